//! `hawser server` as a process against kube-sim: backups from a Backup object to their true
//! final phase, with the API or the storage failing, and the server killed and restarted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_checks::assert_metrics;
use server_support::{
    BUCKET, FAST, Server, archive_paths, artifact, backup_record as record, create_backup,
    filesystem_location, phase, poll, seed, slow_reads, wait_final, wait_for, wait_in_progress,
};

/// Every item entry of a backup archive, the versioned copies included, sorted (duplicates kept).
fn every_archive_path(path: &std::path::Path) -> Vec<String> {
    use hawser_core::archive::{ArchiveReader, ReaderOptions};
    let options = ReaderOptions {
        include_versioned_copies: true,
        ..ReaderOptions::default()
    };
    let mut reader = ArchiveReader::new(std::fs::File::open(path).unwrap(), options);
    let mut items = reader.items().unwrap();
    let mut paths: Vec<String> = items.by_ref().map(|i| i.unwrap().path).collect();
    paths.sort();
    paths
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
        "nightly-podvolumebackups.json.gz",
        "nightly-volumesnapshots.json.gz",
        "nightly-itemoperations.json.gz",
        "nightly-volumeinfo.json.gz",
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
    assert_metrics(
        &server,
        &[
            "velero_backup_attempt_total{schedule=\"\"} 1",
            "velero_backup_success_total{schedule=\"\"} 1",
            "velero_backup_failure_total{schedule=\"\"} 0",
            "velero_backup_items_total{schedule=\"\"} 8",
            "velero_backup_location_status_gauge{backup_location_name=\"default\"} 1",
        ],
    )
    .await;
    assert_eq!(server.try_get("/livez").await.map(|r| r.0), Some(200));
}

#[tokio::test]
async fn invalid_backups_end_failed_validation_with_reasons_and_store_nothing() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 1);
    filesystem_location(&cluster, "default", root.path());
    cluster
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
    assert_metrics(
        &server,
        &["velero_backup_validation_failure_total{schedule=\"\"} 4"],
    )
    .await;
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
async fn a_backup_committed_before_a_kill_is_completed_from_its_record_after_restart() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let mut first = Server::start(&cluster, root.path(), FAST).await;
    // The backup stays InProgress for a second at least, so that the wait below sees it there
    // however loaded the machine is.
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(1))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
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

/// `count` ConfigMaps in `shop` of 32 KiB each that gzip cannot shrink much (base64 of noise):
/// a backup of them is an archive of several 8 MiB parts.
fn bulk(cluster: &Cluster, count: usize) {
    use base64::Engine as _;
    let store = cluster.store();
    for i in 0..count {
        let blob = base64::engine::general_purpose::STANDARD
            .encode(store_common::artifact(24 * 1024, i as u64 + 1));
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("bulk-{i}"), "namespace": "shop"},
                "binaryData": {"blob": blob}
            }))
            .unwrap();
    }
}

#[tokio::test]
async fn a_storage_failure_mid_upload_ends_failed_and_the_record_says_failed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 1);
    bulk(&cluster, 300);
    filesystem_location(&cluster, "default", root.path());
    // Pages of 10 ConfigMaps, each page slow: the archive is uploaded over several seconds.
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_millis(150))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let mut args = FAST.to_vec();
    args.extend(["--client-page-size", "10"]);
    let server = Server::start(&cluster, root.path(), &args).await;
    create_backup(&cluster, "broken", json!({"includedNamespaces": ["shop"]}));

    // Once the archive outgrows one 8 MiB part, its multipart upload writes a staging file
    // (`broken.tar.gz#1`) in the backup's directory.
    let dir = root.path().join(BUCKET).join("backups").join("broken");
    poll(&server, "the archive's multipart upload starting", || {
        store_common::files_under(&dir)
            .iter()
            .any(|f| f.starts_with("broken.tar.gz#"))
            .then_some(())
    })
    .await;
    // Mid-upload the directory is moved out of the bucket and replaced by an empty one: the
    // parts still coming go to the moved staging file, and completing the upload (renaming the
    // staging file into place) fails. Every other write into the directory still works.
    std::fs::rename(&dir, root.path().join("moved-away")).unwrap();
    std::fs::create_dir(&dir).unwrap();

    let done = wait_final(&cluster, &server, "Backup", "broken").await;
    assert_eq!(phase(&done), "Failed", "{done:#}\n{}", server.log_text());
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("upload `backups/broken/broken.tar.gz` failed"),
        "the reason does not say what failed: {reason}"
    );
    // The record, which could have been written, tells the same story as the object; no other
    // artifact of the failed backup was stored.
    let stored = record(root.path(), "broken").expect("the Failed record is stored");
    assert_eq!(stored["status"]["phase"], "Failed");
    assert_eq!(
        stored["status"]["failureReason"],
        done["status"]["failureReason"]
    );
    assert_eq!(
        store_common::files_under(&dir),
        ["velero-backup.json"],
        "files of the failed backup"
    );
    assert_metrics(
        &server,
        &[
            "velero_backup_failure_total{schedule=\"\"} 1",
            "velero_backup_success_total{schedule=\"\"} 0",
        ],
    )
    .await;
}

#[tokio::test]
async fn concurrent_backups_with_different_filters_each_hold_exactly_their_items() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 4);
    cluster
        .store()
        .insert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tagged", "namespace": "other", "labels": {"tier": "front"}},
            "data": {"k": "v"}
        }))
        .unwrap();
    filesystem_location(&cluster, "default", root.path());
    // Slow LISTs: each backup takes at least a second, so three run at the same time only if
    // the server runs them concurrently.
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_millis(1000))
            .verbs(&["list"])
            .resources(&["configmaps", "secrets"]),
    );
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
    for (name, _, expected) in &cases {
        let done = wait_final(&cluster, &server, "Backup", name).await;
        assert_eq!(phase(&done), "Completed", "{name}: {done:#}");
        // Each item is in the archive twice: under its group's copy and its preferred version's.
        // Each copy holds every expected item exactly once (a duplicate fails the comparison).
        let paths = every_archive_path(&artifact(root.path(), name, &format!("{name}.tar.gz")));
        let (preferred, plain): (Vec<String>, Vec<String>) = paths
            .into_iter()
            .partition(|p| p.contains("-preferredversion/"));
        let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(plain, want, "{name}");
        let mut unversioned: Vec<String> = preferred
            .iter()
            .map(|p| p.replacen("/v1-preferredversion/", "/", 1))
            .collect();
        unversioned.sort();
        assert_eq!(unversioned, want, "{name}: the preferred-version copies");
    }
    // The three ran at the same time: from each one's claim (the PATCH to InProgress) to its
    // final status (the last PATCH), the three intervals share a moment.
    let intervals: Vec<(String, jiff::Timestamp, jiff::Timestamp)> = cases
        .iter()
        .map(|(name, _, _)| {
            let patches: Vec<jiff::Timestamp> = cluster
                .sim
                .requests()
                .into_iter()
                .filter(|r| {
                    r.resource == "backups" && r.verb == "patch" && r.name == *name && r.code == 200
                })
                .map(|r| r.time.parse().unwrap())
                .collect();
            assert!(patches.len() >= 2, "{name}: {patches:?}");
            ((*name).to_owned(), patches[0], *patches.last().unwrap())
        })
        .collect();
    let last_start = intervals.iter().map(|i| i.1).max().unwrap();
    let first_end = intervals.iter().map(|i| i.2).min().unwrap();
    assert!(
        last_start < first_end,
        "the backups did not all run at once: {intervals:#?}"
    );
}

/// The Grafana dashboard and the alert rules in `monitoring/` name only metrics the server
/// exports: every `velero_*` and `hawser_*` name in their expressions is a metric of `/metrics`
/// (a counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`), and every rule is an alert
/// with a severity and a summary.
#[tokio::test]
async fn monitoring_files_use_only_metrics_the_server_exports() {
    // Work that makes every series: a backup with a CSI snapshot, and a schedule (paused, so it
    // starts no backup of its own).
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = server_support::csi::application(&cluster, Duration::from_millis(100), "").await;
    filesystem_location(&cluster, "default", root.path());
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": "nightly", "namespace": NS},
            "spec": {"schedule": "0 3 * * *", "paused": true,
                     "template": {"includedNamespaces": ["shop"]}}
        }))
        .unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "with-data",
        json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "with-data").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let (metrics, exported) = loop {
        let metrics = server.metrics().await;
        let exported = exported_names(&metrics);
        // The metrics of a backup are counted after its final status is stored: wait for them.
        if exported.contains("velero_schedule_expected_interval_seconds")
            && metrics.contains("velero_backup_success_total{schedule=\"\"} 1")
        {
            break (metrics, exported);
        }
        assert!(
            Instant::now() < deadline,
            "no schedule metric or no counted backup in\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let (_, panels, alerts) = monitoring_files();
    assert!(
        panels.len() >= 20 && alerts.len() >= 10,
        "{panels:#?}\n{alerts:#?}"
    );
    let mut missing = Vec::new();
    for expression in panels.iter().chain(&alerts) {
        let names = expression
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|t| t.starts_with("velero_") || t.starts_with("hawser_"));
        for name in names {
            if !exported.contains(name) {
                missing.push(format!("{name} (in {expression})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in /metrics: {missing:#?}\n{metrics}"
    );
}

/// The alert rules (a PrometheusRule) and the expressions of the dashboard's panels and of the
/// alerts in `monitoring/`; every rule is an alert with a severity and a summary.
fn monitoring_files() -> (Value, Vec<String>, Vec<String>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../monitoring");
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
    let dashboard: Value = serde_json::from_str(&read("hawser-dashboard.json")).unwrap();
    let rules: Value = serde_yaml::from_str(&read("hawser-alerts.yaml")).unwrap();
    assert_eq!(rules["kind"], "PrometheusRule");
    let mut panels = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            panels.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    let mut alerts = Vec::new();
    for group in rules["spec"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            assert!(
                rule["labels"]["severity"].is_string()
                    && rule["annotations"]["summary"].is_string(),
                "{alert}: {rule:?}"
            );
            alerts.push(rule["expr"].as_str().unwrap().to_owned());
        }
    }
    (rules, panels, alerts)
}

/// Prometheus's own parsers read the alert rule groups and the dashboard's expressions:
/// `promql-check`, named by `PROMQL_CHECK` and built by `scripts/build-promql-check.sh`. Without
/// it the test fails; `scripts/test` leaves it out (counted as skipped) when it is not set.
#[test]
fn monitoring_files_parse_with_prometheus() {
    let check = std::env::var_os("PROMQL_CHECK")
        .filter(|v| !v.is_empty())
        .expect("PROMQL_CHECK is not set: run PROMQL_CHECK=$(scripts/build-promql-check.sh) scripts/test");
    let (rules, panels, _) = monitoring_files();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    let groups = json!({"groups": rules["spec"]["groups"]});
    std::fs::write(&file, serde_yaml::to_string(&groups).unwrap()).unwrap();
    let mut child = std::process::Command::new(check)
        .arg(&file)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = panels.join("\n");
    input.push('\n');
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The sample names of the metrics in a `/metrics` text (a counter's with `_total`, a
/// histogram's `_bucket`, `_sum` and `_count`); a family without series is not there.
fn exported_names(metrics: &str) -> std::collections::BTreeSet<String> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| {
            let (name, kind) = rest.split_once(' ')?;
            Some(match kind {
                "counter" => vec![format!("{name}_total")],
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|suffix| format!("{name}{suffix}"))
                    .collect(),
                _ => vec![name.to_owned()],
            })
        })
        .flatten()
        .collect()
}
