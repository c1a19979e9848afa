//! Backup sync through `hawser server` processes: a second cluster pointed at the directory a
//! first cluster backed up into sees its backups, restores and deletes them, and drops the ones
//! that leave the location; records that cannot be used, backups with a pending deletion
//! request and locations with sync turned off are left alone; a record cannot set the server to
//! work or pass for a schedule's newest backup.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::path::Path;
use std::time::Duration;

use cli_support::{Cluster, NS};
use hawser_api::labels::{HAWSER_RECORD_UID, STORAGE_LOCATION};
use serde_json::{Value, json};
use server_support::*;
use store_common::files_under as files;

/// Flags of the servers here: the test flags and a sync every second.
fn flags() -> Vec<&'static str> {
    FAST.iter()
        .chain(&["--backup-sync-period", "1s"])
        .copied()
        .collect()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The `velero-backup.json` of `backup` in the location rooted at `root`, as JSON.
fn stored(root: &Path, backup: &str) -> Value {
    let bytes = std::fs::read(artifact(root, backup, "velero-backup.json")).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Stores `record` (renamed `backup`) as the record of `backup` in the location at `root`.
fn store_record(root: &Path, backup: &str, mut record: Value) {
    record["metadata"]["name"] = json!(backup);
    let bytes = serde_json::to_vec(&record).unwrap();
    write(&artifact(root, backup, "velero-backup.json"), &bytes);
}

/// A minimal record as another server would have written it.
fn hand_made(name: &str) -> Value {
    json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": NS, "uid": format!("{name}-uid")},
        "spec": {"includedNamespaces": ["shop"]},
        "status": {"phase": "Completed", "startTimestamp": "2026-01-01T00:00:00Z",
            "completionTimestamp": "2026-01-01T00:01:00Z", "expiration": "2099-01-01T00:00:00Z"}
    })
}

/// Waits (up to 15 s) for the Backup `name` to be synced into `cluster`.
async fn synced(cluster: &Cluster, server: &Server, name: &str) -> Value {
    wait_for(
        cluster,
        Some(server),
        "Backup",
        name,
        Duration::from_secs(15),
        |_| true,
    )
    .await
}

/// Returns once the sync has passed over `location` twice after this call: it writes the
/// location's `lastSyncedTime` at the end of each pass, so the second new value is written by a
/// pass that began after the call. A check that sync did *not* bring something waits for this.
async fn sync_passes(cluster: &Cluster, server: &Server, location: &str) {
    let synced_time = || {
        cluster
            .get("velero.io/v1", "BackupStorageLocation", location)
            .and_then(|l| l["status"]["lastSyncedTime"].as_str().map(str::to_owned))
    };
    let mut last = synced_time();
    for pass in 1..=2 {
        last = Some(
            poll(server, &format!("sync pass {pass} over {location}"), || {
                synced_time().filter(|t| Some(t) != last.as_ref())
            })
            .await,
        );
    }
}

#[tokio::test]
async fn a_second_cluster_sees_restores_and_deletes_the_backups_of_its_location() {
    let root = tempfile::tempdir().unwrap();
    let first = Cluster::start().await;
    seed(&first, 2);
    filesystem_location(&first, "default", root.path());
    let first_server = Server::start(&first, root.path(), FAST).await;
    for name in ["keep", "lose"] {
        create_backup(&first, name, json!({"includedNamespaces": ["shop"]}));
        let done = wait_final(&first, &first_server, "Backup", name).await;
        assert_eq!(phase(&done), "Completed", "{}", first_server.log_text());
    }
    drop(first_server);

    // Neighbours: a record that does not parse (its name sorts first), an unfinished backup
    // that has not expired, and one that has.
    write(
        &artifact(root.path(), "broken", "velero-backup.json"),
        b"{not json",
    );
    let mut unfinished = stored(root.path(), "keep");
    unfinished["status"]["phase"] = json!("Finalizing");
    unfinished["status"]["expiration"] = json!("2099-01-01T00:00:00Z");
    store_record(root.path(), "unfinished", unfinished);
    let mut expired = stored(root.path(), "keep");
    expired["status"]["phase"] = json!("WaitingForPluginOperations");
    expired["status"]["expiration"] = json!("2020-01-01T00:00:00Z");
    store_record(root.path(), "expired", expired);

    // The second cluster names the same directory otherwise: the synced backups name it.
    let second = Cluster::start().await;
    filesystem_location(&second, "dr", root.path());
    let server = Server::start(&second, root.path(), &flags()).await;

    let keep = synced(&second, &server, "keep").await;
    let record = stored(root.path(), "keep");
    assert_eq!(phase(&keep), "Completed", "{keep:#}");
    assert_eq!(keep["metadata"]["labels"][STORAGE_LOCATION], "dr");
    assert_eq!(keep["spec"]["storageLocation"], "dr");
    assert_eq!(keep["spec"]["includedNamespaces"], json!(["shop"]));
    assert_eq!(keep["status"]["expiration"], record["status"]["expiration"]);
    assert_ne!(keep["metadata"]["uid"], record["metadata"]["uid"]);
    assert_eq!(
        keep["metadata"]["annotations"][HAWSER_RECORD_UID],
        record["metadata"]["uid"]
    );
    let expired = synced(&second, &server, "expired").await;
    assert_eq!(phase(&expired), "PartiallyFailed");
    synced(&second, &server, "lose").await;
    assert!(second.get("velero.io/v1", "Backup", "broken").is_none());
    assert!(second.get("velero.io/v1", "Backup", "unfinished").is_none());
    assert!(
        server
            .log_text()
            .contains("velero-backup.json cannot be synced")
    );
    // The location's sync time is written after the Backups it brought.
    let location = wait_for(
        &second,
        Some(&server),
        "BackupStorageLocation",
        "dr",
        Duration::from_secs(20),
        |o| o["status"]["lastSyncedTime"].is_string(),
    )
    .await;
    assert_eq!(phase(&location), "Available");

    second
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "keep-here", "namespace": NS},
            "spec": {"backupName": "keep"}
        }))
        .unwrap();
    let restored = wait_final(&second, &server, "Restore", "keep-here").await;
    assert_eq!(phase(&restored), "Completed", "{}", server.log_text());
    assert!(
        second
            .store()
            .get("v1", "ConfigMap", "shop", "cm-1")
            .is_some()
    );

    // A backup whose files leave the location leaves the cluster; the others stay.
    let bucket = root.path().join(BUCKET);
    std::fs::remove_dir_all(bucket.join("backups/lose")).unwrap();
    until_gone(&second, &server, "Backup", "lose").await;
    assert!(second.get("velero.io/v1", "Backup", "keep").is_some());

    // A synced backup is deleted by request like any other, and is not synced back.
    request_deletion(&second, "keep-1", "keep");
    until_gone(&second, &server, "Backup", "keep").await;
    until_gone(&second, &server, "DeleteBackupRequest", "keep-1").await;
    assert_eq!(files(&bucket.join("backups/keep")), Vec::<String>::new());
    assert_eq!(
        files(&bucket.join("restores/keep-here")),
        Vec::<String>::new()
    );
    sync_passes(&second, &server, "dr").await;
    assert!(
        second.get("velero.io/v1", "Backup", "keep").is_none(),
        "{}",
        server.log_text()
    );
    assert!(second.get("velero.io/v1", "Backup", "expired").is_some());
}

#[tokio::test]
async fn a_pending_deletion_request_or_a_location_with_sync_off_keeps_a_backup_out() {
    let root = tempfile::tempdir().unwrap();
    let quiet_root = tempfile::tempdir().unwrap();
    store_record(root.path(), "free", hand_made("free"));
    store_record(root.path(), "pending", hand_made("pending"));
    store_record(quiet_root.path(), "quiet", hand_made("quiet"));

    let cluster = Cluster::start().await;
    filesystem_location(&cluster, "dr", root.path());
    let mut off = cluster
        .get("velero.io/v1", "BackupStorageLocation", "dr")
        .unwrap();
    off["metadata"] = json!({"name": "off", "namespace": NS});
    off["spec"]["config"]["root"] = json!(quiet_root.path().to_str().unwrap());
    off["spec"]["backupSyncPeriod"] = json!("0s");
    cluster.store().insert(off).unwrap();
    // A deletion of `pending` in progress that the server cannot finish while the fault lasts
    // (its requests cannot be written).
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
            "metadata": {"name": "pending-1", "namespace": NS},
            "spec": {"backupName": "pending"},
            "status": {"phase": "InProgress"}
        }))
        .unwrap();
    let stuck = cluster.sim.faults().status(
        kube_sim::StatusFault::new(503)
            .verbs(&["patch", "update"])
            .resources(&["deletebackuprequests"]),
    );
    let mut args: Vec<&str> = flags();
    args.extend(["--filesystem-root", quiet_root.path().to_str().unwrap()]);
    let server = Server::start(&cluster, root.path(), &args).await;

    synced(&cluster, &server, "free").await;
    sync_passes(&cluster, &server, "dr").await;
    assert!(cluster.get("velero.io/v1", "Backup", "pending").is_none());
    assert!(cluster.get("velero.io/v1", "Backup", "quiet").is_none());
    let off = cluster
        .get("velero.io/v1", "BackupStorageLocation", "off")
        .unwrap();
    assert_eq!(phase(&off), "Available", "{off:#}");
    assert!(off["status"].get("lastSyncedTime").is_none(), "{off:#}");

    // Once the request is processed, nothing holds the backup back any more.
    cluster.sim.faults().remove(stuck);
    let pending = synced(&cluster, &server, "pending").await;
    assert_eq!(phase(&pending), "Completed");
}

#[tokio::test]
async fn a_record_in_the_bucket_cannot_set_the_server_to_work_or_pass_for_a_schedules_newest() {
    let root = tempfile::tempdir().unwrap();
    store_record(root.path(), "free", hand_made("free"));
    // A record left running, with a finalizer and the server's own marks.
    let mut running = hand_made("running");
    running["status"]["phase"] = json!("InProgress");
    running["metadata"]["finalizers"] = json!(["example.com/keep"]);
    running["metadata"]["annotations"] =
        json!({"hawser.io/owner": "gone", "hawser.io/attempt": "2"});
    store_record(root.path(), "running", running);
    // A record that claims to be the newest backup of a schedule, dated in the future.
    let mut newest = hand_made("newest");
    newest["metadata"]["labels"] = json!({"velero.io/schedule-name": "daily"});
    newest["status"]["startTimestamp"] = json!("2099-01-01T00:00:00Z");
    store_record(root.path(), "newest", newest);

    let cluster = Cluster::start().await;
    filesystem_location(&cluster, "dr", root.path());
    let server = Server::start(&cluster, root.path(), &flags()).await;

    assert_eq!(phase(&synced(&cluster, &server, "free").await), "Completed");
    let running = synced(&cluster, &server, "running").await;
    assert_eq!(phase(&running), "Failed", "{running:#}");
    assert!(
        running["status"]["failureReason"]
            .as_str()
            .unwrap()
            .starts_with("synced unfinished"),
        "{running:#}"
    );
    assert!(
        running["metadata"].get("finalizers").is_none(),
        "{running:#}"
    );
    let annotations = &running["metadata"]["annotations"];
    assert!(annotations.get("hawser.io/owner").is_none(), "{running:#}");
    assert!(
        annotations.get("hawser.io/attempt").is_none(),
        "{running:#}"
    );
    let newest = synced(&cluster, &server, "newest").await;
    let start: jiff::Timestamp = newest["status"]["startTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(start <= jiff::Timestamp::now(), "{newest:#}");

    // The restore by schedule does not take the synced backup.
    create_restore(&cluster, "from-daily", json!({"scheduleName": "daily"}));
    let restore = wait_final(&cluster, &server, "Restore", "from-daily").await;
    assert_eq!(phase(&restore), "FailedValidation", "{restore:#}");
    let why = restore["status"]["validationErrors"][0].as_str().unwrap();
    assert!(why.contains("spec.backupName"), "{why}");

    // The Failed record stays Failed: no worker takes it up (nor does sync write it again).
    passes(&cluster, &server, "backups", 3).await;
    let running = cluster.get("velero.io/v1", "Backup", "running").unwrap();
    assert_eq!(phase(&running), "Failed", "{running:#}");
}
