//! `hawser server`: the controllers, the status engine, `/metrics`, `/livez` and `/readyz`.
//!
//! The public surface is [`ServerArgs`] (the flags, Velero's names and defaults, each also read
//! from `HAWSER_<NAME>`) and [`serve`], which runs the server until a cancellation token fires.
//!
//! What is built so far: the flags and their checks (a bad value is an error naming the flag),
//! building the Kubernetes client without kube-rs's hidden retries, and the status engine from
//! the flags. The backup controller, the BackupStorageLocation validation controller, recovery
//! from the storage record and the HTTP endpoints are not built yet: [`serve`] checks its
//! arguments and then returns an error saying so, rather than running a server that does
//! nothing.

mod args;

use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

pub use args::{ArgsError, ServerArgs};

use crate::metrics::StatusMetrics;
use crate::status::{self, StatusConfig, StatusEngine};

/// Longest a single Kubernetes API response may stall before the request fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the server until `shutdown` is cancelled.
///
/// `config` is the resolved kubeconfig (or in-cluster config); `namespace` holds every Velero
/// object the server reads and writes.
///
/// # Errors
///
/// A flag value the server cannot run with, a client that cannot be built from `config`, and,
/// until the controllers are built, always an error saying they are not.
pub async fn serve(
    config: kube::Config,
    namespace: String,
    args: ServerArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let settings = args.settings()?;
    let client = status::client_without_retries(config, READ_TIMEOUT)
        .context("building the Kubernetes client")?;
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = StatusEngine::new(
        client,
        StatusConfig {
            resource_timeout: settings.resource_timeout,
            max_backoff: settings.status_patch_max_backoff,
            resync_period: settings.status_resync_period,
            namespace: Some(namespace.clone()),
            ..StatusConfig::default()
        },
        StatusMetrics::register(&mut registry),
    );
    tracing::info!(
        namespace = %namespace,
        instance = engine.instance_id(),
        metrics_address = %settings.metrics_address,
        "hawser server configured"
    );
    engine.shutdown();
    if shutdown.is_cancelled() {
        return Ok(());
    }
    anyhow::bail!(
        "hawser server: the backup and storage-location controllers are not built yet; \
         nothing would reconcile Backups in namespace {namespace}"
    )
}
