//! The request objects: DeleteBackupRequest, DownloadRequest and ServerStatusRequest
//! (velero-compat §1.5–1.7).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::phase::{DeleteBackupRequestPhase, DownloadRequestPhase, ServerStatusRequestPhase};
use crate::string_enum::string_enum;

/// `spec` of a DeleteBackupRequest: the backup to delete, with its data.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "DeleteBackupRequest",
    namespaced,
    status = "DeleteBackupRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero DeleteBackupRequest: a request to delete a backup and its data.",
    printcolumn = r#"{"name": "BackupName", "type": "string", "jsonPath": ".spec.backupName", "description": "The name of the backup to be deleted"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "The status of the deletion request"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DeleteBackupRequestSpec {
    /// Name of the Backup (required).
    pub backup_name: String,
}

/// `status` of a DeleteBackupRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteBackupRequestStatus {
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: DeleteBackupRequestPhase,
    /// Why the deletion failed; empty when `Processed` means success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
}

/// `spec` of a DownloadRequest: which file of a backup or restore to sign a URL for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "DownloadRequest",
    namespaced,
    status = "DownloadRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero DownloadRequest: a request for a pre-signed URL of a backup or restore file."
)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRequestSpec {
    /// The file (required).
    pub target: DownloadTarget,
}

/// `spec.target` of a DownloadRequest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownloadTarget {
    /// Which file (required).
    pub kind: DownloadTargetKind,
    /// The backup's name, or the restore's for the `Restore*` kinds (required).
    pub name: String,
}

impl Default for DownloadTarget {
    fn default() -> Self {
        Self {
            kind: DownloadTargetKind::BackupLog,
            name: String::new(),
        }
    }
}

string_enum! {
    /// `spec.target.kind` of a DownloadRequest.
    pub enum DownloadTargetKind {
        /// The backup's log.
        BackupLog = "BackupLog",
        /// The backup's archive.
        BackupContents = "BackupContents",
        /// Native volume snapshots of the backup.
        BackupVolumeSnapshots = "BackupVolumeSnapshots",
        /// Asynchronous plugin operations of the backup.
        BackupItemOperations = "BackupItemOperations",
        /// The resource list of the backup.
        BackupResourceList = "BackupResourceList",
        /// Warnings and errors of the backup.
        BackupResults = "BackupResults",
        /// The restore's log.
        RestoreLog = "RestoreLog",
        /// Warnings and errors of the restore.
        RestoreResults = "RestoreResults",
        /// The resource list of the restore.
        RestoreResourceList = "RestoreResourceList",
        /// Asynchronous plugin operations of the restore.
        RestoreItemOperations = "RestoreItemOperations",
        /// CSI volume snapshots of the backup.
        CSIBackupVolumeSnapshots = "CSIBackupVolumeSnapshots",
        /// CSI volume snapshot contents of the backup.
        CSIBackupVolumeSnapshotContents = "CSIBackupVolumeSnapshotContents",
        /// Volume information of the backup.
        BackupVolumeInfos = "BackupVolumeInfos",
        /// Volume information of the restore.
        RestoreVolumeInfo = "RestoreVolumeInfo",
    }
}

impl DownloadTargetKind {
    /// True for the kinds whose `name` is a Restore's (the file lives under `restores/`).
    pub fn is_restore_kind(&self) -> bool {
        matches!(
            self,
            Self::RestoreLog
                | Self::RestoreResults
                | Self::RestoreResourceList
                | Self::RestoreItemOperations
                | Self::RestoreVolumeInfo
        )
    }
}

/// `status` of a DownloadRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRequestStatus {
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: DownloadRequestPhase,
    /// The pre-signed URL.
    #[serde(
        default,
        rename = "downloadURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub download_url: Option<String>,
    /// When the request (and the URL) expires; the request is deleted afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Time>,
}

/// `spec` of a ServerStatusRequest: empty. A missing or `null` spec reads as empty too.
#[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "ServerStatusRequest",
    namespaced,
    status = "ServerStatusRequestStatus",
    shortname = "ssr",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero ServerStatusRequest: asks the server for its version and plugins."
)]
pub struct ServerStatusRequestSpec {}

impl<'de> Deserialize<'de> for ServerStatusRequestSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A missing field reaches here as `None` (serde's missing-field path calls
        // `deserialize_option`), so a hand-written request without `spec` still reads.
        Option::<serde::de::IgnoredAny>::deserialize(deserializer).map(|_| Self {})
    }
}

/// `status` of a ServerStatusRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatusRequestStatus {
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: ServerStatusRequestPhase,
    /// When the request was answered; it is deleted a minute later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed_timestamp: Option<Time>,
    /// The server's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The plugins the server has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Vec<PluginInfo>>,
}

/// One plugin in a ServerStatusRequest's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// Plugin name, e.g. `velero.io/aws`.
    pub name: String,
    /// Plugin kind, e.g. `ObjectStore`.
    pub kind: String,
}
