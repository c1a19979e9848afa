//! PodVolumeBackup and PodVolumeRestore (Velero's `pod_volume_backup_types.go`,
//! `pod_volume_restore_types.go`): file-system copies of one pod volume, done by Velero's node
//! agent. hawser serves the kinds and reads them; it does not create or process them.
//!
//! Durations and enums are kept as Velero writes them; nothing here fails to read a value a
//! newer Velero writes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::is_false;
use crate::string_enum::string_enum;

string_enum! {
    /// `spec.uploaderType`: the tool moving the data.
    pub enum UploaderType {
        /// Kopia (the default).
        Kopia = "kopia",
        /// Restic (deprecated in Velero).
        Restic = "restic",
        /// Not set.
        Unset = "",
    }
}

string_enum! {
    /// `status.phase` of the data movement kinds (PodVolumeBackup, PodVolumeRestore,
    /// DataUpload, DataDownload).
    pub enum DataTransferPhase {
        /// Created, not yet taken up.
        New = "New",
        /// Taken up by a node.
        Accepted = "Accepted",
        /// The data is exposed to the mover.
        Prepared = "Prepared",
        /// Data is moving.
        InProgress = "InProgress",
        /// Cancellation asked for.
        Canceling = "Canceling",
        /// Cancelled.
        Canceled = "Canceled",
        /// Done.
        Completed = "Completed",
        /// Failed.
        Failed = "Failed",
    }
    empty = New;
}

/// `status.progress` of the data movement kinds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataTransferProgress {
    /// Bytes to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<i64>,
    /// Bytes moved so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_done: Option<i64>,
}

/// `spec` of a PodVolumeBackup.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "PodVolumeBackup",
    namespaced,
    status = "PodVolumeBackupStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero PodVolumeBackup: a file-system backup of one pod volume.",
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "Phase of the pod volume backup"}"#,
    printcolumn = r#"{"name": "Started", "type": "date", "jsonPath": ".status.startTimestamp", "description": "When the pod volume backup started"}"#,
    printcolumn = r#"{"name": "Bytes Done", "type": "integer", "format": "int64", "jsonPath": ".status.progress.bytesDone", "description": "Bytes copied"}"#,
    printcolumn = r#"{"name": "Total Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.progress.totalBytes", "description": "Bytes to copy"}"#,
    printcolumn = r#"{"name": "Incremental Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.incrementalBytes", "description": "Bytes new since the last backup", "priority": 10}"#,
    printcolumn = r#"{"name": "Storage Location", "type": "string", "jsonPath": ".spec.backupStorageLocation", "description": "Storage location of the data"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "When the pod volume backup was created"}"#,
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".status.node", "description": "Node processing the pod volume backup"}"#,
    printcolumn = r#"{"name": "Uploader", "type": "string", "jsonPath": ".spec.uploaderType", "description": "Tool moving the data"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumeBackupSpec {
    /// Node the pod runs on (required).
    pub node: String,
    /// The pod (required).
    pub pod: ObjectReference,
    /// Name of the volume in the pod (required).
    pub volume: String,
    /// Storage location of the data (required).
    pub backup_storage_location: String,
    /// Repository the data goes to (required).
    pub repo_identifier: String,
    /// Tool moving the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_type: Option<UploaderType>,
    /// Tags of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Settings of the uploader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_settings: Option<BTreeMap<String, String>>,
    /// Asks the node agent to stop.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancel: bool,
}

/// `status` of a PodVolumeBackup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumeBackupStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DataTransferPhase>,
    /// Path of the volume's data on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Snapshot id in the repository.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// What went wrong, or other information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the copy started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the copy ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<DataTransferProgress>,
    /// When a node took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_timestamp: Option<Time>,
    /// Bytes new since the volume's previous backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental_bytes: Option<i64>,
}

/// `spec` of a PodVolumeRestore.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "PodVolumeRestore",
    namespaced,
    status = "PodVolumeRestoreStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero PodVolumeRestore: a file-system restore of one pod volume.",
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "Phase of the pod volume restore"}"#,
    printcolumn = r#"{"name": "Started", "type": "date", "jsonPath": ".status.startTimestamp", "description": "When the pod volume restore started"}"#,
    printcolumn = r#"{"name": "Bytes Done", "type": "integer", "format": "int64", "jsonPath": ".status.progress.bytesDone", "description": "Bytes copied"}"#,
    printcolumn = r#"{"name": "Total Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.progress.totalBytes", "description": "Bytes to copy"}"#,
    printcolumn = r#"{"name": "Storage Location", "type": "string", "jsonPath": ".spec.backupStorageLocation", "description": "Storage location of the data"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "When the pod volume restore was created"}"#,
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".status.node", "description": "Node processing the pod volume restore"}"#,
    printcolumn = r#"{"name": "Uploader Type", "type": "string", "jsonPath": ".spec.uploaderType", "description": "Tool moving the data"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumeRestoreSpec {
    /// The pod (required).
    pub pod: ObjectReference,
    /// Name of the volume in the pod (required).
    pub volume: String,
    /// Storage location of the data (required).
    pub backup_storage_location: String,
    /// Repository the data comes from (required).
    pub repo_identifier: String,
    /// Tool moving the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_type: Option<UploaderType>,
    /// Snapshot id in the repository (required).
    #[serde(rename = "snapshotID")]
    pub snapshot_id: String,
    /// Namespace of the backed-up pod (required).
    pub source_namespace: String,
    /// Settings of the uploader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_settings: Option<BTreeMap<String, String>>,
    /// Asks the node agent to stop.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancel: bool,
    /// Size of the snapshot in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_size: Option<i64>,
}

/// `status` of a PodVolumeRestore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumeRestoreStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DataTransferPhase>,
    /// What went wrong, or other information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the copy started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the copy ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<DataTransferProgress>,
    /// When a node took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_timestamp: Option<Time>,
    /// Node processing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}
