//! The controllers of the table, in process: each started alone (with the ones whose objects it
//! needs) against kube-sim through [`Harness`], then driven through its objects. Not started
//! here: the `backup-operations` row (the item operations of backups recovery hands back; the
//! same following code runs here for a backup's own operations, through the `backup` row) and
//! the restore row's deletion of a deleted Restore's files. The process suites (the `hawser`
//! binary's tests) cover every controller through the command line, outages and restarts;
//! these show each one's contract where its code is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::time::Duration;

use kube_sim::csi::{self, CsiConfig, CsiSim};
use serde_json::{Value, json};

use super::harness::{Harness, NS};

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A harness with a default filesystem location, `shop`'s three ConfigMaps, the location and
/// backup controllers and `more`, and a Completed backup `b1` of `shop`.
async fn backed_up(more: &[&str]) -> Harness {
    let mut h = Harness::start(&[]).await;
    h.location("default");
    h.seed(3);
    h.run(&["backup-storage-location", "backup"]);
    h.run(more);
    h.create("Backup", "b1", json!({"includedNamespaces": ["shop"]}));
    h.until_phase("Backup", "b1", "Completed").await;
    h
}

/// [`backed_up`] with the restore controller on, then `cm-0` deleted.
async fn backed_up_then_lost() -> Harness {
    let h = backed_up(&["restore"]).await;
    h.sim
        .store()
        .delete("v1", "ConfigMap", "shop", "cm-0")
        .unwrap();
    h
}

#[tokio::test]
async fn backup_storage_location_is_validated_available() {
    let mut h = Harness::start(&[]).await;
    h.location("default");
    h.run(&["backup-storage-location"]);
    let bsl = h
        .until_phase("BackupStorageLocation", "default", "Available")
        .await;
    assert!(
        !text(&bsl, "/status/lastValidationTime").is_empty(),
        "{bsl}"
    );
}

#[tokio::test]
async fn backup_runs_to_completed_and_is_committed_with_its_record() {
    let h = backed_up(&[]).await;
    let backup = h.velero("Backup", "b1").unwrap();
    assert_eq!(text(&backup, "/spec/storageLocation"), "default");
    assert_eq!(
        backup["status"]["progress"]["itemsBackedUp"],
        json!(4),
        "{backup}"
    );
    assert_eq!(backup["status"]["formatVersion"], json!("1.1.0"));
    assert!(!text(&backup, "/status/completionTimestamp").is_empty());
    let record: Value =
        serde_json::from_slice(&std::fs::read(h.artifact("b1", "velero-backup.json")).unwrap())
            .unwrap();
    assert_eq!(record["status"]["phase"], json!("Completed"));
    assert!(h.artifact("b1", "b1.tar.gz").exists());
}

#[tokio::test]
async fn an_invalid_backup_fails_validation_with_its_messages() {
    let mut h = Harness::start(&[]).await;
    h.location("default");
    h.run(&["backup-storage-location", "backup"]);
    h.create(
        "Backup",
        "bad",
        json!({"includedResources": ["configmaps"], "includeClusterResources": true,
               "includedClusterScopedResources": ["namespaces"]}),
    );
    let backup = h.until_phase("Backup", "bad", "FailedValidation").await;
    assert_eq!(
        backup["status"]["validationErrors"],
        json!([hawser_core::selection::MIXED_FILTERS_MESSAGE]),
        "{backup}"
    );
    assert!(!h.artifact("bad", "velero-backup.json").exists());
}

#[tokio::test]
async fn restore_brings_back_a_deleted_object() {
    let h = backed_up_then_lost().await;
    h.create("Restore", "r1", json!({"backupName": "b1"}));
    let restore = h.until_phase("Restore", "r1", "Completed").await;
    let cm = h
        .get("v1", "ConfigMap", "shop", "cm-0")
        .expect("cm-0 is restored");
    assert_eq!(cm["data"]["index"], json!("0"));
    assert_eq!(
        cm["metadata"]["labels"]["velero.io/restore-name"],
        json!("r1")
    );
    assert!(!text(&restore, "/status/startTimestamp").is_empty());
}

/// An invalid hook spec (Velero refuses it too) and resource policies hawser does not apply:
/// each Restore fails validation before it is claimed, and nothing is restored.
#[tokio::test]
async fn restores_that_cannot_be_honoured_fail_validation_and_restore_nothing() {
    let h = backed_up_then_lost().await;
    let selector =
        json!({"matchExpressions": [{"key": "app", "operator": "Sideways", "values": ["x"]}]});
    h.create(
        "Restore",
        "hooked",
        json!({"backupName": "b1", "hooks": {"resources": [
            {"name": "bad", "labelSelector": selector,
             "postHooks": [{"exec": {"command": ["true"]}}]}
        ]}}),
    );
    h.create(
        "Restore",
        "filtered",
        json!({"backupName": "b1", "resourcePolicy": {"kind": "configmap", "name": "filters"}}),
    );
    for (name, field) in [
        ("hooked", "spec.hooks"),
        ("filtered", "spec.resourcePolicy"),
    ] {
        let restore = h.until_phase("Restore", name, "FailedValidation").await;
        let errors = restore["status"]["validationErrors"].to_string();
        assert!(errors.contains(field), "{restore}");
        assert!(
            restore.pointer("/status/startTimestamp").is_none(),
            "never claimed: {restore}"
        );
    }
    assert!(h.get("v1", "ConfigMap", "shop", "cm-0").is_none());
}

#[tokio::test]
async fn deletion_removes_the_backup_its_files_and_the_request() {
    let mut h = backed_up(&[]).await;
    h.run(&["backup-deletion"]);
    h.create(
        "DeleteBackupRequest",
        "b1-delete",
        json!({"backupName": "b1"}),
    );
    h.until("the Backup to be gone", |h| {
        h.velero("Backup", "b1").is_none().then_some(())
    })
    .await;
    assert!(!h.artifact("b1", "velero-backup.json").exists());
    assert!(!h.artifact("b1", "b1.tar.gz").exists());
    h.until("the request to be gone", |h| {
        h.velero("DeleteBackupRequest", "b1-delete")
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn sync_makes_the_backups_of_a_location_objects_of_another_cluster() {
    let first = backed_up(&[]).await;
    // A location is looked at again a sync period after a pass found it not yet validated.
    let mut second = Harness::start_at(&first.root, &["--backup-sync-period", "1s"]).await;
    second.location("default");
    second.run(&["backup-storage-location", "backup-sync"]);
    let synced = second.until_phase("Backup", "b1", "Completed").await;
    assert_eq!(text(&synced, "/spec/storageLocation"), "default");
    assert_eq!(
        synced["metadata"]["labels"]["velero.io/storage-location"],
        json!("default")
    );
    assert_ne!(
        text(&synced, "/metadata/uid"),
        text(&first.velero("Backup", "b1").unwrap(), "/metadata/uid")
    );
}

#[tokio::test]
async fn download_request_is_processed_with_a_url() {
    let mut h = backed_up(&[]).await;
    h.run(&["download-request"]);
    h.create(
        "DownloadRequest",
        "b1-log",
        json!({"target": {"kind": "BackupLog", "name": "b1"}}),
    );
    let request = h
        .until_phase("DownloadRequest", "b1-log", "Processed")
        .await;
    assert!(
        !text(&request, "/status/downloadURL").is_empty(),
        "{request}"
    );
    assert!(!text(&request, "/status/expiration").is_empty());
}

#[tokio::test]
async fn gc_asks_for_the_deletion_of_an_expired_backup() {
    let mut h = backed_up(&[]).await;
    // Long expired.
    let mut backup = h.velero("Backup", "b1").unwrap();
    backup["status"]["expiration"] = json!("2020-01-01T00:00:00Z");
    h.sim.store().set_status(&backup).unwrap();
    h.run(&["gc"]);
    let request = h
        .until("a DeleteBackupRequest for b1", |h| {
            h.all("DeleteBackupRequest")
                .into_iter()
                .find(|r| text(r, "/spec/backupName") == "b1")
        })
        .await;
    assert!(
        text(&request, "/metadata/name").starts_with("b1-"),
        "{request}"
    );
}

#[tokio::test]
async fn schedule_is_enabled_or_fails_validation() {
    let mut h = Harness::start(&[]).await;
    h.run(&["schedule"]);
    h.create(
        "Schedule",
        "nightly",
        json!({"schedule": "0 3 * * *", "template": {"includedNamespaces": ["shop"]}}),
    );
    h.create(
        "Schedule",
        "broken",
        json!({"schedule": "every night", "template": {}}),
    );
    h.until_phase("Schedule", "nightly", "Enabled").await;
    let broken = h
        .until_phase("Schedule", "broken", "FailedValidation")
        .await;
    assert!(
        !broken["status"]["validationErrors"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{broken}"
    );
    assert!(h.all("Backup").is_empty(), "no run was due");
}

#[tokio::test]
async fn server_status_request_is_answered() {
    let mut h = Harness::start(&[]).await;
    h.run(&["server-status-request"]);
    h.create("ServerStatusRequest", "ask", json!({}));
    let answered = h
        .until_phase("ServerStatusRequest", "ask", "Processed")
        .await;
    assert_eq!(
        text(&answered, "/status/serverVersion"),
        super::server_status::server_version()
    );
    assert!(
        answered["status"]["plugins"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
}

#[tokio::test]
async fn a_volume_snapshot_location_is_reported_unusable() {
    let mut h = Harness::start(&[]).await;
    h.run(&["volume-snapshot-location"]);
    h.create("VolumeSnapshotLocation", "ebs", json!({"provider": "aws"}));
    h.until("the location's Warning Event", |h| {
        h.sim
            .store()
            .list("events.k8s.io/v1", "Event", Some(NS))
            .into_iter()
            .find(|e| {
                text(e, "/reason") == "VolumeSnapshotsUnsupported"
                    && text(e, "/regarding/name") == "ebs"
                    && text(e, "/type") == "Warning"
            })
    })
    .await;
    let vsl = h.velero("VolumeSnapshotLocation", "ebs").unwrap();
    assert!(vsl.pointer("/status/phase").is_none(), "left alone: {vsl}");
}

/// The item operations a backup hands over (`operations.rs`, which the `backup-operations` row
/// also runs for the backups recovery hands back): a claim's CSI snapshot is cut, the backup
/// waits for it in `WaitingForPluginOperations`, then completes with the counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_follows_its_snapshot_operation_to_completed() {
    let mut h = Harness::start(&[]).await;
    let config = CsiConfig {
        ready_after: Duration::from_millis(300),
        ..CsiConfig::default()
    };
    let _csi = CsiSim::start(h.ctx.client.clone(), config).await.unwrap();
    h.location("default");
    h.seed(0);
    h.insert(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "shop"},
        "spec": {"storageClassName": csi::STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}
    }));
    h.until("the claim to be bound", |h| {
        h.get("v1", "PersistentVolumeClaim", "shop", "data")
            .filter(|c| !text(c, "/spec/volumeName").is_empty())
    })
    .await;
    h.run(&["backup-storage-location", "backup"]);
    h.create(
        "Backup",
        "snap",
        json!({"includedNamespaces": ["shop"], "itemOperationTimeout": "1m"}),
    );
    let backup = h.until_phase("Backup", "snap", "Completed").await;
    let status = &backup["status"];
    assert_eq!(
        status["backupItemOperationsAttempted"],
        json!(1),
        "{backup}"
    );
    assert_eq!(status["backupItemOperationsCompleted"], json!(1));
    assert_eq!(status["csiVolumeSnapshotsCompleted"], json!(1));
    let snapshots =
        h.sim
            .store()
            .list("snapshot.storage.k8s.io/v1", "VolumeSnapshot", Some("shop"));
    assert!(
        snapshots.is_empty(),
        "the snapshot object is cleaned up: {snapshots:?}"
    );
    assert!(h.artifact("snap", "snap-itemoperations.json.gz").exists());
}
