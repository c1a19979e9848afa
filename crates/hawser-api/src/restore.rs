//! The Restore object (velero-compat §1.2).

use std::collections::BTreeMap;

use hawser_core::duration::GoDuration;
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{HookErrorMode, HookStatus};
use crate::phase::RestorePhase;

/// `spec` of a Restore: which backup to restore and how.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Restore",
    namespaced,
    status = "RestoreStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero Restore: a request to restore a backup into the cluster, and its status."
)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSpec {
    /// The backup to restore; filled from the schedule's latest backup when only
    /// `scheduleName` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_name: Option<String>,
    /// Restore the latest backup of this schedule; exactly one of this and `backupName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_name: Option<String>,
    /// Namespaces to include (globs allowed); empty means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces to exclude (globs allowed; `*` is invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_resources: Option<Vec<String>>,
    /// Resources to exclude (the server adds the non-restorable ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_resources: Option<Vec<String>>,
    /// Source namespace → target namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_mapping: Option<BTreeMap<String, String>>,
    /// Only items matching this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Items matching any of these selectors; may not be combined with `labelSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
    /// Whether to restore persistent volumes from snapshots; unset means yes.
    #[serde(
        default,
        rename = "restorePVs",
        skip_serializing_if = "Option::is_none"
    )]
    pub restore_pvs: Option<bool>,
    /// Resources whose `status` is restored too; unset means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_status: Option<RestoreStatusSpec>,
    /// Keep the node ports of Services; unset drops auto-assigned ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_node_ports: Option<bool>,
    /// Whether to restore cluster-scoped resources; unset means "auto".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_cluster_resources: Option<bool>,
    /// Post-restore hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<RestoreHooks>,
    /// What to do with objects that already exist: `none` (default) or `update`; any other value
    /// fails validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_resource_policy: Option<String>,
    /// Timeout of asynchronous plugin operations; zero or unset means the server default (4h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub item_operation_timeout: Option<GoDuration>,
    /// ConfigMap with patches applied to items before they are created (`kind: configmap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_modifier: Option<TypedLocalObjectReference>,
    /// ConfigMap of resource filter policies (Velero 1.18: `namespacedFilterPolicies`,
    /// `clusterScopedFilterPolicy`). hawser does not apply them: a Restore that names one
    /// fails validation, so that nothing they would leave out is restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<TypedLocalObjectReference>,
    /// Settings of the volume data downloader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploader_config: Option<UploaderConfigForRestore>,
}

/// `spec.restoreStatus` of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatusSpec {
    /// Resources whose status is restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_resources: Option<Vec<String>>,
    /// Resources whose status is not restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_resources: Option<Vec<String>>,
}

/// `spec.uploaderConfig` of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploaderConfigForRestore {
    /// Write sparse files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_sparse_files: Option<bool>,
    /// Number of files downloaded in parallel per volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_files_download: Option<i64>,
}

/// `spec.hooks` of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreHooks {
    /// Hooks per selection of pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<RestoreResourceHookSpec>>,
}

/// Hooks run in the restored pods a selection matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreResourceHookSpec {
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
    /// The hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_hooks: Option<Vec<RestoreResourceHook>>,
}

/// One restore hook: an exec hook, an init-container hook, or both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreResourceHook {
    /// A command run in the restored pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecRestoreHook>,
    /// Init containers added to the restored pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitRestoreHook>,
}

/// A command run in a container of a restored pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecRestoreHook {
    /// Container to run in; unset means the pod's first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Command and arguments (at least one item).
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// What a failure does; unset means `Continue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<HookErrorMode>,
    /// How long to wait for the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub exec_timeout: Option<GoDuration>,
    /// How long to wait for the container to become ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub wait_timeout: Option<GoDuration>,
    /// Wait for the container to be ready before running the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_ready: Option<bool>,
}

/// Init containers added to a restored pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitRestoreHook {
    /// Container objects, kept as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::raw_object_list")]
    pub init_containers: Option<Vec<RawExtension>>,
    /// How long to wait for the init containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<GoDuration>,
}

/// `status` of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: RestorePhase,
    /// Why the spec is invalid (phase `FailedValidation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_errors: Option<Vec<String>>,
    /// Number of warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<i64>,
    /// Number of errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<i64>,
    /// Why the restore failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// When the restore entered `InProgress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the restore reached a final phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Item counts while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<RestoreProgress>,
    /// Asynchronous plugin operations started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_attempted: Option<i64>,
    /// Asynchronous plugin operations completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_completed: Option<i64>,
    /// Asynchronous plugin operations failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_failed: Option<i64>,
    /// Hooks run and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_status: Option<HookStatus>,
}

/// `status.progress` of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreProgress {
    /// Items to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_items: Option<i64>,
    /// Items restored so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_restored: Option<i64>,
}

impl Restore {
    /// The phase, `New` when there is no status.
    pub fn phase(&self) -> RestorePhase {
        self.status
            .as_ref()
            .map(|s| s.phase.clone())
            .unwrap_or_default()
    }
}
