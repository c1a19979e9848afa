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
    /// The server allows no `filesystem` location (it was given no `--filesystem-root`).
    #[error(
        "filesystem locations are disabled on this server: start it with --filesystem-root DIR, \
         DIR being spec.config.root {root} or a directory above it"
    )]
    FilesystemDisabled {
        /// `spec.config.root`, quoted, with what it resolves to when that differs.
        root: String,
    },
    /// `spec.config.root` is outside every directory the server allows.
    #[error(
        "spec.config.root {root} is not under a directory this server allows for filesystem \
         locations ({allowed}): use a root under one of them, or add --filesystem-root DIR to \
         the server"
    )]
    RootNotAllowed {
        /// `spec.config.root`, quoted, with what it resolves to when that differs.
        root: String,
        /// The allowed directories, comma-separated.
        allowed: String,
    },
    /// The location would use credentials of the server's environment, which the server does
    /// not allow.
    #[error(
        "provider `{provider}`: {what}, so credentials from the server's environment or instance \
         metadata would be used, and this server does not allow that \
         (--allow-ambient-credentials=false): set spec.credential to a Secret key holding the \
         location's credentials"
    )]
    AmbientCredentials {
        /// The provider.
        provider: &'static str,
        /// Why ambient credentials would be needed.
        what: &'static str,
    },
    /// Credentials would go to a custom endpoint the server does not trust.
    #[error(
        "{field} `{url}` is not trusted with this location's credentials: list it in the \
         server's --trusted-endpoint, or name this location in the credential Secret's \
         hawser.io/locations annotation"
    )]
    UntrustedEndpoint {
        /// The BSL field, e.g. `spec.config.s3Url`.
        field: String,
        /// The endpoint.
        url: String,
    },
    /// A bearer token would go over plain HTTP.
    #[error(
        "{field} `{url}` is plain http://, and this provider would send it a bearer token in \
         clear: use https://, or list the endpoint with http:// in the server's \
         --trusted-endpoint (a local emulator)"
    )]
    PlainHttpToken {
        /// The BSL field.
        field: String,
        /// The endpoint.
        url: String,
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
            Self::FilesystemDisabled { .. } | Self::RootNotAllowed { .. } => {
                "FilesystemRootNotAllowed"
            }
            Self::AmbientCredentials { .. } => "AmbientCredentialsDisabled",
            Self::UntrustedEndpoint { .. } | Self::PlainHttpToken { .. } => "UntrustedEndpoint",
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
    /// No credentials could be obtained from the server's environment (instance metadata, a
    /// token service) for a location that names no `spec.credential`.
    NoCredentials,
    /// The server could not be reached (refused, reset, DNS, TLS, timeout).
    Unreachable,
    /// A create-only write found an object of that name already stored.
    AlreadyExists,
    /// Any other error reported by the store.
    Other,
}

/// Requests for credentials rather than to the store: instance metadata services (AWS, GCP,
/// Azure), token endpoints, the web-identity exchange.
const CREDENTIAL_SOURCES: [&str; 7] = [
    "169.254.169.254",
    "169.254.170.2",
    "metadata.google.internal",
    "/latest/api/token",
    "/metadata/identity/oauth2/token",
    "AssumeRoleWithWebIdentity",
    "oauth2.googleapis.com/token",
];

/// Answers that reject credentials, as S3, GCS and Azure word them.
const DENIED: [&str; 6] = [
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "AuthorizationFailure",
    "403 Forbidden",
    "401 Unauthorized",
];

/// Transport failures, for errors that reach here without an `HttpError` in their chain.
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

impl FailureKind {
    /// Stable short category.
    #[must_use]
    pub fn category(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::NoSuchBucket => "NoSuchBucket",
            Self::AccessDenied => "AccessDenied",
            Self::NoCredentials => "NoCredentials",
            Self::Unreachable => "Unreachable",
            Self::AlreadyExists => "AlreadyExists",
            Self::Other => "StorageError",
        }
    }

    /// Classifies an object-store error: a failed request for credentials first (it is not
    /// the store answering), then the transport failure or HTTP status the client reports,
    /// then well-known markers in the text of the source chain.
    #[must_use]
    pub fn of(error: &object_store::Error) -> Self {
        let text = chain_text(error);
        if CREDENTIAL_SOURCES.iter().any(|m| text.contains(m)) {
            return Self::NoCredentials;
        }
        if text.contains("NoSuchBucket")
            || text.contains("ContainerNotFound")
            || text.contains("bucket does not exist")
        {
            return Self::NoSuchBucket;
        }
        match error {
            object_store::Error::NotFound { .. } => return Self::NotFound,
            object_store::Error::AlreadyExists { .. }
            | object_store::Error::Precondition { .. } => return Self::AlreadyExists,
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => {
                return Self::AccessDenied;
            }
            _ => {}
        }
        if let Some(kind) = transport_failure(error) {
            use object_store::client::HttpErrorKind;
            match kind {
                HttpErrorKind::Connect
                | HttpErrorKind::Timeout
                | HttpErrorKind::Request
                | HttpErrorKind::Interrupted => return Self::Unreachable,
                _ => {}
            }
        }
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
                "the credentials were rejected or lack permission on the bucket: check the Secret \
                 named by spec.credential (and config.profile), or the server's own identity when \
                 the location names none"
            }
            Self::NoCredentials => {
                "no credentials: spec.credential is not set and none could be obtained from the \
                 server's environment (instance metadata, workload identity): set \
                 spec.credential to a Secret key"
            }
            Self::Unreachable => {
                "the storage endpoint is unreachable (connection refused, DNS failure, TLS or \
                 timeout): check spec.config (s3Url, region, storeEndpoint, storageAccountURI) \
                 and the network"
            }
            Self::AlreadyExists => {
                "an object of this name is stored already (another writer, or another cluster                  sharing the bucket), and it is not written over"
            }
            Self::Other => "the storage service reported an error",
        }
    }
}

/// The kind of the HTTP client's error in the source chain of `error`, if there is one.
fn transport_failure(error: &object_store::Error) -> Option<object_store::client::HttpErrorKind> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(http) = e.downcast_ref::<object_store::client::HttpError>() {
            return Some(http.kind());
        }
        source = e.source();
    }
    None
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

    /// True when the store could not be reached: the same request may succeed later.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Storage {
                kind: FailureKind::Unreachable,
                ..
            }
        )
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

#[cfg(test)]
mod tests {
    use object_store::client::{HttpError, HttpErrorKind};

    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.into(),
        }
    }

    fn http(kind: HttpErrorKind) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(
                kind,
                std::io::Error::other("request failed"),
            )),
        }
    }

    #[test]
    fn bad_credentials_missing_buckets_and_transport_failures_are_told_apart() {
        let denied = object_store::Error::PermissionDenied {
            path: "backups/".into(),
            source: "403 Forbidden: <Code>SignatureDoesNotMatch</Code>".into(),
        };
        let unauthenticated = object_store::Error::Unauthenticated {
            path: "backups/".into(),
            source: "401".into(),
        };
        let cases = [
            (denied, FailureKind::AccessDenied),
            (unauthenticated, FailureKind::AccessDenied),
            (
                generic(
                    "Server returned non-2xx status code: 400: <Code>InvalidAccessKeyId</Code>",
                ),
                FailureKind::AccessDenied,
            ),
            (
                object_store::Error::NotFound {
                    path: String::new(),
                    source: "<Code>NoSuchBucket</Code>".into(),
                },
                FailureKind::NoSuchBucket,
            ),
            (
                object_store::Error::NotFound {
                    path: "backups/b1/velero-backup.json".into(),
                    source: "404".into(),
                },
                FailureKind::NotFound,
            ),
            (http(HttpErrorKind::Connect), FailureKind::Unreachable),
            (http(HttpErrorKind::Timeout), FailureKind::Unreachable),
            (http(HttpErrorKind::Interrupted), FailureKind::Unreachable),
            (generic("dns error: no such host"), FailureKind::Unreachable),
            // A metadata service refusing the token request is not the store refusing the
            // location's credentials, nor the store being unreachable.
            (
                generic(
                    "Error performing PUT http://169.254.169.254/latest/api/token - \
                     Server returned non-2xx status code: 403 Forbidden",
                ),
                FailureKind::NoCredentials,
            ),
            (
                generic(
                    "Error performing token request: GET http://169.254.169.254/computeMetadata/\
                     v1/instance/service-accounts/default/token - error sending request",
                ),
                FailureKind::NoCredentials,
            ),
            (generic("500 Internal Server Error"), FailureKind::Other),
        ];
        for (error, kind) in cases {
            assert_eq!(FailureKind::of(&error), kind, "{}", chain_text(&error));
        }
    }

    #[test]
    fn hints_name_the_failure() {
        assert!(FailureKind::Unreachable.hint().contains("unreachable"));
        assert!(!FailureKind::Unreachable.hint().contains("credential"));
        assert!(FailureKind::AccessDenied.hint().contains("rejected"));
        assert!(
            FailureKind::NoSuchBucket
                .hint()
                .contains("bucket does not exist")
        );
        assert!(
            FailureKind::NoCredentials
                .hint()
                .contains("spec.credential is not set")
        );
    }
}
