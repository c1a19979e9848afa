//! [`PhasedResource`]: what a status writer needs to know about Backups and Restores, in one
//! generic interface; [`StatusPatch`]: the typed status deltas it writes.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::backup::{Backup, BackupStatus};
use crate::labels::HAWSER_OWNER;
use crate::phase::{BackupPhase, Kind, LifecyclePhase, RestorePhase, phase_str};
use crate::restore::{Restore, RestoreStatus};

/// A namespaced `velero.io/v1` object whose `status.phase` follows a transition table: a Backup
/// or a Restore.
pub trait PhasedResource:
    kube::Resource<DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// The phase type.
    type Phase: LifecyclePhase;

    /// Its [`Kind`].
    const LIFECYCLE_KIND: Kind;

    /// `"backup"` or `"restore"`, for messages and metric labels.
    const KIND_LABEL: &'static str = <Self::Phase as LifecyclePhase>::KIND_LABEL;

    /// The current phase (`New` when there is no status or no phase).
    fn phase(&self) -> Self::Phase;

    /// The transition table of this kind.
    fn can_transition(from: &Self::Phase, to: &Self::Phase) -> bool {
        from.can_transition_to(to)
    }

    /// True for the final phases of this kind.
    fn is_final(phase: &Self::Phase) -> bool {
        phase.is_final()
    }

    /// The phase of a raw object (for instance a fresh re-read as `serde_json::Value`):
    /// `status.phase`, or `New` when it is missing, empty or not a string.
    fn phase_from_json(object: &serde_json::Value) -> Self::Phase {
        Self::Phase::parse(phase_str(object))
    }

    /// The server instance named by the [`HAWSER_OWNER`] annotation, if any.
    fn owner(&self) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(HAWSER_OWNER)
            .map(String::as_str)
    }
}

impl PhasedResource for Backup {
    type Phase = BackupPhase;
    const LIFECYCLE_KIND: Kind = Kind::Backup;

    fn phase(&self) -> BackupPhase {
        Backup::phase(self)
    }
}

impl PhasedResource for Restore {
    type Phase = RestorePhase;
    const LIFECYCLE_KIND: Kind = Kind::Restore;

    fn phase(&self) -> RestorePhase {
        Restore::phase(self)
    }
}

/// A typed `status` delta: the fields a status write sets besides the phase. Its `None` fields
/// are left as they are on the object; its phase, if it has one, is ignored (a write's phase is
/// its own).
pub trait StatusPatch: Serialize {
    /// The kind whose status it is; `None` for [`SharedStatus`], which fits either.
    const KIND: Option<Kind>;
}

impl StatusPatch for BackupStatus {
    const KIND: Option<Kind> = Some(Kind::Backup);
}

impl StatusPatch for RestoreStatus {
    const KIND: Option<Kind> = Some(Kind::Restore);
}

/// The status fields Backups and Restores share, same names and meaning: for code that
/// handles either kind.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SharedStatus {
    /// Why the spec is invalid (phase `FailedValidation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_errors: Option<Vec<String>>,
    /// Why the work failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// When the work started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the work ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
}

impl StatusPatch for SharedStatus {
    const KIND: Option<Kind> = None;
}
