//! Parsers of the two credential file formats Velero's plugins read from the BSL's Secret.
//!
//! - AWS shared-credentials (INI): sections `[name]` (or `[profile name]`, as in the AWS config
//!   file), `key = value` lines, `#` and `;` comment lines. Only `aws_access_key_id`,
//!   `aws_secret_access_key` and `aws_session_token` are used. Written here because the format is
//!   small and the INI crates differ on exactly these details (the `profile ` prefix, comments).
//! - Azure env file: `NAME=value` lines (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, ...).

use std::collections::BTreeMap;

/// Keys of one profile of an AWS shared-credentials file.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `aws_access_key_id`.
    pub access_key_id: String,
    /// `aws_secret_access_key`.
    pub secret_access_key: String,
    /// `aws_session_token`, for temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets, not even in debug logs.
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Why a credentials file could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    /// The bytes are not UTF-8 text.
    #[error("the credentials file is not UTF-8 text")]
    NotText,
    /// A line is neither a section header, a `key = value` pair, a comment nor blank.
    #[error("line {line} of the credentials file is not `[section]` or `key = value`")]
    Malformed {
        /// 1-based line number.
        line: usize,
    },
    /// The requested profile has no section.
    #[error("the credentials file has no profile `{profile}` (found: {found})")]
    NoProfile {
        /// The profile asked for (`config.profile`, default `default`).
        profile: String,
        /// The sections found, comma-separated.
        found: String,
    },
    /// The profile lacks a required key.
    #[error("profile `{profile}` of the credentials file has no `{key}`")]
    MissingKey {
        /// The profile.
        profile: String,
        /// The missing key.
        key: &'static str,
    },
}

/// Parses an AWS shared-credentials file and returns the keys of `profile`.
///
/// # Errors
/// [`CredentialsError`] when the text is malformed, the profile is missing, or it lacks the
/// access key id or secret key.
pub fn parse_aws_credentials(
    bytes: &[u8],
    profile: &str,
) -> Result<AwsCredentials, CredentialsError> {
    let text = std::str::from_utf8(bytes).map_err(|_| CredentialsError::NotText)?;
    let sections = parse_ini(text)?;
    let Some(keys) = sections.get(profile) else {
        let found: Vec<&str> = sections.keys().map(String::as_str).collect();
        return Err(CredentialsError::NoProfile {
            profile: profile.to_owned(),
            found: if found.is_empty() {
                "none".to_owned()
            } else {
                found.join(", ")
            },
        });
    };
    let get = |key: &'static str| -> Result<String, CredentialsError> {
        keys.get(key)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| CredentialsError::MissingKey {
                profile: profile.to_owned(),
                key,
            })
    };
    Ok(AwsCredentials {
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: get("aws_secret_access_key")?,
        session_token: keys
            .get("aws_session_token")
            .filter(|v| !v.is_empty())
            .cloned(),
    })
}

type Sections = BTreeMap<String, BTreeMap<String, String>>;

fn parse_ini(text: &str) -> Result<Sections, CredentialsError> {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let malformed = CredentialsError::Malformed { line: index + 1 };
        if let Some(header) = line.strip_prefix('[') {
            let name = header.strip_suffix(']').ok_or(malformed)?.trim();
            let name = name.strip_prefix("profile ").map_or(name, str::trim);
            if name.is_empty() {
                return Err(CredentialsError::Malformed { line: index + 1 });
            }
            sections.entry(name.to_owned()).or_default();
            current = Some(name.to_owned());
            continue;
        }
        let (key, value) = line.split_once('=').ok_or(malformed)?;
        // Keys before any section header belong to no profile and are ignored, as the AWS SDKs do.
        if let Some(section) = &current {
            sections
                .entry(section.clone())
                .or_default()
                .insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    Ok(sections)
}

/// Parses an env file of `NAME=value` lines (blank lines and `#` comments skipped, an optional
/// `export ` prefix and surrounding quotes removed).
///
/// # Errors
/// [`CredentialsError::NotText`] or [`CredentialsError::Malformed`].
pub fn parse_env_file(bytes: &[u8]) -> Result<BTreeMap<String, String>, CredentialsError> {
    let text = std::str::from_utf8(bytes).map_err(|_| CredentialsError::NotText)?;
    let mut vars = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (key, value) = line
            .split_once('=')
            .ok_or(CredentialsError::Malformed { line: index + 1 })?;
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        vars.insert(key.trim().to_owned(), value.to_owned());
    }
    Ok(vars)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    const FILE: &str = "\
# comment
[default]
aws_access_key_id = AKIDEFAULT
aws_secret_access_key=secretdefault

; another comment
[profile backup]
aws_access_key_id = AKIBACKUP
aws_secret_access_key = secret/backup=
aws_session_token = tok

[broken]
aws_access_key_id = AKIONLY
";

    #[test]
    fn default_profile() {
        let c = parse_aws_credentials(FILE.as_bytes(), "default").unwrap();
        assert_eq!(c.access_key_id, "AKIDEFAULT");
        assert_eq!(c.secret_access_key, "secretdefault");
        assert_eq!(c.session_token, None);
    }

    #[test]
    fn named_profile_with_profile_prefix_and_equals_in_value() {
        let c = parse_aws_credentials(FILE.as_bytes(), "backup").unwrap();
        assert_eq!(c.access_key_id, "AKIBACKUP");
        assert_eq!(c.secret_access_key, "secret/backup=");
        assert_eq!(c.session_token.as_deref(), Some("tok"));
    }

    #[test]
    fn missing_profile_names_what_exists() {
        let err = parse_aws_credentials(FILE.as_bytes(), "prod").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the credentials file has no profile `prod` (found: backup, broken, default)"
        );
    }

    #[test]
    fn missing_secret_key() {
        let err = parse_aws_credentials(FILE.as_bytes(), "broken").unwrap_err();
        assert_eq!(
            err,
            CredentialsError::MissingKey {
                profile: "broken".into(),
                key: "aws_secret_access_key"
            }
        );
    }

    #[test]
    fn malformed_line_is_reported_with_its_number() {
        let err = parse_aws_credentials(b"[default]\njust words\n", "default").unwrap_err();
        assert_eq!(err, CredentialsError::Malformed { line: 2 });
    }

    #[test]
    fn debug_redacts_secrets() {
        let c = parse_aws_credentials(FILE.as_bytes(), "backup").unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("secret/backup"), "{shown}");
        assert!(!shown.contains("tok\""), "{shown}");
    }

    #[test]
    fn env_file() {
        let vars = parse_env_file(b"# azure\nAZURE_TENANT_ID=t\nexport AZURE_CLIENT_ID=\"c\"\n\n")
            .unwrap();
        assert_eq!(vars.get("AZURE_TENANT_ID").map(String::as_str), Some("t"));
        assert_eq!(vars.get("AZURE_CLIENT_ID").map(String::as_str), Some("c"));
        assert_eq!(
            parse_env_file(b"NOEQUALS\n").unwrap_err(),
            CredentialsError::Malformed { line: 1 }
        );
    }
}
