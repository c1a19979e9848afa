//! [`Kind`] and [`Phase`]: a Backup's or a Restore's phase, for the code that handles both.

use std::fmt;

use kube::api::{ApiResource, GroupVersionKind};

use super::{BackupPhase, LifecyclePhase, RestorePhase};

/// The two kinds whose work has a lifecycle: Backup and Restore (`velero.io/v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `backups.velero.io`.
    Backup,
    /// `restores.velero.io`.
    Restore,
}

impl Kind {
    /// Both kinds, in the order recovery handles them.
    pub const ALL: [Kind; 2] = [Kind::Backup, Kind::Restore];

    /// `"backup"` / `"restore"`: for messages and metric labels.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Kind::Backup => BackupPhase::KIND_LABEL,
            Kind::Restore => RestorePhase::KIND_LABEL,
        }
    }

    /// The API resource (`velero.io/v1`, plural `backups` / `restores`).
    #[must_use]
    pub fn api_resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Kind::Backup => ("Backup", "backups"),
            Kind::Restore => ("Restore", "restores"),
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(crate::GROUP, crate::VERSION, kind),
            plural,
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The phase of a Backup or of a Restore. Each question is answered by the kind's own table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Phase {
    /// A Backup's phase.
    Backup(BackupPhase),
    /// A Restore's phase.
    Restore(RestorePhase),
}

impl Phase {
    /// Reads a phase string of `kind` (`""` is `New`; never fails).
    #[must_use]
    pub fn parse(kind: Kind, value: &str) -> Self {
        match kind {
            Kind::Backup => Self::Backup(BackupPhase::parse(value)),
            Kind::Restore => Self::Restore(RestorePhase::parse(value)),
        }
    }

    /// The phase of a raw object of `kind`: its `status.phase`, `New` when there is none.
    #[must_use]
    pub fn of(kind: Kind, object: &serde_json::Value) -> Self {
        Self::parse(kind, phase_str(object))
    }

    /// `Failed` of `kind`.
    #[must_use]
    pub fn failed(kind: Kind) -> Self {
        match kind {
            Kind::Backup => Self::Backup(BackupPhase::Failed),
            Kind::Restore => Self::Restore(RestorePhase::Failed),
        }
    }

    /// `FailedValidation` of `kind`.
    #[must_use]
    pub fn failed_validation(kind: Kind) -> Self {
        match kind {
            Kind::Backup => Self::Backup(BackupPhase::FailedValidation),
            Kind::Restore => Self::Restore(RestorePhase::FailedValidation),
        }
    }

    /// `InProgress` of `kind`.
    #[must_use]
    pub fn in_progress(kind: Kind) -> Self {
        match kind {
            Kind::Backup => Self::Backup(BackupPhase::InProgress),
            Kind::Restore => Self::Restore(RestorePhase::InProgress),
        }
    }

    /// Whether work left in this phase by a server that is gone, with no record deciding it,
    /// is run again: `InProgress`, and a Restore's `Finalizing` (where it waits for its exec
    /// hooks).
    #[must_use]
    pub fn is_rerun_from(&self) -> bool {
        matches!(
            self,
            Self::Backup(BackupPhase::InProgress)
                | Self::Restore(RestorePhase::InProgress | RestorePhase::Finalizing)
        )
    }

    /// Whose phase this is.
    #[must_use]
    pub fn kind(&self) -> Kind {
        match self {
            Self::Backup(_) => Kind::Backup,
            Self::Restore(_) => Kind::Restore,
        }
    }

    /// The exact string Velero uses.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Backup(p) => p.as_str(),
            Self::Restore(p) => p.as_str(),
        }
    }

    /// See [`LifecyclePhase::is_final`].
    #[must_use]
    pub fn is_final(&self) -> bool {
        self.ask(LifecyclePhase::is_final, LifecyclePhase::is_final)
    }

    /// See [`LifecyclePhase::is_waiting`].
    #[must_use]
    pub fn is_waiting(&self) -> bool {
        self.ask(LifecyclePhase::is_waiting, LifecyclePhase::is_waiting)
    }

    /// See [`LifecyclePhase::is_in_flight`].
    #[must_use]
    pub fn is_in_flight(&self) -> bool {
        self.ask(LifecyclePhase::is_in_flight, LifecyclePhase::is_in_flight)
    }

    /// See [`LifecyclePhase::is_success`].
    #[must_use]
    pub fn is_success(&self) -> bool {
        self.ask(LifecyclePhase::is_success, LifecyclePhase::is_success)
    }

    /// Whether a status write may move an object from `self` to `to`: the kind's table; never
    /// across kinds.
    #[must_use]
    pub fn can_transition_to(&self, to: &Phase) -> bool {
        match (self, to) {
            (Self::Backup(from), Self::Backup(to)) => from.can_transition_to(to),
            (Self::Restore(from), Self::Restore(to)) => from.can_transition_to(to),
            _ => false,
        }
    }

    fn ask(&self, backup: fn(&BackupPhase) -> bool, restore: fn(&RestorePhase) -> bool) -> bool {
        match self {
            Self::Backup(p) => backup(p),
            Self::Restore(p) => restore(p),
        }
    }
}

impl From<BackupPhase> for Phase {
    fn from(phase: BackupPhase) -> Self {
        Self::Backup(phase)
    }
}

impl From<RestorePhase> for Phase {
    fn from(phase: RestorePhase) -> Self {
        Self::Restore(phase)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status.phase` of a raw object as a string; `""` when it is missing or not a string.
pub fn phase_str(object: &serde_json::Value) -> &str {
    object
        .pointer("/status/phase")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}
