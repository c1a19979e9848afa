//! `hawser server` as a process: the commit, the last write of a backup or restore, failing
//! after every other artifact was stored. The record's key is taken by a directory beforehand
//! (the filesystem provider cannot rename the record's staging file onto it), so everything but
//! the record can be written. The backup or restore must end `Failed`, saying why, and no record
//! may claim success, then or after the storage recovers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cli_support::Cluster;
use serde_json::json;
use server_checks::assert_metrics;
use server_support::{
    BUCKET, FAST, Server, artifact, create_backup, create_restore, filesystem_location, phase,
    seed, wait_final,
};

fn restore_dir(root: &Path, name: &str) -> PathBuf {
    root.join(BUCKET).join("restores").join(name)
}

/// The record key `path` is made a directory: writing the record fails, every other write works.
fn block_record(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
}

/// Waits `periods` resync periods of [`FAST`] (1 s each) and a little more.
async fn let_the_server_resync(periods: u32) {
    tokio::time::sleep(Duration::from_millis(1000 * u64::from(periods) + 300)).await;
}

#[tokio::test]
async fn a_backup_whose_record_cannot_be_stored_after_all_artifacts_ends_failed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let record_key = artifact(root.path(), "uncommitted", "velero-backup.json");
    block_record(&record_key);
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "uncommitted",
        json!({"includedNamespaces": ["shop"]}),
    );

    let done = wait_final(&cluster, &server, "Backup", "uncommitted").await;
    assert_eq!(phase(&done), "Failed", "{done:#}\n{}", server.log_text());
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "storing backups/uncommitted/velero-backup.json failed, so the backup was not committed"
        ),
        "{reason}"
    );
    // Every artifact before the record was written: the failure was the commit's.
    for file in [
        "uncommitted.tar.gz",
        "uncommitted-logs.gz",
        "uncommitted-resource-list.json.gz",
        "uncommitted-results.gz",
    ] {
        assert!(
            artifact(root.path(), "uncommitted", file).is_file(),
            "{file} missing"
        );
    }
    // The progress of the work done is kept, the phase is not Completed.
    assert_eq!(done["status"]["progress"]["itemsBackedUp"], 6, "{done:#}");
    assert_metrics(
        &server,
        &[
            "velero_backup_failure_total{schedule=\"\"} 1",
            "velero_backup_success_total{schedule=\"\"} 0",
        ],
    )
    .await;

    // The storage recovers; the server keeps resyncing. Nothing turns the backup into a success:
    // no record appears, the object stays Failed with its reason.
    std::fs::remove_dir(&record_key).unwrap();
    let_the_server_resync(3).await;
    assert!(
        !record_key.exists(),
        "a record was written after the failure: {}",
        std::fs::read_to_string(&record_key).unwrap_or_default()
    );
    let later = cluster
        .get("velero.io/v1", "Backup", "uncommitted")
        .unwrap();
    assert_eq!(phase(&later), "Failed");
    assert_eq!(
        later["status"]["failureReason"],
        done["status"]["failureReason"]
    );
}

#[tokio::test]
async fn a_restore_whose_record_cannot_be_stored_after_all_artifacts_ends_failed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let base = wait_final(&cluster, &server, "Backup", "base").await;
    assert_eq!(phase(&base), "Completed", "{}", server.log_text());

    let dir = restore_dir(root.path(), "unrecorded");
    let record_key = dir.join("restore-unrecorded-status.json");
    block_record(&record_key);
    create_restore(
        &cluster,
        "unrecorded",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-copy"}}),
    );

    let done = wait_final(&cluster, &server, "Restore", "unrecorded").await;
    assert_eq!(phase(&done), "Failed", "{done:#}\n{}", server.log_text());
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "the restore ran, but storing its record restores/unrecorded/restore-unrecorded-status.json failed"
        ),
        "{reason}"
    );
    // The restore did its work and stored its other artifacts before the record.
    let store = cluster.store();
    assert!(store.get("v1", "ConfigMap", "shop-copy", "cm-1").is_some());
    for file in [
        "restore-unrecorded-logs.gz",
        "restore-unrecorded-results.gz",
        "restore-unrecorded-resource-list.json.gz",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    assert_metrics(
        &server,
        &[
            "velero_restore_failed_total{schedule=\"\"} 1",
            "velero_restore_success_total{schedule=\"\"} 0",
        ],
    )
    .await;

    std::fs::remove_dir(&record_key).unwrap();
    let_the_server_resync(3).await;
    assert!(
        !record_key.exists(),
        "a record was written after the failure: {}",
        std::fs::read_to_string(&record_key).unwrap_or_default()
    );
    let later = cluster
        .get("velero.io/v1", "Restore", "unrecorded")
        .unwrap();
    assert_eq!(phase(&later), "Failed");
    assert_eq!(
        later["status"]["failureReason"],
        done["status"]["failureReason"]
    );
}
