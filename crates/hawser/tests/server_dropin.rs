//! hawser as a drop-in for the image of a Velero Deployment: the binary, called `/velero` as
//! Velero's container calls it, runs with the argument lists `velero install` writes, becomes
//! ready, completes a backup, and says once for each Velero flag it does not act on that it has
//! no effect. VolumeSnapshotLocations are reported as unusable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cli_support::{Cluster, NS};
use serde_json::json;
use server_support::{
    FAST, Server, artifact, create_backup, create_restore, filesystem_location, gunzip, passes,
    phase, poll, seed, wait_final,
};

/// What the log says for each flag accepted without effect.
const NOT_IMPLEMENTED: &str = "Velero flag accepted, not implemented";

/// The hawser binary under Velero's name, as the image's `/velero`.
fn velero_binary(dir: &Path) -> PathBuf {
    let link = dir.join("velero");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hawser"), &link).unwrap();
    link
}

/// The environment a Velero Deployment gives its container.
const VELERO_ENV: &[(&str, &str)] = &[
    ("VELERO_NAMESPACE", NS),
    ("VELERO_SCRATCH_DIR", "/scratch"),
    ("LD_LIBRARY_PATH", "/plugins"),
];

/// Starts `/velero ARGS --metrics-address=<free>` and waits until it is ready.
async fn start_as_velero(cluster: &Cluster, dir: &Path, args: &[&str]) -> Server {
    let metrics_addr = Server::free_address();
    let metrics_flag = format!("--metrics-address={metrics_addr}");
    let mut all = args.to_vec();
    all.push(&metrics_flag);
    // Velero's arguments stay as they are; the filesystem location's root is allowed through
    // the environment.
    let mut env = VELERO_ENV.to_vec();
    env.push(("HAWSER_FILESYSTEM_ROOT", dir.to_str().unwrap()));
    let server = Server::spawn_program(cluster, dir, &velero_binary(dir), &all, &env, metrics_addr);
    server.wait_ready(Duration::from_secs(30)).await;
    server
}

/// The log lines about flags without effect, one per flag: each given flag's name appears in
/// exactly one of them.
fn assert_reported_once(log: &str, flags: &[&str], flag_field: impl Fn(&str) -> String) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(NOT_IMPLEMENTED))
        .collect();
    assert_eq!(lines.len(), flags.len(), "{lines:#?}");
    for flag in flags {
        let field = flag_field(flag);
        let count = lines.iter().filter(|l| l.contains(&field)).count();
        assert_eq!(count, 1, "{field} in {lines:#?}");
    }
}

async fn backup_completes(cluster: &Cluster, server: &Server, root: &Path) {
    filesystem_location(cluster, "default", root);
    create_backup(cluster, "first", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(cluster, server, "Backup", "first").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
}

#[tokio::test]
async fn the_arguments_of_velero_install_run_a_server_that_backs_up() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    // The container of a Deployment `velero install` writes: command `/velero`, these args.
    let server = start_as_velero(
        &cluster,
        root.path(),
        &[
            "server",
            "--uploader-type=kopia",
            "--features=",
            "--log-level=info",
        ],
    )
    .await;
    backup_completes(&cluster, &server, root.path()).await;
    assert_reported_once(
        &server.log_text(),
        &["--uploader-type", "--features"],
        |flag| format!("flag={flag} "),
    );
    assert!(
        server.log_text().contains("value=kopia"),
        "{}",
        server.log_text()
    );
    // Without EnableCSI Velero cuts no CSI snapshots; hawser does, and says so.
    assert!(
        server.log_text().contains("--features has no EnableCSI"),
        "{}",
        server.log_text()
    );
}

#[tokio::test]
async fn a_long_velero_argument_list_runs_and_each_unused_flag_is_logged_once() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let not_implemented = [
        "--features",
        "--uploader-type",
        "--fs-backup-timeout",
        "--item-operation-sync-frequency",
        "--default-repo-maintain-frequency",
        "--keep-latest-maintenance-jobs",
        "--maintenance-job-cpu-request",
        "--maintenance-job-mem-limit",
        "--disable-informer-cache",
        "--profiler-address",
        "--backup-repository-configmap",
        "--repo-maintenance-job-configmap",
        "--plugin-dir",
        "--max-concurrent-k8s-connections",
        "--item-block-worker-count",
        "--terminating-resource-timeout",
        "--volume-group-snapshot-label-key",
        "--default-volume-snapshot-locations",
        "--colorized",
    ];
    let server = start_as_velero(
        &cluster,
        root.path(),
        &[
            "server",
            "--features=EnableCSI,EnableAPIGroupVersions",
            "--uploader-type",
            "kopia",
            "--default-volumes-to-fs-backup",
            "--restore-only=false",
            "--disable-controllers=backup-sync,restore-operations",
            "--disable-controllers",
            "gc",
            "--fs-backup-timeout=4h0m0s",
            "--default-item-operation-timeout=4h",
            "--item-operation-sync-frequency=10s",
            "--default-repo-maintain-frequency=168h",
            "--keep-latest-maintenance-jobs=3",
            "--maintenance-job-cpu-request=0",
            "--maintenance-job-mem-limit=0",
            "--default-snapshot-move-data=false",
            "--disable-informer-cache=true",
            "--profiler-address=localhost:6060",
            "--backup-repository-configmap=repository-settings",
            "--repo-maintenance-job-configmap=maintenance-settings",
            "--plugin-dir=/plugins",
            "--max-concurrent-k8s-connections=30",
            "--item-block-worker-count=1",
            "--terminating-resource-timeout=10m",
            "--volume-group-snapshot-label-key=velero.io/volume-group",
            "--default-volume-snapshot-locations=aws:default",
            "--default-volume-snapshot-locations",
            "gcp:other",
            "--colorized=false",
            // Flags hawser implements, written as Velero's users write them.
            "--log-level=info",
            "--log-format=json",
            "--client-qps=50",
            "--client-burst=100",
            "--client-page-size=500",
            "--default-backup-ttl=720h",
            "--store-validation-frequency=1s",
            "--garbage-collection-frequency=1h",
            "--concurrent-backups=2",
            "--concurrent-backups=1",
            "--schedule-skip-immediately=false",
            "--resource-timeout=10m",
            "--default-backup-storage-location=default",
            "--status-resync-period=1s",
            "--global-backup-volume-policies-configmap=global-volumes",
        ],
    )
    .await;
    backup_completes(&cluster, &server, root.path()).await;
    // A Velero 1.18 setting hawser does not act on is a warning on every backup (beside the
    // one of --default-volumes-to-fs-backup).
    let done = cluster.get("velero.io/v1", "Backup", "first").unwrap();
    assert_eq!(done["status"]["warnings"], 2, "{done:#}");
    let results = gunzip(&artifact(root.path(), "first", "first-results.gz"));
    assert!(
        results.contains("server flag --global-backup-volume-policies-configmap: hawser does not merge global volume policies into backups, so those of ConfigMap global-volumes were not used"),
        "{results}"
    );
    let log = server.log_text();
    assert_reported_once(&log, &not_implemented, |flag| {
        format!("\"flag\":\"{flag}\"")
    });
    // List flags report every value; a repeated flag once.
    assert!(log.contains("\"value\":\"aws:default,gcp:other\""), "{log}");
    // With EnableCSI hawser and Velero agree on CSI snapshots.
    assert!(!log.contains("has no EnableCSI"), "{log}");
    // The controllers named are not started (`restore-operations` has none here).
    assert!(
        log.contains(r#""disabled_controllers":"backup-sync,gc""#),
        "{log}"
    );

    // A VolumeSnapshotLocation is reported as one hawser cannot use: a warning in the log and a
    // Warning Event on it; its status.phase stays unset, as Velero leaves it.
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "VolumeSnapshotLocation",
            "metadata": {"name": "default", "namespace": NS},
            "spec": {"provider": "aws", "config": {"region": "eu-west-1"}}
        }))
        .unwrap();
    let store = cluster.store();
    let event = poll(&server, "the VolumeSnapshotLocation's Event", || {
        store
            .list("events.k8s.io/v1", "Event", Some(NS))
            .into_iter()
            .find(|e| e["regarding"]["kind"] == "VolumeSnapshotLocation")
    })
    .await;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "VolumeSnapshotsUnsupported");
    assert_eq!(event["regarding"]["name"], "default");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("provider \"aws\""), "{note}");
    assert!(note.contains("without volume snapshots"), "{note}");
    assert!(
        server
            .log_text()
            .contains("VolumeSnapshotLocation cannot be used"),
        "{}",
        server.log_text()
    );
    let vsl = cluster
        .get("velero.io/v1", "VolumeSnapshotLocation", "default")
        .unwrap();
    assert!(vsl.pointer("/status/phase").is_none(), "{vsl:#}");
}

#[tokio::test]
async fn a_value_velero_would_refuse_stops_the_server_with_a_usage_error() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(velero_binary(dir.path()))
        .args(["server", "--fs-backup-timeout=four hours"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--fs-backup-timeout"), "{stderr}");
}

/// A Schedule `every-minute` of namespace `shop`: a running schedule controller validates it
/// (`Enabled`) and makes a backup from it at once.
fn every_minute_schedule(cluster: &Cluster) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": "every-minute", "namespace": NS},
            "spec": {"schedule": "@every 1m", "template": {"includedNamespaces": ["shop"]}}
        }))
        .unwrap();
}

/// No schedule controller touched `every-minute`.
fn schedule_left_alone(cluster: &Cluster) {
    let schedule = cluster
        .store()
        .get("velero.io/v1", "Schedule", NS, "every-minute")
        .unwrap();
    assert!(schedule.pointer("/status/phase").is_none(), "{schedule:#}");
}

/// `--restore-only`, Velero's deprecated mode: restores are made; backups, deletions and
/// schedules are left alone (no phase, no backup from the Schedule), and the log says the flag
/// is deprecated.
#[tokio::test]
async fn restore_only_restores_and_leaves_backups_and_schedules_alone() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let mut first = Server::start(&cluster, root.path(), FAST).await;
    backup_completes(&cluster, &first, root.path()).await;
    first.terminate();
    assert_eq!(first.wait_exit(Duration::from_secs(30)).await, Some(0));

    let mut args = FAST.to_vec();
    args.push("--restore-only");
    let server = Server::start(&cluster, root.path(), &args).await;
    create_backup(&cluster, "not-now", json!({"includedNamespaces": ["shop"]}));
    every_minute_schedule(&cluster);
    create_restore(
        &cluster,
        "back",
        json!({"backupName": "first", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "back").await;
    assert_eq!(phase(&restored), "Completed", "{restored:#}");
    // Three passes of the storage-location controller (one a second), in which a running
    // backup or schedule controller would act.
    passes(&cluster, &server, "backupstoragelocations", 3).await;
    let store = cluster.store();
    let backup = store.get("velero.io/v1", "Backup", NS, "not-now").unwrap();
    assert!(backup.pointer("/status/phase").is_none(), "{backup:#}");
    schedule_left_alone(&cluster);
    let backups = store.list("velero.io/v1", "Backup", Some(NS));
    assert_eq!(
        backups.len(),
        2,
        "no backup from the Schedule: {backups:#?}"
    );
    let log = server.log_text();
    assert!(log.contains("--restore-only is deprecated"), "{log}");
}

/// A disabled controller does not run (its objects are left alone) while the others do; a
/// name Velero does not know, or the storage-location controller, stops the server with
/// Velero's message.
#[tokio::test]
async fn disabled_controllers_do_not_run_and_unknown_names_are_refused() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let mut args = FAST.to_vec();
    args.extend([
        "--disable-controllers=schedule,backup-repo",
        "--disable-controllers",
        "gc",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;
    every_minute_schedule(&cluster);
    backup_completes(&cluster, &server, root.path()).await;
    // Two passes of the storage-location controller (one a second), in which a running
    // schedule controller would act.
    passes(&cluster, &server, "backupstoragelocations", 2).await;
    schedule_left_alone(&cluster);
    assert_eq!(
        cluster
            .store()
            .list("velero.io/v1", "Backup", Some(NS))
            .len(),
        1
    );

    for name in ["nope", "backup-storage-location"] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args(["server", "--disable-controllers", name])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .output()
            .await
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "Invalid value for --disable-controllers flag provided: {name}. Valid values are: backup,backup-queue,"
            )),
            "{stderr}"
        );
    }
}
