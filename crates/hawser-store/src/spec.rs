//! The plain description of a storage location that a [`Location`](crate::Location) is built
//! from: the fields of a BackupStorageLocation's `spec` plus the resolved secret bytes.

use std::collections::BTreeMap;
use std::time::Duration;

use hawser_api::{BackupStorageLocationAccessMode, BackupStorageLocationSpec};

use crate::error::ConfigError;

/// The providers this crate implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Amazon S3 and S3-compatible servers.
    Aws,
    /// Google Cloud Storage.
    Gcp,
    /// Azure Blob Storage.
    Azure,
    /// A local directory (hawser's own provider).
    Filesystem,
}

impl Provider {
    /// Every provider, in the order of the docs.
    pub const ALL: [Self; 4] = [Self::Aws, Self::Gcp, Self::Azure, Self::Filesystem];

    /// The object-store plugin name a Velero server would report for this provider
    /// (`velero.io/aws`); [`parse`](Self::parse) accepts it as `spec.provider` too.
    #[must_use]
    pub fn plugin_name(self) -> String {
        format!("velero.io/{}", self.name())
    }

    /// Parses `spec.provider`. Velero's `velero.io/<name>` plugin names are accepted too.
    ///
    /// # Errors
    /// [`ConfigError::UnknownProvider`].
    pub fn parse(provider: &str) -> Result<Self, ConfigError> {
        match provider.strip_prefix("velero.io/").unwrap_or(provider) {
            "aws" => Ok(Self::Aws),
            "gcp" => Ok(Self::Gcp),
            "azure" => Ok(Self::Azure),
            "filesystem" => Ok(Self::Filesystem),
            _ => Err(ConfigError::UnknownProvider {
                provider: provider.to_owned(),
            }),
        }
    }

    /// The provider's name as written in `spec.provider`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Gcp => "gcp",
            Self::Azure => "azure",
            Self::Filesystem => "filesystem",
        }
    }
}

/// `spec.accessMode` of a BackupStorageLocation. Unset behaves as [`AccessMode::ReadWrite`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessMode {
    /// Objects are read and written.
    #[default]
    ReadWrite,
    /// Objects are only read; every write or delete is refused.
    ReadOnly,
}

/// Everything needed to open a storage location.
///
/// The caller reads the Secrets the BackupStorageLocation refers to (`spec.credential`,
/// `spec.objectStorage.caCertRef`) and passes their bytes; this crate does no Kubernetes I/O.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocationSpec {
    /// `spec.provider`: `aws`, `gcp`, `azure` or `filesystem`.
    pub provider: String,
    /// `spec.objectStorage.bucket`.
    pub bucket: String,
    /// `spec.objectStorage.prefix`; leading and trailing slashes are ignored.
    pub prefix: Option<String>,
    /// `spec.config`: provider-specific keys (see `docs/storage.md`).
    pub config: BTreeMap<String, String>,
    /// Bytes of the Secret key named by `spec.credential`, if any.
    pub credentials: Option<Vec<u8>>,
    /// PEM CA bundle from `spec.objectStorage.caCert` or `caCertRef`, if any.
    pub ca_cert: Option<Vec<u8>>,
    /// `spec.accessMode`.
    pub access_mode: AccessMode,
    /// The credential Secret names this location (its `hawser.io/locations` annotation): its
    /// custom endpoints are trusted with the credentials ([`crate::LocationPolicy`]).
    pub endpoints_endorsed: bool,
}

impl LocationSpec {
    /// A spec with the given provider and bucket and nothing else set.
    #[must_use]
    pub fn new(provider: impl Into<String>, bucket: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            bucket: bucket.into(),
            ..Self::default()
        }
    }

    /// The spec of a BackupStorageLocation object, with the bytes of the Secret key its
    /// `spec.credential` names and of its `spec.objectStorage.caCertRef` (the caller reads both
    /// Secrets). The deprecated inline `caCert` is used when no `caCertRef` is set.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when both `caCert` and `caCertRef` are set (Velero marks such a
    /// location `Unavailable`).
    pub fn from_bsl(
        bsl: &BackupStorageLocationSpec,
        credentials: Option<Vec<u8>>,
        ca_cert_from_ref: Option<Vec<u8>>,
    ) -> Result<Self, ConfigError> {
        let storage = &bsl.object_storage;
        if storage.ca_cert.is_some() && storage.ca_cert_ref.is_some() {
            return Err(ConfigError::Invalid {
                field: "spec.objectStorage.caCertRef".to_owned(),
                reason: "it cannot be set together with spec.objectStorage.caCert".to_owned(),
            });
        }
        let ca_cert = ca_cert_from_ref.or_else(|| storage.ca_cert.as_ref().map(|b| b.0.clone()));
        Ok(Self {
            provider: bsl.provider.clone(),
            bucket: storage.bucket.clone(),
            prefix: storage.prefix.clone(),
            config: bsl.config.clone().unwrap_or_default(),
            credentials,
            ca_cert,
            access_mode: match bsl.access_mode {
                Some(BackupStorageLocationAccessMode::ReadOnly) => AccessMode::ReadOnly,
                _ => AccessMode::ReadWrite,
            },
            endpoints_endorsed: false,
        })
    }

    /// Sets `spec.objectStorage.prefix`.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Sets one `spec.config` key.
    #[must_use]
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// Sets the credential bytes (the content of the Secret key `spec.credential` names).
    #[must_use]
    pub fn with_credentials(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.credentials = Some(bytes.into());
        self
    }

    /// Sets the PEM CA bundle.
    #[must_use]
    pub fn with_ca_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_cert = Some(pem.into());
        self
    }

    /// Sets `spec.accessMode`.
    #[must_use]
    pub fn with_access_mode(mut self, mode: AccessMode) -> Self {
        self.access_mode = mode;
        self
    }
}

/// Tuning of a location's I/O: part size and parallelism of uploads, request retries.
///
/// The defaults suit production; tests shorten the retry budget so that failures surface fast.
#[derive(Clone, Debug, PartialEq)]
pub struct LocationOptions {
    /// Size of one multipart-upload part (default 8 MiB; S3 needs at least 5 MiB).
    pub part_size: usize,
    /// Parts uploaded at the same time by one writer (default 2).
    pub max_in_flight_parts: usize,
    /// Retries of one failed request (default 10).
    pub max_retries: usize,
    /// Time after which a request is no longer retried (default 3 min).
    pub retry_timeout: Duration,
    /// Timeout of one HTTP request (default 5 min, large enough for one part on a slow link).
    pub request_timeout: Duration,
    /// Timeout of establishing a connection (default 10 s).
    pub connect_timeout: Duration,
}

impl Default for LocationOptions {
    fn default() -> Self {
        Self {
            part_size: 8 * 1024 * 1024,
            max_in_flight_parts: 2,
            max_retries: 10,
            retry_timeout: Duration::from_secs(180),
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use hawser_api::ObjectStorageLocation;

    fn bsl() -> BackupStorageLocationSpec {
        BackupStorageLocationSpec {
            provider: "aws".into(),
            config: Some(BTreeMap::from([(
                "region".to_owned(),
                "eu-west-1".to_owned(),
            )])),
            object_storage: ObjectStorageLocation {
                bucket: "velero".into(),
                prefix: Some("/cluster-a/".into()),
                ..ObjectStorageLocation::default()
            },
            access_mode: Some(BackupStorageLocationAccessMode::ReadOnly),
            ..BackupStorageLocationSpec::default()
        }
    }

    #[test]
    fn from_bsl_copies_every_field() {
        let spec = LocationSpec::from_bsl(&bsl(), Some(b"creds".to_vec()), None).unwrap();
        assert_eq!(
            spec,
            LocationSpec::new("aws", "velero")
                .with_prefix("/cluster-a/")
                .with_config("region", "eu-west-1")
                .with_credentials("creds")
                .with_access_mode(AccessMode::ReadOnly)
        );
    }

    #[test]
    fn ca_cert_inline_or_ref_but_not_both() {
        let mut b = bsl();
        b.object_storage.ca_cert = Some(k8s_openapi::ByteString(b"inline".to_vec()));
        let spec = LocationSpec::from_bsl(&b, None, None).unwrap();
        assert_eq!(spec.ca_cert.as_deref(), Some(&b"inline"[..]));
        b.object_storage.ca_cert_ref = Some(Default::default());
        let err = LocationSpec::from_bsl(&b, None, Some(b"ref".to_vec())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.objectStorage.caCertRef is invalid: it cannot be set together with spec.objectStorage.caCert"
        );
    }
}
