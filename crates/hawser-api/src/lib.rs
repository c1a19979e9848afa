//! The `velero.io/v1` API of hawser: Velero's objects as Rust types, their phases with the one
//! transition table per kind, well-known labels and annotations, and the CRDs generated from the
//! types.
//!
//! - Objects: [`Backup`], [`Restore`], [`BackupStorageLocation`], [`Schedule`],
//!   [`DeleteBackupRequest`], [`DownloadRequest`], [`ServerStatusRequest`] (kube-derive
//!   `CustomResource`s, namespaced). Field names are Velero's; unknown fields are ignored, and
//!   enum-like strings never fail a read (see [`phase`]).
//! - Objects hawser serves but does not process, so that Velero's clients can list them:
//!   [`VolumeSnapshotLocation`], [`PodVolumeBackup`], [`PodVolumeRestore`],
//!   [`BackupRepository`], and the `velero.io/v2alpha1` [`DataUpload`] and [`DataDownload`].
//! - Phases and transitions: [`phase`]; the generic view for status writers: [`PhasedResource`].
//! - Labels and annotations: [`labels`].
//! - Time arithmetic with Go durations: [`time`].
//! - CRDs: [`crd::crds`], checked in as YAML under `crds/` at the repository root.
//! - Test builders (`Backup::named("b1").in_phase(..)`): module `testing`, with the `testing` feature.

mod backup;
mod bsl;
mod common;
pub mod crd;
mod datamover;
mod filters;
pub mod labels;
pub mod phase;
mod phased;
mod podvolume;
mod repository;
mod requests;
mod restore;
mod schedule;
mod schema;
mod string_enum;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
mod unsupported;
mod vsl;

pub use backup::{
    Backup, BackupHooks, BackupProgress, BackupResourceHook, BackupResourceHookSpec, BackupSpec,
    BackupStatus, ExecHook, UploaderConfigForBackup,
};
pub use bsl::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationSpec,
    BackupStorageLocationStatus, ObjectStorageLocation,
};
pub use common::{HookErrorMode, HookStatus, TemplateMetadata, count};
pub use datamover::{
    CsiSnapshotSpec, DATA_MOVER_API_VERSION, DataDownload, DataDownloadSpec, DataDownloadStatus,
    DataUpload, DataUploadSpec, DataUploadStatus, NodeOs, TargetVolumeSpec,
};
pub use hawser_core::duration::GoDuration;
pub use phase::{
    BackupPhase, BackupStorageLocationPhase, DeleteBackupRequestPhase, DownloadRequestPhase,
    IllegalTransition, Kind, LifecyclePhase, Phase, RestorePhase, SchedulePhase,
    ServerStatusRequestPhase, phase_str,
};
pub use phased::{PhasedResource, SharedStatus, StatusPatch};
pub use podvolume::{
    DataTransferPhase, DataTransferProgress, PodVolumeBackup, PodVolumeBackupSpec,
    PodVolumeBackupStatus, PodVolumeRestore, PodVolumeRestoreSpec, PodVolumeRestoreStatus,
    UploaderType,
};
pub use repository::{
    BackupRepository, BackupRepositoryMaintenance, BackupRepositoryPhase, BackupRepositorySpec,
    BackupRepositoryStatus, MaintenanceResult,
};
pub use requests::{
    DeleteBackupRequest, DeleteBackupRequestSpec, DeleteBackupRequestStatus, DownloadRequest,
    DownloadRequestSpec, DownloadRequestStatus, DownloadTarget, DownloadTargetKind, PluginInfo,
    ServerStatusRequest, ServerStatusRequestSpec, ServerStatusRequestStatus,
};
pub use restore::{
    ExecRestoreHook, InitRestoreHook, Restore, RestoreHooks, RestoreProgress, RestoreResourceHook,
    RestoreResourceHookSpec, RestoreSpec, RestoreStatus, RestoreStatusSpec,
    UploaderConfigForRestore,
};
pub use schedule::{Schedule, ScheduleSpec, ScheduleStatus};
pub use vsl::{
    VolumeSnapshotLocation, VolumeSnapshotLocationPhase, VolumeSnapshotLocationSpec,
    VolumeSnapshotLocationStatus,
};

/// The API group of every object here.
pub const GROUP: &str = "velero.io";
/// The API version of every object here but DataUpload and DataDownload.
pub const VERSION: &str = "v1";
/// `apiVersion` of every object here but DataUpload and DataDownload
/// ([`DATA_MOVER_API_VERSION`]).
pub const API_VERSION: &str = "velero.io/v1";
