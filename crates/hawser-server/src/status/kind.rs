//! The two kinds whose status the engine writes, and their phase rules (from `hawser-api`).

use std::fmt;

use hawser_api::phase::{BackupPhase, LifecyclePhase, RestorePhase};
use kube::api::{ApiResource, GroupVersionKind};

/// Backup or Restore (`velero.io/v1`).
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
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("velero.io", "v1", kind), plural)
    }

    /// Whether a status write may move an object of this kind from phase `from` to `to`
    /// (the `hawser-api` transition table; writing the current phase again is allowed).
    #[must_use]
    pub fn can_transition(self, from: &str, to: &str) -> bool {
        match self {
            Kind::Backup => BackupPhase::parse(from).can_transition_to(&BackupPhase::parse(to)),
            Kind::Restore => RestorePhase::parse(from).can_transition_to(&RestorePhase::parse(to)),
        }
    }

    /// Whether `phase` is one the work ends in.
    #[must_use]
    pub fn is_final(self, phase: &str) -> bool {
        match self {
            Kind::Backup => BackupPhase::parse(phase).is_final(),
            Kind::Restore => RestorePhase::parse(phase).is_final(),
        }
    }

    /// Whether `phase` means a worker had started the work and has not finished it: the phases
    /// recovery resolves when no live worker owns the object. Phases before the work starts
    /// (`New`, `Queued`, `ReadyToStart`) belong to the queue and are left alone, as is `Deleting`.
    #[must_use]
    pub fn is_in_flight(self, phase: &str) -> bool {
        match self {
            Kind::Backup => {
                use BackupPhase::*;
                matches!(
                    BackupPhase::parse(phase),
                    InProgress
                        | WaitingForPluginOperations
                        | WaitingForPluginOperationsPartiallyFailed
                        | Finalizing
                        | FinalizingPartiallyFailed
                        | Unknown(_)
                )
            }
            Kind::Restore => {
                use RestorePhase::*;
                matches!(
                    RestorePhase::parse(phase),
                    InProgress
                        | WaitingForPluginOperations
                        | WaitingForPluginOperationsPartiallyFailed
                        | Finalizing
                        | FinalizingPartiallyFailed
                        | Unknown(_)
                )
            }
        }
    }

    /// The phase given to an orphaned object that has no record in the storage location.
    #[must_use]
    pub fn failed_phase(self) -> &'static str {
        // Both kinds spell it the same; hawser-api's `as_str` borrows, so the literal is used.
        "Failed"
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Namespace/name of one Backup or Restore.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Backup or Restore.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key.
    #[must_use]
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_velero_v1() {
        let b = Kind::Backup.api_resource();
        assert_eq!(
            (b.api_version.as_str(), b.kind.as_str(), b.plural.as_str()),
            ("velero.io/v1", "Backup", "backups")
        );
        let r = Kind::Restore.api_resource();
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.plural.as_str()),
            ("velero.io/v1", "Restore", "restores")
        );
    }

    #[test]
    fn in_flight_phases_are_the_ones_between_start_and_end() {
        for kind in Kind::ALL {
            for p in [
                "InProgress",
                "Finalizing",
                "WaitingForPluginOperations",
                "FinalizingPartiallyFailed",
            ] {
                assert!(kind.is_in_flight(p), "{kind} {p}");
            }
            for p in [
                "",
                "New",
                "Completed",
                "Failed",
                "PartiallyFailed",
                "FailedValidation",
            ] {
                assert!(!kind.is_in_flight(p), "{kind} {p}");
            }
        }
        assert!(!Kind::Backup.is_in_flight("Queued"));
        assert!(!Kind::Backup.is_in_flight("Deleting"));
    }

    #[test]
    fn completed_never_returns_to_in_progress_but_in_progress_may_fail() {
        for kind in Kind::ALL {
            assert!(!kind.can_transition("Completed", "InProgress"));
            assert!(!kind.can_transition("Completed", "Failed"));
            assert!(kind.can_transition("InProgress", "Failed"));
            assert!(kind.can_transition("InProgress", "Completed"));
        }
    }
}
