//! Signed download URLs of `filesystem` locations.
//!
//! A local directory has no service that could check a pre-signed URL, so hawser server serves
//! those files itself: [`FileUrls::sign`] makes a URL of the server's download listener that
//! names a location and a key and carries an expiry and an HMAC-SHA256 signature over the three;
//! [`FileUrls::verify`] is what the listener checks before it reads anything.
//!
//! URL: `<base>/files/<location>/<key>?expires=<unix seconds>&signature=<base64url>`, every path
//! segment percent-encoded. The key of the MAC is random per [`FileUrls`] (one per server
//! process): a URL is only good at the process that signed it, until its expiry.
//!
//! Written here rather than taken from a crate: the format is hawser's own, and the parts that
//! need care (the MAC, its constant-time comparison, percent-encoding) come from `hmac`, `sha2`
//! and `percent-encoding`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The path under the base URL that signed files are served at.
const FILES: &str = "/files/";

/// Characters left as they are in a path segment (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Signs and checks the download URLs of `filesystem` locations.
pub struct FileUrls {
    key: [u8; 32],
    base: String,
}

impl std::fmt::Debug for FileUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("FileUrls")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// What a verified URL points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedFile {
    /// The location's name (the BackupStorageLocation).
    pub location: String,
    /// The key, relative to the location's prefix.
    pub key: String,
}

/// Why a URL is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    /// Not a URL of this listener: wrong path, or no `expires`/`signature`.
    #[error("not a signed download URL")]
    Malformed,
    /// The key climbs out of the location (`..`, `.`, empty segments, `\`, NUL).
    #[error("the key is not a plain object key")]
    UnsafeKey,
    /// The signature does not match: changed, or signed by another server process.
    #[error("the signature does not match")]
    BadSignature,
    /// The URL's time is over.
    #[error("the URL has expired")]
    Expired,
}

impl UrlRefused {
    /// Stable short category.
    #[must_use]
    pub fn category(self) -> &'static str {
        match self {
            Self::Malformed => "Malformed",
            Self::UnsafeKey => "UnsafeKey",
            Self::BadSignature => "BadSignature",
            Self::Expired => "Expired",
        }
    }
}

impl FileUrls {
    /// A signer with a fresh random key, for URLs under `base_url` (e.g.
    /// `http://127.0.0.1:40123`; a trailing `/` is ignored).
    #[must_use]
    pub fn new(base_url: &str) -> Self {
        // `rand`'s thread generator is a CSPRNG seeded from the operating system.
        Self::with_key(rand::random(), base_url)
    }

    /// A signer with the given key (tests; two signers with one key accept each other's URLs).
    #[must_use]
    pub fn with_key(key: [u8; 32], base_url: &str) -> Self {
        Self {
            key,
            base: base_url.trim_end_matches('/').to_owned(),
        }
    }

    /// The base URL the signed URLs start with.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn mac(&self, location: &str, key: &str, expires: u64) -> HmacSha256 {
        // Lengths first, so that no two (location, key) pairs share a message.
        let message = format!(
            "hawser-download-v1\n{}:{location}\n{}:{key}\n{expires}",
            location.len(),
            key.len()
        );
        // HMAC takes a key of any length; 32 bytes is never refused.
        let mut mac = match HmacSha256::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(message.as_bytes());
        mac
    }

    /// The URL of `key` in the location named `location`, good until `expires` (Unix seconds).
    #[must_use]
    pub fn sign(&self, location: &str, key: &str, expires: u64) -> String {
        let signature =
            URL_SAFE_NO_PAD.encode(self.mac(location, key, expires).finalize().into_bytes());
        let path: Vec<String> = key
            .split('/')
            .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
            .collect();
        format!(
            "{}{FILES}{}/{}?expires={expires}&signature={signature}",
            self.base,
            utf8_percent_encode(location, SEGMENT),
            path.join("/")
        )
    }

    /// Checks the path and query of a request (`/files/…?expires=…&signature=…`, after the
    /// base URL's own path if it has one) at `now` (Unix seconds). The signature is compared
    /// in constant time; the expiry is checked after it.
    ///
    /// # Errors
    /// [`UrlRefused`].
    pub fn verify(&self, path_and_query: &str, now: u64) -> Result<SignedFile, UrlRefused> {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let base_path = self
            .base
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or("");
        let path = path.strip_prefix(base_path).unwrap_or(path);
        let rest = path.strip_prefix(FILES).ok_or(UrlRefused::Malformed)?;
        let (location, key) = rest.split_once('/').ok_or(UrlRefused::Malformed)?;
        let location = decode(location).ok_or(UrlRefused::Malformed)?;
        let segments: Vec<String> = key
            .split('/')
            .map(decode)
            .collect::<Option<_>>()
            .ok_or(UrlRefused::Malformed)?;
        if location.is_empty() || location.contains(['/', '\0']) {
            return Err(UrlRefused::Malformed);
        }
        if segments
            .iter()
            .any(|s| s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\', '\0']))
        {
            return Err(UrlRefused::UnsafeKey);
        }
        let key = segments.join("/");

        let mut expires = None;
        let mut signature = None;
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("expires", v)) => expires = v.parse::<u64>().ok(),
                Some(("signature", v)) => signature = URL_SAFE_NO_PAD.decode(v).ok(),
                _ => {}
            }
        }
        let (Some(expires), Some(signature)) = (expires, signature) else {
            return Err(UrlRefused::Malformed);
        };
        self.mac(&location, &key, expires)
            .verify_slice(&signature)
            .map_err(|_| UrlRefused::BadSignature)?;
        if now > expires {
            return Err(UrlRefused::Expired);
        }
        Ok(SignedFile { location, key })
    }
}

fn decode(segment: &str) -> Option<String> {
    percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    fn path_of(url: &str) -> &str {
        let rest = url.split_once("://").unwrap().1;
        &rest[rest.find('/').unwrap()..]
    }

    #[test]
    fn a_signed_url_verifies_until_it_expires() {
        let urls = FileUrls::with_key(KEY, "http://127.0.0.1:9/");
        let url = urls.sign("default", "backups/b1/b1-logs.gz", 1000);
        assert!(
            url.starts_with(
                "http://127.0.0.1:9/files/default/backups/b1/b1-logs.gz?expires=1000&signature="
            ),
            "{url}"
        );
        let file = urls.verify(path_of(&url), 1000).unwrap();
        assert_eq!(
            file,
            SignedFile {
                location: "default".to_owned(),
                key: "backups/b1/b1-logs.gz".to_owned()
            }
        );
        assert_eq!(urls.verify(path_of(&url), 1001), Err(UrlRefused::Expired));
    }

    #[test]
    fn a_base_path_and_odd_characters_round_trip() {
        let urls = FileUrls::with_key(KEY, "https://hawser.example/dl");
        let url = urls.sign("loc", "backups/a b%/x?y#z", 50);
        assert!(
            url.contains("/dl/files/loc/backups/a%20b%25/x%3Fy%23z?"),
            "{url}"
        );
        let file = urls.verify(path_of(&url), 10).unwrap();
        assert_eq!(file.key, "backups/a b%/x?y#z");
    }

    #[test]
    fn tampering_is_refused() {
        let urls = FileUrls::with_key(KEY, "http://h");
        let url = urls.sign("default", "backups/b1/b1-logs.gz", 1000);
        let path = path_of(&url);
        let other_key = path.replace("b1-logs.gz", "b1.tar.gz");
        assert_eq!(urls.verify(&other_key, 0), Err(UrlRefused::BadSignature));
        let other_location = path.replace("/default/", "/other/");
        assert_eq!(
            urls.verify(&other_location, 0),
            Err(UrlRefused::BadSignature)
        );
        let later = path.replace("expires=1000", "expires=9999");
        assert_eq!(urls.verify(&later, 0), Err(UrlRefused::BadSignature));
        // An expired URL made longer is refused for its signature, not accepted.
        assert_eq!(urls.verify(&later, 5000), Err(UrlRefused::BadSignature));
        let (head, signature) = path.split_once("signature=").unwrap();
        let mut flipped = signature.to_owned().into_bytes();
        flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
        let flipped = format!("{head}signature={}", String::from_utf8(flipped).unwrap());
        assert_eq!(urls.verify(&flipped, 0), Err(UrlRefused::BadSignature));
        // Another process's key.
        let stranger = FileUrls::with_key([8; 32], "http://h");
        assert_eq!(stranger.verify(path, 0), Err(UrlRefused::BadSignature));
    }

    #[test]
    fn path_tricks_are_refused_before_anything_is_read() {
        let urls = FileUrls::with_key(KEY, "http://h");
        for key in [
            "../etc/passwd",
            "backups/../../x",
            "backups//x",
            "./x",
            "a\\..\\b",
        ] {
            let url = urls.sign("default", key, 1000);
            assert_eq!(
                urls.verify(path_of(&url), 0),
                Err(UrlRefused::UnsafeKey),
                "{key}"
            );
        }
        // Encoded dots and slashes are decoded before the check.
        assert_eq!(
            urls.verify("/files/default/backups/%2E%2E/x?expires=1&signature=AA", 0),
            Err(UrlRefused::UnsafeKey)
        );
        assert_eq!(
            urls.verify("/files/default/backups%2F..%2Fx?expires=1&signature=AA", 0),
            Err(UrlRefused::UnsafeKey)
        );
    }

    #[test]
    fn malformed_urls_are_refused() {
        let urls = FileUrls::with_key(KEY, "http://h");
        for path in [
            "/",
            "/files/",
            "/files/default",
            "/other/default/k?expires=1&signature=AA",
            "/files/default/k",
            "/files/default/k?expires=soon&signature=AA",
            "/files/default/k?expires=1",
            "/files/default/k?expires=1&signature=***",
            "/files/%FF/k?expires=1&signature=AA",
        ] {
            assert_eq!(urls.verify(path, 0), Err(UrlRefused::Malformed), "{path}");
        }
    }
}
