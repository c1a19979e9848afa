//! The background re-driver: final statuses that did not land by the deadline.
//!
//! Each pending status gets a task that waits one jittered cap interval (or the server's
//! `Retry-After`, when longer), makes one attempt with the full request timeout, and repeats until
//! the status lands, the object is deleted, the API refuses it permanently, or the object has
//! moved to a phase the transition table does not allow leaving for this status (then the pending
//! status is dropped and logged). A semaphore bounds the re-driver's requests in flight. A newer
//! write for the same object cancels the pending one. A server that steps down keeps only the
//! statuses a stored record decides ([`Redriver::keep_decided`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::engine::Inner;
use super::error::Class;
use super::journal::PendingStatus;
use super::kind::ObjectKey;
use super::update::StatusUpdate;
use super::writer::AttemptState;
use crate::metrics::StatusMetrics;

/// One pending status: its task's id and handle, and whether a stored record decides it.
struct Entry {
    id: u64,
    task: AbortHandle,
    decided: bool,
    /// The phase it is to store, and when it was handed over (for [`Redriver::list`]).
    phase: String,
    since: jiff::Timestamp,
}

pub(crate) struct Redriver {
    entries: Mutex<HashMap<ObjectKey, Entry>>,
    next_id: AtomicU64,
    permits: Arc<Semaphore>,
}

impl Redriver {
    pub(crate) fn new(concurrency: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            permits: Arc::new(Semaphore::new(concurrency)),
        }
    }

    pub(crate) fn contains(&self, key: &ObjectKey) -> bool {
        self.entries
            .lock()
            .map(|e| e.contains_key(key))
            .unwrap_or(false)
    }

    /// The pending statuses, oldest first.
    pub(crate) fn list(&self) -> Vec<PendingStatus> {
        let mut list: Vec<PendingStatus> = self
            .entries
            .lock()
            .map(|entries| {
                entries
                    .iter()
                    .map(|(key, entry)| PendingStatus {
                        key: key.clone(),
                        phase: entry.phase.clone(),
                        since: entry.since,
                    })
                    .collect()
            })
            .unwrap_or_default();
        list.sort_by(|a, b| (a.since, &a.key).cmp(&(b.since, &b.key)));
        list
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Drop the pending status of `key`, if any (a newer write supersedes it).
    pub(crate) fn cancel(&self, key: &ObjectKey, metrics: &StatusMetrics) {
        let removed = self.entries.lock().ok().and_then(|mut e| e.remove(key));
        if let Some(entry) = removed {
            entry.task.abort();
            metrics.pending_dec(key.kind);
            tracing::debug!(object = %key, "pending status replaced by a newer write");
        }
    }

    /// Remove the entry of a finished task (only if it is still that task's).
    fn finished(&self, key: &ObjectKey, id: u64, metrics: &StatusMetrics) {
        if let Ok(mut e) = self.entries.lock()
            && e.get(key).is_some_and(|entry| entry.id == id)
        {
            e.remove(key);
            metrics.pending_dec(key.kind);
        }
    }

    /// Drops every pending status that no stored record decides (see
    /// [`StatusUpdate::decided_by_record`]); returns how many were dropped. Called when the
    /// server steps down: such a status (a `FailedValidation`, a `Failed` written for lack of a
    /// record) is the leader's to decide, and the next leader decides it again.
    pub(crate) fn keep_decided(&self, metrics: &StatusMetrics) -> usize {
        let Ok(mut entries) = self.entries.lock() else {
            return 0;
        };
        let before = entries.len();
        entries.retain(|key, entry| {
            if !entry.decided {
                entry.task.abort();
                metrics.pending_dec(key.kind);
                tracing::info!(object = %key, "pending status dropped: no stored record decides it, and this server no longer leads");
            }
            entry.decided
        });
        before - entries.len()
    }

    /// Take over `update` after the reconcile path's deadline.
    pub(crate) fn hand_over(
        inner: &Arc<Inner>,
        update: StatusUpdate,
        state: AttemptState,
        start: Instant,
        attempts: u32,
    ) {
        let key = update.key.clone();
        let id = inner.redriver.next_id.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("redrive", object = %key, phase = %update.phase());
        let Ok(mut entries) = inner.redriver.entries.lock() else {
            tracing::error!(object = %key, "re-driver state poisoned; pending status not taken over");
            return;
        };
        let decided = update.decided;
        let phase = update.phase().to_string();
        // Spawned while the map is locked, so the task cannot finish before its entry exists.
        let task =
            tokio::spawn(run(inner.clone(), update, state, start, attempts, id).instrument(span));
        let entry = Entry {
            id,
            task: task.abort_handle(),
            decided,
            phase,
            since: inner.config.clock.now(),
        };
        if let Some(old) = entries.insert(key.clone(), entry) {
            old.task.abort();
        } else {
            inner.metrics.pending_inc(key.kind);
        }
    }
}

async fn run(
    inner: Arc<Inner>,
    update: StatusUpdate,
    mut state: AttemptState,
    start: Instant,
    mut attempts: u32,
    id: u64,
) {
    let key = update.key.clone();
    let mut retry_after: Option<Duration> = None;
    // After a first 409 the object is read again at once: the conflict says it changed, not
    // that the API server is in trouble. Conflicts in a row wait as usual.
    let mut conflicts_in_a_row = 0u32;
    loop {
        let wait = match inner.rng.lock() {
            _ if conflicts_in_a_row == 1 => Duration::ZERO,
            Ok(mut r) => inner.policy.backoff.steady_delay(retry_after, &mut *r),
            Err(p) => inner
                .policy
                .backoff
                .steady_delay(retry_after, &mut *p.into_inner()),
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = inner.shutdown.cancelled() => break,
        }
        let Ok(_permit) = inner.redriver.permits.acquire().await else {
            break;
        };
        attempts += 1;
        let r = inner
            .attempt_once(&update, &mut state, inner.policy.request_timeout)
            .await;
        match r.as_ref().err().map(super::error::AttemptError::class) {
            Some(Class::Transient { retry_after: ra }) => {
                retry_after = ra;
                conflicts_in_a_row = 0;
            }
            Some(Class::Conflict) => {
                retry_after = None;
                conflicts_in_a_row += 1;
            }
            // Landed, stale, gone or refused: this status is settled either way.
            _ => {
                let _settled = inner.concluded(&update, &state, r, attempts, start).await;
                break;
            }
        }
        if attempts.is_multiple_of(20) {
            tracing::info!(
                attempts,
                pending_for_s = start.elapsed().as_secs(),
                "status still pending"
            );
        }
    }
    inner.redriver.finished(&key, id, &inner.metrics);
}
