//! Label values as Velero writes them, and the names Kubernetes accepts.

use sha2::{Digest, Sha256};

/// Whether `s` is a DNS-1123 subdomain: the name most Kubernetes objects must have (a label
/// key's prefix too). An object never has a name that is not one.
#[must_use]
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Velero's `GetValidName`: a label value of at most 63 characters. Longer values keep their
/// first 57 characters followed by the first 6 hex digits of the SHA-256 of the whole value.
pub fn valid_label_value(value: &str) -> String {
    const MAX: usize = 63;
    if value.len() <= MAX {
        return value.to_string();
    }
    let digest = Sha256::digest(value.as_bytes());
    let hex: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    let mut cut = MAX - 6;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{hex}", &value[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_label_values_follow_get_valid_name() {
        assert_eq!(valid_label_value("short"), "short");
        let exactly = "a".repeat(63);
        assert_eq!(valid_label_value(&exactly), exactly);
        let long = "b".repeat(70);
        let got = valid_label_value(&long);
        assert_eq!(got.len(), 63);
        assert_eq!(&got[..57], &long[..57]);
        // sha256("b" * 70) begins with b94440 (computed independently).
        assert_eq!(&got[57..], "b94440");
        assert_ne!(valid_label_value(&"b".repeat(71)), got);
    }
}
