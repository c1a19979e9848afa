//! Validation of a location as Velero's BSL controller does it: list the top level of the
//! prefix; every directory there must be one of Velero's (velero-compat §2.4).

use crate::error::{FailureKind, StoreError};
use crate::keys::VALID_TOP_LEVEL;
use crate::location::Location;

/// Why a location is `Unavailable`.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// The prefix holds directories that are not part of Velero's layout.
    #[error("{}", invalid_dirs_message(.dirs))]
    InvalidLayout {
        /// Every offending top-level directory, sorted.
        dirs: Vec<String>,
    },
    /// The location could not be listed.
    #[error("listing the backup storage location failed")]
    Storage(#[source] StoreError),
}

/// Velero's wording: at most three directories named, then `...`.
fn invalid_dirs_message(dirs: &[String]) -> String {
    if dirs.len() > 3 {
        format!(
            "Backup store contains {} invalid top-level directories: [{} ...]",
            dirs.len(),
            dirs[..3].join(" ")
        )
    } else {
        format!("Backup store contains invalid top-level directories: [{}]", dirs.join(" "))
    }
}

impl ValidationError {
    /// Stable short category for Event reasons and metric labels.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidLayout { .. } => "InvalidLayout",
            Self::Storage(e) => e.category(),
        }
    }

    /// The failure kind when the store could not be listed.
    #[must_use]
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match self {
            Self::Storage(StoreError::Storage { kind, .. }) => Some(*kind),
            _ => None,
        }
    }

    /// The message for the BSL's `status.message`: what is wrong and what to do.
    #[must_use]
    pub fn reason(&self) -> String {
        match self {
            Self::InvalidLayout { .. } => format!(
                "{self}; only {} may exist under the prefix: use an empty bucket or set spec.objectStorage.prefix",
                VALID_TOP_LEVEL.join(", ")
            ),
            Self::Storage(e) => e.full_message(),
        }
    }
}

/// Checks that the location answers and that its prefix holds only Velero's directories.
/// Objects directly under the prefix are ignored, as Velero does.
///
/// # Errors
/// [`ValidationError`]; its [`reason`](ValidationError::reason) is the status message.
pub async fn validate(location: &Location) -> Result<(), ValidationError> {
    let dirs = location.list_dirs("").await.map_err(ValidationError::Storage)?;
    let invalid: Vec<String> = dirs.into_iter().filter(|d| !VALID_TOP_LEVEL.contains(&d.as_str())).collect();
    if invalid.is_empty() {
        Ok(())
    } else {
        Err(ValidationError::InvalidLayout { dirs: invalid })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_at_most_three_dirs() {
        let e = ValidationError::InvalidLayout { dirs: vec!["a".into(), "b".into()] };
        assert_eq!(e.to_string(), "Backup store contains invalid top-level directories: [a b]");
        let e = ValidationError::InvalidLayout { dirs: vec!["a".into(), "b".into(), "c".into(), "d".into()] };
        assert_eq!(e.to_string(), "Backup store contains 4 invalid top-level directories: [a b c ...]");
        assert!(e.reason().contains("spec.objectStorage.prefix"), "{}", e.reason());
    }
}
