//! The work queue of the backup and restore controllers: which objects are waiting to start,
//! and running each of them once, at most `concurrency` at a time.
//!
//! Objects arrive from a watch (kube-runtime's watcher, which re-lists after every break, so an
//! API outage loses nothing), from a LIST every `--status-resync-period`, and from the workers
//! themselves: a worker that could not start its object because the API did not answer (reading
//! it, validating it, or writing its claim, e.g. during an outage) hands it back
//! ([`Handled::Retry`]) and it is offered again after [`retry_delay`] (1 s, doubling up to
//! [`MAX_RETRY_DELAY`]), so it starts soon after the API answers again whatever the resync
//! period. An object is waiting while
//! its phase is unset or `New` (Backups also `Queued` and `ReadyToStart`, the phases a Velero
//! queue leaves behind); objects being deleted are left alone. Each waiting object is handled by
//! one task; an object already taken is not taken again until its task ends.
//!
//! Recovery hands a queue the interrupted objects to run again ([`Offer::Rerun`]): they take
//! a concurrency slot like any other, skip the backup queue's reservations, and one that cannot
//! start is left to recovery's next round.
//!
//! Objects are read one at a time as untyped JSON ([`crate::tolerant`]), so that one malformed
//! object cannot stop the watch of the others: the handler parses it and reports a malformed
//! one on the object itself, and one that is not even JSON the server can parse (nested
//! deeper than the parser's limit) is made `FailedValidation` here when it waits to start.
//!
//! A worker that panics ends its own task only: its object's guard is dropped, the object is
//! offered again (if it still waits) or resolved by recovery (if it was started), with the
//! panic as the reason when there is no record; the server goes on.
//!
//! Shutdown: when the server's shutdown token fires the queue stops offering (no new object is
//! taken, and a task still waiting for a concurrency slot gives up), while the tasks already
//! running go on in [`Workers`], which the server waits for up to `--shutdown-grace-period`
//! and then aborts.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::panic::AssertUnwindSafe;

use futures::{FutureExt as _, StreamExt};
use hawser_api::phase::Phase;
use hawser_status::tolerant::{Tolerant, Unreadable};
use hawser_status::{Kind, ObjectKey, Rerun, WriteError};
use kube::Api;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::context::Context;

/// How long one watch request lasts (`timeoutSeconds`): below the client's read timeout
/// ([`crate::serve`]'s 30 s), which would otherwise cut a watch on which nothing happens.
const WATCH_TIMEOUT_SECONDS: u32 = 25;
/// Longest wait before an object handed back by its worker is offered again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);

use crate::readiness::Watch;

/// What became of an object its worker took up.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handled {
    /// Its work is over, or there was nothing to take (it no longer waits, or another worker
    /// has it).
    Done,
    /// It still waits: the API did not answer while it was being started. It is offered again
    /// after a delay.
    Retry,
}

impl Handled {
    /// What becomes of an object whose claim (or other first write) did not land: offered again
    /// soon when the API did not answer in time; otherwise left to the watch and the periodic
    /// LIST (it changed or went away meanwhile, or the API refuses the write for good, which a
    /// quick retry would not change).
    pub(crate) fn after_failed_claim(error: &WriteError) -> Self {
        match error {
            WriteError::Expired { .. } => Self::Retry,
            _ => Self::Done,
        }
    }
}

/// How long an object handed back for the `attempt`-th time (from 0) waits before it is
/// offered again.
fn retry_delay(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(8)).min(MAX_RETRY_DELAY)
}

/// The tasks of every queue, one per object taken: shutdown waits for them, then aborts what
/// is left. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Workers {
    tracker: TaskTracker,
    abort: CancellationToken,
}

impl Workers {
    /// Runs `work` as a tracked task that [`abort`](Self::abort) ends.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let abort = self.abort.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                () = abort.cancelled() => {}
                () = work => {}
            }
        });
    }

    /// Tasks still running.
    pub(crate) fn running(&self) -> usize {
        self.tracker.len()
    }

    /// Waits up to `grace` for every task to end (call once no queue offers any more); `false`
    /// when some still run.
    pub(crate) async fn finish(&self, grace: Duration) -> bool {
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
    }

    /// Ends every task (their work is dropped where it stands) and waits until they are gone.
    pub(crate) async fn abort(&self) {
        self.abort.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Removes an object's name from the queue's taken set when dropped (also while a panic
/// unwinds), so that it can be offered again.
struct Offered {
    taken: Arc<Mutex<HashSet<String>>>,
    name: String,
}

impl Drop for Offered {
    fn drop(&mut self) {
        if let Ok(mut taken) = self.taken.lock() {
            taken.remove(&self.name);
        }
    }
}

/// The message of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// An object handed back by its worker, and how many times it has been so far.
type Retry = (DynamicObject, u32);

/// What a queue hands its handler.
pub(crate) enum Offer {
    /// An object waiting to start, as the watch or a LIST delivered it.
    Waiting(Box<DynamicObject>),
    /// An object whose work was interrupted, which recovery hands back to be run again.
    Rerun(Rerun),
}

struct Queue<H> {
    ctx: Arc<Context>,
    kind: Kind,
    permits: Arc<Semaphore>,
    taken: Arc<Mutex<HashSet<String>>>,
    handle: H,
    retries: tokio::sync::mpsc::UnboundedSender<Retry>,
}

impl<H, F> Queue<H>
where
    H: Fn(Arc<Context>, Offer) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Handled> + Send + 'static,
{
    /// An object as a watch or a LIST delivered it.
    fn offer_read(&self, object: Tolerant) {
        match object {
            Tolerant::Read(object) => self.offer(object, 0),
            Tolerant::Unreadable(unreadable) => self.refuse_unreadable(unreadable),
        }
    }

    /// Takes up `object` if it waits and is not taken already; `attempt` counts the times its
    /// worker handed it back before.
    fn offer(&self, object: DynamicObject, attempt: u32) {
        let Some(name) = object.metadata.name.clone() else {
            return;
        };
        if object.metadata.deletion_timestamp.is_some()
            || !Phase::of(self.kind, &object.data).is_waiting()
        {
            return;
        }
        self.take(name, Offer::Waiting(Box::new(object)), attempt);
    }

    /// Ends an object that cannot be read as JSON (see [`crate::tolerant`]) `FailedValidation`
    /// when it waits to start, naming the parser's error; one merge patch, with the
    /// resourceVersion read, in a task of its own. Its text is not logged.
    fn refuse_unreadable(&self, unreadable: Unreadable) {
        let id = unreadable.id();
        let waiting = Phase::parse(self.kind, &unreadable.phase).is_waiting();
        let (Some(name), Some(version)) = (
            unreadable.metadata.name.clone(),
            unreadable.metadata.resource_version.clone(),
        ) else {
            tracing::warn!(kind = %self.kind, object = %id, error = %unreadable.error, "an object cannot be read, nor its name and resourceVersion; it is left as it is");
            return;
        };
        if !waiting || unreadable.metadata.deletion_timestamp.is_some() {
            tracing::debug!(kind = %self.kind, object = %id, error = %unreadable.error, "an object that does not wait to start cannot be read");
            return;
        }
        let (ctx, kind) = (self.ctx.clone(), self.kind);
        self.ctx.workers.spawn(async move {
            // The answer holds the object again: it is read as tolerantly.
            let api: Api<Tolerant> =
                Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.api_resource());
            let why = format!(
                "the {} cannot be read: {}",
                kind.api_resource().kind,
                unreadable.error
            );
            let patch = json!({
                "metadata": {"resourceVersion": version},
                "status": {"phase": Phase::failed_validation(kind).as_str(), "validationErrors": [why]},
            });
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            match crate::objects::retried(&ctx, || api.patch(&name, &params, &patch)).await {
                Ok(_) => tracing::warn!(%kind, object = %id, error = %unreadable.error, "an object that cannot be read is FailedValidation"),
                Err(e) => tracing::info!(%kind, object = %id, error = %e, "marking an unreadable object FailedValidation failed; the next LIST tries again"),
            }
        });
    }

    /// Takes up the interrupted object `rerun` names (its handler checks that it is still
    /// the object recovery found). A rerun is not queued behind other backups, and one that
    /// cannot start is left to recovery, which hands it back at its next round.
    fn offer_rerun(&self, rerun: Rerun) {
        let name = rerun.key.name.clone();
        self.take(name, Offer::Rerun(rerun), 0);
    }

    /// Runs `offer` (of the object `name`) in a worker task unless the object is taken.
    fn take(&self, name: String, offer: Offer, attempt: u32) {
        let fresh = self
            .taken
            .lock()
            .is_ok_and(|mut taken| taken.insert(name.clone()));
        if !fresh {
            return;
        }
        let kind = self.kind;
        let (permits, taken, handle, ctx, retries) = (
            self.permits.clone(),
            self.taken.clone(),
            self.handle.clone(),
            self.ctx.clone(),
            self.retries.clone(),
        );
        let span = tracing::info_span!("work", kind = %self.kind, object = %name);
        let key = ObjectKey::new(self.kind, ctx.namespace.clone(), name.clone());
        self.ctx.workers.spawn(
            async move {
                // Offered again once this task ends, however it ends.
                let _offered = Offered { taken, name };
                // A Backup is queued first (Velero's backup queue): it waits for the backups
                // admitted before it that share a namespace with it.
                let _reserved = match (kind, &offer) {
                    (Kind::Backup, Offer::Waiting(object)) => {
                        let json = serde_json::to_value(&**object).unwrap_or_default();
                        match ctx.backup_queue.admit(&ctx, &json).await {
                            Some(reservation) => Some(reservation),
                            None => return,
                        }
                    }
                    _ => None,
                };
                // Once shutdown has begun nothing new starts, not even an object taken before.
                let permit = tokio::select! {
                    permit = permits.acquire_owned() => permit.ok(),
                    () = ctx.shutdown.cancelled() => None,
                };
                if let Some(_permit) = permit
                    && !ctx.shutdown.is_cancelled()
                {
                    let (engine, shutdown) = (ctx.engine.clone(), ctx.shutdown.clone());
                    let again = match &offer {
                        Offer::Waiting(object) => Some((**object).clone()),
                        Offer::Rerun(_) => None,
                    };
                    let work = AssertUnwindSafe(handle(ctx, offer)).catch_unwind();
                    match (work.await, again) {
                        (Ok(Handled::Done), _) | (Ok(Handled::Retry), None) => {}
                        (Ok(Handled::Retry), Some(object)) => {
                            // Offered again from the queue's loop once this task has ended.
                            tokio::spawn(async move {
                                tokio::select! {
                                    () = shutdown.cancelled() => {}
                                    () = tokio::time::sleep(retry_delay(attempt)) => {
                                        let _closed = retries.send((object, attempt + 1));
                                    }
                                }
                            });
                        }
                        (Err(panic), _) => {
                            // The worker's guard is dropped: recovery resolves the object at
                            // its next round, from its record or as Failed with this reason.
                            let why = panic_text(panic.as_ref());
                            tracing::error!(object = %key, panic = %why, "a worker panicked; recovery resolves its object");
                            engine.abandon(key, &why);
                        }
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// Runs the queue of `kind` until the server stops leading or shuts down; `handle` runs one
/// waiting object, or one interrupted object that recovery hands back on `reruns`, as a task
/// of the context's workers.
pub(crate) async fn run<H, F>(
    ctx: Arc<Context>,
    kind: Kind,
    concurrency: usize,
    handle: H,
    health: Watch,
    mut reruns: tokio::sync::mpsc::UnboundedReceiver<Rerun>,
) where
    H: Fn(Arc<Context>, Offer) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Handled> + Send + 'static,
{
    // Read one object at a time: one that cannot be parsed fails neither the watch nor the LIST.
    let api: Api<Tolerant> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.api_resource());
    let (retries, mut handed_back) = tokio::sync::mpsc::unbounded_channel();
    let queue = Queue {
        ctx: ctx.clone(),
        kind,
        permits: Arc::new(Semaphore::new(concurrency.max(1))),
        taken: Arc::default(),
        handle,
        retries,
    };
    // The API server ends each watch before the client's read timeout would cut it: a quiet
    // watch is renewed, not broken (and readiness does not flap).
    let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECONDS);
    let events = watcher::watcher(api.clone(), config).default_backoff();
    let mut events = std::pin::pin!(events);
    let mut sweep = tokio::time::interval(ctx.settings.status.resync_period);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = ctx.shutdown.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(Event::Apply(o) | Event::InitApply(o))) => {
                    health.up();
                    queue.offer_read(o);
                }
                Some(Ok(Event::Init)) => {}
                Some(Ok(Event::InitDone | Event::Delete(_))) => health.up(),
                Some(Err(e)) => {
                    health.down();
                    tracing::warn!(%kind, error = %e, "watching failed; the watch starts again after a backoff");
                }
                None => return,
            },
            Some((o, attempt)) = handed_back.recv() => queue.offer(o, attempt),
            Some(rerun) = reruns.recv() => queue.offer_rerun(rerun),
            _ = sweep.tick() => match api.list(&ListParams::default()).await {
                Ok(list) => {
                    match kind {
                        Kind::Backup => ctx.metrics.backup_count(list.items.len()),
                        Kind::Restore => ctx.metrics.restore_count(list.items.len()),
                    }
                    for o in list.items {
                        queue.offer_read(o);
                    }
                }
                Err(e) => tracing::debug!(%kind, error = %e, "periodic list failed; the next one tries again"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A task of `workers` that sets its flag after `after`.
    fn job(workers: &Workers, after: Duration) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        workers.spawn(async move {
            tokio::time::sleep(after).await;
            flag.store(true, Ordering::SeqCst);
        });
        done
    }

    #[test]
    fn only_a_claim_that_ran_out_of_time_is_offered_again_soon() {
        let unanswered = || hawser_status::AttemptError::TimedOut(Duration::from_secs(1));
        let (kind, namespace, name) = ("backup", "velero".to_owned(), "b".to_owned());
        let expired = WriteError::Expired {
            kind,
            namespace: namespace.clone(),
            name: name.clone(),
            attempts: 3,
            source: unanswered(),
        };
        assert_eq!(Handled::after_failed_claim(&expired), Handled::Retry);
        let refused = WriteError::Rejected {
            kind,
            namespace: namespace.clone(),
            name: name.clone(),
            source: unanswered(),
        };
        let gone = WriteError::Gone {
            kind,
            namespace,
            name,
        };
        for settled in [refused, gone] {
            assert_eq!(
                Handled::after_failed_claim(&settled),
                Handled::Done,
                "{settled}"
            );
        }
        assert_eq!(retry_delay(0), Duration::from_secs(1));
        assert_eq!(retry_delay(3), Duration::from_secs(8));
        assert_eq!(retry_delay(4), MAX_RETRY_DELAY);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn running_work_may_finish_within_the_grace_and_is_aborted_after_it() {
        let grace = Duration::from_secs(60);
        let workers = Workers::default();
        let short = job(&workers, Duration::from_secs(5));
        assert_eq!(workers.running(), 1);
        let started = tokio::time::Instant::now();
        assert!(workers.finish(grace).await);
        assert!(short.load(Ordering::SeqCst));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(5),
            "waited only for the work"
        );

        let workers = Workers::default();
        let quick = job(&workers, Duration::from_secs(1));
        let long = job(&workers, Duration::from_secs(600));
        let started = tokio::time::Instant::now();
        assert!(!workers.finish(grace).await);
        assert_eq!(started.elapsed(), grace);
        assert!(quick.load(Ordering::SeqCst));
        assert_eq!(workers.running(), 1);
        workers.abort().await;
        assert_eq!(workers.running(), 0);
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(!long.load(Ordering::SeqCst), "aborted work went on");
    }
}
