//! Backup sync: the backups stored in a storage location become Backup objects in the cluster,
//! so that a new cluster pointed at an existing bucket sees them (Velero's backup-sync
//! controller, velero-compat §2.4 and rule B15).
//!
//! **When.** A pass looks at every BackupStorageLocation, the default one first. A location is
//! synced when it is `Available` and its sync period — `spec.backupSyncPeriod`, else
//! `--backup-sync-period`; `0s` in the spec turns sync off for that location, a negative one
//! means the flag — has passed since its `status.lastSyncedTime`. The next pass comes when the
//! first location is due again, and at most a minute later (Velero's tick), so a period of one
//! second is honoured and a new location waits at most a minute.
//!
//! **One location**, as a pipeline:
//! 1. fetch: the names under `backups/` in the location; then the Backups,
//!    DeleteBackupRequests and Schedules of the server namespace;
//! 2. for each listed name that has no Backup object and no deletion request that is unset,
//!    `New` or `InProgress`: read its `velero-backup.json` and [`plan`] (pure). A record that is
//!    missing, is not JSON, is not a velero.io/v1 Backup or names another backup is skipped with
//!    a warning and blocks nothing else. B15: a backup still `WaitingForPluginOperations*` or
//!    `Finalizing*` is skipped until it has expired, and is then created `PartiallyFailed`.
//!    A record in any other phase that is not final (`New`, `InProgress`, `Deleting`, …) is
//!    created `Failed`, its `failureReason` starting "synced unfinished": a bucket cannot set
//!    the server to work. Otherwise the object is the record with its stored status (Velero's
//!    CRDs have no status subresource, so a create carries it), in the server namespace,
//!    without the source cluster's identity (`resourceVersion`, `uid`, `creationTimestamp`,
//!    `managedFields`, …), its `finalizers` or any `hawser.io/` label or annotation, with a
//!    `startTimestamp` or `completionTimestamp` in the future set to now, and with
//!    `spec.storageLocation` and the label `velero.io/storage-location` naming this location;
//! 3. act: create those objects (one created meanwhile by someone else wins);
//! 4. orphans: a Backup of this location (its label, as Velero; an unlabelled one made by an
//!    earlier hawser server, whose claim wrote no label, by its owner annotation and
//!    `spec.storageLocation`),
//!    `Completed` or `PartiallyFailed`, whose name was not listed, is deleted — the object only: nothing in the location, no deletion
//!    request. Velero deletes on one listing (its weakness 15); here each candidate gets a
//!    second look at its own `velero-backup.json` first, and is kept when the record is there
//!    or cannot be read, so a listing that misses a name deletes nothing. The delete carries the
//!    uid and resourceVersion seen, so a backup that changed meanwhile (a deletion request
//!    marked it `Deleting`) is left alone;
//! 5. record: a merge patch of `status.lastSyncedTime` (UTC now) alone, once the location was
//!    listed; the storage-location controller writes the other status fields.
//!
//! **Owner references.** Only a reference to a Schedule of this namespace with the same uid is
//! kept: the other references name objects of the cluster the backup came from, and
//! Kubernetes' garbage collector deletes an object whose owner does not exist.
//!
//! **A backup being deleted is never brought back.** The deletion controller works record
//! first: the request goes `InProgress`, the Backup `Deleting`, then `velero-backup.json` is
//! deleted, then the rest of the files, and the Backup object last. Sync lists the Backups
//! before it reads any record, and reads a name's record only when that name had no object. So
//! a record sync reads was still there after the object was gone, which the deletion order
//! rules out: once a deletion has removed the object, the record was already gone, and a
//! directory without a record is never synced. Names with a pending deletion request are
//! skipped as well, as Velero does. What a deletion leaves behind on a storage failure (a
//! `Deleting` object) is neither synced over nor treated as an orphan.
//!
//! **Identity.** A synced object gets a uid of its own, not the one inside its record; the
//! record's uid is written in the annotation `hawser.io/record-uid`, which
//! [`records`](crate::records) accepts. Restores and deletion requests key on the object, not on
//! the record's uid, so a synced backup is restored and deleted like any other.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hawser_api::labels::{HAWSER_OWNER, HAWSER_PREFIX, HAWSER_RECORD_UID, STORAGE_LOCATION};
use hawser_api::phase::{BackupPhase, DeleteBackupRequestPhase};
use hawser_api::{Backup, BackupStorageLocation, BackupStorageLocationPhase};
use hawser_core::duration::GoDuration;
use hawser_core::label::valid_label_value;
use hawser_store::Location;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams, Preconditions};
use serde_json::{Value, json};
use tracing::Instrument;

use super::periodic::{self, Pass};
use crate::context::Context;
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// Longest time between two passes (Velero's tick).
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Shortest time between two passes.
const MIN_WAIT: Duration = Duration::from_millis(200);

/// Metadata of the source cluster that a created object must not carry.
const SOURCE_IDENTITY: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Runs until the term ends.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let locations = velero_api(&ctx, "BackupStorageLocation", "backupstoragelocations");
    periodic::run(ctx, BackupSync(locations), health).await;
}

struct BackupSync(Api<DynamicObject>);

impl Pass for BackupSync {
    type Listed = Vec<(String, BackupStorageLocation)>;

    const LISTS: &'static str = "storage locations to sync";

    async fn list(
        &mut self,
        ctx: &Context,
    ) -> Result<Vec<(String, BackupStorageLocation)>, kube::Error> {
        Ok(objects::list(ctx, &self.0, &ListParams::default())
            .await?
            .into_iter()
            .filter_map(|o| {
                let name = text(&o, "/metadata/name").to_owned();
                // A malformed location is the storage-location controller's to report.
                serde_json::from_value(o).ok().map(|bsl| (name, bsl))
            })
            .collect())
    }

    async fn handle(
        &mut self,
        ctx: &Context,
        locations: Vec<(String, BackupStorageLocation)>,
    ) -> Duration {
        pass(ctx, &self.0, locations).await.max(MIN_WAIT)
    }

    fn retry_after(&self, ctx: &Context) -> Duration {
        ctx.settings.backup.sync_period.clamp(MIN_WAIT, MAX_WAIT)
    }
}

/// One look at every location; how long until the next one is due.
async fn pass(
    ctx: &Context,
    api: &Api<DynamicObject>,
    mut locations: Vec<(String, BackupStorageLocation)>,
) -> Duration {
    locations.sort_by(|a, b| b.1.spec.default.cmp(&a.1.spec.default).then(a.0.cmp(&b.0)));
    let mut wait = MAX_WAIT;
    for (name, bsl) in &locations {
        if ctx.shutdown.is_cancelled() {
            break;
        }
        let Some(period) =
            sync_period(bsl.spec.backup_sync_period, ctx.settings.backup.sync_period)
        else {
            continue;
        };
        let status = bsl.status.as_ref();
        let last = status
            .and_then(|s| s.last_synced_time.as_ref())
            .map(|t| t.0);
        let due = due_in(last, period, ctx.clock.now());
        // An unavailable location is looked at again after its period too.
        wait = wait.min(if due.is_zero() { period } else { due });
        let available =
            status.and_then(|s| s.phase.clone()) == Some(BackupStorageLocationPhase::Available);
        if available && due.is_zero() {
            let span = tracing::info_span!("backup_sync", location = %name);
            sync_location(ctx, api, name, bsl).instrument(span).await;
        }
    }
    wait
}

/// The sync period of a location: `spec.backupSyncPeriod` (`0s`: never, negative: the flag),
/// else the flag.
fn sync_period(spec: Option<GoDuration>, flag: Duration) -> Option<Duration> {
    match spec.map(GoDuration::to_std) {
        None | Some(None) => Some(flag),
        Some(Some(zero)) if zero.is_zero() => None,
        Some(Some(period)) => Some(period),
    }
}

/// How long until a location last synced at `last` is due again; zero when it is due now
/// (never synced, or a `lastSyncedTime` in the future: a clock that went back).
fn due_in(last: Option<Timestamp>, period: Duration, now: Timestamp) -> Duration {
    let Some(last) = last else {
        return Duration::ZERO;
    };
    let elapsed = now.duration_since(last);
    if elapsed.is_negative() {
        return Duration::ZERO;
    }
    period.saturating_sub(elapsed.unsigned_abs())
}

/// What the namespace holds, read before any record (see the module docs).
struct Namespace {
    backups: Vec<Value>,
    /// Names of backups with a deletion request unset, `New` or `InProgress`.
    being_deleted: HashSet<String>,
    /// Schedule name → uid.
    schedules: HashMap<String, String>,
}

async fn fetch(ctx: &Context, backups: &Api<DynamicObject>) -> Result<Namespace, kube::Error> {
    let all = ListParams::default();
    let backups = objects::list(ctx, backups, &all).await?;
    let requests = velero_api(ctx, "DeleteBackupRequest", "deletebackuprequests");
    let requests = objects::list(ctx, &requests, &all).await?;
    let schedules = velero_api(ctx, "Schedule", "schedules");
    let schedules = objects::list(ctx, &schedules, &all).await?;
    Ok(Namespace {
        backups,
        being_deleted: being_deleted(&requests),
        schedules: schedules
            .iter()
            .map(|s| {
                let name = text(s, "/metadata/name").to_owned();
                (name, text(s, "/metadata/uid").to_owned())
            })
            .collect(),
    })
}

/// Syncs one location (see the module docs). Failures are logged; the next pass tries again.
async fn sync_location(
    ctx: &Context,
    bsls: &Api<DynamicObject>,
    name: &str,
    bsl: &BackupStorageLocation,
) {
    let location = match ctx.locations.open(name, &bsl.spec).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(category = e.category(), error = %e.full_message(), "the location cannot be opened; not synced");
            return;
        }
    };
    let listed: BTreeSet<String> = match location.list_backups().await {
        Ok(names) => names.into_iter().collect(),
        Err(e) => {
            tracing::warn!(category = e.category(), error = %e.full_message(), "listing the location's backups failed; not synced");
            return;
        }
    };
    let backups = velero_api(ctx, "Backup", "backups");
    let namespace = match fetch(ctx, &backups).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "reading the namespace's backups failed; not synced");
            return;
        }
    };
    let present: HashSet<&str> = namespace
        .backups
        .iter()
        .map(|b| text(b, "/metadata/name"))
        .collect();
    let target = Target {
        namespace: &ctx.namespace,
        location: name,
        schedules: &namespace.schedules,
        now: ctx.clock.now(),
    };
    for backup in listed.iter().filter(|n| !present.contains(n.as_str())) {
        if ctx.shutdown.is_cancelled() {
            return;
        }
        if namespace.being_deleted.contains(backup) {
            tracing::debug!(backup, "a deletion request for it is pending; not synced");
            continue;
        }
        create(ctx, &backups, &location, backup, &target).await;
    }
    for orphan in orphans(&namespace.backups, name, &listed) {
        remove_orphan(ctx, &backups, &location, orphan).await;
    }
    let synced = json!({"status": {"lastSyncedTime": Time(ctx.clock.now())}});
    if let Err(e) = objects::merge_patch(ctx, bsls, name, &synced).await {
        tracing::warn!(error = %e, "storing the location's lastSyncedTime failed");
    }
}

/// Creates the Backup `name` from its record, when [`plan`] says so.
async fn create(
    ctx: &Context,
    backups: &Api<DynamicObject>,
    location: &Location,
    name: &str,
    target: &Target<'_>,
) {
    let bytes = match location.backup_metadata(name).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            tracing::debug!(
                backup = name,
                "no velero-backup.json (not committed, or being deleted); not synced"
            );
            return;
        }
        Err(e) => {
            tracing::warn!(backup = name, category = e.category(), error = %e.full_message(), "reading velero-backup.json failed; not synced");
            return;
        }
    };
    let object = match plan(name, &bytes, target) {
        Plan::Create(object) => object,
        Plan::Wait(phase) => {
            tracing::debug!(
                backup = name,
                phase = %phase,
                "an unfinished backup that has not expired; not synced"
            );
            return;
        }
        Plan::Unusable(why) => {
            tracing::warn!(backup = name, reason = %why, "velero-backup.json cannot be synced; skipped");
            return;
        }
    };
    match objects::create(ctx, backups, &object).await {
        Ok(_) => tracing::info!(
            backup = name,
            phase = %BackupPhase::of(&object),
            "backup synced from its storage location"
        ),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            tracing::debug!(backup = name, "a Backup of this name was created meanwhile");
        }
        Err(e) => tracing::warn!(backup = name, error = %e, "creating the synced Backup failed"),
    }
}

/// Deletes the Backup object `orphan` after the second look (see the module docs).
async fn remove_orphan(
    ctx: &Context,
    backups: &Api<DynamicObject>,
    location: &Location,
    orphan: &Value,
) {
    let name = text(orphan, "/metadata/name");
    match location.backup_exists(name).await {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!(
                backup = name,
                "not in the location's listing, but its record is there; kept"
            );
            return;
        }
        Err(e) => {
            tracing::warn!(backup = name, category = e.category(), error = %e.full_message(), "the backup's record could not be looked at; kept");
            return;
        }
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(text(orphan, "/metadata/uid").to_owned()),
            resource_version: Some(text(orphan, "/metadata/resourceVersion").to_owned()),
        }),
        ..DeleteParams::default()
    };
    match objects::retried(ctx, || backups.delete(name, &params)).await {
        Ok(_) => tracing::info!(
            backup = name,
            "backup no longer in its storage location: its Backup object is deleted"
        ),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
            tracing::debug!(
                backup = name,
                "the Backup changed meanwhile; left for the next pass"
            );
        }
        Err(e) => tracing::warn!(backup = name, error = %e, "deleting the orphaned Backup failed"),
    }
}

/// Names of backups with a deletion request unset, `New` or `InProgress`.
fn being_deleted(requests: &[Value]) -> HashSet<String> {
    requests
        .iter()
        .filter(|r| DeleteBackupRequestPhase::of(r).is_pending())
        .map(|r| text(r, "/spec/backupName").to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Backups of `location` that are `Completed` or `PartiallyFailed` and not in `listed`.
fn orphans<'a>(backups: &'a [Value], location: &str, listed: &BTreeSet<String>) -> Vec<&'a Value> {
    let label = valid_label_value(location);
    backups
        .iter()
        .filter(|b| {
            let labelled = b
                .pointer("/metadata/labels")
                .and_then(|l| l.get(STORAGE_LOCATION))
                .and_then(Value::as_str);
            let made_here = b
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(HAWSER_OWNER))
                .is_some();
            match labelled {
                Some(value) => value == label,
                // The claims of earlier hawser servers wrote no label: a backup one made
                // carries the owner annotation and the resolved spec.storageLocation instead.
                None => made_here && text(b, "/spec/storageLocation") == location,
            }
        })
        .filter(|b| BackupPhase::of(b).is_restorable())
        .filter(|b| !listed.contains(text(b, "/metadata/name")))
        .collect()
}

/// Where a synced Backup is created.
struct Target<'a> {
    namespace: &'a str,
    /// The BackupStorageLocation's name.
    location: &'a str,
    /// Schedule name → uid, in the server namespace.
    schedules: &'a HashMap<String, String>,
    now: Timestamp,
}

/// What to do with one stored record.
#[derive(Debug, PartialEq)]
enum Plan {
    /// Create this Backup object.
    Create(Value),
    /// Not yet: an unfinished backup (this phase) that has not expired.
    Wait(String),
    /// The record cannot be synced, for this reason.
    Unusable(String),
}

/// The phase a stored backup is created in; `None` to leave it for now. A final phase is kept.
/// Rule B15: one waiting for plugin operations or finalizing is left until it has expired, and
/// is then `PartiallyFailed`. Any other phase (`New`, `InProgress`, `Deleting`, …) is `Failed`:
/// the backup did not finish where it was made, and a record in that phase must not set a
/// server to work on it.
fn synced_phase(
    stored: BackupPhase,
    expiration: Option<Timestamp>,
    now: Timestamp,
) -> Option<BackupPhase> {
    use BackupPhase::*;
    let b15 = matches!(
        stored,
        WaitingForPluginOperations
            | WaitingForPluginOperationsPartiallyFailed
            | Finalizing
            | FinalizingPartiallyFailed
    );
    match expiration {
        _ if stored.is_final() => Some(stored),
        _ if !b15 => Some(Failed),
        Some(at) if at <= now => Some(PartiallyFailed),
        _ => None,
    }
}

/// `status.failureReason` of a backup synced as `Failed` from the unfinished phase `stored`.
fn synced_unfinished(stored: &BackupPhase) -> String {
    format!(
        "synced unfinished: the record in the storage location says phase {stored}; the backup did not finish where it was made"
    )
}

/// The Backup object to create from the record `bytes` of the directory `name` (see the module
/// docs).
fn plan(name: &str, bytes: &[u8], target: &Target<'_>) -> Plan {
    let mut record: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Plan::Unusable(format!("it is not JSON: {e}")),
    };
    let (api_version, kind) = (text(&record, "/apiVersion"), text(&record, "/kind"));
    if (api_version, kind) != ("velero.io/v1", "Backup") {
        return Plan::Unusable(format!(
            "it is a {kind:?} of {api_version:?}, not a velero.io/v1 Backup"
        ));
    }
    if let Err(e) = serde_json::from_value::<Backup>(record.clone()) {
        return Plan::Unusable(format!("it cannot be read as a Backup: {e}"));
    }
    if text(&record, "/metadata/name") != name {
        return Plan::Unusable(format!(
            "it names backup {:?}, not {name:?}",
            text(&record, "/metadata/name")
        ));
    }
    let stored = BackupPhase::of(&record);
    let expiration = text(&record, "/status/expiration").parse().ok();
    let Some(phase) = synced_phase(stored.clone(), expiration, target.now) else {
        return Plan::Wait(stored.to_string());
    };
    let unfinished = (!stored.is_final() && phase == BackupPhase::Failed).then_some(stored);
    let record_uid = text(&record, "/metadata/uid").to_owned();

    // The record is a JSON object here (it has a `kind`), so indexing it cannot panic.
    let metadata = &mut record["metadata"];
    make_object(metadata);
    let references = metadata
        .get("ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(fields) = metadata.as_object_mut() {
        for field in SOURCE_IDENTITY
            .iter()
            .chain(&["ownerReferences", "finalizers"])
        {
            fields.remove(*field);
        }
    }
    metadata["namespace"] = json!(target.namespace);
    let kept: Vec<Value> = references
        .into_iter()
        .filter(|r| {
            text(r, "/kind") == "Schedule"
                && text(r, "/apiVersion") == "velero.io/v1"
                && target.schedules.get(text(r, "/name")).map(String::as_str)
                    == Some(text(r, "/uid"))
        })
        .collect();
    if !kept.is_empty() {
        metadata["ownerReferences"] = Value::Array(kept);
    }
    // The server's own marks (owner, attempts, record uid, …) are never taken from a bucket.
    for marks in ["labels", "annotations"] {
        make_object(&mut metadata[marks]);
        if let Some(marks) = metadata[marks].as_object_mut() {
            marks.retain(|key, _| !key.starts_with(HAWSER_PREFIX));
        }
    }
    metadata["labels"][STORAGE_LOCATION] = json!(valid_label_value(target.location));
    if !record_uid.is_empty() {
        metadata["annotations"][HAWSER_RECORD_UID] = json!(record_uid);
    }
    make_object(&mut record["spec"]);
    record["spec"]["storageLocation"] = json!(target.location);
    let status = &mut record["status"];
    make_object(status);
    status["phase"] = json!(phase.as_str());
    if let Some(stored) = unfinished {
        status["failureReason"] = json!(synced_unfinished(&stored));
    }
    // A record dated in the future would pass for the newest backup until then.
    for field in ["startTimestamp", "completionTimestamp"] {
        let at: Option<Timestamp> = status
            .get(field)
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok());
        if at.is_some_and(|at| at > target.now) {
            status[field] = json!(Time(target.now));
        }
    }
    Plan::Create(record)
}

/// Replaces `value` with `{}` unless it is an object already.
fn make_object(value: &mut Value) {
    if !value.is_object() {
        *value = json!({});
    }
}

#[cfg(test)]
mod tests;
