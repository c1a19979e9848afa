//! The DeleteBackupRequest controller: deletes a backup, everything of it in its storage
//! location, and its restores (velero-compat §2.4).
//!
//! Every second the requests are listed and handled one at a time:
//! - `Processed` requests are deleted 24 h after their creation, as Velero does;
//! - `New` ones, and `InProgress` ones (left so by a server that stopped in the middle: a
//!   deletion is idempotent, so it is simply run again), are processed.
//!
//! Processing refuses (`Processed` with an error, the backup untouched) a request without
//! `spec.backupName`, for a backup that does not exist, that is still running, or whose location
//! is missing, `ReadOnly` or unavailable; it waits (the request stays as it is) while a restore
//! of the backup is waiting or running, so a backup a restore reads is never deleted under it.
//! Otherwise: the request → `InProgress` (with the backup's name and uid labels), the Backup →
//! `Deleting` (written with its `resourceVersion` as a precondition, so a backup that started
//! meanwhile is not marked), then the CSI snapshots its item operations cut (each content set to
//! `deletionPolicy: Delete` and deleted, only when the live content is labelled with this
//! Backup's uid and holds the handle the backup's volume info recorded: the files come from an
//! untrusted bucket, and any other content they name is left alone and reported in the
//! request's errors; a failure keeps every file, so that a new request can find them again),
//! then in the location **`velero-backup.json` first**, then the rest
//! of `backups/<name>/`; then each Restore of the backup (its files in the location, its record
//! kept in the cluster, its object); then the Backup object. The request ends `Processed` with
//! the errors met; without errors every request of the backup is deleted. With errors the
//! Backup stays `Deleting` and a new request (`hawser backup delete` again) finishes the job.
//!
//! Why the record goes first: the record is what makes a backup a backup (restores, sync and
//! recovery all start from it). Removed first, a crash or a storage failure in the middle leaves
//! files without a record, which nothing takes for a complete backup; removed last, it could
//! leave a record whose archive is already gone.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::labels::{BACKUP_NAME, BACKUP_UID};
use hawser_api::phase::{BackupPhase, DeleteBackupRequestPhase, RestorePhase};
use hawser_core::label::valid_label_value;
use hawser_core::layout::Layout;
use hawser_core::restore::volume_data;
use kube::api::ListParams;
use serde_json::{Value, json};

use hawser_engine::backup::operations::{self, SnapshotDeletion, SnapshotOperations};
use hawser_store::Location;

use super::periodic::{self, Pass};
use crate::context::{Context, backup_location_name, schedule_of};
use crate::controllers::restore_files;
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// Time between two passes over the requests.
const TICK: Duration = Duration::from_secs(1);

/// How long a processed request is kept (Velero's 24 h).
const KEEP_PROCESSED: Duration = Duration::from_secs(24 * 3600);

/// How one request ended this pass.
enum Outcome {
    /// Everything of the backup was deleted; these cluster objects its files named were not
    /// its own and were left as they are (the request keeps them as its errors).
    Deleted(Vec<String>),
    /// Nothing was done: `Processed` with this error.
    Refused(String),
    /// Some deletions failed: `Processed` with these errors; the Backup stays `Deleting`.
    Failed(Vec<String>),
    /// Not now (a restore of the backup runs, or the API could not answer): the request stays
    /// as it is and is looked at again on the next pass.
    Later(String),
}

/// Runs until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "DeleteBackupRequest", "deletebackuprequests");
    periodic::run(ctx, Requests(api), health).await;
}

struct Requests(kube::Api<kube::api::DynamicObject>);

impl Pass for Requests {
    const LISTS: &'static str = "deletion requests";

    type Listed = Vec<Value>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<Value>, kube::Error> {
        objects::list(ctx, &self.0, &ListParams::default()).await
    }

    async fn handle(&mut self, ctx: &Context, requests: Vec<Value>) -> Duration {
        for request in requests {
            if ctx.shutdown.is_cancelled() {
                break;
            }
            handle(ctx, &self.0, &request).await;
        }
        TICK
    }

    fn retry_after(&self, _: &Context) -> Duration {
        TICK
    }
}

async fn handle(ctx: &Context, api: &kube::Api<kube::api::DynamicObject>, request: &Value) {
    let name = text(request, "/metadata/name");
    let phase = DeleteBackupRequestPhase::of(request);
    match &phase {
        DeleteBackupRequestPhase::Processed => {
            let created = text(request, "/metadata/creationTimestamp")
                .parse::<jiff::Timestamp>()
                .ok();
            let expired = created.is_some_and(|c| {
                ctx.clock.now().duration_since(c).unsigned_abs() >= KEEP_PROCESSED
            });
            if expired && let Err(e) = objects::delete(ctx, api, name).await {
                tracing::debug!(request = name, error = %e, "deleting an old processed request failed");
            }
            return;
        }
        DeleteBackupRequestPhase::New | DeleteBackupRequestPhase::InProgress => {}
        DeleteBackupRequestPhase::Unknown(other) => {
            tracing::debug!(
                request = name,
                phase = %other,
                "deletion request in an unknown phase; left alone"
            );
            return;
        }
    }
    let backup_name = text(request, "/spec/backupName").to_owned();
    let resumed = phase == DeleteBackupRequestPhase::InProgress;
    let (outcome, schedule) = if backup_name.is_empty() {
        (
            Outcome::Refused("spec.backupName is required".to_owned()),
            String::new(),
        )
    } else {
        delete_backup(ctx, api, name, &backup_name, resumed).await
    };
    let (deleted, errors) = match outcome {
        Outcome::Later(why) => {
            tracing::info!(request = name, backup = %backup_name, reason = %why, "deletion waits");
            return;
        }
        Outcome::Deleted(left_alone) => (true, left_alone),
        Outcome::Refused(why) => (false, vec![why]),
        Outcome::Failed(errors) => (false, errors),
    };
    let processed =
        json!({"status": {"phase": DeleteBackupRequestPhase::Processed, "errors": errors}});
    if let Err(e) = objects::merge_patch(ctx, api, name, &processed).await {
        tracing::warn!(request = name, error = %e, "the deletion request's outcome could not be stored; the next pass runs it again");
        return;
    }
    if deleted {
        tracing::info!(request = name, backup = %backup_name, left_alone = ?errors, "backup deleted");
        ctx.metrics.deletion_finished(&schedule, true);
        // Every request of this backup is done with: remove them all, this one too unless it
        // reports objects left alone (it is then kept, as a processed request, for 24 h).
        let all = ListParams::default().labels(&format!(
            "{BACKUP_NAME}={}",
            valid_label_value(&backup_name)
        ));
        if let Ok(requests) = objects::list(ctx, api, &all).await {
            for r in requests {
                let other = text(&r, "/metadata/name");
                if errors.is_empty() || other != name {
                    let _ = objects::delete(ctx, api, other).await;
                }
            }
        }
    } else {
        tracing::warn!(request = name, backup = %backup_name, errors = ?errors, "backup deletion failed");
        ctx.metrics.deletion_finished(&schedule, false);
    }
}

/// The deletion of `backup_name` for the request `request` (see the module docs); also the
/// backup's schedule label, for the metrics.
async fn delete_backup(
    ctx: &Context,
    requests: &kube::Api<kube::api::DynamicObject>,
    request: &str,
    backup_name: &str,
    resumed: bool,
) -> (Outcome, String) {
    let backups = velero_api(ctx, "Backup", "backups");
    let backup = match objects::get(ctx, &backups, backup_name).await {
        Ok(Some(b)) => b,
        // A resumed request whose backup is gone had deleted it before it stopped.
        Ok(None) if resumed => return (Outcome::Deleted(Vec::new()), String::new()),
        Ok(None) => {
            return (
                Outcome::Refused(format!(
                    "backup {backup_name} not found in namespace {}",
                    ctx.namespace
                )),
                String::new(),
            );
        }
        Err(e) => return (Outcome::Later(e.to_string()), String::new()),
    };
    let schedule = schedule_of(&backup);
    let phase = BackupPhase::of(&backup);
    if phase.is_in_flight() {
        return (
            Outcome::Refused(format!(
                "backup {backup_name} is {phase}; it can be deleted once it has finished"
            )),
            schedule,
        );
    }
    let restores = velero_api(ctx, "Restore", "restores");
    let of_backup: Vec<Value> = match objects::list(ctx, &restores, &ListParams::default()).await {
        Ok(all) => all
            .into_iter()
            .filter(|r| text(r, "/spec/backupName") == backup_name)
            .collect(),
        Err(e) => return (Outcome::Later(e.to_string()), schedule),
    };
    if let Some(running) = of_backup.iter().find(|r| {
        let phase = RestorePhase::of(r);
        phase.is_waiting() || phase.is_in_flight()
    }) {
        return (
            Outcome::Later(format!(
                "restore {} reads the backup",
                text(running, "/metadata/name")
            )),
            schedule,
        );
    }
    let location_name = backup_location_name(&backup, &ctx.settings.backup.default_location);
    let location = match ctx.locations.get(&location_name).await {
        Ok(Some(bsl))
            if bsl.spec.access_mode
                == Some(hawser_api::BackupStorageLocationAccessMode::ReadOnly) =>
        {
            return (
                Outcome::Refused(format!(
                    "cannot delete backup because backup storage location {location_name} is currently in read-only mode"
                )),
                schedule,
            );
        }
        Ok(Some(bsl)) => match ctx.locations.usable(&location_name, &bsl).await {
            Ok(location) => location,
            Err(Some(why)) => return (Outcome::Refused(why), schedule),
            Err(None) => return (Outcome::Later(format!("reading {location_name}")), schedule),
        },
        Ok(None) => {
            return (
                Outcome::Refused(format!("backup storage location {location_name} not found")),
                schedule,
            );
        }
        Err(e) if e.is_transient() => return (Outcome::Later(e.full_message()), schedule),
        Err(e) => return (Outcome::Refused(e.full_message()), schedule),
    };

    if !resumed {
        ctx.metrics.deletion_attempt(&schedule);
    }
    let uid = text(&backup, "/metadata/uid");
    let in_progress = json!({
        "metadata": {"labels": {BACKUP_NAME: valid_label_value(backup_name), BACKUP_UID: uid}},
        "status": {"phase": DeleteBackupRequestPhase::InProgress}
    });
    if let Err(e) = objects::merge_patch(ctx, requests, request, &in_progress).await {
        return (Outcome::Later(e.to_string()), schedule);
    }
    if phase != BackupPhase::Deleting {
        // The precondition: a backup that moved on since it was read is read again.
        let deleting = json!({
            "metadata": {"resourceVersion": text(&backup, "/metadata/resourceVersion")},
            "status": {"phase": BackupPhase::Deleting.as_str()}
        });
        if let Err(e) = objects::merge_patch(ctx, &backups, backup_name, &deleting).await {
            return (Outcome::Later(e.to_string()), schedule);
        }
    }

    let SnapshotDeletion {
        mut errors,
        mut left_alone,
    } = delete_snapshots(ctx, &location, &backup, backup_name).await;
    if !errors.is_empty() {
        return (Outcome::Failed(errors), schedule);
    }
    // Volume data a Velero server made (file-system backups, native snapshots, moved data) is
    // not hawser's to delete: the request says what stays, read before the files go.
    match operations::load_volume_side_files(&location, backup_name).await {
        Ok(files) => left_alone.extend(volume_data::left_by_deletion(&files)),
        Err(e) => left_alone.push(format!(
            "the backup's volume side files could not be read, so volume data it may hold that hawser does not manage is not named: {}",
            e.full_message()
        )),
    }
    let layout = Layout::new(None);
    let record = layout.backup_metadata(backup_name);
    if let Err(e) = location.delete(&record).await {
        errors.push(format!("deleting {record}: {}", e.full_message()));
    } else if let Err(e) = location.delete_backup(backup_name).await {
        errors.push(format!(
            "deleting {}: {}",
            layout.backup_dir(backup_name),
            e.full_message()
        ));
    }
    if !errors.is_empty() {
        return (Outcome::Failed(errors), schedule);
    }
    for restore in &of_backup {
        if let Err(outcome) = delete_restore(ctx, &restores, &location, restore).await {
            return (outcome, schedule);
        }
    }
    // The API not answering (after the retries) leaves the request InProgress: the next pass
    // runs it again, and what is already deleted stays deleted.
    if let Err(e) = objects::delete(ctx, &backups, backup_name).await {
        return (
            Outcome::Later(format!("deleting Backup {backup_name}: {e}")),
            schedule,
        );
    }
    (Outcome::Deleted(left_alone), schedule)
}

/// Deletes the CSI snapshots the backup's item operations cut (read from its operations file,
/// which is kept until they are gone), only those that are the backup's own: labelled with the
/// uid of the Backup object `backup` and holding the handle its volume info recorded. A backup
/// this cluster did not make (synced from a location) has a uid no content carries, so its
/// deletion removes only its files.
async fn delete_snapshots(
    ctx: &Context,
    location: &Location,
    backup: &Value,
    backup_name: &str,
) -> SnapshotDeletion {
    let failed = |why: String| SnapshotDeletion {
        errors: vec![format!("reading the backup's item operations: {why}")],
        left_alone: Vec::new(),
    };
    match location
        .exists(&Layout::new(None).backup_item_operations(backup_name))
        .await
    {
        Ok(false) => return SnapshotDeletion::default(),
        Ok(true) => {}
        Err(e) => return failed(e.full_message()),
    }
    let read = async {
        let operations = operations::load(location, backup_name).await?;
        let volume_info = operations::load_volume_info(location, backup_name).await?;
        Ok::<_, hawser_engine::backup::BackupError>((operations, volume_info))
    };
    match read.await {
        Ok((operations, volume_info)) => {
            SnapshotOperations::new(
                ctx.client.clone(),
                ctx.settings.status.resource_timeout,
                ctx.clock.clone(),
            )
            .delete_snapshots(&operations, text(backup, "/metadata/uid"), &volume_info)
            .await
        }
        Err(e) => failed(e.full_message()),
    }
}

/// Deletes a restore's files in `location`, its record kept in the cluster, and its object (its
/// finalizer taken off first: its files are gone). A storage failure is `Failed`; the API not
/// answering is `Later`.
async fn delete_restore(
    ctx: &Context,
    restores: &kube::Api<kube::api::DynamicObject>,
    location: &hawser_store::Location,
    restore: &Value,
) -> Result<(), Outcome> {
    let name = text(restore, "/metadata/name");
    restore_files::delete_files(ctx, location, restore)
        .await
        .map_err(|why| Outcome::Failed(vec![why]))?;
    if restore_files::has_finalizer(restore) {
        restore_files::remove_finalizer(ctx, name)
            .await
            .map_err(Outcome::Later)?;
    }
    objects::delete(ctx, restores, name)
        .await
        .map_err(|e| Outcome::Later(format!("deleting Restore {name}: {e}")))
}
