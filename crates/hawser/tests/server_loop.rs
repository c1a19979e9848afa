//! The everyday loop through the `hawser server` process against kube-sim: schedules make
//! backups, expired backups are collected, and deletion requests delete a backup, its files and
//! its restores, or say why not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use kube_sim::LatencyFault;
use serde_json::{Value, json};
use server_checks::assert_metrics;
use server_support::*;
use store_common::files_under as files;

fn schedule(cluster: &Cluster, name: &str, cron: &str) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": name, "namespace": NS, "labels": {"team": "shop"}},
            "spec": {"schedule": cron,
                     "template": {"includedNamespaces": ["shop"], "ttl": "1h0m0s"}}
        }))
        .unwrap();
}

/// Backups labelled with schedule `name`.
fn backups_of(cluster: &Cluster, name: &str) -> Vec<Value> {
    cluster
        .store()
        .list("velero.io/v1", "Backup", Some(NS))
        .into_iter()
        .filter(|b| b["metadata"]["labels"]["velero.io/schedule-name"] == name)
        .collect()
}

/// A cluster with `shop` seeded, a filesystem location, and a server started with the test
/// flags plus `extra`.
async fn started(extra: &[&str]) -> (Cluster, tempfile::TempDir, Server) {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let flags: Vec<&str> = FAST.iter().chain(extra).copied().collect();
    let server = Server::start(&cluster, root.path(), &flags).await;
    (cluster, root, server)
}

/// A Completed backup `name` of namespace `shop`, with `ttl` when given.
async fn completed_backup(
    cluster: &Cluster,
    server: &Server,
    name: &str,
    ttl: Option<&str>,
) -> Value {
    let mut spec = json!({"includedNamespaces": ["shop"]});
    if let Some(ttl) = ttl {
        spec["ttl"] = json!(ttl);
    }
    create_backup(cluster, name, spec);
    let done = wait_final(cluster, server, "Backup", name).await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    done
}

#[tokio::test]
async fn a_schedule_every_two_seconds_makes_named_labelled_backups_and_honours_paused() {
    let (cluster, _root, server) = started(&["--schedule-min-interval=2s"]).await;
    schedule(&cluster, "often", "@every 2s");

    let deadline = Instant::now() + Duration::from_secs(20);
    let made = loop {
        let made = backups_of(&cluster, "often");
        if made.iter().filter(|b| phase(b) == "Completed").count() >= 2 {
            break made;
        }
        assert!(
            Instant::now() < deadline,
            "{made:#?}\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for backup in &made {
        let name = backup["metadata"]["name"].as_str().unwrap();
        let stamp = name.strip_prefix("often-").unwrap();
        assert!(
            stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()),
            "{name}"
        );
        assert_eq!(backup["spec"]["includedNamespaces"], json!(["shop"]));
        assert_eq!(backup["spec"]["ttl"], "1h0m0s");
        // The Schedule's own labels, as the template has none.
        assert_eq!(backup["metadata"]["labels"]["team"], "shop");
    }
    let object = cluster.get("velero.io/v1", "Schedule", "often").unwrap();
    assert_eq!(phase(&object), "Enabled");
    assert!(object["status"]["lastBackup"].is_string(), "{object:#}");
    assert_metrics(
        &server,
        &["velero_schedule_expected_interval_seconds{schedule=\"often\"} 2"],
    )
    .await;

    let mut paused = object;
    paused["spec"]["paused"] = json!(true);
    cluster.store().insert(paused).unwrap();
    // The schedule controller has seen the pause once it has listed twice since (the pass under
    // way may predate it); a run it had started finishes.
    passes(&cluster, &server, "schedules", 2).await;
    for backup in backups_of(&cluster, "often") {
        let name = backup["metadata"]["name"].as_str().unwrap();
        wait_final(&cluster, &server, "Backup", name).await;
    }
    let before = backups_of(&cluster, "often").len();
    // Unpaused, the schedule would be due within two of its one-second passes: four make
    // nothing.
    passes(&cluster, &server, "schedules", 4).await;
    assert_eq!(
        backups_of(&cluster, "often").len(),
        before,
        "a paused schedule made a backup"
    );
}

#[tokio::test]
async fn a_bad_cron_or_template_ends_failed_validation() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    schedule(&cluster, "bad-cron", "61 * * * *");
    // A whole backup every second: more often than the default minimum, a minute.
    schedule(&cluster, "flood", "@every 1s");
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": "bad-template", "namespace": NS},
            "spec": {"schedule": "@daily",
                     "template": {"includedNamespaces": ["shop"], "excludedNamespaces": ["*"]}}
        }))
        .unwrap();
    for (name, wanted) in [
        ("bad-cron", "invalid schedule"),
        ("bad-template", "excludes list cannot contain"),
        (
            "flood",
            "runs every 1s, more often than the 1m0s this server allows",
        ),
    ] {
        let object = wait_for(
            &cluster,
            Some(&server),
            "Schedule",
            name,
            Duration::from_secs(10),
            |o| phase(o) == "FailedValidation",
        )
        .await;
        let errors = object["status"]["validationErrors"].to_string();
        assert!(errors.contains(wanted), "{name}: {errors}");
    }
    // Three more passes of the schedule controller make no backup of them.
    passes(&cluster, &server, "schedules", 3).await;
    assert!(backups_of(&cluster, "bad-cron").is_empty());
    assert!(backups_of(&cluster, "flood").is_empty());
}

#[tokio::test]
async fn an_expired_backup_is_collected_from_the_cluster_and_the_location() {
    let (cluster, root, server) = started(&["--garbage-collection-frequency", "2s"]).await;
    completed_backup(&cluster, &server, "short-lived", Some("3s")).await;
    completed_backup(&cluster, &server, "kept", None).await;
    let dir = root.path().join(BUCKET).join("backups");
    assert!(!files(&dir.join("short-lived")).is_empty());

    until_gone(&cluster, &server, "Backup", "short-lived").await;
    assert_eq!(files(&dir.join("short-lived")), Vec::<String>::new());
    assert!(cluster.get("velero.io/v1", "Backup", "kept").is_some());
    assert!(files(&dir.join("kept")).contains(&"velero-backup.json".to_owned()));
    assert_metrics(
        &server,
        &["velero_backup_deletion_success_total{schedule=\"\"} 1"],
    )
    .await;
}

#[tokio::test]
async fn a_deletion_request_removes_the_backup_its_files_and_its_restores() {
    let (cluster, root, server) = started(&[]).await;
    completed_backup(&cluster, &server, "doomed", None).await;
    completed_backup(&cluster, &server, "other", None).await;
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "doomed-copy", "namespace": NS},
            "spec": {"backupName": "doomed", "namespaceMapping": {"shop": "shop-copy"}}
        }))
        .unwrap();
    let restored = wait_final(&cluster, &server, "Restore", "doomed-copy").await;
    assert_eq!(phase(&restored), "Completed");
    let bucket = root.path().join(BUCKET);
    assert!(!files(&bucket.join("restores/doomed-copy")).is_empty());
    let before_other = files(&bucket.join("backups/other"));

    request_deletion(&cluster, "doomed-1", "doomed");
    until_gone(&cluster, &server, "Backup", "doomed").await;
    until_gone(&cluster, &server, "DeleteBackupRequest", "doomed-1").await;
    assert_eq!(files(&bucket.join("backups/doomed")), Vec::<String>::new());
    assert_eq!(
        files(&bucket.join("restores/doomed-copy")),
        Vec::<String>::new()
    );
    assert!(
        cluster
            .get("velero.io/v1", "Restore", "doomed-copy")
            .is_none()
    );
    // The restored objects stay: deleting a backup does not undo its restores.
    assert!(
        cluster
            .store()
            .get("v1", "ConfigMap", "shop-copy", "cm-0")
            .is_some()
    );
    assert_eq!(files(&bucket.join("backups/other")), before_other);
    assert!(cluster.get("velero.io/v1", "Backup", "other").is_some());
    assert_metrics(
        &server,
        &[
            "velero_backup_deletion_attempt_total{schedule=\"\"} 1",
            "velero_backup_deletion_success_total{schedule=\"\"} 1",
        ],
    )
    .await;
}

#[tokio::test]
async fn deleting_a_running_backup_is_refused_with_a_reason() {
    let (cluster, root, server) = started(&[]).await;
    let slow = cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(3))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    create_backup(&cluster, "running", json!({"includedNamespaces": ["shop"]}));
    wait_in_progress(&cluster, &server, "Backup", "running").await;
    request_deletion(&cluster, "running-1", "running");
    let request = wait_for(
        &cluster,
        Some(&server),
        "DeleteBackupRequest",
        "running-1",
        Duration::from_secs(10),
        |o| phase(o) == "Processed",
    )
    .await;
    let errors = request["status"]["errors"].to_string();
    assert!(errors.contains("InProgress"), "{errors}");
    cluster.sim.faults().remove(slow);
    let done = wait_final(&cluster, &server, "Backup", "running").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    assert!(
        files(&root.path().join(BUCKET).join("backups/running"))
            .contains(&"velero-backup.json".to_owned())
    );
}

#[tokio::test]
async fn a_storage_failure_during_deletion_is_reported_and_a_new_request_completes_it() {
    let (cluster, root, server) = started(&[]).await;
    completed_backup(&cluster, &server, "stuck", None).await;
    // The record cannot be deleted: where the file was, the store finds a non-empty directory.
    let record = root
        .path()
        .join(BUCKET)
        .join("backups/stuck/velero-backup.json");
    let saved = std::fs::read(&record).unwrap();
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir_all(record.join("blocker")).unwrap();
    std::fs::write(record.join("blocker/file"), b"x").unwrap();

    request_deletion(&cluster, "stuck-1", "stuck");
    let request = wait_for(
        &cluster,
        Some(&server),
        "DeleteBackupRequest",
        "stuck-1",
        Duration::from_secs(10),
        |o| phase(o) == "Processed",
    )
    .await;
    let errors = request["status"]["errors"].to_string();
    assert!(errors.contains("velero-backup.json"), "{errors}");
    let backup = cluster.get("velero.io/v1", "Backup", "stuck").unwrap();
    assert_eq!(phase(&backup), "Deleting");
    assert_metrics(
        &server,
        &["velero_backup_deletion_failure_total{schedule=\"\"} 1"],
    )
    .await;

    std::fs::remove_dir_all(&record).unwrap();
    std::fs::write(&record, saved).unwrap();
    request_deletion(&cluster, "stuck-2", "stuck");
    until_gone(&cluster, &server, "Backup", "stuck").await;
    assert_eq!(
        files(&root.path().join(BUCKET).join("backups/stuck")),
        Vec::<String>::new()
    );
    // Both requests of the backup are gone once it is deleted.
    for request in ["stuck-1", "stuck-2"] {
        until_gone(&cluster, &server, "DeleteBackupRequest", request).await;
    }
}

#[tokio::test]
async fn an_api_outage_during_a_deletion_leaves_nothing_unfinished() {
    let (cluster, root, server) = started(&["--resource-timeout", "2s"]).await;
    completed_backup(&cluster, &server, "outage", None).await;
    // Deleting the Backup object is refused for 4 s, longer than the server's resource timeout
    // of the test (2 s): the request is left InProgress and the next pass finishes it.
    let refused = cluster.sim.faults().status(
        kube_sim::StatusFault::new(503)
            .verbs(&["delete"])
            .resources(&["backups"]),
    );
    request_deletion(&cluster, "outage-1", "outage");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !files(&root.path().join(BUCKET).join("backups/outage")).is_empty() {
        assert!(Instant::now() < deadline, "{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Two passes of the deletion controller meet the refusal.
    passes(&cluster, &server, "deletebackuprequests", 2).await;
    assert!(cluster.get("velero.io/v1", "Backup", "outage").is_some());
    let request = cluster
        .get("velero.io/v1", "DeleteBackupRequest", "outage-1")
        .unwrap();
    assert_eq!(phase(&request), "InProgress", "{request:#}");
    cluster.sim.faults().remove(refused);
    until_gone(&cluster, &server, "Backup", "outage").await;
    until_gone(&cluster, &server, "DeleteBackupRequest", "outage-1").await;
}
