//! DataUpload and DataDownload, `velero.io/v2alpha1` (Velero's `data_upload_types.go`,
//! `data_download_types.go`): moves of CSI snapshot data to and from a storage location, done
//! by Velero's node agent. hawser serves the kinds and reads them; it does not move data.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::is_false;
use crate::podvolume::{DataTransferPhase, DataTransferProgress};
use crate::string_enum::string_enum;

/// The API version of DataUpload and DataDownload.
pub const DATA_MOVER_API_VERSION: &str = "velero.io/v2alpha1";

string_enum! {
    /// Operating system of the node moving the data.
    pub enum NodeOs {
        /// Chosen by the node agent.
        Auto = "auto",
        /// Linux.
        Linux = "linux",
        /// Windows.
        Windows = "windows",
    }
}

/// `spec.csiSnapshot` of a DataUpload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsiSnapshotSpec {
    /// The VolumeSnapshot (required).
    pub volume_snapshot: String,
    /// Storage class of the snapshotted volume (required).
    pub storage_class: String,
    /// VolumeSnapshotClass of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_class: Option<String>,
    /// CSI driver of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

/// `spec` of a DataUpload.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v2alpha1",
    kind = "DataUpload",
    namespaced,
    status = "DataUploadStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero DataUpload: a move of a volume snapshot's data to a storage location.",
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "Phase of the upload"}"#,
    printcolumn = r#"{"name": "Started", "type": "date", "jsonPath": ".status.startTimestamp", "description": "When the upload started"}"#,
    printcolumn = r#"{"name": "Bytes Done", "type": "integer", "format": "int64", "jsonPath": ".status.progress.bytesDone", "description": "Bytes uploaded"}"#,
    printcolumn = r#"{"name": "Total Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.progress.totalBytes", "description": "Bytes to upload"}"#,
    printcolumn = r#"{"name": "Incremental Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.incrementalBytes", "description": "Bytes new since the last upload", "priority": 10}"#,
    printcolumn = r#"{"name": "Storage Location", "type": "string", "jsonPath": ".spec.backupStorageLocation", "description": "Storage location of the data"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "When the upload was created"}"#,
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".status.node", "description": "Node processing the upload"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DataUploadSpec {
    /// Kind of snapshot, e.g. `CSI` (required).
    pub snapshot_type: String,
    /// The CSI snapshot, for `CSI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_snapshot: Option<CsiSnapshotSpec>,
    /// The PVC whose snapshot is moved (required).
    #[serde(rename = "sourcePVC")]
    pub source_pvc: String,
    /// Data mover; empty or `velero` is Velero's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datamover: Option<String>,
    /// Settings of the data mover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_mover_config: Option<BTreeMap<String, String>>,
    /// Namespace of the PVC (required).
    pub source_namespace: String,
    /// Storage location of the data (required).
    pub backup_storage_location: String,
    /// Asks the node agent to stop.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancel: bool,
    /// How long the upload may take, a Go duration (required).
    pub operation_timeout: String,
}

/// `status` of a DataUpload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataUploadStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DataTransferPhase>,
    /// Path of the data on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Snapshot id in the repository.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// What the data mover reports back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_mover_result: Option<BTreeMap<String, String>>,
    /// What went wrong, or other information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the upload started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the upload ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<DataTransferProgress>,
    /// Node processing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Operating system of that node.
    #[serde(default, rename = "nodeOS", skip_serializing_if = "Option::is_none")]
    pub node_os: Option<NodeOs>,
    /// Node that took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by_node: Option<String>,
    /// When a node took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_timestamp: Option<Time>,
    /// Bytes new since the previous upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental_bytes: Option<i64>,
}

/// `spec.targetVolume` of a DataDownload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetVolumeSpec {
    /// The PVC to fill (required).
    pub pvc: String,
    /// The PV to fill (required).
    pub pv: String,
    /// Namespace of the PVC (required).
    pub namespace: String,
}

/// `spec` of a DataDownload.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v2alpha1",
    kind = "DataDownload",
    namespaced,
    status = "DataDownloadStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero DataDownload: a move of snapshot data from a storage location to a volume.",
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "Phase of the download"}"#,
    printcolumn = r#"{"name": "Started", "type": "date", "jsonPath": ".status.startTimestamp", "description": "When the download started"}"#,
    printcolumn = r#"{"name": "Bytes Done", "type": "integer", "format": "int64", "jsonPath": ".status.progress.bytesDone", "description": "Bytes downloaded"}"#,
    printcolumn = r#"{"name": "Total Bytes", "type": "integer", "format": "int64", "jsonPath": ".status.progress.totalBytes", "description": "Bytes to download"}"#,
    printcolumn = r#"{"name": "Storage Location", "type": "string", "jsonPath": ".spec.backupStorageLocation", "description": "Storage location of the data"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "When the download was created"}"#,
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".status.node", "description": "Node processing the download"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DataDownloadSpec {
    /// The volume to fill (required).
    pub target_volume: TargetVolumeSpec,
    /// Storage location of the data (required).
    pub backup_storage_location: String,
    /// Data mover; empty or `velero` is Velero's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datamover: Option<String>,
    /// Snapshot id in the repository (required).
    #[serde(rename = "snapshotID")]
    pub snapshot_id: String,
    /// Namespace of the backed-up PVC (required).
    pub source_namespace: String,
    /// How long the download may take, a Go duration (required).
    pub operation_timeout: String,
    /// Settings of the data mover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_mover_config: Option<BTreeMap<String, String>>,
    /// Asks the node agent to stop.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancel: bool,
    /// Operating system of the node to use.
    #[serde(default, rename = "nodeOS", skip_serializing_if = "Option::is_none")]
    pub node_os: Option<NodeOs>,
    /// Size of the snapshot in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_size: Option<i64>,
}

/// `status` of a DataDownload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataDownloadStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DataTransferPhase>,
    /// When the download started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the download ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<DataTransferProgress>,
    /// What went wrong, or other information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Node processing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node that took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by_node: Option<String>,
    /// When a node took it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_timestamp: Option<Time>,
}
