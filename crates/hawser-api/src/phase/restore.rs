//! [`RestorePhase`] and the Restore transition table.

use super::LifecyclePhase;
use crate::string_enum::string_enum;

string_enum! {
    /// `status.phase` of a Restore (velero-compat §1.2), with Velero's exact strings.
    ///
    /// # Transitions
    ///
    /// [`RestorePhase::can_transition`] is the only table; it allows exactly:
    ///
    /// | From | To |
    /// |---|---|
    /// | any | itself (a no-op) |
    /// | `New` | `FailedValidation`, `InProgress`, `Failed` |
    /// | `InProgress` | `WaitingForPluginOperations[PartiallyFailed]`, `Finalizing[PartiallyFailed]`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `WaitingForPluginOperations` | `WaitingForPluginOperationsPartiallyFailed`, `Finalizing[PartiallyFailed]`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `WaitingForPluginOperationsPartiallyFailed` | `FinalizingPartiallyFailed`, `PartiallyFailed`, `Failed` |
    /// | `Finalizing` | `FinalizingPartiallyFailed`, `Completed`, `PartiallyFailed`, `Failed` |
    /// | `FinalizingPartiallyFailed` | `PartiallyFailed`, `Failed` |
    /// | `Unknown(..)` | `Failed` |
    ///
    /// Nothing else: final phases never move, nothing returns to `New` or to an earlier step, and
    /// a partially failed step never becomes a clean one. Jumps forward over steps are allowed.
    pub enum RestorePhase {
        /// Created, not yet looked at (also what `""` and a missing phase read as).
        New = "New",
        /// The spec is invalid (final); see `status.validationErrors`.
        FailedValidation = "FailedValidation",
        /// Items are being restored.
        InProgress = "InProgress",
        /// Items are restored, asynchronous plugin operations still run.
        WaitingForPluginOperations = "WaitingForPluginOperations",
        /// As `WaitingForPluginOperations`, with errors so far.
        WaitingForPluginOperationsPartiallyFailed = "WaitingForPluginOperationsPartiallyFailed",
        /// Running the finalization tasks.
        Finalizing = "Finalizing",
        /// As `Finalizing`, with errors so far.
        FinalizingPartiallyFailed = "FinalizingPartiallyFailed",
        /// Done without errors (final).
        Completed = "Completed",
        /// Done with errors (final).
        PartiallyFailed = "PartiallyFailed",
        /// Did not complete (final).
        Failed = "Failed",
    }
    empty = New;
}

impl RestorePhase {
    /// The phases before the work starts (`New`).
    pub fn is_waiting(&self) -> bool {
        *self == Self::New
    }

    /// The phases between the start and the end of the work, and `Unknown`.
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

    /// True for `FailedValidation`, `Completed`, `PartiallyFailed` and `Failed`; `Unknown` is not
    /// final.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::FailedValidation | Self::Completed | Self::PartiallyFailed | Self::Failed
        )
    }

    /// The Restore transition table (see the type's docs).
    pub fn can_transition(from: &Self, to: &Self) -> bool {
        use RestorePhase::*;
        if from == to {
            return true;
        }
        match from {
            New => matches!(to, FailedValidation | InProgress | Failed),
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
            FailedValidation | Completed | PartiallyFailed | Failed => false,
        }
    }
}

impl LifecyclePhase for RestorePhase {
    const KIND_LABEL: &'static str = "restore";

    fn parse(value: &str) -> Self {
        RestorePhase::parse(value)
    }

    fn as_str(&self) -> &str {
        RestorePhase::as_str(self)
    }

    fn is_final(&self) -> bool {
        RestorePhase::is_final(self)
    }

    fn can_transition_to(&self, to: &Self) -> bool {
        Self::can_transition(self, to)
    }

    fn is_waiting(&self) -> bool {
        RestorePhase::is_waiting(self)
    }

    fn is_in_flight(&self) -> bool {
        RestorePhase::is_in_flight(self)
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
