//! The end of a Backup with item operations (CSI snapshots cut while it was `InProgress`), from
//! `WaitingForPluginOperations` to its true final phase, in a task of its own ([`spawn`]) so
//! that the backup worker's slot is free for the next backup; after a restart, recovery hands
//! such a Backup over ([`run`]) and it goes on from what its location holds.
//!
//! 1. **Wait** (`WaitingForPluginOperations[PartiallyFailed]`): poll the operations
//!    ([`SnapshotOperations::poll`]) after 50 ms, then twice as long each quiet round, up to a
//!    twentieth of `spec.itemOperationTimeout` (at most 1 s);
//!    after a round that ended one, store `<backup>-itemoperations.json.gz` and write the
//!    operation counts to the status.
//! 2. **`Finalizing[PartiallyFailed]`**: the record `velero-backup.json` is stored with that
//!    phase first, then the status, so a restart finalizes rather than waits again.
//! 3. **Finalize** ([`SnapshotOperations::finalize`]): volume info, the VolumeSnapshot objects
//!    deleted, failed operations as errors. A storage failure here is retried at the next
//!    round of recovery (the record still says `Finalizing`).
//! 4. **Commit and final status**, as a backup without operations ends: the record with the
//!    final phase, then the final status through the status engine.
//!
//! Every intermediate status write is one write through the status engine; one that does not
//! land (an API outage past `--resource-timeout`) does not stop the work, whose final status
//! goes to the re-driver like any other. At shutdown the work stops where it is; the record says
//! where, and recovery takes it up at the next start.

use std::sync::Arc;

use hawser_api::phase::{BackupPhase, Phase};
use hawser_api::{Backup, BackupStatus};
use hawser_core::csi::BackupOperation;
use hawser_engine::backup::operations::{self, SnapshotOperations};
use hawser_engine::backup::{self, BackupOutcome};
use hawser_status::{Kind, ObjectKey, StatusUpdate};
use hawser_store::Location;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::context::{Context, backup_location_name, schedule_of};
use crate::controllers::backup::{commit, finished};
use crate::work::{Committed, record_status, report_final};

/// The Backup being ended: its key, uid, and how the first write of this worker is made.
pub(crate) struct Target {
    pub(crate) key: ObjectKey,
    pub(crate) uid: String,
    /// For a Backup taken up again: its resourceVersion and phase as read; the first write
    /// claims it for this instance with that precondition.
    pub(crate) taken_up: Option<(String, Phase)>,
}

impl Target {
    fn update(&mut self, phase: BackupPhase) -> StatusUpdate {
        let update = StatusUpdate::new(
            self.key.namespace.clone(),
            self.key.name.clone(),
            Phase::Backup(phase),
        )
        .for_uid(self.uid.clone());
        match self.taken_up.take() {
            Some((rv, phase)) => update.take_over().observed(rv, phase),
            None => update,
        }
    }
}

/// Ends the backup of `target` in a task of its own among the term's workers (see the module
/// docs). The object counts as owned from now on, so recovery leaves it to that task.
pub(crate) fn spawn(
    ctx: &Arc<Context>,
    target: Target,
    backup: Backup,
    location: Location,
    outcome: BackupOutcome,
) {
    let worker = ctx.engine.worker(target.key.clone());
    let span = tracing::info_span!("backup operations", backup = %target.key);
    let task_ctx = ctx.clone();
    ctx.workers.spawn(
        async move {
            let _worker = worker;
            drive(&task_ctx, target, &backup, &location, outcome).await;
        }
        .instrument(span),
    );
}

/// Takes up the Backups recovery hands over, until shutdown.
pub(crate) async fn run(ctx: Arc<Context>, mut resumed: mpsc::UnboundedReceiver<ObjectKey>) {
    loop {
        let key = tokio::select! {
            key = resumed.recv() => match key {
                Some(key) => key,
                None => return,
            },
            () = ctx.shutdown.cancelled() => return,
        };
        if ctx.engine.owns(&key) {
            continue;
        }
        let task_ctx = ctx.clone();
        let span = tracing::info_span!("backup operations", backup = %key);
        ctx.workers
            .spawn(async move { take_up(task_ctx, key).await }.instrument(span));
    }
}

/// Reads what the Backup's location holds and goes on with its work.
async fn take_up(ctx: Arc<Context>, key: ObjectKey) {
    let _worker = ctx.engine.worker(key.clone());
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &key.namespace,
        &Kind::Backup.api_resource(),
    );
    let object = match api.get_opt(&key.name).await {
        Ok(Some(object)) => serde_json::to_value(object).unwrap_or(Value::Null),
        Ok(None) => return,
        Err(e) => {
            tracing::info!(object = %key, error = %e, "the backup to take up again could not be read; recovery offers it again");
            return;
        }
    };
    let phase = Phase::of(Kind::Backup, &object);
    if !phase.is_in_flight() {
        return;
    }
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let backup: Backup = match serde_json::from_value(object.clone()) {
        Ok(backup) => backup,
        Err(e) => {
            tracing::warn!(object = %key, error = %e, "the backup to take up again cannot be read as a Backup");
            return;
        }
    };
    let location_name = backup_location_name(&object, &ctx.settings.backup.default_location);
    let read = async {
        let location = ctx
            .locations
            .open_named(&location_name)
            .await
            .map_err(|e| hawser_core::errors::chain_text(&e))?;
        let record = location
            .backup_metadata(&key.name)
            .await
            .map_err(|e| e.full_message())?
            .ok_or_else(|| "its velero-backup.json is gone".to_owned())?;
        let record: Backup = serde_json::from_slice(&record)
            .map_err(|e| format!("its record cannot be read: {e}"))?;
        let operations = operations::load(&location, &key.name)
            .await
            .map_err(|e| e.full_message())?;
        let results = operations::load_results(&location, &key.name)
            .await
            .map_err(|e| e.full_message())?;
        Ok::<_, String>((location, record, operations, results))
    };
    let (location, record, operations, results) = match read.await {
        Ok(read) => read,
        Err(why) => {
            tracing::warn!(object = %key, error = %why, "the backup's work cannot go on yet; recovery offers it again");
            return;
        }
    };
    let outcome = outcome_of_record(&record, operations.clone(), results);
    tracing::info!(object = %key, phase = %phase, operations = operations.len(), "backup taken up again from its record");
    let target = Target {
        key: key.clone(),
        uid: text("/metadata/uid"),
        taken_up: Some((text("/metadata/resourceVersion"), phase)),
    };
    drive(&ctx, target, &backup, &location, outcome).await;
}

/// The outcome a run left, as its record and stored operations say.
fn outcome_of_record(
    record: &Backup,
    operations: Vec<BackupOperation>,
    results: hawser_core::archive::gzjson::Results,
) -> BackupOutcome {
    let status = record.status.clone().unwrap_or_default();
    let time = |t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or_else(jiff::Timestamp::now, |t| t.0)
    };
    BackupOutcome {
        phase: status.phase.clone(),
        started: time(status.start_timestamp.clone()),
        completed: time(status.completion_timestamp.clone()),
        items_backed_up: status
            .progress
            .and_then(|p| p.items_backed_up)
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0),
        results,
        archive_bytes: 0,
        failure_reason: None,
        operations,
        archive_key_id: record
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(backup::ARCHIVE_KEY_ANNOTATION))
            .cloned(),
        hooks: status.hook_status.map_or_else(Default::default, |h| {
            let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
            backup::hooks::Tally {
                attempted: count(h.hooks_attempted),
                failed: count(h.hooks_failed),
            }
        }),
    }
}

/// Ends the backup (see the module docs).
pub(crate) async fn drive(
    ctx: &Arc<Context>,
    mut target: Target,
    backup: &Backup,
    location: &Location,
    mut outcome: BackupOutcome,
) {
    let name = target.key.name.clone();
    let schedule = schedule_of(&serde_json::to_value(backup).unwrap_or(Value::Null));
    let driver = SnapshotOperations::new(
        ctx.client.clone(),
        ctx.settings.status.resource_timeout,
        ctx.clock.clone(),
    );
    let partially = matches!(
        outcome.phase,
        BackupPhase::WaitingForPluginOperationsPartiallyFailed
            | BackupPhase::FinalizingPartiallyFailed
    );
    let waiting = matches!(
        outcome.phase,
        BackupPhase::WaitingForPluginOperations
            | BackupPhase::WaitingForPluginOperationsPartiallyFailed
    );
    if waiting {
        let phase = outcome.phase.clone();
        intermediate(
            ctx,
            target.update(phase).status(&counts(&outcome.operations)),
        )
        .await;
        let polling = SnapshotOperations::polling(backup);
        let mut quiet = 0;
        while !operations::all_done(&outcome.operations) {
            if driver.poll(backup, &mut outcome.operations).await {
                quiet = 0;
                if let Err(e) = operations::store(location, &name, &outcome.operations).await {
                    tracing::warn!(backup = %name, error = %e.full_message(), "the operations could not be stored; they are stored again after the next change");
                }
                let phase = outcome.phase.clone();
                intermediate(
                    ctx,
                    target.update(phase).status(&counts(&outcome.operations)),
                )
                .await;
                continue;
            }
            quiet += 1;
            tokio::select! {
                () = tokio::time::sleep(polling.delay(quiet, &mut rand::rng())) => {}
                () = ctx.shutdown.cancelled() => {
                    tracing::info!(backup = %name, "shutting down while the backup waits for its item operations; it goes on after the restart");
                    return;
                }
            }
        }
        let (_, failed) = operations::counts(&outcome.operations);
        outcome.phase = if partially || failed > 0 {
            BackupPhase::FinalizingPartiallyFailed
        } else {
            BackupPhase::Finalizing
        };
        let stored = commit(
            ctx,
            location,
            backup,
            Ok(outcome.clone()),
            outcome.started,
            true,
        )
        .await;
        if stored.outcome.phase == BackupPhase::Failed {
            finish(ctx, &mut target, backup, stored, &schedule).await;
            return;
        }
        let phase = outcome.phase.clone();
        intermediate(
            ctx,
            target.update(phase).status(&counts(&outcome.operations)),
        )
        .await;
    }
    let started = outcome.started;
    let finalized = match driver
        .finalize(location, backup, &outcome.operations.clone(), outcome)
        .await
    {
        Ok(finalized) => finalized,
        Err(e) => {
            tracing::warn!(backup = %name, error = %e.full_message(), "finalizing the backup failed; recovery takes it up again");
            return;
        }
    };
    let stored = commit(ctx, location, backup, Ok(finalized), started, true).await;
    finish(ctx, &mut target, backup, stored, &schedule).await;
}

/// The final status of `stored` (what `commit` stored), and the metrics.
async fn finish(
    ctx: &Context,
    target: &mut Target,
    backup: &Backup,
    stored: Committed<BackupOutcome>,
    schedule: &str,
) {
    let outcome = &stored.outcome;
    let record = record_status(backup::record(backup, outcome).ok().as_ref());
    let update = stored.mark(target.update(outcome.phase.clone()).fields(record));
    report_final(ctx.engine.write(update).await, &target.key);
    ctx.metrics
        .backup_finished(schedule, &finished(backup, outcome));
}

/// Writes a non-final status; one that does not land is logged and the work goes on.
async fn intermediate(ctx: &Context, update: StatusUpdate) {
    let key = update.key().clone();
    let phase = update.phase().clone();
    if let Err(e) = ctx.engine.write(update).await {
        tracing::info!(object = %key, phase = %phase, category = e.category(), error = %e, "status not stored; the work goes on and its final status will be");
    }
}

/// The operation counts of the status.
fn counts(operations: &[BackupOperation]) -> BackupStatus {
    operations::with_counts(operations, BackupStatus::default())
}
