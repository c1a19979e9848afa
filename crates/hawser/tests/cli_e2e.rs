//! The CLI against a running `hawser server`: `backup create --wait` follows a real backup to its
//! final phase, and `get`/`describe` show what the server recorded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use cli_support::Cluster;
use serde_json::json;
use server_support::{FAST, Server, filesystem_location, seed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_a_real_backup_to_completed_and_describe_shows_its_counts() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;

    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "nightly",
            "--include-namespaces",
            "shop",
            "--storage-location",
            "default",
            "--wait",
        ])
        .await;
    assert_eq!(
        run.code,
        0,
        "stderr: {}\nserver log:\n{}",
        run.stderr,
        server.log_text()
    );
    // 5 ConfigMaps, 2 Secrets and the Namespace.
    assert!(
        run.stderr
            .contains("Backup nightly: Completed, 8 of 8 items backed up"),
        "{}",
        run.stderr
    );

    let run = cluster.hawser(&["backup", "get", "nightly"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let row: Vec<&str> = run
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..4],
        ["nightly", "Completed", "0", "0"],
        "{}",
        run.stdout
    );

    let run = cluster.hawser(&["backup", "describe", "nightly"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let items = run
        .stdout
        .lines()
        .find(|l| l.starts_with("Items backed up:"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(items.ends_with(" 8"), "{items}");
    assert!(
        !run.stdout.contains("Started:      <none>"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_exits_3_when_the_server_refuses_the_backup() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    // A read-only location: the server fails validation of every backup aimed at it.
    let mut location = cluster
        .get("velero.io/v1", "BackupStorageLocation", "default")
        .unwrap();
    location["spec"]["accessMode"] = json!("ReadOnly");
    cluster.store().insert(location).unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;

    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "refused",
            "--storage-location",
            "default",
            "-w",
        ])
        .await;
    assert_eq!(
        run.code,
        3,
        "stderr: {}\nserver log:\n{}",
        run.stderr,
        server.log_text()
    );
    assert!(
        run.stderr.contains("Backup refused: FailedValidation"),
        "{}",
        run.stderr
    );
    let run = cluster.hawser(&["backup", "describe", "refused"]).await;
    assert!(run.stdout.contains("Validation errors:"), "{}", run.stdout);
}
