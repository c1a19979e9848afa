//! The restore as a user gets it: `hawser server` (the library, in this worker process, so the
//! peak RSS is the server's) with the given flags, and a Restore object created through the
//! API, timed from its creation until the server has written its final phase. Everything the
//! server does on the way counts: picking the object up, validation, its rate-limited client
//! (`--client-qps`, `--client-burst`), progress writes, the record and the final status.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bench_common::seed;
use bench_common::worker::report;
use clap::Parser;
use hawser_server::ServerArgs;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::plan;

/// Where the server keeps its objects.
pub const NAMESPACE: &str = "velero";

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    server: ServerArgs,
}

fn api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "velero.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "velero.io/v1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    };
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// Waits up to `limit` until `check` holds for the object `name`; returns it.
async fn until(
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn phase(object: &Value) -> &str {
    object
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Restores the first `namespaces` application namespaces of the backup into the namespaces
/// of `run` through a server started with `flags`. Prints `server phase=… errors=…`.
pub async fn restore(url: &str, run: usize, namespaces: usize, flags: &[String]) -> Result<()> {
    let client = bench_common::client(url)?;
    let mut argv = vec!["server".to_owned()];
    argv.extend(flags.iter().cloned());
    argv.extend(["--metrics-address".to_owned(), "127.0.0.1:0".to_owned()]);
    let args = Flags::try_parse_from(argv).context("server flags")?.server;
    let config = kube::Config::new(url.parse().context("kube-sim URL")?);
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(hawser_server::serve(
        config,
        NAMESPACE.to_owned(),
        args,
        shutdown.clone(),
    ));
    // The server leads and runs its controllers once it has validated the location.
    until(
        &api(&client, "BackupStorageLocation", "backupstoragelocations"),
        "default",
        Duration::from_secs(60),
        |o| phase(o) == "Available",
    )
    .await?;

    let name = format!("bench-server-{run}");
    let mapping: serde_json::Map<String, Value> = (0..namespaces)
        .map(|i| (seed::namespace(i), json!(plan::served(run, i))))
        .collect();
    let included: Vec<String> = (0..namespaces).map(seed::namespace).collect();
    let restore = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "Restore",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"backupName": plan::BACKUP, "includedNamespaces": included,
                 "namespaceMapping": mapping}
    }))?;
    let restores = api(&client, "Restore", "restores");
    let started = Instant::now();
    restores
        .create(&PostParams::default(), &restore)
        .await
        .context("creating the Restore")?;
    let done = until(&restores, &name, Duration::from_secs(3600), |o| {
        matches!(
            phase(o),
            "Completed" | "PartiallyFailed" | "Failed" | "FailedValidation"
        )
    })
    .await?;
    let items = done
        .pointer("/status/progress/itemsRestored")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    report(items, started)?;
    println!(
        "server phase={} errors={}",
        phase(&done),
        done.pointer("/status/errors")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    );
    shutdown.cancel();
    server
        .await
        .context("the server task")?
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Ok(())
}
