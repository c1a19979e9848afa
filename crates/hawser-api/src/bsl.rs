//! The BackupStorageLocation object (velero-compat §1.3).

use std::collections::BTreeMap;

use hawser_core::duration::GoDuration;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::SecretKeySelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::is_false;
use crate::phase::BackupStorageLocationPhase;
use crate::string_enum::string_enum;

/// `spec` of a BackupStorageLocation: an object-storage bucket (and prefix) backups are kept in.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "BackupStorageLocation",
    namespaced,
    status = "BackupStorageLocationStatus",
    shortname = "bsl",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero BackupStorageLocation: where backups are stored, and whether it is reachable.",
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase", "description": "Backup Storage Location status such as Available/Unavailable"}"#,
    printcolumn = r#"{"name": "Last Validated", "type": "date", "jsonPath": ".status.lastValidationTime", "description": "LastValidationTime is the last time the backup store location was validated"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Default", "type": "boolean", "jsonPath": ".spec.default", "description": "Default backup storage location"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BackupStorageLocationSpec {
    /// Object-store provider (`aws`, `gcp`, `azure`, `filesystem`, or a plugin name).
    pub provider: String,
    /// Provider-specific settings (for `aws`: `region`, `s3Url`, `s3ForcePathStyle`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
    /// Secret key holding the provider's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<SecretKeySelector>,
    /// Bucket, prefix and CA certificate.
    pub object_storage: ObjectStorageLocation,
    /// Whether this is the default location for Backups that name none.
    #[serde(default, skip_serializing_if = "is_false")]
    pub default: bool,
    /// `ReadOnly` or `ReadWrite`; unset behaves as `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<BackupStorageLocationAccessMode>,
    /// How often backups in the bucket are synced into the cluster; zero disables sync, unset
    /// means the server's `--backup-sync-period`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub backup_sync_period: Option<GoDuration>,
    /// How often the location is validated; zero validates only once, unset means the server's
    /// `--store-validation-frequency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub validation_frequency: Option<GoDuration>,
}

/// `spec.objectStorage` of a BackupStorageLocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStorageLocation {
    /// Bucket name (required).
    pub bucket: String,
    /// Path inside the bucket under which everything is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Deprecated inline PEM CA bundle (base64 in JSON); may not be combined with `caCertRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::optional_bytes")]
    pub ca_cert: Option<ByteString>,
    /// Secret key holding a PEM CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert_ref: Option<SecretKeySelector>,
}

string_enum! {
    /// `spec.accessMode` of a BackupStorageLocation.
    pub enum BackupStorageLocationAccessMode {
        /// Backups are only read (restores, sync); new backups and deletions are refused.
        ReadOnly = "ReadOnly",
        /// Backups are read and written.
        ReadWrite = "ReadWrite",
    }
}

/// `status` of a BackupStorageLocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStorageLocationStatus {
    /// `Available` or `Unavailable`; unset before the first validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupStorageLocationPhase>,
    /// When backups were last synced from the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_time: Option<Time>,
    /// Deprecated and unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_revision: Option<String>,
    /// When the location was last validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_validation_time: Option<Time>,
    /// Why the location is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Deprecated and unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<BackupStorageLocationAccessMode>,
}

impl BackupStorageLocation {
    /// True when `spec.accessMode` is `ReadOnly`.
    pub fn is_read_only(&self) -> bool {
        self.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly)
    }

    /// True when the last validation found the location `Available`.
    pub fn is_available(&self) -> bool {
        self.status.as_ref().and_then(|s| s.phase.as_ref())
            == Some(&BackupStorageLocationPhase::Available)
    }
}
