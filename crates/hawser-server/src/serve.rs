//! [`serve`]: builds the client, the status engine and the context from the flags, waits to
//! lead, runs every controller, recovery and the HTTP endpoints, and shuts down gracefully.
//!
//! The life of a server:
//! 1. **Start**: check the flags, bind `--metrics-address`, serve `/livez`, `/metrics` and
//!    `/readyz` (not ready yet).
//! 2. **Follow** (with `--leader-elect`, the default): wait for the Lease
//!    ([`leader`](crate::leader)); `/readyz` answers `follower: <holder> leads`.
//! 3. **Lead** (a term): run recovery at once and every controller of the table
//!    ([`CONTROLLERS`](crate::controllers::table::CONTROLLERS)) that `--disable-controllers` and
//!    `--restore-only` leave on; renew the Lease every retry period.
//! 4. **Step down**, when the Lease is lost (not renewed within
//!    `--leader-elect-renew-deadline`, e.g. the API server cannot be reached, or found naming
//!    another holder): the term ends in-process. The controllers and this term's work stop at
//!    once; the statuses a stored record decides go on landing through the re-driver (right
//!    from any instance), the others are dropped for the next leader; `/livez` answers,
//!    `/readyz` says the server follows; and it competes for the Lease again (2). When it leads
//!    again, recovery resolves or runs again what the stopped work left. Only a term whose work
//!    does not stop within [`STEP_DOWN_BOUND`], or a Lease task that crashed, ends the process
//!    (exit code 1): its state could not be reconciled in-process.
//! 5. **Stop**, on the shutdown token (SIGTERM/SIGINT): `/readyz` turns 503 at once; the queues
//!    stop taking work; running backups and restores get `--shutdown-grace-period` to finish
//!    (and their final statuses to land); then what is left is abandoned, the Lease released,
//!    and `serve` returns `Ok`. Abandoned work is resolved by the next leader's recovery: from
//!    its record when it has one, else run again (`--resume-attempts`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hawser_core::clock::Clock;
use hawser_status::{Kind, ObjectKey, Rerun, Resumed, StatusConfig, StatusEngine};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::context::Context;
use crate::controllers::table::{self, Inputs};
use crate::leader::{Elector, LeaseLost};
use crate::metrics::{StatusMetrics, VeleroMetrics};
use crate::queue::Workers;
use crate::readiness::Readiness;
use crate::{Locations, ServerArgs, StorageRecords, downloads, http};
use hawser_engine::cluster::client::{client_without_retries, throttled_client_without_retries};

/// Longest a single Kubernetes API response may stall before the request fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How often shutdown looks whether the re-driver has landed every pending status.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// Longest the work of a term may take to stop once the server steps down (aborted tasks end
/// at their next await; only a task that never yields could hold it up).
const STEP_DOWN_BOUND: Duration = Duration::from_secs(10);

/// Runs the server until `shutdown` is cancelled.
///
/// `config` is the resolved kubeconfig (or in-cluster config); `namespace` holds every Velero
/// object the server reads and writes, and the Lease.
///
/// # Errors
///
/// A flag value the server cannot run with, a client that cannot be built from `config`, a
/// metrics address that cannot be bound; a controller that stopped on its own; a term whose
/// work could not be stopped after the Lease was lost.
pub async fn serve(
    config: kube::Config,
    namespace: String,
    args: ServerArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let settings = args.settings()?;
    if args.restore_only {
        tracing::warn!(
            "--restore-only is deprecated (as in Velero): no backups, deletions or schedules run; a ReadOnly storage location is the lasting way"
        );
    }
    // The Lease has a client of its own, outside `--client-qps`: a busy backup must not delay
    // the renewals.
    let lease_client = settings
        .leader_election
        .as_ref()
        .map(|_| client_without_retries(config.clone(), READ_TIMEOUT))
        .transpose()
        .context("building the Kubernetes client of leader election")?;
    let client = match settings.client.qps {
        Some(qps) => {
            throttled_client_without_retries(config, READ_TIMEOUT, qps, settings.client.burst)
        }
        None => client_without_retries(config, READ_TIMEOUT),
    }
    .context("building the Kubernetes client")?;
    let listener = http::bind(settings.metrics_address)
        .await
        .with_context(|| {
            format!(
                "listening on --metrics-address {}",
                settings.metrics_address
            )
        })?;
    let downloads_listener = http::bind(settings.downloads.address)
        .await
        .with_context(|| {
            format!(
                "listening on --download-address {}",
                settings.downloads.address
            )
        })?;
    let file_urls = Arc::new(hawser_store::FileUrls::new(
        &match &settings.downloads.public_url {
            Some(url) => url.clone(),
            None => http::local_url(
                downloads_listener
                    .local_addr()
                    .context("reading the address of --download-address")?,
            ),
        },
    ));
    let clock = Clock::system();
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = StatusEngine::new(
        client.clone(),
        status_config(&settings, &namespace, &clock),
        StatusMetrics::register(&mut registry),
    );
    let metrics = VeleroMetrics::register(&mut registry);
    let locations = Locations::new(
        client.clone(),
        namespace.clone(),
        settings.locations.policy.clone(),
    )
    .served_by(file_urls.clone());
    let records = StorageRecords::new(
        client.clone(),
        locations.clone(),
        settings.backup.default_location.clone(),
    );
    // `filesystem` locations: anywhere, nowhere (an empty list), or under these directories.
    let filesystem_roots = match settings.locations.policy.filesystem_roots() {
        None => "any directory".to_owned(),
        Some([]) => "none".to_owned(),
        Some(roots) => roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(","),
    };
    let disabled: Vec<&str> = settings.controllers.disabled().collect();
    tracing::info!(
        namespace = %namespace,
        instance = engine.instance_id(),
        metrics = %http::local_url(listener.local_addr().unwrap_or(settings.metrics_address)),
        leader_election = settings.leader_election.is_some(),
        resume_attempts = settings.status.resume_attempts,
        filesystem_roots = %filesystem_roots,
        ambient_credentials = settings.locations.policy.allows_ambient_credentials(),
        downloads = file_urls.base_url(),
        disabled_controllers = %if disabled.is_empty() { "none".to_owned() } else { disabled.join(",") },
        "hawser server starting"
    );
    let server = Server {
        client,
        namespace,
        settings,
        clock,
        engine,
        metrics,
        locations,
        records,
        readiness: Readiness::default(),
        lease_client,
    };

    // The endpoints answer until `serve` returns: while following, through the grace period,
    // and between terms of leadership.
    let endpoints_stop = CancellationToken::new();
    let _stop_endpoints = endpoints_stop.clone().drop_guard();
    tokio::spawn(http::serve(
        listener,
        http::Endpoints {
            registry: Arc::new(registry),
            readiness: server.readiness.clone(),
            status_page: server
                .settings
                .status_page
                .then(|| crate::status_page::StatusPage {
                    client: server.client.clone(),
                    namespace: server.namespace.clone(),
                    engine: server.engine.clone(),
                }),
        },
        endpoints_stop.clone(),
    ));
    tokio::spawn(downloads::serve(
        downloads_listener,
        downloads::FileServer {
            urls: file_urls,
            locations: server.locations.clone(),
        },
        endpoints_stop,
    ));

    loop {
        let Some(leadership) = server.follow(&shutdown).await else {
            return server.stop_following().await;
        };
        match server.lead(leadership, &shutdown).await? {
            TermEnd::Stopped => return Ok(()),
            TermEnd::SteppedDown => {}
        }
    }
}

/// The status engine's configuration: the server's settings for the objects of `namespace`.
pub(crate) fn status_config(settings: &Settings, namespace: &str, clock: &Clock) -> StatusConfig {
    StatusConfig {
        resource_timeout: settings.status.resource_timeout,
        max_backoff: settings.status.max_backoff,
        resync_period: settings.status.resync_period,
        resume_attempts: settings.status.resume_attempts,
        namespace: Some(namespace.to_owned()),
        clock: clock.clone(),
        ..StatusConfig::default()
    }
}

/// What outlives a term of leadership.
struct Server {
    client: kube::Client,
    namespace: String,
    settings: Settings,
    clock: Clock,
    engine: StatusEngine,
    metrics: VeleroMetrics,
    locations: Locations,
    records: StorageRecords,
    readiness: Readiness,
    /// The client of leader election (`None` with `--leader-elect=false`).
    lease_client: Option<kube::Client>,
}

/// How a term of leadership ended.
enum TermEnd {
    /// Shutdown: the work drained (or was abandoned after the grace period), the Lease was
    /// released.
    Stopped,
    /// The Lease was lost; the server follows again.
    SteppedDown,
}

/// What ends a term early: the Lease lost, or a controller that stopped on its own.
enum Interrupted {
    Lost(LeaseLost),
    Controller(anyhow::Error),
}

impl Server {
    /// Waits for the Lease; `None` when shutdown came first. Without leader election the
    /// server leads at once.
    async fn follow(&self, shutdown: &CancellationToken) -> Option<Leadership> {
        let (Some(election), Some(client)) = (&self.settings.leader_election, &self.lease_client)
        else {
            return Some(Leadership::NotElected);
        };
        let mut elector = Elector::new(
            client.clone(),
            &self.namespace,
            self.engine.instance_id(),
            election.clone(),
            self.clock.clone(),
        );
        self.readiness.following(None);
        tracing::info!(lease = elector.lease(), "waiting to lead");
        let follower = self.readiness.clone();
        tokio::select! {
            () = shutdown.cancelled() => None,
            () = elector.acquire(|holder| follower.following(holder)) => {
                let release = CancellationToken::new();
                Some(Leadership::Held {
                    name: elector.lease().to_owned(),
                    task: tokio::spawn(elector.hold(release.clone())),
                    release,
                })
            }
        }
    }

    /// Shutdown while following: the statuses still pending (a stored record decides them) get
    /// the grace period to land.
    async fn stop_following(&self) -> anyhow::Result<()> {
        tracing::info!(
            pending = self.engine.pending(),
            "hawser server stopping while it follows"
        );
        self.readiness.stopping();
        let grace = self.settings.shutdown.grace_period;
        if !drain(&Workers::default(), &self.engine, grace).await {
            tracing::warn!(
                pending = self.engine.pending(),
                "the shutdown grace period is over with statuses pending; the leader's recovery writes them from their records"
            );
        }
        self.engine.shutdown();
        Ok(())
    }

    /// The context of one term: it ends with `term`, and its work runs as `workers`.
    fn context(&self, term: CancellationToken, workers: Workers) -> Arc<Context> {
        Arc::new(Context {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
            engine: self.engine.clone(),
            metrics: self.metrics.clone(),
            locations: self.locations.clone(),
            records: self.records.clone(),
            shutdown: term,
            workers,
            backup_queue: Arc::default(),
        })
    }

    /// One term of leadership: runs every controller and recovery until shutdown (then
    /// drains and releases the Lease) or until the Lease is lost (then steps down).
    async fn lead(
        &self,
        mut leadership: Leadership,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<TermEnd> {
        let readiness = &self.readiness;
        // The controllers stop taking work when the term ends; at shutdown running work gets
        // the grace period.
        let term = shutdown.child_token();
        // Recovery's heartbeat (this instance's Lease) goes on through the grace period, so
        // that no other server takes the draining work for orphaned; it stops when the server
        // steps down or the engine shuts down.
        let stepped_down = CancellationToken::new();
        let workers = Workers::default();
        let ctx = self.context(term.clone(), workers.clone());

        let mut controllers = JoinSet::new();
        let (resumer, resumed) = unbounded_channel();
        self.engine.resume_with(resumer);
        let (operations, resumed_operations) = unbounded_channel();
        let (backup_reruns, backup_reruns_rx) = unbounded_channel();
        let (restore_reruns, restore_reruns_rx) = unbounded_channel();
        controllers.spawn(route_resumed(
            resumed,
            operations,
            backup_reruns,
            restore_reruns,
        ));
        let (recovery, records, stop) = (
            self.engine.clone(),
            self.records.clone(),
            stepped_down.clone(),
        );
        controllers.spawn(async move { recovery.run_recovery(records, stop).await });
        // Every watch is registered before `leading`, so that `/readyz` waits for all of them.
        table::start(
            &self.settings.controllers,
            &ctx,
            readiness,
            Inputs {
                operations: Some(resumed_operations),
                backup_reruns: Some(backup_reruns_rx),
                restore_reruns: Some(restore_reruns_rx),
            },
            &mut controllers,
        );
        readiness.leading();
        tracing::info!("hawser server running");

        let interrupted = tokio::select! {
            biased;
            () = shutdown.cancelled() => None,
            lost = leadership.lost() => Some(Interrupted::Lost(lost)),
            // A controller, the recovery loop or a queue ends only with the term: one that
            // ends earlier (a panic) would leave its work undone while the server looks alive.
            Some(ended) = controllers.join_next() => {
                let why = match ended {
                    Err(e) if e.is_panic() => "it panicked".to_owned(),
                    Err(e) => e.to_string(),
                    Ok(()) => "it returned".to_owned(),
                };
                Some(Interrupted::Controller(anyhow::anyhow!(
                    "a controller task stopped before shutdown: {why}"
                )))
            }
        };
        let term_work = Term {
            term,
            stepped_down,
            controllers,
            workers,
        };
        match interrupted {
            None => {}
            Some(Interrupted::Lost(lost)) => return self.step_down(lost, term_work).await,
            Some(Interrupted::Controller(cause)) => {
                return Err(self.stop_now(cause, term_work).await);
            }
        }

        let Term {
            stepped_down,
            mut controllers,
            workers,
            ..
        } = term_work;
        let grace = self.settings.shutdown.grace_period;
        tracing::info!(
            running = workers.running(),
            pending = self.engine.pending(),
            grace = ?grace,
            "hawser server shutting down: no new work; running backups and restores may finish"
        );
        readiness.stopping();
        // Recovery and the controllers stop; the workers they started go on.
        controllers.abort_all();
        while controllers.join_next().await.is_some() {}
        let finished = tokio::select! {
            finished = drain(&workers, &self.engine, grace) => finished,
            lost = leadership.lost() => {
                let term_work = Term {
                    term: CancellationToken::new(),
                    stepped_down,
                    controllers: JoinSet::new(),
                    workers,
                };
                return Err(self.stop_now(lost_lease(lost), term_work).await);
            }
        };
        if !finished {
            tracing::warn!(
                running = workers.running(),
                pending = self.engine.pending(),
                "the shutdown grace period is over; stopping anyway: the next leader's recovery resolves what is unfinished"
            );
        }
        workers.abort().await;
        self.engine.shutdown();
        leadership.release().await;
        tracing::info!("hawser server stopped");
        Ok(TermEnd::Stopped)
    }

    /// The Lease was lost: this term's controllers and work stop at once, the statuses a
    /// stored record decides go on landing, and the server follows again. A crashed Lease task,
    /// or work that does not stop, ends the process instead.
    async fn step_down(&self, lost: LeaseLost, term: Term) -> anyhow::Result<TermEnd> {
        if matches!(lost, LeaseLost::Crashed { .. }) {
            return Err(self.stop_now(lost_lease(lost), term).await);
        }
        let holder = match &lost {
            LeaseLost::TakenOver { holder, .. } => holder.clone(),
            _ => None,
        };
        self.readiness.following(holder.as_deref());
        let stopped = term.stop(STEP_DOWN_BOUND).await;
        let dropped = self.engine.step_down();
        if !stopped {
            return Err(anyhow::Error::new(lost).context(format!(
                "hawser server stopped leading and the work it ran did not stop within {STEP_DOWN_BOUND:?}: it exits so that it can be started again as a follower"
            )));
        }
        tracing::warn!(
            error = %lost,
            pending = self.engine.pending(),
            dropped,
            "stepped down: this server's backups and restores stopped where they were; statuses their records decide go on landing; competing for the Lease again"
        );
        Ok(TermEnd::SteppedDown)
    }

    /// Stops every controller and worker at once (a controller died, or the Lease cannot be
    /// held) and returns `cause`.
    async fn stop_now(&self, cause: anyhow::Error, term: Term) -> anyhow::Error {
        self.readiness.stopping();
        let _stopped = term.stop(STEP_DOWN_BOUND).await;
        self.engine.shutdown();
        tracing::error!(error = %format!("{cause:#}"), "stopping at once; the next leader's recovery resolves unfinished work");
        cause
    }
}

/// What runs in a term of leadership, to stop it.
struct Term {
    /// The context's token: the controllers stop taking work.
    term: CancellationToken,
    /// Recovery and its heartbeat.
    stepped_down: CancellationToken,
    controllers: JoinSet<()>,
    workers: Workers,
}

impl Term {
    /// Stops everything at once; false when the work did not end within `bound`.
    async fn stop(mut self, bound: Duration) -> bool {
        self.term.cancel();
        self.stepped_down.cancel();
        self.controllers.abort_all();
        let stopped = tokio::time::timeout(bound, self.workers.abort())
            .await
            .is_ok();
        while self.controllers.join_next().await.is_some() {}
        stopped
    }
}

/// Sends what recovery hands back to the controller that does it: item operations to the
/// operations controller, reruns to the queue of their kind. Ends when recovery's sender is
/// gone (the term ended).
async fn route_resumed(
    mut resumed: UnboundedReceiver<Resumed>,
    operations: UnboundedSender<ObjectKey>,
    backups: UnboundedSender<Rerun>,
    restores: UnboundedSender<Rerun>,
) {
    while let Some(resumed) = resumed.recv().await {
        let _closed = match resumed {
            Resumed::Operations(key) => operations.send(key).is_ok(),
            Resumed::Rerun(rerun) => match rerun.key.kind {
                Kind::Backup => backups.send(rerun).is_ok(),
                Kind::Restore => restores.send(rerun).is_ok(),
            },
        };
    }
}

/// Waits up to `grace` for the workers to end and the re-driver to land every pending status;
/// `true` when everything finished.
async fn drain(workers: &Workers, engine: &StatusEngine, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    if !workers.finish(grace).await {
        return false;
    }
    while engine.pending() > 0 {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
    true
}

/// Why the server stops when it lost the Lease during shutdown, or when its Lease task crashed.
fn lost_lease(lost: LeaseLost) -> anyhow::Error {
    anyhow::Error::new(lost).context(
        "hawser server stopped leading: it stops so that it can be started again as a follower",
    )
}

/// The Lease this server leads by, if it elects.
enum Leadership {
    /// `--leader-elect=false`: this process is the only server.
    NotElected,
    /// Held; `task` renews it until `release` fires, then gives it up.
    Held {
        name: String,
        task: JoinHandle<Result<(), LeaseLost>>,
        release: CancellationToken,
    },
}

impl Leadership {
    /// Resolves when the Lease is lost; never without leader election.
    async fn lost(&mut self) -> LeaseLost {
        match self {
            Self::NotElected => std::future::pending().await,
            Self::Held { name, task, .. } => match task.await {
                Err(_) => LeaseLost::Crashed {
                    lease: name.clone(),
                },
                Ok(Err(lost)) => lost,
                // Only a release ends the task well, and `lost` is not awaited after it.
                Ok(Ok(())) => std::future::pending().await,
            },
        }
    }

    /// Gives the Lease up (waits for the release request, bounded by the renew deadline).
    async fn release(self) {
        if let Self::Held { task, release, .. } = self {
            release.cancel();
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(lost)) => {
                    tracing::warn!(error = %lost, "the Lease was lost during shutdown")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the task renewing the Lease failed during shutdown")
                }
            }
        }
    }
}
