//! The server's controllers as one table ([`CONTROLLERS`]): each row names a controller (Velero's
//! name, which `--disable-controllers` takes), the resource whose first LIST `/readyz` waits for,
//! and how it starts. A term of leadership starts every row that is not disabled
//! ([`Enabled::start`]); adding a controller is a file in this folder and a row here
//! (docs/contributing.md).
//!
//! `--disable-controllers` and `--restore-only` take Velero's names with Velero's meaning. Where
//! one hawser controller does the work of two of Velero's (`backup` also keeps Velero's
//! `backup-queue`; `backup-operations` also finalizes, Velero's `backup-finalizer`), disabling
//! either name disables it. Velero's names of work hawser does not do in a controller of its own
//! ([`NOT_HERE`]) are accepted and change nothing. `backup-storage-location` cannot be disabled,
//! as in Velero.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;

use crate::args::ArgsError;
use crate::context::Context;
use crate::controllers::{
    backup, bsl, deletion, download, gc, operations, restore, restore_files, schedule,
    server_status, sync, vsl,
};
use crate::queue;
use crate::readiness::{Readiness, Watch};
use crate::status::{Kind, ObjectKey, Rerun};

/// What recovery hands to the controllers of one term; each row takes what it consumes.
#[derive(Default)]
pub(crate) struct Inputs {
    /// Backups with item operations to follow again.
    pub(crate) operations: Option<UnboundedReceiver<ObjectKey>>,
    /// Interrupted backups to run again.
    pub(crate) backup_reruns: Option<UnboundedReceiver<Rerun>>,
    /// Interrupted restores to run again.
    pub(crate) restore_reruns: Option<UnboundedReceiver<Rerun>>,
}

type Start = fn(Arc<Context>, &mut Inputs, Watch) -> BoxFuture<'static, ()>;

/// One controller of the server.
pub(crate) struct Controller {
    /// Velero's name of the controller (hawser's own where Velero has none).
    pub(crate) name: &'static str,
    /// Velero's names of other controllers whose work this one does: disabling one of them
    /// disables this one.
    pub(crate) also: &'static [&'static str],
    /// The resource whose first LIST `/readyz` waits for; `None`: readiness does not wait.
    pub(crate) ready_on: Option<&'static str>,
    /// Whether `--disable-controllers` may name it.
    pub(crate) can_disable: bool,
    /// Disabled by `--restore-only` (Velero's list: backup, backup-deletion, backup-finalizer,
    /// backup-operations, gc, schedule).
    pub(crate) off_when_restore_only: bool,
    start: Start,
}

/// Every controller, in the order a term starts them.
pub(crate) const CONTROLLERS: &[Controller] = &[
    Controller {
        name: "backup-storage-location",
        also: &[],
        ready_on: Some("backupstoragelocations"),
        can_disable: false,
        off_when_restore_only: false,
        start: |ctx, _, health| Box::pin(bsl::run(ctx, health)),
    },
    Controller {
        name: "backup",
        also: &["backup-queue"],
        ready_on: Some("backups"),
        can_disable: true,
        off_when_restore_only: true,
        start: |ctx, inputs, health| {
            let reruns = inputs.backup_reruns.take().unwrap_or_else(closed);
            let concurrency = ctx.settings.backup.concurrency;
            Box::pin(queue::run(
                ctx,
                Kind::Backup,
                concurrency,
                backup::handle,
                health,
                reruns,
            ))
        },
    },
    Controller {
        name: "backup-operations",
        also: &["backup-finalizer"],
        ready_on: None,
        can_disable: true,
        off_when_restore_only: true,
        start: |ctx, inputs, _| {
            let resumed = inputs.operations.take().unwrap_or_else(closed);
            Box::pin(operations::run(ctx, resumed))
        },
    },
    Controller {
        name: "backup-deletion",
        also: &[],
        ready_on: Some("deletebackuprequests"),
        can_disable: true,
        off_when_restore_only: true,
        start: |ctx, _, health| Box::pin(deletion::run(ctx, health)),
    },
    Controller {
        name: "backup-sync",
        also: &[],
        ready_on: None,
        can_disable: true,
        off_when_restore_only: false,
        start: |ctx, _, _| Box::pin(sync::run(ctx)),
    },
    Controller {
        name: "download-request",
        also: &[],
        ready_on: Some("downloadrequests"),
        can_disable: true,
        off_when_restore_only: false,
        start: |ctx, _, health| Box::pin(download::run(ctx, health)),
    },
    Controller {
        name: "gc",
        also: &[],
        ready_on: None,
        can_disable: true,
        off_when_restore_only: true,
        start: |ctx, _, _| Box::pin(gc::run(ctx)),
    },
    // Velero runs one restore at a time (the restore controller's default concurrency).
    Controller {
        name: "restore",
        also: &[],
        ready_on: Some("restores"),
        can_disable: true,
        off_when_restore_only: false,
        // With the deletion of its Restores' files (Velero's restore controller does both).
        start: |ctx, inputs, health| {
            let reruns = inputs.restore_reruns.take().unwrap_or_else(closed);
            let files = restore_files::run(ctx.clone());
            let queue = queue::run(ctx, Kind::Restore, 1, restore::handle, health, reruns);
            Box::pin(async move {
                futures::future::join(queue, files).await;
            })
        },
    },
    Controller {
        name: "schedule",
        also: &[],
        ready_on: Some("schedules"),
        can_disable: true,
        off_when_restore_only: true,
        start: |ctx, _, health| Box::pin(schedule::run(ctx, health)),
    },
    Controller {
        name: "server-status-request",
        also: &[],
        ready_on: Some("serverstatusrequests"),
        can_disable: true,
        off_when_restore_only: false,
        start: |ctx, _, health| Box::pin(server_status::run(ctx, health)),
    },
    // hawser's own: reports the VolumeSnapshotLocations it cannot use (Velero validates them
    // in the backup controller).
    Controller {
        name: "volume-snapshot-location",
        also: &[],
        ready_on: None,
        can_disable: true,
        off_when_restore_only: false,
        start: |ctx, _, _| Box::pin(vsl::run(ctx)),
    },
];

/// Velero's controller names for work hawser does not do in a controller of its own: accepted
/// by `--disable-controllers`, with nothing to disable (no repositories; restores have no
/// asynchronous item operations and finish in the restore controller).
pub(crate) const NOT_HERE: &[&str] = &["backup-repo", "restore-operations", "restore-finalizer"];

/// A receiver whose sender is gone: the row runs without that input.
fn closed<T>() -> UnboundedReceiver<T> {
    tokio::sync::mpsc::unbounded_channel().1
}

/// Every name `--disable-controllers` takes, as Velero lists them in its error.
pub(crate) fn disableable() -> Vec<&'static str> {
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
    /// The rows of [`CONTROLLERS`] that do not run.
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

    fn runs(&self, controller: &Controller) -> bool {
        !self.disabled.contains(controller.name)
    }

    /// Starts every controller that runs into `tasks`, each watch registered with `readiness`
    /// first (so that `/readyz` waits for all of them).
    pub(crate) fn start(
        &self,
        ctx: &Arc<Context>,
        readiness: &Readiness,
        mut inputs: Inputs,
        tasks: &mut JoinSet<()>,
    ) {
        let running: Vec<(&Controller, Watch)> = CONTROLLERS
            .iter()
            .filter(|c| self.runs(c))
            .map(|c| {
                let health = match c.ready_on {
                    Some(resource) => readiness.watch(resource),
                    None => Watch::unwatched(c.name),
                };
                (c, health)
            })
            .collect();
        for (controller, health) in running {
            tasks.spawn((controller.start)(ctx.clone(), &mut inputs, health));
        }
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
    fn names_are_unique_and_every_readiness_resource_is_distinct() {
        let mut all: Vec<&str> = CONTROLLERS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.also.iter().copied()))
            .chain(NOT_HERE.iter().copied())
            .collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
        let mut resources: Vec<&str> = CONTROLLERS.iter().filter_map(|c| c.ready_on).collect();
        let count = resources.len();
        resources.sort_unstable();
        resources.dedup();
        assert_eq!(resources.len(), count);
    }
}
