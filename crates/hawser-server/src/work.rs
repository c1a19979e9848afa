//! What the backup and restore workers share: taking up an object, bounded-rate progress
//! reports, storing the record, and the logging of a final status write.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hawser_api::labels::{HAWSER_ATTEMPT, HAWSER_INTERRUPTED_ATTEMPTS, HAWSER_OWNER};
use hawser_api::phase::Phase;
use hawser_api::{PhasedResource, SharedStatus};
use hawser_status::{Landing, ObjectKey, ProgressWrite, StatusUpdate, WorkerGuard, WriteError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;
use tokio::sync::watch;

use crate::context::Context;
use crate::queue::{Handled, Offer};

/// A waiting object taken up by a worker of this instance.
pub(crate) struct Taken<T> {
    pub(crate) name: String,
    pub(crate) key: ObjectKey,
    /// The object as JSON, as it was read (for what is read of it even when it is malformed).
    pub(crate) json: Value,
    /// The object, typed; or, when it does not parse as its kind, why (its work then ends in
    /// `FailedValidation` with that message).
    pub(crate) object: Result<T, String>,
    /// `metadata.resourceVersion` and `status.phase` as seen, for the first write.
    pub(crate) resource_version: String,
    pub(crate) phase: Phase,
    /// `metadata.uid`: every write of this work is for this object only.
    pub(crate) uid: String,
    /// Marks the object as owned here (recovery leaves it alone) while held.
    pub(crate) _worker: WorkerGuard,
    /// Set when this is interrupted work run again.
    rerun: Option<RerunOf>,
}

/// Interrupted work taken up again: which attempt this is, why the earlier ones ended, and
/// when the first one started.
struct RerunOf {
    attempt: u32,
    interrupted: Vec<String>,
    started: Option<jiff::Timestamp>,
}

impl<T: PhasedResource> Taken<T> {
    /// Takes up the object `offered` names, as it is now: it is read again (it may have waited
    /// for a free slot, changed, or been deleted and created again), and taken only when this
    /// instance does not already own it (a worker or the re-driver holds it) and it still waits
    /// or, for a rerun, it is still the interrupted object recovery found (same uid and owner,
    /// `InProgress`). Otherwise what the queue does with it: [`Handled::Done`] when there is
    /// nothing to take, [`Handled::Retry`] when the API cannot answer. The object is parsed as
    /// its kind once, here.
    pub(crate) async fn fresh(ctx: &Context, offered: &Offer) -> Result<Self, Handled> {
        let kind = T::LIFECYCLE_KIND;
        let (name, rerun) = match offered {
            Offer::Waiting(object) => (object.metadata.name.clone().ok_or(Handled::Done)?, None),
            Offer::Rerun(rerun) => (rerun.key.name.clone(), Some(rerun)),
        };
        let key = ObjectKey::new(kind, ctx.namespace.clone(), name.clone());
        if ctx.engine.owns(&key) {
            return Err(Handled::Done);
        }
        let worker = ctx.engine.worker(key.clone());
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.api_resource());
        let object = match api.get_opt(&name).await {
            Ok(Some(object)) => object,
            Ok(None) => return Err(Handled::Done),
            Err(e) => {
                tracing::debug!(object = %key, error = %e, "reading the object again failed; it is offered again later");
                return Err(Handled::Retry);
            }
        };
        let json = serde_json::to_value(&object).unwrap_or(Value::Null);
        let phase = Phase::of(kind, &json);
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let takeable = match rerun {
            None => phase.is_waiting(),
            Some(rerun) => {
                phase.is_rerun_from()
                    && uid == rerun.uid
                    && owner_of(&json) == rerun.owner.as_deref()
            }
        };
        if !takeable || object.metadata.deletion_timestamp.is_some() {
            return Err(Handled::Done);
        }
        let rerun = rerun.map(|rerun| RerunOf {
            attempt: rerun.attempt,
            interrupted: rerun.interrupted.clone(),
            started: json
                .pointer("/status/startTimestamp")
                .and_then(Value::as_str)
                .and_then(|t| t.parse().ok()),
        });
        let typed = T::deserialize(&json)
            .map_err(|e| format!("the {} cannot be read: {e}", kind.api_resource().kind));
        Ok(Self {
            name,
            key,
            resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
            phase,
            uid,
            json,
            object: typed,
            _worker: worker,
            rerun,
        })
    }

    /// When the work started: now, or for a rerun when its first attempt started.
    pub(crate) fn started(&self, now: jiff::Timestamp) -> jiff::Timestamp {
        self.rerun.as_ref().and_then(|r| r.started).unwrap_or(now)
    }

    /// `update` (to `InProgress`) as the write that takes this object: a claim of a waiting
    /// object, or for a rerun a take-over that records the attempt and why the earlier ones
    /// ended.
    pub(crate) fn claim(&self, update: StatusUpdate) -> StatusUpdate {
        let update = match &self.rerun {
            None => update.claim(),
            Some(rerun) => update
                .take_over()
                .annotation(HAWSER_ATTEMPT, rerun.attempt.to_string())
                .annotation(
                    HAWSER_INTERRUPTED_ATTEMPTS,
                    serde_json::to_string(&rerun.interrupted).unwrap_or_default(),
                ),
        };
        self.first_write(update)
    }

    /// For a rerun, the line its log starts with: that the work is run again, and why.
    pub(crate) fn resumed_note(&self) -> Option<String> {
        self.rerun.as_ref().map(|rerun| {
            format!(
                "this {} was interrupted and is run again from the start (attempt {}): {}",
                self.key.kind,
                rerun.attempt,
                rerun.interrupted.join("; ")
            )
        })
    }

    /// The final status of work that fails validation: `FailedValidation` with `messages` for a
    /// waiting object; `Failed` for a rerun (it was started, and validation failed when it was
    /// taken up again).
    pub(crate) fn refused(&self, messages: Vec<String>, now: jiff::Timestamp) -> StatusUpdate {
        let update = match &self.rerun {
            None => self
                .update(Phase::failed_validation(self.key.kind))
                .status(&SharedStatus {
                    validation_errors: Some(messages),
                    ..SharedStatus::default()
                }),
            Some(_) => self
                .update(Phase::failed(self.key.kind))
                .status(&SharedStatus {
                    failure_reason: Some(format!(
                        "the interrupted {} could not be run again: {}",
                        self.key.kind,
                        messages.join("; ")
                    )),
                    completion_timestamp: Some(Time(now)),
                    ..SharedStatus::default()
                }),
        };
        self.first_write(update)
    }

    /// Whether this is interrupted work run again.
    pub(crate) fn is_rerun(&self) -> bool {
        self.rerun.is_some()
    }

    /// A status update of this object moving it to `phase` (a phase of its kind).
    pub(crate) fn update(&self, phase: impl Into<Phase>) -> StatusUpdate {
        StatusUpdate::new(
            self.key.namespace.clone(),
            self.key.name.clone(),
            phase.into(),
        )
        .for_uid(self.uid.clone())
    }

    /// Writes `status.progress` of this object while `rx` changes (see [`report_progress`]),
    /// as `report` makes an `InProgress` update say it.
    pub(crate) fn report_progress<P>(
        &self,
        ctx: Arc<Context>,
        rx: watch::Receiver<P>,
        report: Report<P>,
    ) -> tokio::task::JoinHandle<()>
    where
        P: Clone + PartialEq + Default + Send + Sync + 'static,
    {
        let template = self.update(Phase::in_progress(self.key.kind));
        tokio::spawn(report_progress(ctx, template, rx, report))
    }

    /// Writes the outcome recorded for this very object (same uid), when this waiting object
    /// has one: its status was removed by a client after the work had ended (see
    /// [`StatusUpdate::restoring_record`]), and the work must not run again. True when the
    /// object was settled so. A record that cannot be read counts as none: validation then
    /// says what is wrong with the location.
    pub(crate) async fn settle_from_record(&self, ctx: &Context) -> bool {
        if self.is_rerun() {
            // Recovery found no record before handing it back.
            return false;
        }
        let outcome = match ctx
            .records
            .outcome_of_object(self.key.kind, &self.json)
            .await
        {
            Ok(Some(outcome)) => outcome,
            Ok(None) => return false,
            Err(e) => {
                tracing::debug!(object = %self.key, error = %hawser_core::errors::chain_text(&e), "no record read for a waiting object");
                return false;
            }
        };
        let phase = Phase::parse(self.key.kind, &outcome.phase);
        if !phase.is_final() {
            return false;
        }
        tracing::warn!(object = %self.key, phase = %phase, "the object's status was removed after its work ended; the recorded outcome is written back");
        let update = self.update(phase).fields(outcome.status).restoring_record();
        report_final(ctx.engine.write(self.first_write(update)).await, &self.key);
        true
    }

    /// `update` with the object as seen as its precondition.
    pub(crate) fn first_write(&self, update: StatusUpdate) -> StatusUpdate {
        update.observed(self.resource_version.clone(), self.phase.clone())
    }
}

/// The owner annotation of `object`.
fn owner_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(HAWSER_OWNER))
        .and_then(Value::as_str)
}

/// A fault for tests, in debug builds only: the worker of the object named by the environment
/// variable `HAWSER_TEST_PANIC_AFTER_CLAIM` panics once its claim has landed. Release builds
/// have no such hook.
#[cfg_attr(not(debug_assertions), allow(unused_variables))]
pub(crate) fn test_panic_after_claim(name: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("HAWSER_TEST_PANIC_AFTER_CLAIM").is_ok_and(|n| n == name) {
        panic!("test fault HAWSER_TEST_PANIC_AFTER_CLAIM for {name}");
    }
}

/// An outcome as it was committed: `recorded` when its record was stored (its final status is
/// then [decided by the record](StatusUpdate::decided_by_record)).
pub(crate) struct Committed<O> {
    pub(crate) outcome: O,
    pub(crate) recorded: bool,
}

impl<O> Committed<O> {
    /// `update`, marked as decided by the record when the record was stored.
    pub(crate) fn mark(&self, update: StatusUpdate) -> StatusUpdate {
        if self.recorded {
            update.decided_by_record()
        } else {
            update
        }
    }
}

/// Encodes `record` and stores it with `put`; what failed, in words, otherwise. A put that
/// failed may still have stored the record (the answer was lost): the record is read back
/// with `read`, and when the stored bytes are the ones written the record counts as stored, so
/// the object's phase and the record always agree.
pub(crate) async fn store_record<P, PutFut, R, ReadFut>(
    record: Result<Value, serde_json::Error>,
    what: &str,
    put: P,
    read: R,
) -> Result<(), String>
where
    P: FnOnce(Bytes) -> PutFut,
    PutFut: Future<Output = Result<(), String>>,
    R: FnOnce() -> ReadFut,
    ReadFut: Future<Output = Result<Option<Bytes>, String>>,
{
    let bytes = Bytes::from(
        record
            .and_then(|r| serde_json::to_vec(&r))
            .map_err(|e| format!("encoding {what} failed: {e}"))?,
    );
    let Err(e) = put(bytes.clone()).await else {
        return Ok(());
    };
    match read().await {
        Ok(Some(stored)) if stored == bytes => {
            tracing::info!(record = what, error = %e, "storing the record answered with an error, but it was stored");
            Ok(())
        }
        _ => Err(e),
    }
}

/// Shortest time between two `status.progress` writes of one object.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Makes an `InProgress` status update report a progress: its `status.progress`, and the
/// phase the work is in (`InProgress`, or a Restore's `Finalizing`).
pub(crate) type Report<P> = fn(StatusUpdate, &P) -> StatusUpdate;

/// Writes `status.progress` (as `report` makes the update say it) when it changed, at most every
/// [`PROGRESS_INTERVAL`], until aborted or the sender is dropped. Each write is one attempt,
/// paused after a transient failure
/// ([`StatusEngine::write_progress`](hawser_status::StatusEngine::write_progress)); a report
/// that is not stored (the phase table refuses it, say) is replaced by the next one.
async fn report_progress<P>(
    ctx: Arc<Context>,
    template: StatusUpdate,
    mut rx: watch::Receiver<P>,
    report: Report<P>,
) where
    P: Clone + PartialEq + Default + Send + Sync + 'static,
{
    let mut last = P::default();
    loop {
        tokio::time::sleep(PROGRESS_INTERVAL).await;
        if rx.changed().await.is_err() {
            return;
        }
        let now = rx.borrow_and_update().clone();
        if now == last {
            continue;
        }
        let key = template.key().clone();
        let update = report(template.clone(), &now);
        match ctx.engine.write_progress(update).await {
            ProgressWrite::Stored => last = now,
            ProgressWrite::Paused => {}
            ProgressWrite::Failed(why) => {
                tracing::debug!(object = %key, error = %why, "progress not stored");
            }
        }
    }
}

/// Logs the result of a final status write; true when it landed or the re-driver holds it.
pub(crate) fn report_final(result: Result<Landing, WriteError>, key: &ObjectKey) -> bool {
    match result {
        Ok(landing) => {
            tracing::info!(object = %key, attempts = landing.attempts, "final status stored");
            true
        }
        Err(e) if e.is_pending() => {
            tracing::warn!(object = %key, "final status not stored yet; the re-driver keeps trying");
            true
        }
        Err(e) => {
            tracing::warn!(object = %key, category = e.category(), error = %e, "final status not stored");
            false
        }
    }
}

/// The final status fields of a record (its `status` without `phase`).
pub(crate) fn record_status(record: Option<&Value>) -> serde_json::Map<String, Value> {
    record
        .and_then(|r| r.get("status"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}
