//! The Backup object (velero-compat §1.1).

use std::collections::BTreeMap;

use hawser_core::duration::GoDuration;
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{HookErrorMode, HookStatus, TemplateMetadata};
use crate::phase::BackupPhase;

/// `spec` of a Backup: what to back up and where. Empty lists and unset values take the server
/// defaults described on each field.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero Backup: a request to back up cluster resources, and its status."
)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// Labels copied onto Backups created from a Schedule template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// Namespaces to include (globs allowed); empty means all (`*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces to exclude (globs allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources to include (`resource[.group]`, short names, globs); the "old" filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_resources: Option<Vec<String>>,
    /// Resources to exclude; the "old" filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_resources: Option<Vec<String>>,
    /// Cluster-scoped resources to include; `*` means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_cluster_scoped_resources: Option<Vec<String>>,
    /// Cluster-scoped resources to exclude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_cluster_scoped_resources: Option<Vec<String>>,
    /// Namespace-scoped resources to include; empty means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_namespace_scoped_resources: Option<Vec<String>>,
    /// Namespace-scoped resources to exclude.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespace_scoped_resources: Option<Vec<String>>,
    /// Only items matching this selector; unset means every item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Items matching any of these selectors; may not be combined with `labelSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
    /// Whether to snapshot persistent volumes; unset behaves as true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_volumes: Option<bool>,
    /// Retention; zero or unset means the server's `--default-backup-ttl` (720h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ttl: Option<GoDuration>,
    /// Label key that groups volumes into one volume group snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_snapshot_label_key: Option<String>,
    /// Whether to include cluster-scoped resources; unset means "auto"; the "old" filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_cluster_resources: Option<bool>,
    /// Pre and post exec hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<BackupHooks>,
    /// Name of the target BackupStorageLocation; empty means the default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_location: Option<String>,
    /// Names of the VolumeSnapshotLocations to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_locations: Option<Vec<String>>,
    /// Deprecated; when true it is copied to `defaultVolumesToFsBackup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_volumes_to_restic: Option<bool>,
    /// Back up all pod volumes with the file-system uploader by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_volumes_to_fs_backup: Option<bool>,
    /// Order of items per resource: key a plain resource name, value `"ns/name,ns/name"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered_resources: Option<BTreeMap<String, String>>,
    /// How long to wait for CSI snapshots; zero or unset means 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub csi_snapshot_timeout: Option<GoDuration>,
    /// Timeout of asynchronous plugin operations; zero or unset means the server default (4h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub item_operation_timeout: Option<GoDuration>,
    /// ConfigMap with volume and include/exclude policies (`kind: configmap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<TypedLocalObjectReference>,
    /// Move snapshot data to the storage location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_move_data: Option<bool>,
    /// Data mover; `""` or `velero` is the built-in one.
    #[serde(default, rename = "datamover", skip_serializing_if = "Option::is_none")]
    pub data_mover: Option<String>,
    /// Settings of the volume data uploader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_config: Option<UploaderConfigForBackup>,
}

/// `spec.uploaderConfig` of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploaderConfigForBackup {
    /// Number of files uploaded in parallel per volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_files_upload: Option<i64>,
}

/// `spec.hooks` of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupHooks {
    /// Hooks per selection of pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<BackupResourceHookSpec>>,
}

/// Hooks run in the pods a selection matches, before and after they are backed up.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupResourceHookSpec {
    /// Name of the hook spec (required).
    pub name: String,
    /// Namespaces the hooks apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces the hooks do not apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources the hooks apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_resources: Option<Vec<String>>,
    /// Resources the hooks do not apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_resources: Option<Vec<String>>,
    /// Only pods matching this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Hooks run before the pod is backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre: Option<Vec<BackupResourceHook>>,
    /// Hooks run after the pod is backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<Vec<BackupResourceHook>>,
}

/// One backup hook.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupResourceHook {
    /// The command to run (required).
    pub exec: ExecHook,
}

/// A command run in a container of a pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecHook {
    /// Container to run in; unset means the pod's first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Command and arguments (at least one item).
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// What a failure does; unset means `Fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<HookErrorMode>,
    /// How long to wait for the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<GoDuration>,
}

/// `status` of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Deprecated backup format version; always 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Version of the backup archive format (`"1.1.0"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<String>,
    /// When the backup may be garbage-collected (start + TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Time>,
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: BackupPhase,
    /// Position in the backup queue while `Queued`; 0 otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<i64>,
    /// Why the spec is invalid (phase `FailedValidation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_errors: Option<Vec<String>>,
    /// When the backup entered `InProgress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the backup reached a final phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Native volume snapshots attempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshots_attempted: Option<i64>,
    /// Native volume snapshots completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshots_completed: Option<i64>,
    /// Why the backup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Number of warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<i64>,
    /// Number of errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<i64>,
    /// Item counts while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<BackupProgress>,
    /// CSI volume snapshots attempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_volume_snapshots_attempted: Option<i64>,
    /// CSI volume snapshots completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_volume_snapshots_completed: Option<i64>,
    /// Asynchronous plugin operations started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_attempted: Option<i64>,
    /// Asynchronous plugin operations completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_completed: Option<i64>,
    /// Asynchronous plugin operations failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_failed: Option<i64>,
    /// Hooks run and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_status: Option<HookStatus>,
}

/// `status.progress` of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupProgress {
    /// Items to back up (an estimate while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_items: Option<i64>,
    /// Items backed up so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_backed_up: Option<i64>,
}

impl Backup {
    /// The phase, `New` when there is no status.
    pub fn phase(&self) -> BackupPhase {
        self.status
            .as_ref()
            .map(|s| s.phase.clone())
            .unwrap_or_default()
    }
}
