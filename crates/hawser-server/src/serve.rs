//! [`serve`]: builds the client, the status engine and the context from the flags, then runs
//! every controller, recovery and the HTTP endpoints until shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hawser_core::clock::Clock;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::controllers;
use crate::metrics::{StatusMetrics, VeleroMetrics};
use crate::readiness::Readiness;
use crate::status::{self, Kind, StatusConfig, StatusEngine};
use crate::{Locations, ServerArgs, StorageRecords, http, queue};

/// Longest a single Kubernetes API response may stall before the request fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the server until `shutdown` is cancelled.
///
/// `config` is the resolved kubeconfig (or in-cluster config); `namespace` holds every Velero
/// object the server reads and writes.
///
/// # Errors
///
/// A flag value the server cannot run with, a client that cannot be built from `config`, a
/// metrics address that cannot be bound.
pub async fn serve(
    config: kube::Config,
    namespace: String,
    args: ServerArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let settings = args.settings()?;
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
    let locations = Locations::new(client.clone(), namespace.clone());
    let records = StorageRecords::new(
        client.clone(),
        locations.clone(),
        settings.backup.default_location.clone(),
    );
    let concurrent_backups = settings.backup.concurrency;
    let ctx = Arc::new(Context {
        client,
        namespace: namespace.clone(),
        settings,
        clock,
        engine: engine.clone(),
        metrics,
        locations,
        shutdown: shutdown.clone(),
    });
    tracing::info!(
        namespace = %namespace,
        instance = engine.instance_id(),
        metrics = %http::local_url(listener.local_addr().unwrap_or(ctx.settings.metrics_address)),
        "hawser server starting"
    );

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(http::serve(
        listener,
        http::Endpoints {
            registry: Arc::new(registry),
            readiness: readiness.clone(),
        },
        shutdown.clone(),
    ));
    let recovery = engine.clone();
    tasks.spawn(async move { recovery.run_recovery(records).await });
    tasks.spawn(controllers::bsl::run(ctx.clone(), location_watch));
    tasks.spawn(queue::run(
        ctx.clone(),
        Kind::Backup,
        concurrent_backups,
        controllers::backup::handle,
        backup_watch,
    ));
    // Velero runs one restore at a time (the restore controller's default concurrency).
    tasks.spawn(queue::run(
        ctx.clone(),
        Kind::Restore,
        1,
        controllers::restore::handle,
        restore_watch,
    ));
    tracing::info!("hawser server running");

    shutdown.cancelled().await;
    tracing::info!("hawser server shutting down");
    readiness.stopping();
    engine.shutdown();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
