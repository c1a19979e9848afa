//! Validation of a location as Velero's BSL controller does it: list the top level of the
//! prefix; every directory there must be one of Velero's (velero-compat §2.4).

use hawser_core::layout::{Layout, TOP_LEVEL_DIRS};

use crate::error::{FailureKind, StoreError};
use crate::location::Location;

/// Why a location is `Unavailable`.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// The prefix holds directories that are not part of Velero's layout.
    #[error("{message}")]
    InvalidLayout {
        /// Every offending top-level directory, sorted.
        dirs: Vec<String>,
        /// Velero's message (at most three directories named).
        message: String,
    },
    /// The location could not be listed.
    #[error("listing the backup storage location failed")]
    Storage(#[source] StoreError),
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
                TOP_LEVEL_DIRS.join(", ")
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
    let dirs = location
        .list_dirs("")
        .await
        .map_err(ValidationError::Storage)?;
    // Keys of a location are relative to its prefix, so the layout here has no root.
    match Layout::new(None).check_top_level_dirs(&dirs) {
        Ok(()) => Ok(()),
        Err(message) => {
            let dirs = dirs
                .into_iter()
                .filter(|d| !TOP_LEVEL_DIRS.contains(&d.as_str()))
                .collect();
            Err(ValidationError::InvalidLayout { dirs, message })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn reason_says_what_to_do() {
        let message = Layout::new(None)
            .check_top_level_dirs(&["a", "backups"])
            .unwrap_err();
        let e = ValidationError::InvalidLayout {
            dirs: vec!["a".into()],
            message,
        };
        assert_eq!(
            e.to_string(),
            "Backup store contains invalid top-level directories: [a]"
        );
        assert!(
            e.reason().contains("set spec.objectStorage.prefix"),
            "{}",
            e.reason()
        );
    }
}
