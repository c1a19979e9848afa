//! [`PhasedResource`]: what a status writer needs to know about Backups and Restores, in one
//! generic interface.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backup::Backup;
use crate::labels::HAWSER_OWNER;
use crate::phase::{BackupPhase, LifecyclePhase, RestorePhase, phase_str};
use crate::restore::Restore;

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

    fn phase(&self) -> BackupPhase {
        Backup::phase(self)
    }
}

impl PhasedResource for Restore {
    type Phase = RestorePhase;

    fn phase(&self) -> RestorePhase {
        Restore::phase(self)
    }
}
