//! `hawser server`: the controllers, the status engine, `/metrics`, `/livez` and `/readyz`.
//!
//! The public surface is [`ServerArgs`] (the flags, Velero's names and defaults, each also read
//! from `HAWSER_<NAME>`) and [`serve`], which runs the server until a cancellation token fires.
//!
//! What runs:
//! - the **backup controller** ([`backup_controller`]) behind a work queue ([`queue`]):
//!   `--concurrent-backups` backups at a time, each independent;
//! - the **restore controller** ([`restore_controller`]), one restore at a time, as Velero;
//! - the **storage-location controller** ([`bsl_controller`]), validating every location;
//! - **recovery** (the status engine's, reading the records in the storage locations through
//!   [`records::StorageRecords`]) at start-up and every `--status-resync-period`;
//! - the HTTP endpoints ([`http`]) on `--metrics-address`.
//!
//! The client has kube-rs's hidden retries off and `--client-qps`/`--client-burst` applied;
//! every controller, the engines and the status engine share it.

mod args;
mod backup_controller;
mod bsl_controller;
mod context;
mod http;
mod locations;
mod queue;
mod records;
mod restore_controller;
mod work;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

pub use args::{ArgsError, ServerArgs};
pub use locations::{LocationError, Locations};
pub use records::StorageRecords;

use crate::metrics::{StatusMetrics, VeleroMetrics};
use crate::status::{self, Kind, StatusConfig, StatusEngine};
use context::Context;

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
    let client = match settings.client_qps {
        Some(qps) => status::throttled_client_without_retries(
            config,
            READ_TIMEOUT,
            qps,
            settings.client_burst,
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
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = StatusEngine::new(
        client.clone(),
        StatusConfig {
            resource_timeout: settings.resource_timeout,
            max_backoff: settings.status_patch_max_backoff,
            resync_period: settings.status_resync_period,
            namespace: Some(namespace.clone()),
            ..StatusConfig::default()
        },
        StatusMetrics::register(&mut registry),
    );
    let metrics = VeleroMetrics::register(&mut registry);
    let ready = Arc::new(AtomicBool::new(false));
    let locations = Locations::new(client.clone(), namespace.clone());
    let records = StorageRecords::new(
        client.clone(),
        locations.clone(),
        settings.default_backup_storage_location.clone(),
    );
    let concurrent_backups = settings.concurrent_backups;
    let ctx = Arc::new(Context {
        client,
        namespace: namespace.clone(),
        settings,
        engine: engine.clone(),
        metrics,
        locations,
        shutdown: shutdown.clone(),
        ready: ready.clone(),
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
            ready,
        },
        shutdown.clone(),
    ));
    let recovery = engine.clone();
    tasks.spawn(async move { recovery.run_recovery(records).await });
    tasks.spawn(bsl_controller::run(ctx.clone()));
    tasks.spawn(queue::run(
        ctx.clone(),
        Kind::Backup,
        concurrent_backups,
        backup_controller::handle,
    ));
    // Velero runs one restore at a time (the restore controller's default concurrency).
    tasks.spawn(queue::run(
        ctx.clone(),
        Kind::Restore,
        1,
        restore_controller::handle,
    ));
    ctx.set_ready();
    tracing::info!("hawser server running");

    shutdown.cancelled().await;
    tracing::info!("hawser server shutting down");
    engine.shutdown();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
