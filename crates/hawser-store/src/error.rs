//! Errors of building a location and of talking to it.

use crate::credentials::CredentialsError;

/// A BackupStorageLocation spec that cannot be turned into a location. Every variant names the
/// BSL field to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `spec.provider` is not one this server implements.
    #[error("spec.provider `{provider}` is not supported (supported: aws, gcp, azure, filesystem)")]
    UnknownProvider {
        /// The provider given.
        provider: String,
    },
    /// A required field is empty or missing.
    #[error("{field} is required for provider `{provider}`")]
    Missing {
        /// The BSL field, e.g. `spec.config.root`.
        field: &'static str,
        /// The provider.
        provider: &'static str,
    },
    /// A field has a value that cannot be used.
    #[error("{field} is invalid: {reason}")]
    Invalid {
        /// The BSL field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `spec.config` has keys the provider does not know (Velero's plugins refuse these too).
    #[error(
        "spec.config has keys not valid for provider `{provider}`: {keys}; valid keys are: {valid}"
    )]
    UnknownKeys {
        /// The provider.
        provider: &'static str,
        /// The unknown keys, comma-separated.
        keys: String,
        /// The valid keys, comma-separated.
        valid: String,
    },
    /// The credentials in the Secret referenced by `spec.credential` cannot be used.
    #[error("spec.credential: the referenced Secret key is not usable for provider `{provider}`")]
    Credentials {
        /// The provider.
        provider: &'static str,
        /// What is wrong.
        #[source]
        source: CredentialsError,
    },
    /// The object-store client refused the settings.
    #[error("provider `{provider}`: the client could not be configured from spec.config")]
    Client {
        /// The provider.
        provider: &'static str,
        /// The client's error.
        #[source]
        source: object_store::Error,
    },
}

impl ConfigError {
    /// Stable short category for Event reasons and metric labels.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::UnknownProvider { .. } => "UnknownProvider",
            Self::Missing { .. } => "MissingConfig",
            Self::Invalid { .. } | Self::UnknownKeys { .. } => "InvalidConfig",
            Self::Credentials { .. } => "InvalidCredentials",
            Self::Client { .. } => "ClientConfig",
        }
    }
}

/// What kind of storage failure happened; decides whether retrying can help and what a user
/// should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The object (or the bucket) does not exist.
    NotFound,
    /// The bucket does not exist.
    NoSuchBucket,
    /// The credentials were rejected or lack permission.
    AccessDenied,
    /// The server could not be reached (refused, reset, DNS, TLS, timeout).
    Unreachable,
    /// Any other error reported by the store.
    Other,
}

impl FailureKind {
    /// Stable short category.
    #[must_use]
    pub fn category(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::NoSuchBucket => "NoSuchBucket",
            Self::AccessDenied => "AccessDenied",
            Self::Unreachable => "Unreachable",
            Self::Other => "StorageError",
        }
    }

    /// Classifies an object-store error by its variant and, for errors the client only reports
    /// as text (HTTP answers, transport errors), by well-known markers in its source chain.
    #[must_use]
    pub fn of(error: &object_store::Error) -> Self {
        let text = chain_text(error);
        if text.contains("NoSuchBucket")
            || text.contains("ContainerNotFound")
            || text.contains("bucket does not exist")
        {
            return Self::NoSuchBucket;
        }
        match error {
            object_store::Error::NotFound { .. } => return Self::NotFound,
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => {
                return Self::AccessDenied;
            }
            _ => {}
        }
        const DENIED: [&str; 6] = [
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "AuthorizationFailure",
            "403 Forbidden",
            "401 Unauthorized",
        ];
        const UNREACHABLE: [&str; 9] = [
            "error sending request",
            "Connection refused",
            "connection refused",
            "dns error",
            "error trying to connect",
            "connection reset",
            "Connection reset",
            "timed out",
            "certificate",
        ];
        if DENIED.iter().any(|m| text.contains(m)) {
            Self::AccessDenied
        } else if UNREACHABLE.iter().any(|m| text.contains(m)) {
            Self::Unreachable
        } else {
            Self::Other
        }
    }

    /// A hint for the person reading the error.
    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            Self::NotFound => "the object does not exist",
            Self::NoSuchBucket => {
                "the bucket does not exist: create it or fix spec.objectStorage.bucket"
            }
            Self::AccessDenied => {
                "the credentials were rejected: check the Secret named by spec.credential (and config.profile)"
            }
            Self::Unreachable => {
                "the storage endpoint could not be reached: check spec.config (s3Url, region) and the network"
            }
            Self::Other => "the storage service reported an error",
        }
    }
}

pub(crate) use hawser_core::errors::chain_text;

/// A failed operation on a location.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The location is `accessMode: ReadOnly`.
    #[error(
        "refusing to {operation} `{key}`: the backup storage location is ReadOnly (spec.accessMode)"
    )]
    ReadOnly {
        /// The refused operation (`write`, `delete`).
        operation: &'static str,
        /// The key, relative to the location's prefix.
        key: String,
    },
    /// A key or name is not a valid object name.
    #[error("`{key}` is not a valid object key: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The store answered an operation with an error.
    #[error("{operation} `{key}` failed ({}): {}", .kind.category(), .kind.hint())]
    Storage {
        /// The operation (`put`, `get`, `list`, `upload`, `delete`, `head`).
        operation: &'static str,
        /// The key or prefix, relative to the location's prefix.
        key: String,
        /// The classified failure.
        kind: FailureKind,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// The writer producing the artifact stopped before finishing it; the upload was aborted and
    /// nothing was committed.
    #[error("upload of `{key}` was abandoned before it was finished; nothing was stored")]
    Abandoned {
        /// The key.
        key: String,
    },
    /// The location cannot give out download URLs: a `filesystem` location outside hawser
    /// server, which is what serves its files.
    #[error("a `{provider}` location has no download URLs here: hawser server serves them")]
    NotSignable {
        /// The provider.
        provider: &'static str,
    },
    /// A blocking bridge was created outside a tokio runtime.
    #[error("{operation} needs a tokio runtime context")]
    NoRuntime {
        /// The operation.
        operation: &'static str,
    },
}

impl StoreError {
    pub(crate) fn storage(
        operation: &'static str,
        key: impl Into<String>,
        source: object_store::Error,
    ) -> Self {
        Self::Storage {
            operation,
            key: key.into(),
            kind: FailureKind::of(&source),
            source,
        }
    }

    /// Stable short category for Event reasons and metric labels.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::ReadOnly { .. } => "ReadOnly",
            Self::InvalidKey { .. } => "InvalidKey",
            Self::Storage { kind, .. } => kind.category(),
            Self::Abandoned { .. } => "Abandoned",
            Self::NotSignable { .. } => "NotSignable",
            Self::NoRuntime { .. } => "NoRuntime",
        }
    }

    /// True when the object does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Self::Storage {
                kind: FailureKind::NotFound,
                ..
            }
        )
    }

    /// The full text of the error and its causes, for status messages and logs.
    #[must_use]
    pub fn full_message(&self) -> String {
        chain_text(self)
    }
}
