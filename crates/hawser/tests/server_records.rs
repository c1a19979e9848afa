//! `hawser server` as a process and what the storage location already holds: a backup name that
//! is taken there, records of an earlier object of the same name, and objects created while the
//! API was unreachable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use hawser_status::{Kind, restart_failure_reason};
use serde_json::{Value, json};
use server_checks::assert_metrics;
use server_support::{
    BUCKET, FAST, Server, create_backup, filesystem_location, phase, seed, wait_final,
};
use store_common::files_under;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A Backup or Restore left `InProgress` by an instance that no longer runs.
fn orphan(cluster: &Cluster, kind: &str, name: &str, spec: Value) -> Value {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": NS,
                "annotations": {hawser_api::labels::HAWSER_OWNER: "hawser-gone"}},
            "spec": spec,
            "status": {"phase": "InProgress", "startTimestamp": "2026-01-01T00:00:00Z"}
        }))
        .unwrap()
}

/// A record as hawser writes it: the object with its final status, under `uid`.
fn record(kind: &str, name: &str, uid: &str) -> Vec<u8> {
    json!({
        "apiVersion": "velero.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "status": {"phase": "Completed", "startTimestamp": "2026-01-01T00:00:00Z",
            "completionTimestamp": "2026-01-01T00:05:00Z", "errors": 0, "warnings": 0}
    })
    .to_string()
    .into_bytes()
}

fn uid(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap()
}

#[tokio::test]
async fn a_backup_named_like_one_already_in_the_location_fails_validation_and_changes_nothing() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    // A backup of that name made earlier (by this cluster or another one sharing the bucket).
    let dir = root.path().join(BUCKET).join("backups/taken");
    let earlier_record = record("Backup", "taken", "uid-of-the-earlier-backup");
    write(&dir.join("velero-backup.json"), &earlier_record);
    write(&dir.join("taken.tar.gz"), b"the earlier archive");
    let server = Server::start(&cluster, root.path(), FAST).await;

    create_backup(&cluster, "taken", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "taken").await;

    assert_eq!(phase(&done), "FailedValidation", "{done:#}");
    assert_eq!(
        done["status"]["validationErrors"],
        json!([
            "a backup named taken already exists in BackupStorageLocation default; choose another name"
        ])
    );
    assert!(done["status"].get("startTimestamp").is_none(), "{done:#}");
    // The earlier backup is untouched, and nothing was added next to it.
    assert_eq!(
        files_under(&dir),
        ["taken.tar.gz", "velero-backup.json"],
        "files of backups/taken"
    );
    assert_eq!(
        std::fs::read(dir.join("velero-backup.json")).unwrap(),
        earlier_record
    );
    assert_eq!(
        std::fs::read(dir.join("taken.tar.gz")).unwrap(),
        b"the earlier archive"
    );
}

#[tokio::test]
async fn recovery_does_not_take_the_outcome_of_a_record_with_another_uid() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let bucket = root.path().join(BUCKET);
    // A restorable backup for the restores below.
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "base", "namespace": NS},
            "spec": {"storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();
    // Left unfinished by a server that is gone. `stale`'s records were written for an earlier
    // object of the same name (another uid); `own`'s for the object itself.
    let stale = orphan(
        &cluster,
        "Backup",
        "stale",
        json!({"storageLocation": "default"}),
    );
    let own = orphan(
        &cluster,
        "Backup",
        "own",
        json!({"storageLocation": "default"}),
    );
    let stale_r = orphan(
        &cluster,
        "Restore",
        "stale-r",
        json!({"backupName": "base"}),
    );
    let own_r = orphan(&cluster, "Restore", "own-r", json!({"backupName": "base"}));
    assert_ne!(uid(&stale), "uid-of-an-earlier-object");
    write(
        &bucket.join("backups/stale/velero-backup.json"),
        &record("Backup", "stale", "uid-of-an-earlier-object"),
    );
    write(
        &bucket.join("backups/own/velero-backup.json"),
        &record("Backup", "own", uid(&own)),
    );
    write(
        &bucket.join("restores/stale-r/restore-stale-r-status.json"),
        &record("Restore", "stale-r", "uid-of-an-earlier-object"),
    );
    write(
        &bucket.join("restores/own-r/restore-own-r-status.json"),
        &record("Restore", "own-r", uid(&own_r)),
    );
    assert_ne!(uid(&stale_r), "uid-of-an-earlier-object");

    // Not run again (--resume-attempts 0): what recovery decides from the records is the point.
    let mut flags = FAST.to_vec();
    flags.extend(["--resume-attempts", "0"]);
    let server = Server::start(&cluster, root.path(), &flags).await;

    for (kind, name, server_kind) in [
        ("Backup", "stale", Kind::Backup),
        ("Restore", "stale-r", Kind::Restore),
    ] {
        let done = wait_final(&cluster, &server, kind, name).await;
        assert_eq!(phase(&done), "Failed", "{name}: {done:#}");
        assert_eq!(
            done["status"]["failureReason"],
            json!(restart_failure_reason(server_kind)),
            "{name}"
        );
    }
    // The records of the objects themselves are used (the test can tell the two apart).
    for (kind, name) in [("Backup", "own"), ("Restore", "own-r")] {
        let done = wait_final(&cluster, &server, kind, name).await;
        assert_eq!(phase(&done), "Completed", "{name}: {done:#}");
        assert_eq!(
            done["status"]["completionTimestamp"], "2026-01-01T00:05:00Z",
            "{name}"
        );
    }
}

#[tokio::test]
async fn objects_created_while_the_api_or_its_watch_is_out_are_taken_up_by_the_resync() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let base = wait_final(&cluster, &server, "Backup", "base").await;
    assert_eq!(phase(&base), "Completed", "{}", server.log_text());

    // 1. The API refuses every connection for 4 s; meanwhile a Backup and a Restore are created
    //    (straight into the simulator's store, as another API server replica would take them)
    //    and the watch history is compacted.
    let outage = Duration::from_secs(4);
    cluster.sim.faults().refuse(Some(outage));
    let outage_start = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    create_backup(&cluster, "during", json!({"includedNamespaces": ["shop"]}));
    restore_base(&cluster, "during-r", "shop-during");
    // The watch history is compacted too: a watch cannot resume where it broke off, the server
    // has to list again to find what was created.
    cluster.store().sim().compact_history();

    let backup = wait_final(&cluster, &server, "Backup", "during").await;
    let restore = wait_final(&cluster, &server, "Restore", "during-r").await;
    assert!(
        outage_start.elapsed() >= outage - Duration::from_millis(200),
        "finished during the outage?"
    );
    assert_eq!(
        phase(&backup),
        "Completed",
        "{backup:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        phase(&restore),
        "Completed",
        "{restore:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        backup["status"]["progress"]["itemsBackedUp"], 5,
        "{backup:#}"
    );
    let store = cluster.store();
    assert!(
        store
            .get("v1", "ConfigMap", "shop-during", "cm-1")
            .is_some()
    );

    // 2. The API answers but its watches stop delivering anything (for 20 s): objects created
    //    now reach the server only through its periodic LIST (--status-resync-period, 1 s here).
    let stall = Duration::from_secs(20);
    cluster.sim.faults().stall_watches(Some(stall));
    let stall_start = Instant::now();
    create_backup(&cluster, "unseen", json!({"includedNamespaces": ["shop"]}));
    restore_base(&cluster, "unseen-r", "shop-unseen");
    let backup = wait_final(&cluster, &server, "Backup", "unseen").await;
    let restore = wait_final(&cluster, &server, "Restore", "unseen-r").await;
    assert!(
        stall_start.elapsed() < stall - Duration::from_secs(5),
        "taken up only once the watch delivered again"
    );
    assert_eq!(
        phase(&backup),
        "Completed",
        "{backup:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        phase(&restore),
        "Completed",
        "{restore:#}\n{}",
        server.log_text()
    );
    assert!(
        store
            .get("v1", "ConfigMap", "shop-unseen", "cm-1")
            .is_some()
    );

    // Each was run once.
    assert_metrics(
        &server,
        &[
            "velero_backup_attempt_total{schedule=\"\"} 3",
            "velero_backup_success_total{schedule=\"\"} 3",
            "velero_restore_attempt_total{schedule=\"\"} 2",
            "velero_restore_success_total{schedule=\"\"} 2",
        ],
    )
    .await;
}

/// A Restore of backup `base` mapping `shop` to `target`.
fn restore_base(cluster: &Cluster, name: &str, target: &str) {
    server_support::create_restore(
        cluster,
        name,
        json!({"backupName": "base", "namespaceMapping": {"shop": target}}),
    );
}

#[tokio::test]
async fn a_backup_to_an_unavailable_location_fails_validation_and_works_once_it_is_fixed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    // A top-level directory Velero's layout does not have makes the location Unavailable.
    let junk = root.path().join(BUCKET).join("not-velero");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("file"), b"x").unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    server_support::wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "default",
        Duration::from_secs(10),
        |o| phase(o) == "Unavailable",
    )
    .await;

    create_backup(&cluster, "refused", json!({"includedNamespaces": ["shop"]}));
    let refused = wait_final(&cluster, &server, "Backup", "refused").await;
    assert_eq!(phase(&refused), "FailedValidation");
    let errors = refused["status"]["validationErrors"].to_string();
    assert!(
        errors.contains("Unavailable") && errors.contains("not-velero"),
        "{errors}"
    );
    assert!(!root.path().join(BUCKET).join("backups/refused").exists());

    std::fs::remove_dir_all(&junk).unwrap();
    server_support::wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "default",
        Duration::from_secs(10),
        |o| phase(o) == "Available",
    )
    .await;
    create_backup(
        &cluster,
        "accepted",
        json!({"includedNamespaces": ["shop"]}),
    );
    let accepted = wait_final(&cluster, &server, "Backup", "accepted").await;
    assert_eq!(phase(&accepted), "Completed", "{}", server.log_text());
}
