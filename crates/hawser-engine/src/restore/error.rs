//! Errors that end a restore run. Each has a stable category for Event reasons and metric labels
//! and says which final phase it leads to. Problems with single items are not errors of the run:
//! they are messages in the restore's results.

use hawser_api::phase::RestorePhase;
use hawser_core::archive::ArchiveError;
use hawser_store::StoreError;

use crate::cluster::DiscoveryError;

/// Why a restore did not produce an outcome.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The spec is invalid; the messages go to `status.validationErrors`.
    #[error("the restore spec is invalid: {}", messages.join("; "))]
    Validation {
        /// Velero's validation messages, in order.
        messages: Vec<String>,
    },
    /// The Restore object has no name.
    #[error("the Restore object has no metadata.name")]
    Unnamed,
    /// The Backup object has no name.
    #[error("the Backup object has no metadata.name")]
    BackupUnnamed,
    /// Discovery of the served resources failed.
    #[error("discovering the API resources of the cluster")]
    Discovery(#[source] DiscoveryError),
    /// A ConfigMap the restore's spec names could not be read (not a 404: the API server did
    /// not answer within the budget). Nothing has been created.
    #[error("reading ConfigMap {name}")]
    ConfigMap {
        /// `namespace/name`.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The backup archive could not be opened in the storage location.
    #[error("opening the backup archive `{key}`")]
    OpenArchive {
        /// The archive's key.
        key: String,
        /// The cause.
        #[source]
        source: Box<StoreError>,
    },
    /// The archive is unreadable as a whole (not gzip, a broken tar structure, too large, or
    /// the download broke). Nothing has been created.
    #[error("reading the backup archive `{key}`")]
    Archive {
        /// The archive's key.
        key: String,
        /// The cause.
        #[source]
        source: ArchiveError,
    },
    /// The items waiting for their turn could not be kept in, or read back from, the temporary
    /// file (in `TMPDIR`).
    #[error("keeping the archived items until their turn in a temporary file")]
    Waiting(#[source] std::io::Error),
    /// The archive-reading task ended without a result.
    #[error("the archive reader stopped unexpectedly")]
    ReaderGone(#[source] tokio::task::JoinError),
}

impl RestoreError {
    /// Stable short category (Event reason, metric label).
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Validation { .. } => RestorePhase::FailedValidation.name(),
            Self::Unnamed | Self::BackupUnnamed => "InvalidRestoreObject",
            Self::Discovery(_) => "DiscoveryFailed",
            Self::ConfigMap { .. } => "ConfigMapUnavailable",
            Self::OpenArchive { .. } => "ArchiveUnavailable",
            Self::Archive { source, .. } => source.category(),
            Self::Waiting(_) => "TemporaryFileFailed",
            Self::ReaderGone(_) => "ArchiveReaderStopped",
        }
    }

    /// The final phase this error gives the restore: `FailedValidation` for an invalid spec or
    /// object, `Failed` otherwise.
    #[must_use]
    pub fn phase(&self) -> RestorePhase {
        match self {
            Self::Validation { .. } | Self::Unnamed | Self::BackupUnnamed => {
                RestorePhase::FailedValidation
            }
            _ => RestorePhase::Failed,
        }
    }

    /// The message with its causes, for `status.failureReason` and logs.
    #[must_use]
    pub fn full_message(&self) -> String {
        hawser_core::errors::chain_text(self)
    }
}
