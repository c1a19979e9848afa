//! Which controllers run: Velero's controller names ([`CONTROLLERS`]) with the rules
//! `--disable-controllers` and `--restore-only` follow ([`Enabled`]). The controllers themselves
//! are started from `controllers/table.rs`, one row per name here.
//!
//! Where one hawser controller does the work of two of Velero's (`backup` also keeps Velero's
//! `backup-queue`; `backup-operations` also finalizes, Velero's `backup-finalizer`), disabling
//! either name disables it. Velero's names of work hawser does not do in a controller of its own
//! ([`NOT_HERE`]) are accepted and change nothing. `backup-storage-location` cannot be disabled,
//! as in Velero.

use std::collections::BTreeSet;

use super::error::ArgsError;

/// One controller's names and rules.
pub(crate) struct Names {
    /// Velero's name of the controller (hawser's own where Velero has none).
    pub(crate) name: &'static str,
    /// Velero's names of other controllers whose work this one does: disabling one of them
    /// disables this one.
    pub(crate) also: &'static [&'static str],
    /// Whether `--disable-controllers` may name it.
    pub(crate) can_disable: bool,
    /// Disabled by `--restore-only` (Velero's list: backup, backup-deletion, backup-finalizer,
    /// backup-operations, gc, schedule).
    pub(crate) off_when_restore_only: bool,
}

const fn names(
    name: &'static str,
    also: &'static [&'static str],
    can_disable: bool,
    off_when_restore_only: bool,
) -> Names {
    Names {
        name,
        also,
        can_disable,
        off_when_restore_only,
    }
}

/// Every controller, in the order a term starts them.
pub(crate) const CONTROLLERS: &[Names] = &[
    names("backup-storage-location", &[], false, false),
    names("backup", &["backup-queue"], true, true),
    names("backup-operations", &["backup-finalizer"], true, true),
    names("backup-deletion", &[], true, true),
    names("backup-sync", &[], true, false),
    names("download-request", &[], true, false),
    names("gc", &[], true, true),
    names("restore", &[], true, false),
    names("schedule", &[], true, true),
    names("server-status-request", &[], true, false),
    // hawser's own: reports the VolumeSnapshotLocations it cannot use (Velero validates them
    // in the backup controller).
    names("volume-snapshot-location", &[], true, false),
];

/// Velero's controller names for work hawser does not do in a controller of its own: accepted
/// by `--disable-controllers`, with nothing to disable (no repositories; restores have no
/// asynchronous item operations and finish in the restore controller).
pub(crate) const NOT_HERE: &[&str] = &["backup-repo", "restore-operations", "restore-finalizer"];

/// Every name `--disable-controllers` takes, as Velero lists them in its error.
fn disableable() -> Vec<&'static str> {
    CONTROLLERS
        .iter()
        .filter(|c| c.can_disable)
        .flat_map(|c| std::iter::once(c.name).chain(c.also.iter().copied()))
        .chain(NOT_HERE.iter().copied())
        .collect()
}

/// Which controllers run, from `--disable-controllers` and `--restore-only`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Enabled {
    /// The names of [`CONTROLLERS`] that do not run.
    disabled: BTreeSet<&'static str>,
}

impl Enabled {
    /// Checks the names given; `restore_only` adds Velero's restore-only list.
    pub(crate) fn new(disable: &[String], restore_only: bool) -> Result<Self, ArgsError> {
        let mut disabled = BTreeSet::new();
        for name in disable.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            if NOT_HERE.contains(&name) {
                continue;
            }
            let row = CONTROLLERS
                .iter()
                .find(|c| c.can_disable && (c.name == name || c.also.contains(&name)))
                .ok_or_else(|| ArgsError::DisableControllers {
                    name: name.to_owned(),
                    valid: disableable().join(","),
                })?;
            disabled.insert(row.name);
        }
        if restore_only {
            disabled.extend(
                CONTROLLERS
                    .iter()
                    .filter(|c| c.off_when_restore_only)
                    .map(|c| c.name),
            );
        }
        Ok(Self { disabled })
    }

    /// The controllers that do not run, by name.
    pub(crate) fn disabled(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.disabled.iter().copied()
    }

    /// Whether the controller named `name` runs.
    pub(crate) fn runs(&self, name: &str) -> bool {
        !self.disabled.contains(name)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn names(enabled: &Enabled) -> Vec<&'static str> {
        enabled.disabled().collect()
    }

    #[test]
    fn velero_names_disable_the_controller_that_does_their_work() {
        let enabled = Enabled::new(
            &["gc".into(), "backup-finalizer".into(), " schedule ".into()],
            false,
        )
        .unwrap();
        assert_eq!(names(&enabled), ["backup-operations", "gc", "schedule"]);
        assert_eq!(
            names(&Enabled::new(&["backup-queue".into()], false).unwrap()),
            ["backup"]
        );
        assert!(!enabled.runs("gc") && enabled.runs("restore"));
    }

    #[test]
    fn restore_only_disables_velero_s_list() {
        let enabled = Enabled::new(&[], true).unwrap();
        assert_eq!(
            names(&enabled),
            [
                "backup",
                "backup-deletion",
                "backup-operations",
                "gc",
                "schedule"
            ]
        );
    }

    #[test]
    fn names_without_a_controller_here_are_accepted_and_change_nothing() {
        let enabled = Enabled::new(
            &[
                "backup-repo".into(),
                "restore-operations".into(),
                "restore-finalizer".into(),
            ],
            false,
        )
        .unwrap();
        assert_eq!(names(&enabled), Vec::<&str>::new());
    }

    #[test]
    fn an_unknown_name_and_the_location_controller_are_refused_with_velero_s_message() {
        for name in ["nope", "backup-storage-location"] {
            let err = Enabled::new(&[name.into()], false).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(&format!(
                    "Invalid value for --disable-controllers flag provided: {name}. Valid values are: backup,backup-queue,"
                )),
                "{text}"
            );
            assert!(!text.contains("backup-storage-location,"), "{text}");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> = CONTROLLERS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.also.iter().copied()))
            .chain(NOT_HERE.iter().copied())
            .collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
    }
}
