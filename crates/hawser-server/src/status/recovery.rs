//! Recovery: objects whose work was started but that no live worker of this instance owns.
//!
//! At start-up and every `--status-resync-period`, list Backups and Restores → keep those whose
//! phase says the work had started and is not finished (`InProgress`, `WaitingForPluginOperations*`,
//! `Finalizing*`) → skip those owned here (a live worker, a write in progress, or a pending status
//! in the re-driver, all behind the owner annotation naming this instance) → ask the
//! [`RecordSource`] for the recorded outcome → write it, or `Failed` with a reason saying the
//! server restarted during the work when there is no record. A Backup whose record says
//! `WaitingForPluginOperations*` or `Finalizing*` (its items are stored, its item operations
//! were under way) is not resolved but handed to the resumer set with
//! [`StatusEngine::resume_with`], which goes on with its work. Writes go through
//! [`StatusEngine::write`] (same deadline, re-driver, transition table).
//!
//! A record source that cannot be read (storage down, a location, Secret or backup missing)
//! leaves the object alone, with a Warning Event, and the round is tried again within one
//! backoff cap: a backup whose artifacts were written must never be reported `Failed` for that.
//! Ownership is by instance id (the `hawser.io/owner` annotation the claim writes). An object
//! owned by another instance is left alone while that instance's Lease is alive (see
//! [`super::liveness`]); once it is not, the object is an orphan like any other. Leader election
//! keeps one active server; the Leases keep two servers run without it from stealing each
//! other's work.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use hawser_api::labels::HAWSER_OWNER;
use hawser_api::phase::Phase;
use serde_json::{Map, Value};

use super::engine::StatusEngine;
use super::error::{RecoveryError, WriteError};
use super::events::reasons;
use super::kind::{Kind, ObjectKey};
use super::update::StatusUpdate;

/// The outcome recorded in the storage location for one Backup/Restore: its final status.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedOutcome {
    /// The final phase.
    pub phase: String,
    /// Other status fields to restore (e.g. `completionTimestamp`, `progress`, `errors`).
    pub status: Map<String, Value>,
}

impl RecordedOutcome {
    /// A recorded outcome with only a phase.
    #[must_use]
    pub fn phase(phase: impl Into<String>) -> Self {
        Self {
            phase: phase.into(),
            status: Map::new(),
        }
    }

    /// Add a status field.
    #[must_use]
    pub fn with(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.status.insert(field.to_owned(), value.into());
        self
    }
}

/// Reading a record failed.
#[derive(Debug, thiserror::Error)]
#[error("could not read the outcome record of {key}")]
pub struct RecordError {
    /// Which object.
    pub key: ObjectKey,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl RecordError {
    /// A stable short category.
    #[must_use]
    pub fn category(&self) -> &'static str {
        "RecordUnreadable"
    }
}

/// Where the outcome of finished work is recorded (the storage location; an in-memory one for
/// tests and `hawser dev`).
pub trait RecordSource: Send + Sync {
    /// The recorded final outcome of the object, `None` when there is no record.
    fn outcome(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<RecordedOutcome>, RecordError>> + Send;
}

/// An in-memory [`RecordSource`].
#[derive(Debug, Default)]
pub struct MemoryRecords {
    records: Mutex<HashMap<ObjectKey, RecordedOutcome>>,
}

impl MemoryRecords {
    /// Record `outcome` for `key`.
    pub fn insert(&self, key: ObjectKey, outcome: RecordedOutcome) {
        if let Ok(mut r) = self.records.lock() {
            r.insert(key, outcome);
        }
    }
}

impl RecordSource for MemoryRecords {
    async fn outcome(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<RecordedOutcome>, RecordError> {
        let key = ObjectKey::new(kind, namespace, name);
        Ok(self.records.lock().ok().and_then(|r| r.get(&key).cloned()))
    }
}

/// What one recovery round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Objects whose work had started and not finished.
    pub in_flight: usize,
    /// Of those, owned by this instance (left alone).
    pub owned: usize,
    /// Of those, owned by another instance whose Lease is alive (left alone).
    pub owned_elsewhere: usize,
    /// Resolved to their recorded outcome.
    pub from_record: usize,
    /// Resolved to `Failed` for lack of a record.
    pub failed_without_record: usize,
    /// Handed back to work: Backups whose record says their item operations go on.
    pub resumed: usize,
    /// Not resolved this round (record unreadable, write handed over, dropped, refused).
    pub unresolved: usize,
}

/// Whether work recorded at `phase` can go on from what is stored: a Backup waiting for its
/// item operations or finalizing.
fn is_resumable(phase: &Phase) -> bool {
    use hawser_api::phase::BackupPhase as B;
    matches!(
        phase,
        Phase::Backup(
            B::WaitingForPluginOperations
                | B::WaitingForPluginOperationsPartiallyFailed
                | B::Finalizing
                | B::FinalizingPartiallyFailed
        )
    )
}

/// `failureReason` of an orphan with no record.
#[must_use]
pub fn restart_failure_reason(kind: Kind) -> String {
    format!(
        "hawser server restarted while the {kind} was in progress; no completion record was found in the storage location"
    )
}

/// `failureReason` of an object whose worker stopped with the panic `why`, with no record.
#[must_use]
pub fn abandoned_failure_reason(kind: Kind, why: &str) -> String {
    format!(
        "hawser server's worker of this {kind} stopped unexpectedly ({why}); no completion record was found in the storage location"
    )
}

enum Resolution {
    FromRecord,
    Resumed,
    WithoutRecord,
    Unresolved,
}

impl StatusEngine {
    /// Notes that the worker of `key` stopped with the panic `why`: recovery, which resolves
    /// the object once no worker holds it, gives that as the reason when there is no record.
    pub fn abandon(&self, key: ObjectKey, why: &str) {
        if let Ok(mut abandoned) = self.inner.abandoned.lock() {
            abandoned.insert(key, why.to_owned());
        }
    }

    /// One recovery round over both kinds.
    ///
    /// # Errors
    ///
    /// [`RecoveryError::List`] when a kind cannot be listed (the next round tries again).
    pub async fn resolve_orphans<R: RecordSource + ?Sized>(
        &self,
        records: &R,
    ) -> Result<RecoveryReport, RecoveryError> {
        let mut report = RecoveryReport::default();
        for kind in Kind::ALL {
            let inner = &self.inner;
            let items = inner
                .writer
                .api()
                .list(
                    kind,
                    inner.config.namespace.as_deref(),
                    inner.config.request_timeout,
                )
                .await
                .map_err(|source| RecoveryError::List {
                    kind: kind.label(),
                    source,
                })?;
            let mut orphans = Vec::new();
            for obj in items {
                let s = |p: &str| {
                    obj.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let phase = Phase::of(kind, &obj);
                if !phase.is_in_flight() {
                    continue;
                }
                report.in_flight += 1;
                let key = ObjectKey::new(kind, s("/metadata/namespace"), s("/metadata/name"));
                if self.owns(&key) {
                    report.owned += 1;
                    continue;
                }
                let owner = obj["metadata"]["annotations"][HAWSER_OWNER].as_str();
                if let (Some(liveness), Some(owner)) = (&inner.liveness, owner) {
                    match liveness.is_alive(owner).await {
                        Ok(true) => {
                            report.owned_elsewhere += 1;
                            continue;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(object = %key, owner, error = %e, "whether the owner is alive cannot be read; object left for the next round");
                            report.unresolved += 1;
                            continue;
                        }
                    }
                }
                orphans.push((
                    key,
                    s("/metadata/resourceVersion"),
                    s("/metadata/uid"),
                    phase,
                ));
            }
            let results: Vec<Resolution> = futures::stream::iter(orphans)
                .map(|(key, rv, uid, phase)| self.resolve_one(records, key, rv, uid, phase))
                .buffer_unordered(inner.config.redrive_concurrency.max(1))
                .collect()
                .await;
            for r in results {
                match r {
                    Resolution::FromRecord => report.from_record += 1,
                    Resolution::Resumed => report.resumed += 1,
                    Resolution::WithoutRecord => report.failed_without_record += 1,
                    Resolution::Unresolved => report.unresolved += 1,
                }
            }
        }
        if report.in_flight > report.owned {
            tracing::info!(?report, "recovery round");
        }
        Ok(report)
    }

    async fn resolve_one<R: RecordSource + ?Sized>(
        &self,
        records: &R,
        key: ObjectKey,
        rv: String,
        uid: String,
        phase: Phase,
    ) -> Resolution {
        let record = match records.outcome(key.kind, &key.namespace, &key.name).await {
            Ok(r) => {
                let r = r.map(|o| (Phase::parse(key.kind, &o.phase), o.status));
                if let (Some((recorded, _)), Some(resumer)) = (&r, self.inner.resumer.get())
                    && is_resumable(recorded)
                    && resumer.send(key.clone()).is_ok()
                {
                    tracing::info!(object = %key, recorded = %recorded, "the record says the work can go on; it is taken up again");
                    return Resolution::Resumed;
                }
                r.filter(|(recorded, _)| recorded.is_final())
            }
            Err(e) => {
                let why = hawser_core::errors::chain_text(&e);
                tracing::warn!(object = %key, error = %why, "outcome record unreadable; object left for the next round");
                self.inner
                    .events
                    .publish(
                        &key,
                        None,
                        true,
                        reasons::RECOVERY_WAITING,
                        format!("the outcome of this {} cannot be decided yet, it stays {phase} until it can: {why}", key.kind),
                    )
                    .await;
                return Resolution::Unresolved;
            }
        };
        let abandoned = self
            .inner
            .abandoned
            .lock()
            .ok()
            .and_then(|mut a| a.remove(&key));
        // The reason written when there is no record (None: the record decides).
        let unrecorded = record.is_none().then(|| {
            abandoned.map_or_else(
                || restart_failure_reason(key.kind),
                |why| abandoned_failure_reason(key.kind, &why),
            )
        });
        let update = match (record, &unrecorded) {
            (Some((recorded, status)), _) => {
                StatusUpdate::for_key(key.clone(), recorded).fields(status)
            }
            (None, reason) => {
                let now = self
                    .inner
                    .config
                    .clock
                    .now()
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string();
                StatusUpdate::for_key(key.clone(), Phase::failed(key.kind))
                    .field("failureReason", reason.clone().unwrap_or_default())
                    .field("completionTimestamp", now)
            }
        }
        .observed(rv, phase.clone())
        .for_uid(uid);
        let from_record = unrecorded.is_none();
        let wanted = update.phase().clone();
        match self.write(update).await {
            Ok(landing) => {
                let note = match &unrecorded {
                    None => format!("resolved from {phase} to the recorded outcome {wanted}"),
                    Some(reason) => format!("resolved from {phase} to {wanted}: {reason}"),
                };
                self.inner
                    .events
                    .publish(
                        &key,
                        Some(&landing.object),
                        !from_record,
                        reasons::RECOVERED,
                        note,
                    )
                    .await;
                if from_record {
                    Resolution::FromRecord
                } else {
                    Resolution::WithoutRecord
                }
            }
            Err(WriteError::Gone { .. }) => Resolution::Unresolved,
            Err(e) => {
                tracing::warn!(object = %key, category = e.category(), error = %e, "orphan not resolved this round");
                Resolution::Unresolved
            }
        }
    }

    /// Run recovery at once and then every `--status-resync-period` until
    /// [`shutdown`](Self::shutdown).
    ///
    /// While it runs, this instance's Lease is renewed every heartbeat (other instances read it
    /// to tell whether the objects this one owns are still worked on); it is deleted on return.
    pub async fn run_recovery<R: RecordSource>(&self, records: R) {
        let heartbeat = self.inner.liveness.clone().map(|liveness| {
            let shutdown = self.inner.shutdown.clone();
            tokio::spawn(async move {
                loop {
                    if let Err(e) = liveness.beat().await {
                        tracing::warn!(error = %e, "renewing this instance's Lease failed; trying again");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(liveness.interval()) => {}
                        () = shutdown.cancelled() => break,
                    }
                }
                liveness.release().await;
            })
        });
        self.recovery_rounds(&records).await;
        if let Some(heartbeat) = heartbeat {
            let _ = heartbeat.await;
        }
    }

    async fn recovery_rounds<R: RecordSource>(&self, records: &R) {
        let period = self
            .inner
            .config
            .resync_period
            .max(Duration::from_millis(100));
        // A round that left work undecided is tried again within one backoff cap, not a whole
        // resync period later.
        let soon = period.min(self.inner.config.max_backoff);
        loop {
            let wait = match self.resolve_orphans(records).await {
                Ok(report) if report.unresolved == 0 => period,
                Ok(_) => soon,
                Err(e) => {
                    tracing::warn!(category = e.category(), error = %e, "recovery round failed; retrying soon");
                    soon
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }
}
