//! `hawser server` in a benchmark's worker process (the library, so the worker's peak RSS is the
//! server's), and the objects it reads: what the backup and restore benchmarks' through-the-server
//! modes share.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use hawser_server::ServerArgs;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube_sim::SimStore;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Where the server keeps its objects.
pub const NAMESPACE: &str = "velero";

/// The phases a Backup or Restore ends in.
const FINAL: [&str; 4] = ["Completed", "PartiallyFailed", "Failed", "FailedValidation"];

/// Velero's CRDs, the server's namespace and the BackupStorageLocation `default`: a
/// `filesystem` location under `root`, bucket `bench` (loaded through the store).
///
/// # Errors
/// When kube-sim refuses an object.
pub fn install(store: &SimStore, root: &str) -> Result<()> {
    for crd in hawser_api::crd::crds() {
        store
            .insert(serde_json::to_value(crd)?)
            .context("installing a velero.io CRD")?;
    }
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default", "namespace": NAMESPACE},
            "spec": {"provider": "filesystem", "objectStorage": {"bucket": "bench"},
                     "config": {"root": root}, "default": true}
        }),
    ] {
        store.insert(object).context("storing a server object")?;
    }
    Ok(())
}

/// The velero.io objects of `kind` (`plural`) in [`NAMESPACE`].
#[must_use]
pub fn api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "velero.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "velero.io/v1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    };
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// `status.phase`, or `""`.
#[must_use]
pub fn phase(object: &Value) -> &str {
    object
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Waits up to `limit` until `check` holds for the object `name`; returns it.
///
/// # Errors
/// When it does not in time or cannot be read.
pub async fn until(
    api: &Api<DynamicObject>,
    name: &str,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(object) = api.get_opt(name).await.context("reading the object")? {
            let object = serde_json::to_value(object)?;
            if check(&object) {
                return Ok(object);
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "{name}: not there in {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    server: ServerArgs,
}

/// A server running in this process.
pub struct Running {
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    shutdown: CancellationToken,
}

/// Starts `hawser server FLAGS --filesystem-root ROOT` against the kube-sim at `url` and waits
/// until it has validated the location `default` (it then leads and runs its controllers).
///
/// # Errors
/// Bad flags, or the location not `Available` within a minute.
pub async fn start(url: &str, root: &str, flags: &[String]) -> Result<Running> {
    let mut argv = vec![
        "server".to_owned(),
        "--filesystem-root".to_owned(),
        root.to_owned(),
    ];
    argv.extend(flags.iter().cloned());
    argv.extend(["--metrics-address".to_owned(), "127.0.0.1:0".to_owned()]);
    let args = Flags::try_parse_from(argv).context("server flags")?.server;
    let config = kube::Config::new(url.parse().context("kube-sim URL")?);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(hawser_server::serve(
        config,
        NAMESPACE.to_owned(),
        args,
        shutdown.clone(),
    ));
    let client = crate::client(url)?;
    until(
        &api(&client, "BackupStorageLocation", "backupstoragelocations"),
        "default",
        Duration::from_secs(60),
        |o| phase(o) == "Available",
    )
    .await?;
    Ok(Running { task, shutdown })
}

impl Running {
    /// Creates `object` (a `kind` in `plural`) and waits until the server has written its final
    /// phase; returns it and the seconds from the create to that read.
    ///
    /// # Errors
    /// When the create fails or the object is not final within an hour.
    pub async fn run(
        &self,
        client: &kube::Client,
        kind: &str,
        plural: &str,
        object: Value,
    ) -> Result<(Value, Instant)> {
        let name = object["metadata"]["name"]
            .as_str()
            .context("no name")?
            .to_owned();
        let api = api(client, kind, plural);
        let started = Instant::now();
        api.create(&PostParams::default(), &serde_json::from_value(object)?)
            .await
            .with_context(|| format!("creating the {kind}"))?;
        let done = until(&api, &name, Duration::from_secs(3600), |o| {
            FINAL.contains(&phase(o))
        })
        .await?;
        Ok((done, started))
    }

    /// Stops the server and waits for it.
    ///
    /// # Errors
    /// When the server ended with an error.
    pub async fn stop(self) -> Result<()> {
        self.shutdown.cancel();
        self.task
            .await
            .context("the server task")?
            .map_err(|e| anyhow::anyhow!("{e:#}"))
    }
}
