//! The BackupRepository object (Velero's `backup_repository_types.go`): a kopia or restic
//! repository of pod volume data in a storage location. hawser serves the kind and reads it;
//! it does not create or maintain repositories.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::podvolume::UploaderType;
use crate::string_enum::string_enum;

/// `spec` of a BackupRepository.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "BackupRepository",
    plural = "backuprepositories",
    namespaced,
    status = "BackupRepositoryStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero BackupRepository: a repository of pod volume data in a storage location.",
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Repository Type", "type": "string", "jsonPath": ".spec.repositoryType"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BackupRepositorySpec {
    /// Namespace whose volumes the repository holds (required).
    pub volume_namespace: String,
    /// Storage location of the repository (required).
    pub backup_storage_location: String,
    /// `kopia` or `restic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_type: Option<UploaderType>,
    /// Full restic identifier of the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restic_identifier: Option<String>,
    /// How often the repository is maintained, a Go duration (required).
    pub maintenance_frequency: String,
    /// Settings of the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_config: Option<BTreeMap<String, String>>,
}

string_enum! {
    /// `status.phase` of a BackupRepository.
    pub enum BackupRepositoryPhase {
        /// Not yet checked.
        New = "New",
        /// Usable.
        Ready = "Ready",
        /// Not usable; see the message.
        NotReady = "NotReady",
    }
    empty = New;
}

string_enum! {
    /// `result` of one maintenance run.
    pub enum MaintenanceResult {
        /// The run succeeded.
        Succeeded = "Succeeded",
        /// The run failed.
        Failed = "Failed",
    }
}

/// One recent maintenance run of a BackupRepository.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRepositoryMaintenance {
    /// When the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_timestamp: Option<Time>,
    /// How it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<MaintenanceResult>,
    /// What went wrong, or other information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `status` of a BackupRepository.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRepositoryStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupRepositoryPhase>,
    /// Why the repository is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the repository was last maintained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance_time: Option<Time>,
    /// The latest maintenance runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent_maintenance: Option<Vec<BackupRepositoryMaintenance>>,
}
