//! The Schedule object (velero-compat §1.4).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backup::BackupSpec;
use crate::common::is_false;
use crate::phase::SchedulePhase;

/// `spec` of a Schedule: a cron expression and the Backup spec to create when it is due.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Schedule",
    namespaced,
    status = "ScheduleStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero Schedule: Backups created periodically from a template.",
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase", "description": "Status of the schedule"}"#,
    printcolumn = r#"{"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule", "description": "A Cron expression defining when to run the Backup"}"#,
    printcolumn = r#"{"name": "LastBackup", "type": "date", "jsonPath": ".status.lastBackup", "description": "The last time a Backup was run for this schedule"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleSpec {
    /// The spec of each created Backup (required).
    pub template: BackupSpec,
    /// Cron expression (5 fields, or a descriptor such as `@every 6h`) (required).
    pub schedule: String,
    /// Give created Backups a controller owner reference to the Schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_owner_references_in_backup: Option<bool>,
    /// No Backups are created while paused.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Skip the next due run; unset means the server's `--schedule-skip-immediately`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_immediately: Option<bool>,
}

/// `status` of a Schedule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    /// Current phase; `""` and a missing phase read as `New`.
    #[serde(default)]
    pub phase: SchedulePhase,
    /// When the last Backup was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<Time>,
    /// When a due run was last skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skipped: Option<Time>,
    /// Why the schedule is invalid (phase `FailedValidation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_errors: Option<Vec<String>>,
}
