//! Recovery: objects whose work was started but that no live worker of this instance owns.
//!
//! At start-up of each term of leadership and every `--status-resync-period`, list Backups and
//! Restores → keep those whose phase says the work had started and is not finished
//! (`InProgress`, `WaitingForPluginOperations*`, `Finalizing*`) → skip those owned here (a live
//! worker, a write in progress, or a pending status in the re-driver, all behind the owner
//! annotation naming this instance) → ask the [`RecordSource`] for the recorded outcome → then:
//!
//! - a final record: write it;
//! - a Backup whose record says `WaitingForPluginOperations*` or `Finalizing*` (its items are
//!   stored, its item operations were under way): hand it to the resumer set with
//!   [`StatusEngine::resume_with`] ([`Resumed::Operations`]), which goes on with its work;
//! - no record, `InProgress`, and fewer than [`StatusConfig::resume_attempts`] reruns so far:
//!   hand it to the resumer to be run again from the start ([`Resumed::Rerun`]); the attempt
//!   number and why each earlier attempt ended travel with it, and the rerun's take-over write
//!   stores them on the object (`hawser.io/attempt`, `hawser.io/interrupted-attempts`);
//! - otherwise `Failed`, with a reason saying the server restarted during the work (and, after
//!   reruns, why each attempt ended). A worker that panicked is not run again: its object is
//!   `Failed` with the panic as the reason.
//!
//! Writes go through [`StatusEngine::write`] (same deadline, re-driver, transition table).
//!
//! A record source that cannot be read (storage down, a location, Secret or backup missing)
//! leaves the object alone, with a Warning Event, and the round is tried again within one
//! backoff cap: a backup whose artifacts were written must never be reported `Failed` for that.
//! Ownership is by instance id (the `hawser.io/owner` annotation the claim writes). An object
//! owned by another instance is left alone while that instance's Lease is alive (see
//! [`super::liveness`]); once it is not, the object is an orphan like any other. Leader election
//! keeps one active server; the Leases keep two servers run without it from stealing each
//! other's work.
//!
//! [`StatusConfig::resume_attempts`]: super::StatusConfig::resume_attempts

use std::time::Duration;

use futures::StreamExt;
use hawser_api::SharedStatus;
use hawser_api::labels::{HAWSER_ATTEMPT, HAWSER_INTERRUPTED_ATTEMPTS, HAWSER_OWNER};
use hawser_api::phase::Phase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::engine::StatusEngine;
use super::error::{RecoveryError, WriteError};
use super::events::reasons;
use super::kind::{Kind, ObjectKey};
use super::metrics::Resolution;
use super::outcome::RecordSource;
use super::update::StatusUpdate;

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

/// Work recovery hands back to be done instead of resolving it (see
/// [`StatusEngine::resume_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// A Backup whose record says its item operations go on: taken up from what is stored.
    Operations(ObjectKey),
    /// An object left `InProgress` with no record by a server that is gone: run it again from
    /// the start.
    Rerun(Rerun),
}

/// An interrupted object to run again from the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    /// Which object.
    pub key: ObjectKey,
    /// Its `metadata.uid` as recovery read it: the rerun is for this object only.
    pub uid: String,
    /// Its owner annotation as recovery read it (`None`: no owner): the rerun takes the object
    /// over only while it still names that owner.
    pub owner: Option<String>,
    /// The number of the attempt about to run (2 for the first rerun).
    pub attempt: u32,
    /// Why each earlier attempt ended, oldest first.
    pub interrupted: Vec<String>,
}

/// The attempts an object records: the number of the one that ran last (1 when the
/// annotation is absent or unreadable) and why the ones before it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attempts {
    pub(crate) last: u32,
    pub(crate) interrupted: Vec<String>,
}

/// Most reasons kept from [`HAWSER_INTERRUPTED_ATTEMPTS`] (the annotation is the object's, so
/// anyone who can write the object could make it long).
const MAX_INTERRUPTED: usize = 32;

impl Attempts {
    /// Reads the annotations of `object`.
    pub(crate) fn of(object: &Value) -> Self {
        let annotation = |key: &str| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
        };
        let last = annotation(HAWSER_ATTEMPT)
            .and_then(|a| a.parse::<u32>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(1);
        let interrupted = annotation(HAWSER_INTERRUPTED_ATTEMPTS)
            .and_then(|a| serde_json::from_str::<Vec<String>>(a).ok())
            .unwrap_or_default()
            .into_iter()
            .take(MAX_INTERRUPTED)
            .collect();
        Self { last, interrupted }
    }
}

/// Why attempt `attempt` of the work ended, when the object names `owner` and this server is
/// `me`.
fn interruption(attempt: u32, owner: Option<&str>, me: &str) -> String {
    match owner {
        Some(owner) if owner == me => format!(
            "attempt {attempt} was stopped when this server ({me}) stopped leading, before its record was stored"
        ),
        Some(owner) => format!(
            "attempt {attempt} ended when its server {owner} stopped (its instance Lease expired or was released), before its record was stored"
        ),
        None => format!(
            "attempt {attempt} ended with no record stored and no server named as its owner"
        ),
    }
}

/// `failureReason` of an orphan with no record once no rerun is left: the server restarted,
/// and, when it was run more than once, why each attempt ended.
fn resume_exhausted_reason(kind: Kind, interrupted: &[String], resume_attempts: u32) -> String {
    let restarted = restart_failure_reason(kind);
    if interrupted.len() <= 1 {
        return restarted;
    }
    format!(
        "{restarted}; it was run {} times (--resume-attempts {resume_attempts}): {}",
        interrupted.len(),
        interrupted.join("; ")
    )
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

/// What ends recovery: the end of the term of leadership, or the engine's shutdown.
struct Stop(CancellationToken, CancellationToken);

impl Stop {
    async fn fired(&self) {
        tokio::select! {
            () = self.0.cancelled() => {}
            () = self.1.cancelled() => {}
        }
    }
}

/// An object in flight as recovery read it.
struct Orphan {
    key: ObjectKey,
    resource_version: String,
    uid: String,
    phase: Phase,
    owner: Option<String>,
    attempts: Attempts,
}

impl Orphan {
    /// `object` of `kind` when its work started and has not finished.
    fn of(kind: Kind, object: &Value) -> Option<Self> {
        let phase = Phase::of(kind, object);
        if !phase.is_in_flight() {
            return None;
        }
        let text = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        Some(Self {
            key: ObjectKey::new(kind, text("/metadata/namespace"), text("/metadata/name")),
            resource_version: text("/metadata/resourceVersion"),
            uid: text("/metadata/uid"),
            phase,
            owner: object["metadata"]["annotations"][HAWSER_OWNER]
                .as_str()
                .map(str::to_owned),
            attempts: Attempts::of(object),
        })
    }
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
                let Some(orphan) = Orphan::of(kind, &obj) else {
                    continue;
                };
                report.in_flight += 1;
                if self.owns(&orphan.key) {
                    report.owned += 1;
                    continue;
                }
                if let (Some(liveness), Some(owner)) = (&inner.liveness, &orphan.owner) {
                    match liveness.is_alive(owner).await {
                        Ok(true) => {
                            report.owned_elsewhere += 1;
                            continue;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(object = %orphan.key, owner, error = %e, "whether the owner is alive cannot be read; object left for the next round");
                            report.unresolved += 1;
                            continue;
                        }
                    }
                }
                orphans.push(orphan);
            }
            let results: Vec<Option<Resolution>> = futures::stream::iter(orphans)
                .map(|orphan| self.resolve_one(records, orphan))
                .buffer_unordered(inner.config.redrive_concurrency.max(1))
                .collect()
                .await;
            for resolution in results {
                // `None`: left for the next round.
                let Some(resolution) = resolution else {
                    report.unresolved += 1;
                    continue;
                };
                *match resolution {
                    Resolution::FromRecord => &mut report.from_record,
                    Resolution::Resumed => &mut report.resumed,
                    Resolution::FailedWithoutRecord => &mut report.failed_without_record,
                } += 1;
                inner.metrics.recovered(kind, resolution);
            }
        }
        if report.in_flight > report.owned {
            tracing::info!(?report, "recovery round");
        }
        Ok(report)
    }

    /// Sends `resumed` to the resumer; false when there is none (or it is gone).
    fn hand_back(&self, resumed: Resumed) -> bool {
        self.inner
            .resumer
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.send(resumed).is_ok()))
            .unwrap_or(false)
    }

    /// Resolves one orphan; how, or `None` when it is left for the next round.
    async fn resolve_one<R: RecordSource + ?Sized>(
        &self,
        records: &R,
        orphan: Orphan,
    ) -> Option<Resolution> {
        let Orphan {
            key,
            resource_version,
            uid,
            phase,
            owner,
            attempts,
        } = orphan;
        let record = match records.outcome(key.kind, &key.namespace, &key.name).await {
            Ok(r) => {
                let r = r.map(|o| (Phase::parse(key.kind, &o.phase), o.status));
                if let Some((recorded, _)) = &r
                    && is_resumable(recorded)
                    && self.hand_back(Resumed::Operations(key.clone()))
                {
                    tracing::info!(object = %key, recorded = %recorded, "the record says the work can go on; it is taken up again");
                    return Some(Resolution::Resumed);
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
                return None;
            }
        };
        let abandoned = self
            .inner
            .abandoned
            .lock()
            .ok()
            .and_then(|mut a| a.remove(&key));
        let resume_attempts = self.inner.config.resume_attempts;
        let mut interrupted = attempts.interrupted;
        if record.is_none() && abandoned.is_none() {
            interrupted.push(interruption(
                attempts.last,
                owner.as_deref(),
                self.instance_id(),
            ));
            let rerun = || Rerun {
                key: key.clone(),
                uid: uid.clone(),
                owner: owner.clone(),
                attempt: attempts.last.saturating_add(1),
                interrupted: interrupted.clone(),
            };
            if phase.is_rerun_from()
                && attempts.last <= resume_attempts
                && self.hand_back(Resumed::Rerun(rerun()))
            {
                tracing::warn!(object = %key, attempt = attempts.last + 1, "interrupted with no record; it is run again");
                return Some(Resolution::Resumed);
            }
        }
        // The reason written when there is no record (None: the record decides).
        let unrecorded = record.is_none().then(|| match abandoned {
            Some(why) => abandoned_failure_reason(key.kind, &why),
            None => resume_exhausted_reason(key.kind, &interrupted, resume_attempts),
        });
        let update = match (record, &unrecorded) {
            (Some((recorded, status)), _) => StatusUpdate::for_key(key.clone(), recorded)
                .fields(status)
                .decided_by_record(),
            (None, reason) => {
                StatusUpdate::for_key(key.clone(), Phase::failed(key.kind)).status(&SharedStatus {
                    failure_reason: Some(reason.clone().unwrap_or_default()),
                    completion_timestamp: Some(Time(self.inner.config.clock.now())),
                    ..SharedStatus::default()
                })
            }
        }
        .observed(resource_version, phase.clone())
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
                    Some(Resolution::FromRecord)
                } else {
                    Some(Resolution::FailedWithoutRecord)
                }
            }
            Err(WriteError::Gone { .. }) => None,
            Err(e) => {
                tracing::warn!(object = %key, category = e.category(), error = %e, "orphan not resolved this round");
                None
            }
        }
    }

    /// Runs recovery at once and then every `--status-resync-period` until `stop` fires (the
    /// server stops leading) or [`shutdown`](Self::shutdown).
    ///
    /// While it runs, this instance's Lease is renewed every heartbeat (other instances read it
    /// to tell whether the objects this one owns are still worked on); it is deleted on return
    /// (best effort: a Lease that cannot be deleted expires after three heartbeats).
    pub async fn run_recovery<R: RecordSource>(&self, records: R, stop: CancellationToken) {
        let heartbeat = self.inner.liveness.clone().map(|liveness| {
            let stop = Stop(stop.clone(), self.inner.shutdown.clone());
            tokio::spawn(async move {
                loop {
                    if let Err(e) = liveness.beat().await {
                        tracing::warn!(error = %e, "renewing this instance's Lease failed; trying again");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(liveness.interval()) => {}
                        () = stop.fired() => break,
                    }
                }
                liveness.release().await;
            })
        });
        let stop = Stop(stop, self.inner.shutdown.clone());
        self.recovery_rounds(&records, &stop).await;
        if let Some(heartbeat) = heartbeat {
            let _ = heartbeat.await;
        }
    }

    async fn recovery_rounds<R: RecordSource>(&self, records: &R, stop: &Stop) {
        let period = self
            .inner
            .config
            .resync_period
            .max(Duration::from_millis(100));
        // A round that left work undecided is tried again within one backoff cap, not a whole
        // resync period later.
        let soon = period.min(self.inner.config.max_backoff);
        loop {
            let wait = tokio::select! {
                round = self.resolve_orphans(records) => match round {
                    Ok(report) if report.unresolved == 0 => period,
                    Ok(_) => soon,
                    Err(e) => {
                        tracing::warn!(category = e.category(), error = %e, "recovery round failed; retrying soon");
                        soon
                    }
                },
                () = stop.fired() => return,
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.fired() => return,
            }
        }
    }
}
