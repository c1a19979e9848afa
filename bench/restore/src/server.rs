//! The restore as a user gets it: `hawser server` (the library, in this worker process, so the
//! peak RSS is the server's) with the given flags, and a Restore object created through the
//! API, timed from its creation until the server has written its final phase. Everything the
//! server does on the way counts: picking the object up, validation, its rate-limited client
//! (`--client-qps`, `--client-burst`), progress writes, the record and the final status.

use anyhow::Result;
use bench_common::server::{self, NAMESPACE, phase};
use bench_common::{seed, worker::report};
use serde_json::{Value, json};

use crate::plan;

/// Restores the first `namespaces` application namespaces of the backup into the namespaces
/// of `run` through a server started with `flags`, its location under `root`. Prints
/// `server phase=… errors=…`.
pub async fn restore(
    url: &str,
    root: &str,
    run: usize,
    namespaces: usize,
    flags: &[String],
) -> Result<()> {
    let client = bench_common::client(url)?;
    let running = server::start(url, root, flags).await?;
    let mapping: serde_json::Map<String, Value> = (0..namespaces)
        .map(|i| (seed::namespace(i), json!(plan::served(run, i))))
        .collect();
    let included: Vec<String> = (0..namespaces).map(seed::namespace).collect();
    let restore = json!({
        "apiVersion": "velero.io/v1", "kind": "Restore",
        "metadata": {"name": format!("bench-server-{run}"), "namespace": NAMESPACE},
        "spec": {"backupName": plan::BACKUP, "includedNamespaces": included,
                 "namespaceMapping": mapping}
    });
    let (done, started) = running.run(&client, "Restore", "restores", restore).await?;
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
    running.stop().await
}
