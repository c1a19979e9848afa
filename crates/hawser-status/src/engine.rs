//! [`StatusEngine`]: the one place Backup/Restore statuses are written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hawser_core::backoff::{Backoff, DEFAULT_JITTER, DeadlinePolicy};
use hawser_core::clock::Clock;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::StatusApi;
use super::error::{AttemptError, Class, WriteError};
use super::events::{Events, reasons};
use super::kind::ObjectKey;
use super::liveness::{Liveness, heartbeat};
use super::recovery::Resumed;
use super::redriver::Redriver;
use super::retry::{Finish, until_deadline};
use super::update::StatusUpdate;
use super::writer::{AttemptState, Step, Writer};
use crate::metrics::{AttemptOutcome, StatusMetrics};

/// Settings of the status engine (from `hawser server` flags).
#[derive(Debug, Clone)]
pub struct StatusConfig {
    /// Names this server instance in the owner annotation (random per process by default).
    pub instance_id: String,
    /// `--resource-timeout`: the deadline of the reconcile path's retries (Velero default 10m).
    pub resource_timeout: Duration,
    /// `--status-patch-max-backoff`: the cap of the backoff and the re-driver's interval.
    pub max_backoff: Duration,
    /// Longest time one request may take (shortened to the time left before the deadline).
    pub request_timeout: Duration,
    /// `--status-resync-period`: how often recovery looks for orphaned objects.
    pub resync_period: Duration,
    /// Namespace holding Backups/Restores (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Most re-driver requests in flight at once (bounds the server's request rate).
    pub redrive_concurrency: usize,
    /// Seed of the jitter RNG (`None`: from the OS).
    pub rng_seed: Option<u64>,
    /// The clock of the timestamps the engine writes (`completionTimestamp` of recovered
    /// objects); the server's one clock.
    pub clock: Clock,
    /// `--resume-attempts`: how many times recovery hands an interrupted object (left
    /// `InProgress` without a record by a server that is gone) back to be run again, before it
    /// is `Failed` with every attempt's reason. Only with a resumer
    /// ([`StatusEngine::resume_with`]); 0 fails it at once.
    pub resume_attempts: u32,
}

impl Default for StatusConfig {
    fn default() -> Self {
        Self {
            instance_id: format!("hawser-{}", uuid::Uuid::new_v4()),
            resource_timeout: hawser_core::backoff::DEFAULT_RESOURCE_TIMEOUT,
            max_backoff: hawser_core::backoff::DEFAULT_MAX_BACKOFF,
            request_timeout: hawser_core::backoff::DEFAULT_REQUEST_TIMEOUT,
            resync_period: Duration::from_secs(60),
            namespace: None,
            redrive_concurrency: 16,
            rng_seed: None,
            clock: Clock::system(),
            resume_attempts: 0,
        }
    }
}

impl StatusConfig {
    /// The deadline policy these settings describe.
    #[must_use]
    pub fn policy(&self) -> DeadlinePolicy {
        DeadlinePolicy {
            backoff: Backoff {
                jitter: DEFAULT_JITTER,
                ..Backoff::with_max(self.max_backoff)
            },
            timeout: self.resource_timeout,
            request_timeout: self.request_timeout,
            min_request_timeout: Duration::from_millis(100).min(self.request_timeout),
        }
    }
}

/// A status that was stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Landing {
    /// Attempts it took (reconcile path and re-driver together).
    pub attempts: u32,
    /// Time from the first attempt to the landing.
    pub elapsed: Duration,
    /// The object already had it (an earlier attempt landed but its answer was lost).
    pub already_there: bool,
    /// The object as stored.
    pub object: Value,
}

pub(crate) struct Inner {
    pub(crate) writer: Writer,
    pub(crate) config: StatusConfig,
    pub(crate) policy: DeadlinePolicy,
    pub(crate) rng: Mutex<StdRng>,
    pub(crate) metrics: StatusMetrics,
    pub(crate) events: Events,
    pub(crate) redriver: Redriver,
    /// The phases stored here, for people watching ([`StatusEngine::timeline`]).
    journal: super::journal::Journal,
    workers: Mutex<HashMap<ObjectKey, usize>>,
    /// This instance's Lease and the other instances' (only with a namespace).
    pub(crate) liveness: Option<Liveness>,
    /// Objects whose worker here stopped with a panic, with the panic's message (for the
    /// reason recovery writes when there is no record).
    pub(crate) abandoned: Mutex<HashMap<ObjectKey, String>>,
    /// When each object's next progress write may be sent.
    pub(crate) progress_pauses: super::progress::ProgressPauses,
    /// Whether this instance's Lease has been written (before its first claim).
    beaten: tokio::sync::OnceCell<()>,
    /// Where recovery hands work that goes on (see [`StatusEngine::resume_with`]).
    pub(crate) resumer: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Resumed>>>,
    pub(crate) shutdown: CancellationToken,
}

/// Writes Backup/Restore statuses with the truth guarantee (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct StatusEngine {
    pub(crate) inner: Arc<Inner>,
}

/// Marks an object as owned by a live worker of this instance while it is held; recovery
/// leaves such objects alone. Dropping it releases the object.
#[must_use = "the object counts as owned only while the guard is held"]
pub struct WorkerGuard {
    inner: Arc<Inner>,
    key: ObjectKey,
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        if let Ok(mut w) = self.inner.workers.lock()
            && let Some(n) = w.get_mut(&self.key)
        {
            *n -= 1;
            if *n == 0 {
                w.remove(&self.key);
            }
        }
    }
}

impl StatusEngine {
    /// An engine writing through `client` (build it with
    /// [`client_without_retries`](super::client_without_retries)), recording into `metrics`.
    #[must_use]
    pub fn new(client: kube::Client, config: StatusConfig, metrics: StatusMetrics) -> Self {
        let rng = config
            .rng_seed
            .map_or_else(StdRng::from_os_rng, StdRng::seed_from_u64);
        let api = StatusApi::new(client.clone(), "hawser", config.clock.clone());
        let writer = Writer::new(
            api,
            config.instance_id.clone(),
            hawser_api::labels::HAWSER_OWNER,
        );
        let events = Events::new(client.clone(), &config.instance_id, config.request_timeout);
        let redriver = Redriver::new(config.redrive_concurrency.max(1));
        let liveness = config.namespace.as_deref().map(|ns| {
            Liveness::new(
                client.clone(),
                ns,
                &config.instance_id,
                config.clock.clone(),
                heartbeat(config.resync_period),
            )
        });
        let inner = Inner {
            writer,
            policy: config.policy(),
            config,
            rng: Mutex::new(rng),
            metrics,
            events,
            redriver,
            journal: super::journal::Journal::default(),
            workers: Mutex::new(HashMap::new()),
            liveness,
            abandoned: Mutex::default(),
            progress_pauses: super::progress::ProgressPauses::default(),
            beaten: tokio::sync::OnceCell::new(),
            resumer: Mutex::new(None),
            shutdown: CancellationToken::new(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Has recovery send on `resumer`, instead of resolving it, the orphaned work that can go
    /// on ([`Resumed`]): a Backup whose record says `WaitingForPluginOperations*` or
    /// `Finalizing*`, and, up to [`StatusConfig::resume_attempts`] times, an object left
    /// `InProgress` with no record. Replaces the resumer set before (one per term of
    /// leadership); without one, such objects are resolved like any other orphan.
    pub fn resume_with(&self, resumer: tokio::sync::mpsc::UnboundedSender<Resumed>) {
        if let Ok(mut r) = self.inner.resumer.lock() {
            *r = Some(resumer);
        }
    }

    /// This server no longer leads: the statuses pending in the re-driver that a stored record
    /// decides go on landing (right from any instance), the others are dropped for the next
    /// leader to decide again, and the resumer is forgotten. Returns how many were dropped.
    pub fn step_down(&self) -> usize {
        if let Ok(mut r) = self.inner.resumer.lock() {
            *r = None;
        }
        self.inner.redriver.keep_decided(&self.inner.metrics)
    }

    /// The deadline policy of its writes (`--resource-timeout`, backoff capped at
    /// `--status-patch-max-backoff`), for other calls that retry as status writes do.
    #[must_use]
    pub fn policy(&self) -> DeadlinePolicy {
        self.inner.policy
    }

    /// The id written into the owner annotation.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        self.inner.writer.instance_id()
    }

    /// The clock the engine stamps statuses with.
    #[must_use]
    pub fn clock(&self) -> &Clock {
        &self.inner.config.clock
    }

    /// The engine's metrics.
    #[must_use]
    pub fn metrics(&self) -> &StatusMetrics {
        &self.inner.metrics
    }

    /// Register a live worker for `key` (held for as long as the work runs).
    pub fn worker(&self, key: ObjectKey) -> WorkerGuard {
        if let Ok(mut w) = self.inner.workers.lock() {
            *w.entry(key.clone()).or_insert(0) += 1;
        }
        WorkerGuard {
            inner: self.inner.clone(),
            key,
        }
    }

    /// Whether a live worker, a write in progress or the re-driver holds `key` in this instance.
    #[must_use]
    pub fn owns(&self, key: &ObjectKey) -> bool {
        let live = self
            .inner
            .workers
            .lock()
            .map(|w| w.contains_key(key))
            .unwrap_or(false);
        live || self.inner.redriver.contains(key)
    }

    /// Number of statuses held by the re-driver.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.inner.redriver.len()
    }

    /// The statuses the re-driver holds, oldest first.
    #[must_use]
    pub fn pending_statuses(&self) -> Vec<super::PendingStatus> {
        self.inner.redriver.list()
    }

    /// The phases this instance stored for `key`, oldest first, with when (bounded: see
    /// [`super::journal`]).
    #[must_use]
    pub fn timeline(&self, key: &ObjectKey) -> Vec<super::PhaseChange> {
        self.inner.journal.of(key)
    }

    /// Whether the re-driver holds a status for `key`.
    #[must_use]
    pub fn is_pending(&self, key: &ObjectKey) -> bool {
        self.inner.redriver.contains(key)
    }

    /// Stop the re-driver and every wait in progress; writes return
    /// [`WriteError::ShuttingDown`]. Pending statuses are resolved by recovery at the next start.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Store `update`, retrying until `--resource-timeout` has passed.
    ///
    /// A final status that has not landed by the deadline is handed to the background re-driver
    /// and `Err(WriteError::HandedOver)` is returned at once: the caller's work is done (check
    /// [`WriteError::is_pending`]). A non-final status returns `Err(WriteError::Expired)`. A
    /// newer update for the same object replaces a pending one.
    ///
    /// # Errors
    ///
    /// [`WriteError`]: gone (404), stale (the transition table forbids it now), rejected
    /// (400/403/422…, with a Warning Event), handed over, expired, shutting down.
    pub async fn write(&self, update: StatusUpdate) -> Result<Landing, WriteError> {
        if update.claim {
            self.heartbeat_before_first_claim().await;
        }
        let key = update.key.clone();
        if update.is_final() {
            self.inner.progress_pauses.clear(&key);
        }
        self.inner.redriver.cancel(&key, &self.inner.metrics);
        let _in_flight = self.worker(key.clone());
        let start = Instant::now();
        let state = tokio::sync::Mutex::new(AttemptState::from_update(&update));
        let inner = &self.inner;
        let finish = until_deadline(
            &inner.policy,
            &inner.rng,
            &inner.shutdown,
            start,
            |_, timeout| {
                let (u, state) = (&update, &state);
                async move {
                    let mut st = state.lock().await;
                    inner.attempt_once(u, &mut st, timeout).await
                }
            },
        )
        .await;
        let state = state.into_inner();
        match finish {
            Finish::Done { value, attempts } => {
                inner
                    .concluded(&update, &state, Ok(value), attempts, start)
                    .await
            }
            Finish::Stopped { error, attempts } => {
                inner
                    .concluded(&update, &state, Err(error), attempts, start)
                    .await
            }
            Finish::Deadline { error, attempts } => {
                if update.is_final() {
                    tracing::warn!(object = %key, phase = %update.phase(), attempts, error = %error,
                        "status not stored by the deadline; the re-driver keeps trying");
                    let err = key.handed_over(attempts, error);
                    Redriver::hand_over(&self.inner, update, state, start, attempts);
                    Err(err)
                } else {
                    tracing::warn!(object = %key, phase = %update.phase(), attempts, error = %error,
                        "non-final status not stored by the deadline");
                    Err(key.expired(attempts, error))
                }
            }
            Finish::Cancelled => Err(key.shutting_down()),
        }
    }
}

impl StatusEngine {
    /// Writes this instance's Lease once, before it first claims an object, so that no other
    /// instance takes its fresh claims for orphans (see [`Liveness`]).
    async fn heartbeat_before_first_claim(&self) {
        let Some(liveness) = &self.inner.liveness else {
            return;
        };
        self.inner
            .beaten
            .get_or_init(|| async {
                if let Err(e) = liveness.beat().await {
                    tracing::warn!(error = %e, "writing this instance's Lease failed; the next heartbeat tries again");
                }
            })
            .await;
    }
}

impl Inner {
    /// One attempt with its metric and log line.
    pub(crate) async fn attempt_once(
        &self,
        u: &StatusUpdate,
        st: &mut AttemptState,
        timeout: Duration,
    ) -> Result<Step, AttemptError> {
        let r = self.writer.attempt(u, st, timeout).await;
        if let Ok(Step::Landed(_) | Step::AlreadyLanded(_)) = &r {
            self.journal
                .record(&u.key, &u.phase().to_string(), self.config.clock.now());
        }
        let outcome = match &r {
            Ok(Step::Landed(_)) => AttemptOutcome::Landed,
            Ok(Step::AlreadyLanded(_)) => AttemptOutcome::AlreadyLanded,
            Ok(Step::Stale { .. }) => AttemptOutcome::Stale,
            Err(e) => match e.class() {
                Class::Transient { .. } => AttemptOutcome::Transient,
                Class::Conflict => AttemptOutcome::Conflict,
                Class::Gone => AttemptOutcome::Gone,
                Class::Rejected => AttemptOutcome::Rejected,
            },
        };
        self.metrics.attempt(u.key.kind, outcome);
        if let Err(e) = &r {
            tracing::debug!(object = %u.key, phase = %u.phase(), category = e.category(), error = %e, "status write attempt failed");
        }
        r
    }

    async fn landed(
        &self,
        u: &StatusUpdate,
        object: Value,
        already_there: bool,
        attempts: u32,
        elapsed: Duration,
    ) -> Landing {
        let key = &u.key;
        self.metrics.landed_after(key.kind, elapsed.as_secs_f64());
        if attempts > 1 {
            tracing::info!(object = %key, phase = %u.phase(), attempts, elapsed_ms = elapsed.as_millis(), "status stored after retries");
            let note = format!(
                "status {} stored after {attempts} attempts over {:.1}s",
                u.phase(),
                elapsed.as_secs_f64()
            );
            self.events
                .publish(
                    key,
                    Some(&object),
                    false,
                    reasons::STATUS_LANDED_AFTER_RETRIES,
                    note,
                )
                .await;
        } else {
            tracing::debug!(object = %key, phase = %u.phase(), "status stored");
        }
        Landing {
            attempts,
            elapsed,
            already_there,
            object,
        }
    }

    /// Turn the end of a write (reconcile path or re-driver) into its result, with logs,
    /// metrics and Events.
    pub(crate) async fn concluded(
        &self,
        u: &StatusUpdate,
        st: &AttemptState,
        r: Result<Step, AttemptError>,
        attempts: u32,
        start: Instant,
    ) -> Result<Landing, WriteError> {
        let key = &u.key;
        let elapsed = start.elapsed();
        match r {
            Ok(Step::Landed(object)) => Ok(self.landed(u, object, false, attempts, elapsed).await),
            Ok(Step::AlreadyLanded(object)) => {
                Ok(self.landed(u, object, true, attempts, elapsed).await)
            }
            Ok(Step::Stale { current }) => {
                tracing::warn!(object = %key, current = %current, wanted = %u.phase(), attempts,
                    "object moved to a phase this status may not replace; status dropped");
                Err(WriteError::Stale {
                    kind: key.kind.label(),
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    current,
                    wanted: u.phase.clone(),
                })
            }
            Err(e) if matches!(e.class(), Class::Gone) => {
                tracing::info!(object = %key, phase = %u.phase(), attempts, "object no longer exists; status not written");
                Err(key.gone())
            }
            Err(e) => {
                tracing::error!(object = %key, phase = %u.phase(), attempts, category = e.category(), error = %e,
                    "the API server refused the status write");
                let note = format!("status {} refused: {e}", u.phase());
                self.events
                    .publish(
                        key,
                        st.last_object.as_ref(),
                        true,
                        reasons::STATUS_WRITE_REJECTED,
                        note,
                    )
                    .await;
                Err(WriteError::Rejected {
                    kind: key.kind.label(),
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    source: e,
                })
            }
        }
    }
}

impl ObjectKey {
    fn gone(&self) -> WriteError {
        WriteError::Gone {
            kind: self.kind.label(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    fn handed_over(&self, attempts: u32, source: AttemptError) -> WriteError {
        WriteError::HandedOver {
            kind: self.kind.label(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            attempts,
            source,
        }
    }

    fn expired(&self, attempts: u32, source: AttemptError) -> WriteError {
        WriteError::Expired {
            kind: self.kind.label(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            attempts,
            source,
        }
    }

    fn shutting_down(&self) -> WriteError {
        WriteError::ShuttingDown {
            kind: self.kind.label(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}
