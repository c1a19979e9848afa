//! `--through-server`: the same backup through the path a user runs. `hawser server` (the
//! library, in this worker process, so the peak RSS is the server's) against the same kube-sim,
//! a Backup of everything created through the API, timed from that create until the server has
//! written its final phase (after storing `velero-backup.json`).

use anyhow::Result;
use bench_common::server::{self, NAMESPACE, phase};
use bench_common::worker::report;
use serde_json::{Value, json};

/// Backs the cluster up as Backup `name` through a server whose location `default` is under
/// `root`. Prints `server phase=…`.
pub async fn backup(url: &str, root: &str, name: &str) -> Result<()> {
    let client = bench_common::client(url)?;
    let running = server::start(url, root, &[]).await?;
    let backup = json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"storageLocation": "default"}
    });
    let (done, started) = running.run(&client, "Backup", "backups", backup).await?;
    let items = done
        .pointer("/status/progress/itemsBackedUp")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    report(items, started)?;
    println!("server phase={}", phase(&done));
    running.stop().await
}
