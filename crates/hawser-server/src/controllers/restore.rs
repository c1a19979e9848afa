//! The restore controller: one waiting Restore from validation to its true final phase.
//!
//! 0. **Already recorded?** As for backups ([`Taken::settle_from_record`]).
//! 1. **Validate** (→ `FailedValidation` with `validationErrors`, nothing written to the cluster
//!    or the store): the object parses; exactly one of `backupName`/`scheduleName` (a schedule
//!    resolves to its newest `Completed` backup made in this cluster, not synced from a bucket
//!    nor dated in the future); the Backup exists and is `Completed` or
//!    `PartiallyFailed`; its storage location exists and is `Available`; the spec's filters,
//!    selectors, mappings and existing-resource policy (Velero's checks, against discovery),
//!    its hook specs, and no `resourcePolicy` (hawser does not apply a restore's filter
//!    policies). An API that cannot answer leaves the Restore waiting: the queue takes it up again.
//! 2. **Claim** (→ `InProgress` with `startTimestamp` and the owner annotation).
//! 3. **Run** the restore engine, with `status.progress` at a bounded rate; the engine uploads
//!    the results, the restored-resource list and the log.
//! 4. **Commit** the Restore record (`restores/<name>/restore-<name>-status.json`) with the final
//!    status. When it cannot be stored the restore is `Failed` with a reason saying so: recovery
//!    could not tell the truth after a restart without it. A failed run stores a `Failed`
//!    record too (best effort). The record of a restore from a `ReadOnly` location is kept in
//!    the cluster instead, in a ConfigMap owned by the Restore ([`crate::records`]).
//! 5. **Final status** through the status engine (deadline, then the re-driver).
//!
//! `velero_restore_attempt_total` counts every Restore taken up, before validation, as Velero
//! does.

use std::sync::Arc;

use hawser_api::labels::HAWSER_RECORD_UID;
use hawser_api::phase::{BackupPhase, Phase, RestorePhase};
use hawser_api::{Backup, Restore, RestoreStatus, SharedStatus};
use hawser_status::Kind;
use hawser_store::Location;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;
use tokio::sync::watch;

use crate::context::{Context, SCHEDULE_LABEL, backup_location_name};
use crate::controllers::restore_files;
use crate::metrics::FinalOutcome;
use crate::queue::{Handled, Offer};
use crate::records;
use crate::work::{
    Committed, Taken, record_status, report_final, store_record, test_panic_after_claim,
};
use hawser_engine::restore::{
    self, Progress, RestoreError, RestoreOptions, RestoreOutcome, ValidatedRestore,
};

enum Checked {
    Valid(Box<ValidatedRestore>, Box<Location>),
    Invalid(Vec<String>),
    Retry(String),
}

/// Handles one waiting Restore (see the module docs).
pub(crate) async fn handle(ctx: Arc<Context>, offer: Offer) -> Handled {
    let taken = match Taken::<Restore>::fresh(&ctx, &offer).await {
        Ok(taken) => taken,
        Err(handled) => return handled,
    };
    if taken.settle_from_record(&ctx).await {
        return Handled::Done;
    }
    let (name, key) = (taken.name.clone(), taken.key.clone());
    let schedule = taken
        .json
        .pointer("/spec/scheduleName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (valid, location) = match check(&ctx, taken.object.clone()).await {
        Checked::Valid(valid, location) => (*valid, *location),
        Checked::Retry(why) => {
            tracing::info!(restore = %name, reason = %why, "validation could not finish; the restore waits");
            return Handled::Retry;
        }
        Checked::Invalid(messages) => {
            ctx.metrics.restore_attempt(&schedule);
            tracing::warn!(restore = %name, errors = ?messages, "restore failed validation");
            let update = taken.refused(messages, ctx.clock.now());
            if report_final(ctx.engine.write(update).await, &key) && !taken.is_rerun() {
                ctx.metrics.restore_validation_failed(&schedule);
            }
            return Handled::Done;
        }
    };
    ctx.metrics.restore_attempt(&schedule);

    // Deleting the Restore then deletes its files first (Velero's finalizer), added before the
    // claim so that no status write of the running restore meets it. Without it the restore
    // still runs; its files would outlive its object.
    if let Err(why) = restore_files::add_finalizer(&ctx, &name).await {
        tracing::warn!(restore = %name, error = %why, "the restore's finalizer could not be added: deleting the Restore will leave its files in the storage location");
    }
    let started = taken.started(ctx.clock.now());
    // A restore interrupted while it waited for its exec hooks is run again in `Finalizing`,
    // the phase it showed, which no phase may follow but a final one.
    let (restore, backup) = (valid.restore(), valid.backup());
    let claim_phase = match taken.phase {
        Phase::Restore(RestorePhase::Finalizing) => RestorePhase::Finalizing,
        _ => RestorePhase::InProgress,
    };
    let claim = taken
        .update(claim_phase)
        // The backup a `scheduleName` resolved to, written as Velero does, so that recovery
        // finds the record whatever the schedule's newest backup is by then.
        .spec_field("backupName", restore.spec.backup_name.clone())
        .status(&SharedStatus {
            start_timestamp: Some(Time(started)),
            ..SharedStatus::default()
        });
    if let Err(e) = ctx.engine.write(taken.claim(claim)).await {
        tracing::info!(restore = %name, category = e.category(), error = %e, "the restore could not be started");
        return Handled::after_failed_claim(&e);
    }
    tracing::info!(restore = %name, backup = %backup.metadata.name.clone().unwrap_or_default(), "restore started");
    test_panic_after_claim(&name);

    let (progress, progress_rx) = watch::channel(Progress::default());
    let reporter = taken.report_progress(ctx.clone(), progress_rx, |update, p| {
        let progress = RestoreStatus {
            progress: Some(p.status()),
            ..RestoreStatus::default()
        };
        // Velero's phase while a restore waits for its exec hooks.
        let phase = if p.finalizing {
            RestorePhase::Finalizing
        } else {
            RestorePhase::InProgress
        };
        update.with_phase(phase.into()).status(&progress)
    });
    let options = RestoreOptions::default()
        .with_priorities(ctx.settings.restore.resource_priorities.clone())
        .with_crd_ready_timeout(ctx.settings.restore.crd_ready_timeout)
        .with_api_retry(ctx.settings.status.resource_timeout)
        .with_progress(progress)
        .with_clock(ctx.clock.clone())
        .with_log_warning(taken.resumed_note());
    let result = restore::run(ctx.client.clone(), &location, &valid, options).await;
    reporter.abort();

    let committed = commit(&ctx, &location, restore, result, started).await;
    let outcome = &committed.outcome;
    let record = record_status(restore::record(restore, outcome).ok().as_ref());
    let update = committed.mark(taken.update(outcome.phase.clone()).fields(record));
    report_final(ctx.engine.write(update).await, &key);
    ctx.metrics.restore_finished(
        &schedule,
        match outcome.phase {
            RestorePhase::Completed => FinalOutcome::Completed,
            RestorePhase::PartiallyFailed => FinalOutcome::PartiallyFailed,
            _ => FinalOutcome::Failed,
        },
    );
    Handled::Done
}

/// Stores the Restore record for the run's result; returns the outcome that was stored (or
/// `Failed`, unrecorded, when the record of a finished run could not be stored).
async fn commit(
    ctx: &Context,
    location: &Location,
    restore: &Restore,
    result: Result<RestoreOutcome, RestoreError>,
    started: jiff::Timestamp,
) -> Committed<RestoreOutcome> {
    let name = restore.metadata.name.clone().unwrap_or_default();
    let mut outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::warn!(restore = %name, category = e.category(), error = %e.full_message(), "restore failed");
            let mut failed = RestoreOutcome::failed(&e, started, ctx.clock.now());
            // The claim moved it to InProgress; FailedValidation is for unstarted restores.
            failed.phase = RestorePhase::Failed;
            failed
        }
    };
    outcome.started = started;
    let record = restore::record(restore, &outcome);
    let stored = if location.is_read_only() {
        // Not in the location: in the cluster, where recovery reads it too (crate::records).
        let object = serde_json::to_value(restore).unwrap_or(Value::Null);
        store_record(
            record,
            "the restore record",
            |bytes| records::store_cluster_record(ctx, &object, bytes),
            || records::read_cluster_record(&ctx.client, &object),
        )
        .await
    } else {
        store_record(
            record,
            "the restore record",
            |bytes| async {
                location
                    .commit_restore(&name, bytes)
                    .await
                    .map_err(|e| e.full_message())
            },
            || async {
                location
                    .restore_record(&name)
                    .await
                    .map_err(|e| e.full_message())
            },
        )
        .await
    };
    let recorded = stored.is_ok();
    let outcome = match stored {
        Ok(()) => outcome,
        Err(why) if outcome.phase == RestorePhase::Failed => {
            tracing::warn!(restore = %name, error = %why, "the record of the failed restore could not be stored");
            outcome
        }
        Err(why) => {
            tracing::error!(restore = %name, error = %why, "the restore ran but its record was not stored; the restore is Failed");
            outcome.phase = RestorePhase::Failed;
            outcome.failure_reason = Some(format!(
                "the restore ran, but storing its record restores/{name}/restore-{name}-status.json failed: {why}"
            ));
            outcome
        }
    };
    Committed { outcome, recorded }
}

/// Validation (see the module docs).
async fn check(ctx: &Context, object: Result<Restore, String>) -> Checked {
    let restore = match object {
        Ok(r) => r,
        Err(why) => return Checked::Invalid(vec![why]),
    };
    let by_name = restore.spec.backup_name.clone().filter(|s| !s.is_empty());
    let by_schedule = restore.spec.schedule_name.clone().filter(|s| !s.is_empty());
    let backup_name = match (by_name, by_schedule) {
        (Some(b), None) => b,
        (None, Some(schedule)) => match newest_completed(ctx, &schedule).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Checked::Invalid(vec![format!(
                    "no Completed backup made by schedule {schedule} in this cluster was found in namespace {}; a backup synced from a storage location is restored by spec.backupName",
                    ctx.namespace
                )]);
            }
            Err(e) => return Checked::Retry(e.to_string()),
        },
        _ => {
            return Checked::Invalid(vec![
                "either spec.backupName or spec.scheduleName must be set, and not both".to_owned(),
            ]);
        }
    };
    let backups: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &Kind::Backup.api_resource(),
    );
    // No object has a name that is not a DNS subdomain (and no request can be built for some).
    let found = if hawser_core::label::is_dns_subdomain(&backup_name) {
        backups.get_opt(&backup_name).await
    } else {
        Ok(None)
    };
    let backup_json = match found {
        Ok(Some(b)) => serde_json::to_value(b).unwrap_or(Value::Null),
        Ok(None) => {
            return Checked::Invalid(vec![format!(
                "Backup {backup_name} does not exist in namespace {}; list them with `hawser backup get`",
                ctx.namespace
            )]);
        }
        Err(e) => return Checked::Retry(e.to_string()),
    };
    let backup: Backup = match serde_json::from_value(backup_json.clone()) {
        Ok(b) => b,
        Err(e) => {
            return Checked::Invalid(vec![format!("Backup {backup_name} cannot be read: {e}")]);
        }
    };
    if let Some(claimed) = identity_taken(ctx, &backup).await {
        match claimed {
            Ok(other) => {
                return Checked::Invalid(vec![format!(
                    "Backup {backup_name} was synced from a record that claims the uid of Backup {other}, made in this cluster; it is not restored"
                )]);
            }
            Err(e) => return Checked::Retry(e.to_string()),
        }
    }
    let phase = backup
        .status
        .as_ref()
        .map(|s| s.phase.clone())
        .unwrap_or_default();
    if !phase.is_restorable() {
        return Checked::Invalid(vec![format!(
            "Backup {backup_name} is in phase {:?}; only a Completed or PartiallyFailed backup can be restored",
            phase.to_string()
        )]);
    }
    let location_name = backup_location_name(&backup_json, &ctx.settings.backup.default_location);
    let location = match ctx.locations.get(&location_name).await {
        Ok(Some(bsl)) => match ctx.locations.usable(&location_name, &bsl).await {
            Ok(l) => l,
            Err(Some(why)) => {
                return Checked::Invalid(vec![format!(
                    "the restore can't be started because {why}"
                )]);
            }
            Err(None) => {
                return Checked::Retry(format!("reading BackupStorageLocation {location_name}"));
            }
        },
        Ok(None) => {
            return Checked::Invalid(vec![format!(
                "BackupStorageLocation {location_name} of Backup {backup_name} does not exist in namespace {}",
                ctx.namespace
            )]);
        }
        Err(e) if e.is_transient() => return Checked::Retry(e.full_message()),
        Err(e) => {
            return Checked::Invalid(vec![format!(
                "the restore can't be started because {}",
                e.full_message()
            )]);
        }
    };
    let mut restore = restore;
    restore.spec.backup_name = Some(backup_name);
    let budget = ctx.settings.status.resource_timeout;
    match ValidatedRestore::check(&ctx.client, restore, backup, budget).await {
        Ok(valid) => Checked::Valid(Box::new(valid), Box::new(location)),
        Err(RestoreError::Validation { messages }) => Checked::Invalid(messages),
        Err(e) => Checked::Retry(e.full_message()),
    }
}

/// For a synced `backup` (it carries [`HAWSER_RECORD_UID`]): another Backup of the namespace
/// whose own uid is the one its record claims. A restore would take that backup's snapshots
/// for this one's, so a record that copies a live backup's uid is refused.
async fn identity_taken(ctx: &Context, backup: &Backup) -> Option<Result<String, kube::Error>> {
    let claimed = backup
        .metadata
        .annotations
        .as_ref()?
        .get(HAWSER_RECORD_UID)?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &Kind::Backup.api_resource(),
    );
    match crate::objects::list(ctx, &api, &ListParams::default()).await {
        Ok(all) => all
            .iter()
            .find(|b| crate::objects::text(b, "/metadata/uid") == claimed)
            .map(|b| Ok(crate::objects::text(b, "/metadata/name").to_owned())),
        Err(e) => Some(Err(e)),
    }
}

/// The newest `Completed` backup (by `startTimestamp`) labelled with `schedule` and made in
/// this cluster: one synced from a bucket (it carries [`HAWSER_RECORD_UID`]) or dated in the
/// future is never chosen, so a record written into the bucket cannot become "the newest
/// backup" of a schedule. Backups are read untyped and parsed one by one, so a malformed one
/// among them is skipped, not fatal.
async fn newest_completed(ctx: &Context, schedule: &str) -> Result<Option<String>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &Kind::Backup.api_resource(),
    );
    let selector = ListParams::default().labels(&format!("{SCHEDULE_LABEL}={schedule}"));
    let list = crate::objects::list(ctx, &api, &selector).await?;
    let now = ctx.clock.now();
    Ok(list
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Backup>(v).ok())
        .filter(|b| {
            b.metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key(HAWSER_RECORD_UID))
        })
        .filter_map(|b| {
            let status = b.status.as_ref()?;
            let start = status.start_timestamp.as_ref().map(|t| t.0);
            (status.phase == BackupPhase::Completed && start.is_none_or(|at| at <= now))
                .then(|| (start, b.metadata.name.clone()))
        })
        .max_by_key(|(start, _)| *start)
        .and_then(|(_, name)| name))
}
