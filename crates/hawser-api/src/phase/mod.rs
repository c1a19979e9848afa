//! Phases of every `velero.io/v1` object, with Velero's exact strings, and the one transition
//! table each for Backups and Restores.
//!
//! Reading a phase never fails: an empty or missing phase is `New` (as in Velero), and a string
//! this version does not know becomes `Unknown(..)`. An unknown phase is not final, and the only
//! move out of it is to `Failed` (for a Backup also to `Deleting`, which Velero allows from every
//! phase): the server cannot tell what work it stands for, so it may only give up on it.
//!
//! Writing the phase an object already has is a no-op and always allowed, so a repeated status
//! write is never rejected; every other move must be forward.
//!
//! Code that handles Backups and Restores alike (the status engine, recovery, the work queue)
//! uses [`Phase`], a Backup's or a Restore's phase with its [`Kind`]; nothing outside this
//! module spells a phase or reads `status.phase` by hand ([`Phase::of`]).

mod backup;
mod lifecycle;
mod other;
mod restore;

use std::fmt::{Debug, Display};

pub use backup::BackupPhase;
pub use lifecycle::{Kind, Phase, phase_str};
pub use other::{
    BackupStorageLocationPhase, DeleteBackupRequestPhase, DownloadRequestPhase, SchedulePhase,
    ServerStatusRequestPhase,
};
pub use restore::RestorePhase;

/// `of`: a phase type's value at `status.phase` of a raw object.
macro_rules! read_from_status {
    ($($phase:ty),+ $(,)?) => {
        $(
            impl $phase {
                /// The value at `status.phase` of a raw object (a missing phase reads as `""`
                /// does).
                #[must_use]
                pub fn of(object: &serde_json::Value) -> Self {
                    Self::parse(phase_str(object))
                }
            }
        )+
    };
}

read_from_status!(
    BackupPhase,
    RestorePhase,
    BackupStorageLocationPhase,
    SchedulePhase,
    DeleteBackupRequestPhase,
    DownloadRequestPhase,
    ServerStatusRequestPhase,
    crate::BackupRepositoryPhase,
    crate::VolumeSnapshotLocationPhase,
    crate::DataTransferPhase,
);

/// A phase with a transition table: implemented by [`BackupPhase`] and [`RestorePhase`].
pub trait LifecyclePhase: Clone + Eq + Debug + Display + Send + Sync + 'static {
    /// The object kind in lower case (`"backup"`, `"restore"`), for messages and metric labels.
    const KIND_LABEL: &'static str;

    /// Reads a phase string; `""` is `New`, an unknown string is kept as `Unknown`.
    fn parse(value: &str) -> Self;

    /// The exact string Velero uses.
    fn as_str(&self) -> &str;

    /// True for the phases the work ends in: `FailedValidation`, `Completed`, `PartiallyFailed`,
    /// `Failed`.
    fn is_final(&self) -> bool;

    /// Whether a status write may move an object from `self` to `to` (see the type's docs).
    fn can_transition_to(&self, to: &Self) -> bool;

    /// The phases before the work starts, from which a server may take the object up (`New`,
    /// and a Backup's `Queued` and `ReadyToStart`).
    fn is_waiting(&self) -> bool;

    /// The phases between the start and the end of the work (`InProgress` up to the
    /// `Finalizing` steps, and `Unknown`): the ones recovery resolves when no live worker owns
    /// the object.
    fn is_in_flight(&self) -> bool;

    /// `Completed`: the only phase that means the work succeeded without errors.
    fn is_success(&self) -> bool;

    /// `Failed`, the phase given to work that cannot be finished.
    fn failed() -> Self;

    /// `FailedValidation`: the spec was refused and the work never ran.
    fn failed_validation() -> Self;

    /// Whether the work has stored its log (Velero's gate for `logs`): it has finished
    /// (`Completed`, `PartiallyFailed`, `Failed`) or waits only for plugin operations.
    fn has_log(&self) -> bool;

    /// `Ok(to)` when the move is allowed, otherwise an [`IllegalTransition`] naming both phases.
    fn transition_to(&self, to: Self) -> Result<Self, IllegalTransition> {
        if self.can_transition_to(&to) {
            Ok(to)
        } else {
            Err(IllegalTransition {
                kind: Self::KIND_LABEL,
                from: self.as_str().to_owned(),
                to: to.as_str().to_owned(),
            })
        }
    }
}

/// A status write that would move an object's phase backwards or sideways.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} may not move from phase {from:?} to {to:?}")]
pub struct IllegalTransition {
    /// `"backup"` or `"restore"`.
    pub kind: &'static str,
    /// The phase the object has.
    pub from: String,
    /// The phase that was asked for.
    pub to: String,
}

impl IllegalTransition {
    /// A stable short category for Event reasons and metric labels.
    pub fn category(&self) -> &'static str {
        "IllegalTransition"
    }
}

#[cfg(test)]
mod tests;
