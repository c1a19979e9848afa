//! The backup controller: one waiting Backup from validation to its true final phase.
//!
//! 0. **Already recorded?** A waiting Backup whose own record (same uid) is in its location had
//!    its status removed by a client: the recorded status is written back, nothing runs
//!    ([`Taken::settle_from_record`]).
//! 1. **Validate** (→ `FailedValidation` with `validationErrors`, nothing stored): the object
//!    parses; the spec's filters and selectors (Velero's checks); the storage location exists,
//!    is not `ReadOnly` and is `Available` (one never validated yet is validated on the spot);
//!    the name is not one of the location's top-level directories ([`RESERVED_NAMES`]); no
//!    backup of this name is already in the location (a store that cannot be reached leaves
//!    the Backup waiting, as the API does). An API that cannot answer leaves the
//!    Backup waiting: the queue takes it up again.
//! 2. **Claim** (→ `InProgress` with `startTimestamp`, `expiration`, `formatVersion`, and the
//!    owner annotation naming this server instance, one write through the status engine).
//! 3. **Run** the backup engine, with `status.progress` written at most every
//!    [`PROGRESS_INTERVAL`](crate::work::PROGRESS_INTERVAL).
//! 4. **Commit**: `velero-backup.json`, carrying the final status, is stored last. A backup is
//!    `Completed`/`PartiallyFailed` only once it is stored; when storing it fails the backup is
//!    `Failed`. A run that cut CSI snapshots stores it with `WaitingForPluginOperations*` and
//!    goes on in [`operations`], in a task of its own, instead of step 5: the worker's slot is
//!    free for the next backup while the snapshots become ready. A failed run stores a `Failed` record too (best effort), so that recovery finds
//!    the truth if the status write below does not land before a restart.
//! 5. **Final status** through the status engine: retried until `--resource-timeout`, then
//!    handed to the re-driver, which keeps trying; recovery reconciles to the record after a
//!    restart.

use std::sync::Arc;

use hawser_api::labels::{
    SOURCE_CLUSTER_K8S_GIT_VERSION, SOURCE_CLUSTER_K8S_MAJOR_VERSION,
    SOURCE_CLUSTER_K8S_MINOR_VERSION, STORAGE_LOCATION,
};
use hawser_api::phase::BackupPhase;
use hawser_api::{Backup, BackupStatus};
use hawser_core::archive::FORMAT_VERSION;
use hawser_core::duration::GoDuration;
use hawser_core::label::valid_label_value;
use hawser_store::Location;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use tokio::sync::watch;

use crate::backup_queue;
use crate::context::{Context, schedule_of};
use crate::controllers::operations;
use crate::metrics::{BackupFinished, FinalOutcome};
use crate::queue::{Handled, Offer};
use crate::work::{
    Committed, Taken, record_status, report_final, store_record, test_panic_after_claim,
};
use hawser_engine::backup::{
    self, BackupError, BackupOptions, BackupOutcome, Progress, ValidatedBackup,
};

/// The outcome of validation.
enum Checked {
    /// Valid: the backup (with defaults filled in and what its checks read) and its location.
    Valid(Box<ValidatedBackup>, Box<Location>),
    /// `FailedValidation` with these messages.
    Invalid(Vec<String>),
    /// The API could not answer; try again later.
    Retry(String),
}

/// Handles one waiting Backup (see the module docs).
pub(crate) async fn handle(ctx: Arc<Context>, offer: Offer) -> Handled {
    let taken = match Taken::<Backup>::fresh(&ctx, &offer).await {
        Ok(taken) => taken,
        Err(handled) => return handled,
    };
    if taken.settle_from_record(&ctx).await {
        return Handled::Done;
    }
    let (name, key) = (taken.name.clone(), taken.key.clone());
    let schedule = schedule_of(&taken.json);
    let (valid, location) = match check(&ctx, &name, taken.object.clone()).await {
        Checked::Valid(valid, location) => (*valid, *location),
        Checked::Retry(why) => {
            tracing::info!(backup = %name, reason = %why, "validation could not finish; the backup waits");
            return Handled::Retry;
        }
        Checked::Invalid(messages) => {
            tracing::warn!(backup = %name, errors = ?messages, "backup failed validation");
            let update = taken
                .refused(messages, ctx.clock.now())
                .status(&BackupStatus {
                    queue_position: Some(0),
                    ..BackupStatus::default()
                });
            if report_final(ctx.engine.write(update).await, &key) && !taken.is_rerun() {
                ctx.metrics.backup_validation_failed(&schedule);
            }
            backup_queue::renumber(&ctx).await;
            return Handled::Done;
        }
    };

    let backup = valid.backup();
    let started = taken.started(ctx.clock.now());
    let expiration = backup
        .spec
        .ttl
        .and_then(|ttl| hawser_api::time::add(started, ttl))
        .map(Time);
    let claim = taken
        .update(BackupPhase::InProgress)
        // What the backup was resolved to, written as Velero does, so that recovery reads the
        // location this backup went to whatever the defaults are by then.
        .spec_field("storageLocation", backup.spec.storage_location.clone())
        .spec_field("ttl", json!(backup.spec.ttl))
        .spec_field(
            "defaultVolumesToFsBackup",
            json!(backup.spec.default_volumes_to_fs_backup),
        )
        .spec_field("snapshotMoveData", json!(backup.spec.snapshot_move_data))
        .spec_field(
            "csiSnapshotTimeout",
            json!(backup.spec.csi_snapshot_timeout),
        )
        .spec_field(
            "itemOperationTimeout",
            json!(backup.spec.item_operation_timeout),
        )
        .label(
            STORAGE_LOCATION,
            valid_label_value(&backup.spec.storage_location.clone().unwrap_or_default()),
        )
        .status(&BackupStatus {
            version: Some(1),
            format_version: Some(FORMAT_VERSION.to_owned()),
            queue_position: Some(0),
            start_timestamp: Some(Time(started)),
            expiration,
            ..BackupStatus::default()
        });
    let claim = match source_cluster(&ctx).await {
        Some(info) => claim
            .annotation(SOURCE_CLUSTER_K8S_GIT_VERSION, info.git_version)
            .annotation(SOURCE_CLUSTER_K8S_MAJOR_VERSION, info.major)
            .annotation(SOURCE_CLUSTER_K8S_MINOR_VERSION, info.minor),
        None => claim,
    };
    match ctx.engine.write(taken.claim(claim)).await {
        Ok(_) => ctx.metrics.backup_attempt(&schedule),
        Err(e) => {
            tracing::info!(backup = %name, category = e.category(), error = %e, "the backup could not be started");
            return Handled::after_failed_claim(&e);
        }
    }
    backup_queue::renumber(&ctx).await;
    tracing::info!(backup = %name, location = %backup.spec.storage_location.clone().unwrap_or_default(), "backup started");
    test_panic_after_claim(&name);

    let (progress, progress_rx) = watch::channel(Progress::default());
    let reporter = taken.report_progress(ctx.clone(), progress_rx, |update, p| {
        update.status(&BackupStatus {
            progress: Some(p.status()),
            ..BackupStatus::default()
        })
    });
    let options = BackupOptions::default()
        .with_page_size(ctx.settings.client.page_size.unwrap_or(u32::MAX))
        .with_api_retry(ctx.settings.status.resource_timeout)
        .with_progress(progress)
        .with_clock(ctx.clock.clone())
        .with_log_warning(taken.resumed_note())
        .with_warning(ctx.settings.backup.global_volume_policies.as_ref().map(|name| {
            format!(
                "server flag --global-backup-volume-policies-configmap: hawser does not merge global volume policies into backups, so those of ConfigMap {name} were not used (the backup's own resource policies were)"
            )
        }));
    let result = backup::run(ctx.client.clone(), &location, &valid, options).await;
    reporter.abort();

    let committed = commit(&ctx, &location, backup, result, started, false).await;
    let outcome = &committed.outcome;
    if !outcome.operations.is_empty() && !outcome.phase.is_final() {
        // The wait for the snapshots does not hold this worker's slot: the next backup starts.
        let target = operations::Target {
            key: key.clone(),
            uid: taken.uid.clone(),
            taken_up: None,
        };
        operations::spawn(
            &ctx,
            target,
            valid.into_backup(),
            location,
            committed.outcome,
        );
        return Handled::Done;
    }
    let record = record_status(backup::record(backup, outcome).ok().as_ref());
    let update = committed.mark(taken.update(outcome.phase.clone()).fields(record));
    report_final(ctx.engine.write(update).await, &key);
    ctx.metrics
        .backup_finished(&schedule, &finished(backup, outcome));
    Handled::Done
}

/// Stores `velero-backup.json` for the run's result; returns the outcome that was stored (or
/// `Failed`, unrecorded, when storing the record of a successful run failed). The first
/// commit of a backup never writes over a record of the same name ([`Location::commit_backup`]);
/// `replace` rewrites this backup's own (after its item operations).
pub(crate) async fn commit(
    ctx: &Context,
    location: &Location,
    backup: &Backup,
    result: Result<BackupOutcome, BackupError>,
    started: jiff::Timestamp,
    replace: bool,
) -> Committed<BackupOutcome> {
    let name = backup.metadata.name.clone().unwrap_or_default();
    let mut outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::warn!(backup = %name, category = e.category(), error = %e.full_message(), "backup failed");
            let mut failed = BackupOutcome::failed(&e, started, ctx.clock.now());
            // The claim moved it to InProgress; FailedValidation is for unstarted backups.
            failed.phase = BackupPhase::Failed;
            failed
        }
    };
    outcome.started = started;
    let stored = store_record(
        backup::record(backup, &outcome),
        "velero-backup.json",
        |bytes| async {
            location
                .commit_backup(&name, bytes, replace)
                .await
                .map_err(|e| e.full_message())
        },
        || async {
            location
                .backup_metadata(&name)
                .await
                .map_err(|e| e.full_message())
        },
    )
    .await;
    let recorded = stored.is_ok();
    let outcome = match stored {
        Ok(()) => outcome,
        Err(why) if outcome.phase == BackupPhase::Failed => {
            tracing::warn!(backup = %name, error = %why, "the record of the failed backup could not be stored");
            outcome
        }
        Err(why) => {
            tracing::error!(backup = %name, error = %why, "the backup's artifacts were written but velero-backup.json was not; the backup is Failed");
            let mut failed = outcome;
            failed.phase = BackupPhase::Failed;
            failed.failure_reason = Some(format!(
                "storing backups/{name}/velero-backup.json failed, so the backup was not committed: {why}"
            ));
            failed
        }
    };
    Committed { outcome, recorded }
}

/// The API server's version, for Velero's source-cluster annotations (what a restore into
/// another cluster compares against); `None`, logged, when it cannot be read.
async fn source_cluster(ctx: &Context) -> Option<k8s_openapi::apimachinery::pkg::version::Info> {
    match ctx.client.apiserver_version().await {
        Ok(info) => Some(info),
        Err(e) => {
            tracing::info!(error = %e, "the API server's version could not be read; the backup goes without its source-cluster annotations");
            None
        }
    }
}

pub(crate) fn finished(backup: &Backup, outcome: &BackupOutcome) -> BackupFinished {
    let duration = outcome.completed.duration_since(outcome.started);
    let (completed, _) = hawser_engine::backup::operations::counts(&outcome.operations);
    BackupFinished {
        outcome: match outcome.phase {
            BackupPhase::Completed => FinalOutcome::Completed,
            BackupPhase::PartiallyFailed => FinalOutcome::PartiallyFailed,
            _ => FinalOutcome::Failed,
        },
        duration_seconds: u64::try_from(duration.as_secs()).unwrap_or(0),
        tarball_bytes: outcome.archive_bytes,
        items: outcome.items_backed_up,
        errors: outcome.errors(),
        warnings: outcome.warnings(),
        completed_unix: outcome.completed.as_second(),
        backup: backup.metadata.name.clone().unwrap_or_default(),
        snapshots_attempted: outcome.operations.len() as u64,
        snapshots_completed: completed,
    }
}

/// Names a backup may not have: the directories at the top of a location (velero-compat §2.4),
/// so that no backup's files can pass for a location's own, under whatever prefix.
const RESERVED_NAMES: [&str; 6] = [
    "backups", "restores", "restic", "metadata", "plugins", "kopia",
];

/// The server's defaults of what `spec` leaves unset, as Velero's backup controller fills
/// them in before the backup starts (and writes them into the spec, so that `describe` shows
/// the values in force): TTL, file-system backup by default, snapshot data movement, the CSI
/// snapshot timeout (Velero's 10 minutes, which the snapshot wait also falls back to) and the
/// item operation timeout.
fn server_defaults(settings: &crate::config::BackupSettings, spec: &mut hawser_api::BackupSpec) {
    let unset = |d: Option<GoDuration>| d.is_none_or(|d| d.is_zero());
    if unset(spec.ttl) {
        spec.ttl = Some(settings.default_ttl);
    }
    // Velero's deprecated field still asks for file-system backup.
    if spec.default_volumes_to_fs_backup.is_none() {
        spec.default_volumes_to_fs_backup = Some(
            spec.default_volumes_to_restic == Some(true) || settings.default_volumes_to_fs_backup,
        );
    }
    spec.snapshot_move_data
        .get_or_insert(settings.default_snapshot_move_data);
    if unset(spec.csi_snapshot_timeout) {
        spec.csi_snapshot_timeout = Some(GoDuration::from_mins(10));
    }
    if unset(spec.item_operation_timeout) {
        spec.item_operation_timeout = Some(settings.default_item_operation_timeout);
    }
}

/// Validation (see the module docs).
async fn check(ctx: &Context, name: &str, object: Result<Backup, String>) -> Checked {
    let mut backup = match object {
        Ok(b) => b,
        Err(why) => return Checked::Invalid(vec![why]),
    };
    server_defaults(&ctx.settings.backup, &mut backup.spec);
    let named = backup
        .spec
        .storage_location
        .clone()
        .filter(|s| !s.is_empty());
    let location_name = match &named {
        Some(named) => named.clone(),
        None => match ctx
            .locations
            .default_name(&ctx.settings.backup.default_location)
            .await
        {
            Ok(name) => name,
            Err(e) => return Checked::Retry(e.full_message()),
        },
    };
    backup.spec.storage_location = Some(location_name.clone());
    let budget = ctx.settings.status.resource_timeout;
    let (valid, mut messages) = match ValidatedBackup::check(&ctx.client, backup, budget).await {
        Ok(valid) => (Some(valid), Vec::new()),
        Err(BackupError::Validation { messages }) => (None, messages),
        Err(e) => return Checked::Retry(e.full_message()),
    };
    if RESERVED_NAMES.contains(&name) {
        messages.push(format!(
            "the name {name:?} is reserved: it is the name of a directory at the top of a storage location ({}); choose another name",
            RESERVED_NAMES.join(", ")
        ));
    }
    let bsl = match ctx.locations.get(&location_name).await {
        Ok(Some(bsl)) => bsl,
        Ok(None) => {
            messages.push(match named {
                Some(_) => format!(
                    "BackupStorageLocation {location_name} named in spec.storageLocation does not exist in namespace {}; create it (hawser backup-location create) or name an existing one",
                    ctx.namespace
                ),
                None => format!(
                    "the backup names no storage location, no BackupStorageLocation has spec.default: true, and the server's default (--default-backup-storage-location), {location_name}, does not exist in namespace {}; create it, mark a location default, or set spec.storageLocation",
                    ctx.namespace
                ),
            });
            return Checked::Invalid(messages);
        }
        Err(e) if e.is_transient() => return Checked::Retry(e.full_message()),
        Err(e) => {
            messages.push(format!(
                "backup can't be created because {}",
                e.full_message()
            ));
            return Checked::Invalid(messages);
        }
    };
    if bsl.spec.access_mode == Some(hawser_api::BackupStorageLocationAccessMode::ReadOnly) {
        messages.push(format!(
            "backup can't be created because BackupStorageLocation {location_name} is in read-only mode"
        ));
        return Checked::Invalid(messages);
    }
    let location = match ctx.locations.usable(&location_name, &bsl).await {
        Ok(location) => location,
        Err(Some(why)) => {
            messages.push(format!("backup can't be created because {why}"));
            return Checked::Invalid(messages);
        }
        Err(None) => {
            return Checked::Retry(format!("reading BackupStorageLocation {location_name}"));
        }
    };
    match location.backup_exists(name).await {
        Ok(false) => {}
        Ok(true) => messages.push(format!(
            "a backup named {name} already exists in BackupStorageLocation {location_name}; choose another name"
        )),
        // The location's own validation turns a store that stays away into `Unavailable`.
        Err(e) if e.is_transient() => return Checked::Retry(e.full_message()),
        Err(e) => messages.push(format!(
            "BackupStorageLocation {location_name} could not be checked for an existing backup named {name}: {}",
            e.full_message()
        )),
    }
    match valid {
        Some(valid) if messages.is_empty() => Checked::Valid(Box::new(valid), Box::new(location)),
        _ => Checked::Invalid(messages),
    }
}
