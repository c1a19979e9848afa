//! Errors of a backup run. Each has a stable category for Event reasons and metric labels and
//! says which final phase it leads to.

use hawser_api::phase::BackupPhase;
use hawser_core::archive::ArchiveWriteError;
use hawser_core::archive::gzjson::GzJsonError;
use hawser_store::StoreError;

use crate::cluster::DiscoveryError;

/// Why a backup did not produce an outcome.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The spec is invalid; the messages go to `status.validationErrors`.
    #[error("the backup spec is invalid: {}", messages.join("; "))]
    Validation {
        /// Velero's validation messages, in order.
        messages: Vec<String>,
    },
    /// The location is read-only; nothing was written.
    #[error("the backup storage location is read-only")]
    ReadOnlyLocation,
    /// Discovery of the served resources failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// Listing the namespaces (needed for every backup) failed.
    #[error("listing namespaces")]
    Namespaces(#[source] kube::Error),
    /// Reading the resource-policies ConfigMap the spec names failed (before validation
    /// could finish).
    #[error("reading the backup's resource policies")]
    Policies(#[source] kube::Error),
    /// Writing an artifact to the storage location failed.
    #[error("storing `{key}`")]
    Storage {
        /// The key being written.
        key: String,
        /// The cause.
        #[source]
        source: Box<StoreError>,
    },
    /// Producing the archive failed (the stream broke, usually because the upload failed).
    #[error("writing the backup archive")]
    Archive(#[source] ArchiveWriteError),
    /// Encoding a gzipped JSON artifact failed.
    #[error("encoding `{key}`")]
    Encode {
        /// The artifact's key.
        key: String,
        /// The cause.
        #[source]
        source: GzJsonError,
    },
    /// A gzipped JSON artifact read back (to be extended) cannot be decoded.
    #[error("reading `{key}`")]
    Decode {
        /// The artifact's key.
        key: String,
        /// The cause.
        #[source]
        source: GzJsonError,
    },
    /// The archive-writing task ended without a result.
    #[error("the archive writer stopped unexpectedly")]
    WriterGone(#[source] tokio::task::JoinError),
    /// The resource list could not be kept in, or read back from, its temporary file (in
    /// `TMPDIR`).
    #[error("keeping the resource list in a temporary file")]
    TemporaryFile(#[source] std::io::Error),
    /// The backup object has no name.
    #[error("the Backup object has no metadata.name")]
    Unnamed,
}

impl BackupError {
    pub(crate) fn storage(key: impl Into<String>, source: StoreError) -> Self {
        Self::Storage {
            key: key.into(),
            source: Box::new(source),
        }
    }

    /// Stable short category (Event reason, metric label).
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Validation { .. } => BackupPhase::FailedValidation.name(),
            Self::ReadOnlyLocation => "StorageLocationReadOnly",
            Self::Discovery(_) => "DiscoveryFailed",
            Self::Namespaces(_) => "NamespaceListFailed",
            Self::Policies(_) => "ResourcePoliciesReadFailed",
            Self::Storage { .. } => "StorageFailed",
            Self::Archive(_) => "ArchiveWriteFailed",
            Self::Encode { .. } => "EncodeFailed",
            Self::Decode { .. } => "DecodeFailed",
            Self::WriterGone(_) => "ArchiveWriterStopped",
            Self::TemporaryFile(_) => "TemporaryFileFailed",
            Self::Unnamed => "InvalidBackupObject",
        }
    }

    /// The final phase this error gives the backup: `FailedValidation` for an invalid spec,
    /// `Failed` otherwise.
    #[must_use]
    pub fn phase(&self) -> BackupPhase {
        match self {
            Self::Validation { .. } | Self::Unnamed => BackupPhase::FailedValidation,
            _ => BackupPhase::Failed,
        }
    }

    /// The message with its causes, for `status.failureReason` and logs.
    #[must_use]
    pub fn full_message(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}
