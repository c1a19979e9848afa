//! [`BackupPhase`] and the Backup transition table.

use super::LifecyclePhase;
use crate::string_enum::string_enum;

string_enum! {
    /// `status.phase` of a Backup (velero-compat §1.1), with Velero's exact strings.
    ///
    /// # Transitions
    ///
    /// [`BackupPhase::can_transition`] is the only table; it allows exactly:
    ///
    /// | From | To |
    /// |---|---|
    /// | any | itself (a no-op) |
    /// | any | `Deleting` (Velero accepts a DeleteBackupRequest in every phase) |
    /// | `New` | `Queued`, `ReadyToStart`, `FailedValidation`, `InProgress`, `Failed` |
    /// | `Queued` | `ReadyToStart`, `FailedValidation`, `InProgress`, `Failed` |
    /// | `ReadyToStart` | `FailedValidation`, `InProgress`, `Failed` |
    /// | `InProgress` | `WaitingForPluginOperations[PartiallyFailed]`, `Finalizing[PartiallyFailed]`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `WaitingForPluginOperations` | `WaitingForPluginOperationsPartiallyFailed`, `Finalizing[PartiallyFailed]`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `WaitingForPluginOperationsPartiallyFailed` | `FinalizingPartiallyFailed`, `PartiallyFailed`, `Failed` |
    /// | `Finalizing` | `FinalizingPartiallyFailed`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `FinalizingPartiallyFailed` | `PartiallyFailed`, `Failed` |
    /// | `Unknown(..)` | `Failed` |
    ///
    /// Nothing else: final phases and `Deleting` never move (except to `Deleting`), nothing
    /// returns to `New` or to an earlier step, and a partially failed step never becomes a clean
    /// one. Jumps forward over steps are allowed (a CR left at `InProgress` may be resolved straight
    /// to the `Completed` recorded in the storage location).
    pub enum BackupPhase {
        /// Created, not yet looked at (also what `""` and a missing phase read as).
        New = "New",
        /// Waiting for a free backup slot.
        Queued = "Queued",
        /// Dequeued, about to be validated and started.
        ReadyToStart = "ReadyToStart",
        /// The spec is invalid (final); see `status.validationErrors`.
        FailedValidation = "FailedValidation",
        /// Items are being backed up.
        InProgress = "InProgress",
        /// Items are backed up, asynchronous plugin operations still run.
        WaitingForPluginOperations = "WaitingForPluginOperations",
        /// As `WaitingForPluginOperations`, with errors so far.
        WaitingForPluginOperationsPartiallyFailed = "WaitingForPluginOperationsPartiallyFailed",
        /// Writing the final artifacts.
        Finalizing = "Finalizing",
        /// As `Finalizing`, with errors so far.
        FinalizingPartiallyFailed = "FinalizingPartiallyFailed",
        /// Done without errors (final).
        Completed = "Completed",
        /// Done with errors (final).
        PartiallyFailed = "PartiallyFailed",
        /// Did not complete (final).
        Failed = "Failed",
        /// A DeleteBackupRequest is removing the backup; the object disappears afterwards. Not
        /// final in the sense of [`BackupPhase::is_final`], and no move leaves it.
        Deleting = "Deleting",
    }
    empty = New;
}

impl BackupPhase {
    /// The phases before the work starts (`New`, `Queued`, `ReadyToStart`).
    pub fn is_waiting(&self) -> bool {
        matches!(self, Self::New | Self::Queued | Self::ReadyToStart)
    }

    /// The phases between the start and the end of the work, and `Unknown`, not `Deleting`.
    pub fn is_in_flight(&self) -> bool {
        matches!(
            self,
            Self::InProgress
                | Self::WaitingForPluginOperations
                | Self::WaitingForPluginOperationsPartiallyFailed
                | Self::Finalizing
                | Self::FinalizingPartiallyFailed
                | Self::Unknown(_)
        )
    }

    /// True for `FailedValidation`, `Completed`, `PartiallyFailed` and `Failed`. `Deleting` is
    /// not final (the object is about to be removed) and `Unknown` is not final either.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::FailedValidation | Self::Completed | Self::PartiallyFailed | Self::Failed
        )
    }

    /// `Completed` and `PartiallyFailed`: the backups a restore may read (Velero's rule) and
    /// sync brings into a cluster.
    pub fn is_restorable(&self) -> bool {
        matches!(self, Self::Completed | Self::PartiallyFailed)
    }

    /// The Backup transition table (see the type's docs).
    pub fn can_transition(from: &Self, to: &Self) -> bool {
        use BackupPhase::*;
        if from == to || *to == Deleting {
            return true;
        }
        match from {
            New => matches!(
                to,
                Queued | ReadyToStart | FailedValidation | InProgress | Failed
            ),
            Queued => matches!(to, ReadyToStart | FailedValidation | InProgress | Failed),
            ReadyToStart => matches!(to, FailedValidation | InProgress | Failed),
            InProgress => matches!(
                to,
                WaitingForPluginOperations
                    | WaitingForPluginOperationsPartiallyFailed
                    | Finalizing
                    | FinalizingPartiallyFailed
                    | Completed
                    | PartiallyFailed
                    | Failed
            ),
            WaitingForPluginOperations => matches!(
                to,
                WaitingForPluginOperationsPartiallyFailed
                    | Finalizing
                    | FinalizingPartiallyFailed
                    | Completed
                    | PartiallyFailed
                    | Failed
            ),
            WaitingForPluginOperationsPartiallyFailed => {
                matches!(to, FinalizingPartiallyFailed | PartiallyFailed | Failed)
            }
            Finalizing => {
                matches!(
                    to,
                    FinalizingPartiallyFailed | Completed | PartiallyFailed | Failed
                )
            }
            FinalizingPartiallyFailed => matches!(to, PartiallyFailed | Failed),
            Unknown(_) => *to == Failed,
            FailedValidation | Completed | PartiallyFailed | Failed | Deleting => false,
        }
    }
}

impl LifecyclePhase for BackupPhase {
    const KIND_LABEL: &'static str = "backup";

    fn parse(value: &str) -> Self {
        BackupPhase::parse(value)
    }

    fn as_str(&self) -> &str {
        BackupPhase::as_str(self)
    }

    fn is_final(&self) -> bool {
        BackupPhase::is_final(self)
    }

    fn can_transition_to(&self, to: &Self) -> bool {
        Self::can_transition(self, to)
    }

    fn is_waiting(&self) -> bool {
        BackupPhase::is_waiting(self)
    }

    fn is_in_flight(&self) -> bool {
        BackupPhase::is_in_flight(self)
    }

    fn is_success(&self) -> bool {
        *self == Self::Completed
    }

    fn failed() -> Self {
        Self::Failed
    }

    fn failed_validation() -> Self {
        Self::FailedValidation
    }

    fn has_log(&self) -> bool {
        matches!(
            self,
            Self::Completed
                | Self::PartiallyFailed
                | Self::Failed
                | Self::WaitingForPluginOperations
                | Self::WaitingForPluginOperationsPartiallyFailed
        )
    }
}
