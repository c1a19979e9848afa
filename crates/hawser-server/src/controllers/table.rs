//! The server's controllers as one table ([`CONTROLLERS`]): each row is named by Velero's name
//! of the controller (the names and the rules of `--disable-controllers` and `--restore-only`
//! are in `config/controllers.rs`, one entry per row here), says the resource whose first LIST
//! `/readyz` waits for, and how it starts. A term of leadership starts every row that is
//! enabled ([`start`]); adding a controller is a file in this folder, a row here and its names
//! there (docs/contributing.md).

use std::sync::Arc;

use futures::future::BoxFuture;
use hawser_status::{Kind, ObjectKey, Rerun};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;

use crate::config::Enabled;
use crate::context::Context;
use crate::controllers::{
    backup, bsl, deletion, download, gc, operations, restore, restore_files, schedule,
    server_status, sync, vsl,
};
use crate::queue;
use crate::readiness::{Readiness, Watch};

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
    /// Velero's name of the controller (`config::controllers::CONTROLLERS` has its rules).
    pub(crate) name: &'static str,
    /// The resource whose first LIST `/readyz` waits for; `None`: readiness does not wait.
    pub(crate) ready_on: Option<&'static str>,
    start: Start,
}

/// Every controller, in the order a term starts them.
pub(crate) const CONTROLLERS: &[Controller] = &[
    Controller {
        name: "backup-storage-location",
        ready_on: Some("backupstoragelocations"),
        start: |ctx, _, health| Box::pin(bsl::run(ctx, health)),
    },
    Controller {
        name: "backup",
        ready_on: Some("backups"),
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
        ready_on: None,
        start: |ctx, inputs, _| {
            let resumed = inputs.operations.take().unwrap_or_else(closed);
            Box::pin(operations::run(ctx, resumed))
        },
    },
    Controller {
        name: "backup-deletion",
        ready_on: Some("deletebackuprequests"),
        start: |ctx, _, health| Box::pin(deletion::run(ctx, health)),
    },
    Controller {
        name: "backup-sync",
        ready_on: None,
        start: |ctx, _, health| Box::pin(sync::run(ctx, health)),
    },
    Controller {
        name: "download-request",
        ready_on: Some("downloadrequests"),
        start: |ctx, _, health| Box::pin(download::run(ctx, health)),
    },
    Controller {
        name: "gc",
        ready_on: None,
        start: |ctx, _, health| Box::pin(gc::run(ctx, health)),
    },
    // Velero runs one restore at a time (the restore controller's default concurrency).
    Controller {
        name: "restore",
        ready_on: Some("restores"),
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
        ready_on: Some("schedules"),
        start: |ctx, _, health| Box::pin(schedule::run(ctx, health)),
    },
    Controller {
        name: "server-status-request",
        ready_on: Some("serverstatusrequests"),
        start: |ctx, _, health| Box::pin(server_status::run(ctx, health)),
    },
    // hawser's own: reports the VolumeSnapshotLocations it cannot use (Velero validates them
    // in the backup controller).
    Controller {
        name: "volume-snapshot-location",
        ready_on: None,
        start: |ctx, _, health| Box::pin(vsl::run(ctx, health)),
    },
];

/// A receiver whose sender is gone: the row runs without that input.
fn closed<T>() -> UnboundedReceiver<T> {
    tokio::sync::mpsc::unbounded_channel().1
}

/// Starts every controller `enabled` lets run into `tasks`, each watch registered with
/// `readiness` first (so that `/readyz` waits for all of them).
pub(crate) fn start(
    enabled: &Enabled,
    ctx: &Arc<Context>,
    readiness: &Readiness,
    mut inputs: Inputs,
    tasks: &mut JoinSet<()>,
) {
    let running: Vec<(&Controller, Watch)> = CONTROLLERS
        .iter()
        .filter(|c| enabled.runs(c.name))
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

/// Starts the controller named `name` alone into `tasks`, unwatched (for the in-process
/// tests of one controller).
#[cfg(test)]
pub(crate) fn start_one(name: &str, ctx: &Arc<Context>, tasks: &mut JoinSet<()>) {
    let controller = CONTROLLERS
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no controller is named {name}"));
    let health = Watch::unwatched(controller.name);
    tasks.spawn((controller.start)(
        ctx.clone(),
        &mut Inputs::default(),
        health,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_configured_name_in_the_same_order() {
        let rows: Vec<&str> = CONTROLLERS.iter().map(|c| c.name).collect();
        let names: Vec<&str> = crate::config::CONTROLLERS.iter().map(|c| c.name).collect();
        assert_eq!(rows, names);
    }

    #[test]
    fn every_readiness_resource_is_distinct() {
        let mut resources: Vec<&str> = CONTROLLERS.iter().filter_map(|c| c.ready_on).collect();
        let count = resources.len();
        resources.sort_unstable();
        resources.dedup();
        assert_eq!(resources.len(), count);
    }
}
