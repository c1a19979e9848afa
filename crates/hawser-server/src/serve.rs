//! [`serve`]: builds the client, the status engine and the context from the flags, waits to
//! lead, runs every controller, recovery and the HTTP endpoints, and shuts down gracefully.
//!
//! The life of a server:
//! 1. **Start**: check the flags, bind `--metrics-address`, serve `/livez`, `/metrics` and
//!    `/readyz` (not ready yet).
//! 2. **Follow** (with `--leader-elect`, the default): wait for the Lease
//!    ([`leader`](crate::leader)); `/readyz` answers `follower: <holder> leads`.
//! 3. **Lead**: run recovery, the storage-location controller and the backup and restore queues;
//!    renew the Lease every retry period.
//! 4. **Stop**, on the shutdown token (SIGTERM/SIGINT): `/readyz` turns 503 at once; the queues
//!    stop taking work; running backups and restores get `--shutdown-grace-period` to finish
//!    (and their final statuses to land); then what is left is abandoned, the Lease released,
//!    and `serve` returns `Ok`. Abandoned work is resolved by the next leader's recovery, from
//!    its record when it has one, else `Failed` saying the server restarted during the work.
//! 5. **Lose the Lease** (not renewed within `--leader-elect-renew-deadline`, or taken): stop
//!    everything at once and return an error, so the process exits with 1 and is started again
//!    as a follower; the new leader's recovery resolves what was running.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hawser_core::clock::Clock;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::controllers;
use crate::leader::{Elector, LeaseLost};
use crate::metrics::{StatusMetrics, VeleroMetrics};
use crate::queue::Workers;
use crate::readiness::Readiness;
use crate::status::{self, Kind, StatusConfig, StatusEngine};
use crate::{Locations, ServerArgs, StorageRecords, downloads, http, queue};

/// Longest a single Kubernetes API response may stall before the request fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How often shutdown looks whether the re-driver has landed every pending status.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// Runs the server until `shutdown` is cancelled.
///
/// `config` is the resolved kubeconfig (or in-cluster config); `namespace` holds every Velero
/// object the server reads and writes, and the Lease.
///
/// # Errors
///
/// A flag value the server cannot run with, a client that cannot be built from `config`, a
/// metrics address that cannot be bound; the Lease lost while leading.
pub async fn serve(
    config: kube::Config,
    namespace: String,
    args: ServerArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let settings = args.settings()?;
    // The Lease has a client of its own, outside `--client-qps`: a busy backup must not delay
    // the renewals.
    let lease_client = settings
        .leader_election
        .as_ref()
        .map(|_| status::client_without_retries(config.clone(), READ_TIMEOUT))
        .transpose()
        .context("building the Kubernetes client of leader election")?;
    let client = match settings.client.qps {
        Some(qps) => status::throttled_client_without_retries(
            config,
            READ_TIMEOUT,
            qps,
            settings.client.burst,
        ),
        None => status::client_without_retries(config, READ_TIMEOUT),
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
        StatusConfig {
            resource_timeout: settings.status.resource_timeout,
            max_backoff: settings.status.max_backoff,
            resync_period: settings.status.resync_period,
            namespace: Some(namespace.clone()),
            clock: clock.clone(),
            ..StatusConfig::default()
        },
        StatusMetrics::register(&mut registry),
    );
    let metrics = VeleroMetrics::register(&mut registry);
    let readiness = Readiness::default();
    // Registered before anything runs, so that `/readyz` waits for all of them.
    let location_watch = readiness.watch("backupstoragelocations");
    let backup_watch = readiness.watch("backups");
    let restore_watch = readiness.watch("restores");
    let schedule_watch = readiness.watch("schedules");
    let deletion_watch = readiness.watch("deletebackuprequests");
    let download_watch = readiness.watch("downloadrequests");
    let status_watch = readiness.watch("serverstatusrequests");
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
    let concurrent_backups = settings.backup.concurrency;
    let grace = settings.shutdown.grace_period;
    let election = settings.leader_election.clone();
    let ctx = Arc::new(Context {
        client,
        namespace: namespace.clone(),
        settings,
        clock: clock.clone(),
        engine: engine.clone(),
        metrics,
        locations,
        records: records.clone(),
        // The controllers stop taking work on it; running work gets the grace period.
        shutdown: shutdown.clone(),
        backup_queue: Arc::default(),
    });
    tracing::info!(
        namespace = %namespace,
        instance = engine.instance_id(),
        metrics = %http::local_url(listener.local_addr().unwrap_or(ctx.settings.metrics_address)),
        leader_election = election.is_some(),
        filesystem_roots = ?ctx.settings.locations.policy.filesystem_roots(),
        ambient_credentials = ctx.settings.locations.policy.allows_ambient_credentials(),
        downloads = file_urls.base_url(),
        "hawser server starting"
    );

    // The endpoints answer until `serve` returns, through the grace period too.
    let endpoints_stop = CancellationToken::new();
    let _stop_endpoints = endpoints_stop.clone().drop_guard();
    tokio::spawn(http::serve(
        listener,
        http::Endpoints {
            registry: Arc::new(registry),
            readiness: readiness.clone(),
        },
        endpoints_stop.clone(),
    ));
    tokio::spawn(downloads::serve(
        downloads_listener,
        downloads::FileServer {
            urls: file_urls.clone(),
            locations: ctx.locations.clone(),
        },
        endpoints_stop,
    ));

    let mut leadership = match (election, lease_client) {
        (Some(election), Some(lease_client)) => {
            let mut elector = Elector::new(
                lease_client,
                &namespace,
                engine.instance_id(),
                election,
                clock,
            );
            readiness.following(None);
            tracing::info!(lease = elector.lease(), "waiting to lead");
            let follower = readiness.clone();
            tokio::select! {
                () = shutdown.cancelled() => {
                    tracing::info!("hawser server stopping before it led");
                    readiness.stopping();
                    return Ok(());
                }
                () = elector.acquire(|holder| follower.following(holder)) => {}
            }
            readiness.leading();
            let release = CancellationToken::new();
            Leadership::Held {
                name: elector.lease().to_owned(),
                task: tokio::spawn(elector.hold(release.clone())),
                release,
            }
        }
        _ => Leadership::NotElected,
    };

    let workers = Workers::default();
    let mut controllers = JoinSet::new();
    // Backups whose record says their item operations go on are handed back, not resolved.
    let (resumer, resumed) = tokio::sync::mpsc::unbounded_channel();
    engine.resume_with(resumer);
    let recovery = engine.clone();
    controllers.spawn(async move { recovery.run_recovery(records).await });
    controllers.spawn(controllers::operations::run(ctx.clone(), resumed));
    controllers.spawn(controllers::bsl::run(ctx.clone(), location_watch));
    controllers.spawn(controllers::schedule::run(ctx.clone(), schedule_watch));
    controllers.spawn(controllers::gc::run(ctx.clone()));
    controllers.spawn(controllers::sync::run(ctx.clone()));
    controllers.spawn(controllers::deletion::run(ctx.clone(), deletion_watch));
    controllers.spawn(controllers::download::run(ctx.clone(), download_watch));
    controllers.spawn(controllers::server_status::run(ctx.clone(), status_watch));
    controllers.spawn(controllers::vsl::run(ctx.clone()));
    controllers.spawn(queue::run(
        ctx.clone(),
        Kind::Backup,
        concurrent_backups,
        controllers::backup::handle,
        backup_watch,
        workers.clone(),
    ));
    // Velero runs one restore at a time (the restore controller's default concurrency).
    controllers.spawn(queue::run(
        ctx.clone(),
        Kind::Restore,
        1,
        controllers::restore::handle,
        restore_watch,
        workers.clone(),
    ));
    tracing::info!("hawser server running");

    tokio::select! {
        biased;
        () = shutdown.cancelled() => {}
        lost = leadership.lost() => {
            return Err(stop_now(lost_lease(lost), &readiness, controllers, &workers, &engine).await);
        }
        // A controller, the recovery loop or a queue ends only at shutdown: one that ends
        // earlier (a panic) would leave its work undone while the server looks alive.
        Some(ended) = controllers.join_next() => {
            let why = match ended {
                Err(e) if e.is_panic() => "it panicked".to_owned(),
                Err(e) => e.to_string(),
                Ok(()) => "it returned".to_owned(),
            };
            let stopped = anyhow::anyhow!("a controller task stopped before shutdown: {why}");
            return Err(stop_now(stopped, &readiness, controllers, &workers, &engine).await);
        }
    }

    tracing::info!(
        running = workers.running(),
        pending = engine.pending(),
        grace = ?grace,
        "hawser server shutting down: no new work; running backups and restores may finish"
    );
    readiness.stopping();
    // Recovery and the controllers stop; the workers they started go on.
    controllers.abort_all();
    while controllers.join_next().await.is_some() {}
    let finished = tokio::select! {
        finished = drain(&workers, &engine, grace) => finished,
        lost = leadership.lost() => {
            return Err(stop_now(lost_lease(lost), &readiness, JoinSet::new(), &workers, &engine).await);
        }
    };
    if !finished {
        tracing::warn!(
            running = workers.running(),
            pending = engine.pending(),
            "the shutdown grace period is over; stopping anyway: the next leader's recovery resolves what is unfinished"
        );
    }
    workers.abort().await;
    engine.shutdown();
    leadership.release().await;
    tracing::info!("hawser server stopped");
    Ok(())
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

/// Why the server stops when it lost the Lease (another server may lead already).
fn lost_lease(lost: LeaseLost) -> anyhow::Error {
    anyhow::Error::new(lost).context(
        "hawser server stopped leading: it stops so that it can be started again as a follower",
    )
}

/// Stops every controller and worker at once (the Lease was lost, or a controller died) and
/// returns `cause`.
async fn stop_now(
    cause: anyhow::Error,
    readiness: &Readiness,
    mut controllers: JoinSet<()>,
    workers: &Workers,
    engine: &StatusEngine,
) -> anyhow::Error {
    readiness.stopping();
    controllers.abort_all();
    workers.abort().await;
    engine.shutdown();
    while controllers.join_next().await.is_some() {}
    tracing::error!(error = %format!("{cause:#}"), "stopping at once; the next leader's recovery resolves unfinished work");
    cause
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
