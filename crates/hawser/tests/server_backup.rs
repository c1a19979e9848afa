//! `hawser server` as a process against kube-sim: backups from a Backup object to their true
//! final phase, with the API or the storage failing, and the server killed and restarted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_support::{
    BUCKET, FAST, Server, archive_paths, artifact, create_backup, filesystem_location, phase, poll,
    seed, slow_reads, wait_final, wait_for, wait_in_progress,
};

fn record(root: &std::path::Path, name: &str) -> Option<Value> {
    let bytes = std::fs::read(artifact(root, name, "velero-backup.json")).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_backup_completes_in_velero_layout_with_the_record_matching_the_object() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "nightly", json!({"includedNamespaces": ["shop"]}));

    let done = wait_final(&cluster, &server, "Backup", "nightly").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    let status = &done["status"];
    assert_eq!(status["formatVersion"], "1.1.0");
    assert_eq!(
        status["progress"]["itemsBackedUp"],
        status["progress"]["totalItems"]
    );
    // 5 ConfigMaps, 2 Secrets and the Namespace.
    assert_eq!(status["progress"]["itemsBackedUp"], 8);
    let start = status["startTimestamp"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap();
    let expiration = status["expiration"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap();
    assert_eq!(expiration.duration_since(start).as_secs(), 720 * 3600);

    let stored = record(root.path(), "nightly").expect("velero-backup.json stored");
    for field in [
        "phase",
        "startTimestamp",
        "completionTimestamp",
        "expiration",
        "progress",
        "errors",
        "warnings",
    ] {
        assert_eq!(
            stored["status"][field], status[field],
            "status.{field} differs from the record"
        );
    }
    let paths = archive_paths(&artifact(root.path(), "nightly", "nightly.tar.gz"));
    for want in [
        "resources/configmaps/namespaces/shop/cm-0.json",
        "resources/configmaps/namespaces/shop/cm-4.json",
        "resources/secrets/namespaces/shop/db-password.json",
        "resources/namespaces/cluster/shop.json",
    ] {
        assert!(
            paths.iter().any(|p| p == want),
            "{want} missing from {paths:?}"
        );
    }
    assert!(!paths.iter().any(|p| p.contains("/other/")), "{paths:?}");
    for file in [
        "nightly-logs.gz",
        "nightly-resource-list.json.gz",
        "nightly-results.gz",
    ] {
        assert!(
            artifact(root.path(), "nightly", file).exists(),
            "{file} missing"
        );
    }

    let bsl = wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "default",
        Duration::from_secs(10),
        |o| phase(o) == "Available",
    )
    .await;
    assert!(bsl["status"]["lastValidationTime"].is_string());
    let metrics = server.metrics().await;
    for line in [
        "velero_backup_attempt_total{schedule=\"\"} 1",
        "velero_backup_success_total{schedule=\"\"} 1",
        "velero_backup_failure_total{schedule=\"\"} 0",
        "velero_backup_items_total{schedule=\"\"} 8",
        "velero_backup_location_status_gauge{backup_location_name=\"default\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    assert_eq!(server.try_get("/livez").await.map(|r| r.0), Some(200));
}

#[tokio::test]
async fn invalid_backups_end_failed_validation_with_reasons_and_store_nothing() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 1);
    filesystem_location(&cluster, "default", root.path());
    cluster
        .sim
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "archive", "namespace": NS},
            "spec": {"provider": "filesystem", "objectStorage": {"bucket": BUCKET},
                     "config": {"root": root.path().to_str().unwrap()}, "accessMode": "ReadOnly"}
        }))
        .unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;
    let cases = [
        (
            "nowhere",
            json!({"storageLocation": "missing"}),
            "BackupStorageLocation missing",
        ),
        (
            "readonly",
            json!({"storageLocation": "archive"}),
            "read-only mode",
        ),
        (
            "mixed",
            json!({"includedResources": ["configmaps"], "includedNamespaceScopedResources": ["secrets"]}),
            "They cannot be used together",
        ),
        (
            "unreadable",
            json!({"ttl": "forever"}),
            "the Backup cannot be read",
        ),
    ];
    for (name, spec, _) in &cases {
        create_backup(&cluster, name, spec.clone());
    }
    for (name, _, expected) in cases {
        let done = wait_final(&cluster, &server, "Backup", name).await;
        assert_eq!(phase(&done), "FailedValidation", "{name}: {done:#}");
        let errors = done["status"]["validationErrors"].to_string();
        assert!(errors.contains(expected), "{name}: {errors}");
        assert!(
            done["status"].get("startTimestamp").is_none(),
            "{name} was started"
        );
        assert!(
            !artifact(root.path(), name, "").exists(),
            "{name} stored something"
        );
    }
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("velero_backup_validation_failure_total{schedule=\"\"} 4"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_api_outage_longer_than_the_resource_timeout_still_ends_completed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend([
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "250ms",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;
    // Reads of the Backup take a while, so the final write is still under way when the API goes.
    slow_reads(&cluster, "backups");
    create_backup(&cluster, "outage", json!({"includedNamespaces": ["shop"]}));
    poll(&server, "storing the record of outage", || {
        record(root.path(), "outage")
    })
    .await;
    let outage = Duration::from_secs(4);
    cluster.sim.faults().refuse(Some(outage));
    let outage_start = Instant::now();

    let done = wait_final(&cluster, &server, "Backup", "outage").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    assert!(
        outage_start.elapsed() >= outage - Duration::from_millis(200),
        "the status landed before the outage ended"
    );
    assert_eq!(
        record(root.path(), "outage").unwrap()["status"]["phase"],
        "Completed"
    );
    let log = server.log_text();
    assert!(
        log.contains("re-driver"),
        "the final status never went to the re-driver:\n{log}"
    );
}

#[tokio::test]
async fn a_server_killed_mid_backup_leaves_it_failed_with_a_restart_reason_after_restart() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    let slow = cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(5))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let mut first = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "interrupted",
        json!({"includedNamespaces": ["shop"]}),
    );
    wait_in_progress(&cluster, &first, "Backup", "interrupted").await;
    first.kill().await;
    cluster.sim.faults().remove(slow);
    assert!(record(root.path(), "interrupted").is_none());

    let second = Server::start(&cluster, root.path(), FAST).await;
    let done = wait_final(&cluster, &second, "Backup", "interrupted").await;
    assert_eq!(phase(&done), "Failed", "{done:#}");
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(reason.contains("restarted"), "{reason}");
    assert!(
        record(root.path(), "interrupted").is_none_or(|r| r["status"]["phase"] != "Completed"),
        "a record claims success"
    );
}

#[tokio::test]
async fn a_backup_committed_before_a_kill_is_completed_from_its_record_after_restart() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let mut first = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "committed",
        json!({"includedNamespaces": ["shop"]}),
    );
    wait_in_progress(&cluster, &first, "Backup", "committed").await;
    // From now on no status write lands: the record is committed, the object stays InProgress.
    let blocked = cluster.sim.faults().status(
        StatusFault::new(503)
            .verbs(&["patch"])
            .resources(&["backups"]),
    );
    poll(&first, "storing the record of committed", || {
        record(root.path(), "committed")
    })
    .await;
    first.kill().await;
    let object = cluster.get("velero.io/v1", "Backup", "committed").unwrap();
    assert_eq!(phase(&object), "InProgress");
    cluster.sim.faults().remove(blocked);

    let second = Server::start(&cluster, root.path(), FAST).await;
    let done = wait_final(&cluster, &second, "Backup", "committed").await;
    assert_eq!(phase(&done), "Completed", "{}", second.log_text());
    let stored = record(root.path(), "committed").unwrap();
    assert_eq!(
        done["status"]["completionTimestamp"],
        stored["status"]["completionTimestamp"]
    );
}

#[tokio::test]
async fn a_storage_failure_mid_upload_ends_failed_and_nothing_claims_success() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(2))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "broken", json!({"includedNamespaces": ["shop"]}));
    wait_in_progress(&cluster, &server, "Backup", "broken").await;
    // The backup's directory becomes a file: every write below it fails.
    let dir = root.path().join(BUCKET).join("backups").join("broken");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();

    let done = wait_final(&cluster, &server, "Backup", "broken").await;
    assert_eq!(phase(&done), "Failed", "{done:#}\n{}", server.log_text());
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(!reason.is_empty());
    assert!(record(root.path(), "broken").is_none());
    assert!(
        server
            .metrics()
            .await
            .contains("velero_backup_failure_total{schedule=\"\"} 1")
    );
}

#[tokio::test]
async fn a_backup_to_an_s3_location_completes() {
    let s3 = store_common::S3Server::start();
    let bucket = format!("e2e-{}", std::process::id());
    s3.create_bucket(&bucket);
    let cluster = Cluster::start().await;
    let logs = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let store = cluster.sim.store();
    use base64::Engine as _;
    let credentials = base64::engine::general_purpose::STANDARD
        .encode("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n");
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "cloud-credentials", "namespace": NS},
            "data": {"cloud": credentials}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default", "namespace": NS},
            "spec": {
                "provider": "aws",
                "objectStorage": {"bucket": bucket, "prefix": "cluster-a"},
                "credential": {"name": "cloud-credentials", "key": "cloud"},
                "config": {"region": "us-east-1", "s3Url": s3.endpoint, "s3ForcePathStyle": "true"}
            }
        }))
        .unwrap();
    let server = Server::start(&cluster, logs.path(), FAST).await;
    create_backup(&cluster, "to-s3", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "to-s3").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());

    let location = hawser_store::Location::new(&s3.spec(&bucket).with_prefix("cluster-a")).unwrap();
    let stored = location
        .backup_metadata("to-s3")
        .await
        .unwrap()
        .expect("velero-backup.json in S3");
    let stored: Value = serde_json::from_slice(&stored).unwrap();
    assert_eq!(stored["status"]["phase"], "Completed");
    assert_eq!(stored["status"]["progress"]["itemsBackedUp"], 6);
}

#[tokio::test]
async fn concurrent_backups_with_different_filters_each_hold_exactly_their_items() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 4);
    cluster
        .sim
        .store()
        .insert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tagged", "namespace": "other", "labels": {"tier": "front"}},
            "data": {"k": "v"}
        }))
        .unwrap();
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend(["--concurrent-backups", "3"]);
    let server = Server::start(&cluster, root.path(), &args).await;
    let cases: [(&str, Value, &[&str]); 3] = [
        (
            "no-secrets",
            json!({"includedNamespaces": ["shop"], "excludedResources": ["secrets"]}),
            &[
                "resources/configmaps/namespaces/shop/cm-0.json",
                "resources/configmaps/namespaces/shop/cm-1.json",
                "resources/configmaps/namespaces/shop/cm-2.json",
                "resources/configmaps/namespaces/shop/cm-3.json",
                "resources/namespaces/cluster/shop.json",
            ],
        ),
        (
            "front",
            json!({"labelSelector": {"matchLabels": {"tier": "front"}}}),
            // The Namespace of a backed-up item goes with it, as in Velero.
            &[
                "resources/configmaps/namespaces/other/tagged.json",
                "resources/namespaces/cluster/other.json",
            ],
        ),
        (
            "secrets-only",
            json!({"includedNamespaces": ["sh*"], "includedResources": ["secrets"]}),
            // Namespaces are a type like the others: not included, not backed up.
            &[
                "resources/secrets/namespaces/shop/api-token.json",
                "resources/secrets/namespaces/shop/db-password.json",
            ],
        ),
    ];
    for (name, spec, _) in &cases {
        create_backup(&cluster, name, spec.clone());
    }
    for (name, _, expected) in cases {
        let done = wait_final(&cluster, &server, "Backup", name).await;
        assert_eq!(phase(&done), "Completed", "{name}: {done:#}");
        // Each item is in the archive twice: under its preferred version and its group's copy.
        let mut paths = archive_paths(&artifact(root.path(), name, &format!("{name}.tar.gz")));
        paths.retain(|p| !p.contains("-preferredversion/"));
        paths.dedup();
        let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(paths, want, "{name}");
    }
}
