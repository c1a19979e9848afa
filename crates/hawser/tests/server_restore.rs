//! `hawser server` as a process against kube-sim: restores from a Restore object to their true
//! final phase, including a kill and restart of the server mid-restore.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
#[path = "../../hawser-engine/tests/restore_support/mod.rs"]
mod restore_support;
mod server_checks;
mod server_support;

use std::path::Path;
use std::time::Duration;

use cli_support::{Cluster, NS};
use kube_sim::LatencyFault;
use serde_json::{Value, json};
use server_checks::assert_metrics;
use server_support::{
    BUCKET, FAST, Server, create_backup, create_restore, filesystem_location, peak_rss_kib, phase,
    poll, restore_artifact, restore_record, seed, slow_reads, wait_final, wait_in_progress,
};

/// A cluster with `shop` seeded and a Completed backup `base` of it.
async fn backed_up(configmaps: usize) -> (Cluster, tempfile::TempDir, Server) {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, configmaps);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "base").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    (cluster, root, server)
}

#[tokio::test]
async fn a_restore_into_a_mapped_namespace_completes_and_records_its_outcome() {
    let (cluster, root, server) = backed_up(4).await;
    let before = cluster.sim.last_request_seq();
    create_restore(
        &cluster,
        "copy",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let done = wait_final(&cluster, &server, "Restore", "copy").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    // Validation discovers the cluster's types and the run plans from what it found (the
    // restore has no CRD that would make it discover again).
    let discoveries = cluster
        .sim
        .requests_since(before)
        .iter()
        .filter(|r| r.path == "/apis")
        .count();
    assert_eq!(discoveries, 1, "the restore discovers the cluster once");
    let store = cluster.store();
    for i in 0..4 {
        let original = store
            .get("v1", "ConfigMap", "shop", &format!("cm-{i}"))
            .unwrap();
        let copy = store
            .get("v1", "ConfigMap", "shop-copy", &format!("cm-{i}"))
            .expect("restored ConfigMap");
        assert_eq!(copy["data"], original["data"]);
        assert_eq!(copy["metadata"]["labels"]["velero.io/restore-name"], "copy");
        assert_ne!(copy["metadata"]["uid"], original["metadata"]["uid"]);
    }
    assert!(
        store
            .get("v1", "Secret", "shop-copy", "db-password")
            .is_some()
    );
    assert!(
        store
            .get("v1", "ConfigMap", "shop-copy", "elsewhere")
            .is_none()
    );

    let record = restore_record(root.path(), "copy").expect("restore record stored");
    for field in [
        "phase",
        "startTimestamp",
        "completionTimestamp",
        "progress",
        "errors",
        "warnings",
    ] {
        assert_eq!(
            record["status"][field], done["status"][field],
            "status.{field}"
        );
    }
    assert_metrics(
        &server,
        &[
            "velero_restore_attempt_total{schedule=\"\"} 1",
            "velero_restore_success_total{schedule=\"\"} 1",
        ],
    )
    .await;
}

/// Velero's restore finalizer: a Restore the server ran carries
/// `restores.velero.io/external-resources-finalizer`, and `hawser restore delete` removes its
/// files from the storage location before the object goes, as the CLI says.
#[tokio::test]
async fn deleting_a_restore_deletes_its_files_before_the_object() {
    let (cluster, root, server) = backed_up(2).await;
    create_restore(
        &cluster,
        "gone",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-gone"}}),
    );
    let done = wait_final(&cluster, &server, "Restore", "gone").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    assert_eq!(
        done["metadata"]["finalizers"],
        json!(["restores.velero.io/external-resources-finalizer"]),
        "{done:#}"
    );
    let files = restore_artifact(root.path(), "gone", "");
    assert!(restore_record(root.path(), "gone").is_some());
    assert!(files.join("restore-gone-results.gz").exists());

    let run = cluster
        .hawser(&["restore", "delete", "gone", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    poll(&server, "the Restore deleted", || {
        cluster
            .store()
            .get("velero.io/v1", "Restore", NS, "gone")
            .is_none()
            .then_some(())
    })
    .await;
    let left: Vec<_> = std::fs::read_dir(&files)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "files of the deleted restore: {left:?}");
    // The backup and what the restore created are untouched.
    assert!(server_support::backup_record(root.path(), "base").is_some());
    assert!(
        cluster
            .store()
            .get("v1", "ConfigMap", "shop-gone", "cm-0")
            .is_some()
    );
}

#[tokio::test]
async fn invalid_restores_end_failed_validation_and_change_nothing() {
    let (cluster, root, server) = backed_up(1).await;
    create_backup(&cluster, "invalid", json!({"storageLocation": "missing"}));
    wait_final(&cluster, &server, "Backup", "invalid").await;
    let cases = [
        (
            "no-backup",
            json!({"backupName": "absent"}),
            "Backup absent does not exist",
        ),
        (
            "not-restorable",
            json!({"backupName": "invalid"}),
            "only a Completed or PartiallyFailed",
        ),
        (
            "no-source",
            json!({}),
            "either spec.backupName or spec.scheduleName",
        ),
        (
            "bad-policy",
            json!({"backupName": "base", "existingResourcePolicy": "overwrite"}),
            "invalid existingResourcePolicy",
        ),
        (
            "bad-mapping",
            json!({"backupName": "base", "namespaceMapping": {"shop": "Not_A_Name"}}),
            "invalid namespaceMapping",
        ),
    ];
    for (name, spec, _) in &cases {
        create_restore(&cluster, name, spec.clone());
    }
    for (name, _, expected) in cases {
        let done = wait_final(&cluster, &server, "Restore", name).await;
        assert_eq!(phase(&done), "FailedValidation", "{name}: {done:#}");
        let errors = done["status"]["validationErrors"].to_string();
        assert!(errors.contains(expected), "{name}: {errors}");
        assert!(
            restore_record(root.path(), name).is_none(),
            "{name} stored a record"
        );
    }
    assert!(
        cluster
            .store()
            .get("v1", "Namespace", "", "Not_A_Name")
            .is_none()
    );
    assert_metrics(
        &server,
        &["velero_restore_validation_failed_total{schedule=\"\"} 5"],
    )
    .await;
}

#[tokio::test]
async fn the_cli_backs_up_and_restores_with_wait_against_a_running_server() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let server = Server::start(&cluster, root.path(), FAST).await;
    let bsl = cluster
        .hawser(&[
            "backup-location",
            "create",
            "default",
            "--provider",
            "filesystem",
            "--bucket",
            BUCKET,
            "--config",
            &format!("root={}", root.path().display()),
        ])
        .await;
    assert_eq!(bsl.code, 0, "{}", bsl.stderr);

    let backup = cluster
        .hawser(&[
            "backup",
            "create",
            "nightly",
            "--include-namespaces",
            "shop",
            "--wait",
        ])
        .await;
    assert_eq!(
        backup.code,
        0,
        "{}\n{}\n{}",
        backup.stdout,
        backup.stderr,
        server.log_text()
    );
    assert!(format!("{}{}", backup.stdout, backup.stderr).contains("Completed"));
    let described = cluster.hawser(&["backup", "describe", "nightly"]).await;
    assert_eq!(described.code, 0, "{}", described.stderr);
    assert!(
        described.stdout.contains("Completed"),
        "{}",
        described.stdout
    );

    let restore = cluster
        .hawser(&[
            "restore",
            "create",
            "again",
            "--from-backup",
            "nightly",
            "--namespace-mappings",
            "shop:shop-copy",
            "--wait",
        ])
        .await;
    assert_eq!(
        restore.code,
        0,
        "{}\n{}\n{}",
        restore.stdout,
        restore.stderr,
        server.log_text()
    );
    assert!(
        cluster
            .store()
            .get("v1", "ConfigMap", "shop-copy", "cm-2")
            .is_some()
    );

    let live = |kind: &str| cluster.store().list("v1", kind, Some("shop"));
    let versions_before: Vec<Value> = ["ConfigMap", "Secret"]
        .iter()
        .flat_map(|kind| live(kind))
        .map(|o| o["metadata"]["resourceVersion"].clone())
        .collect();
    let in_place = cluster
        .hawser(&[
            "restore",
            "create",
            "--from-backup",
            "nightly",
            "--include-namespaces",
            "shop",
            "--existing-resource-policy",
            "none",
            "--wait",
        ])
        .await;
    assert_eq!(in_place.code, 0, "{}\n{}", in_place.stdout, in_place.stderr);
    // Everything already exists and is equal: each item is recorded as skipped, and none was
    // written to.
    let name = cluster
        .store()
        .list("velero.io/v1", "Restore", Some(NS))
        .into_iter()
        .filter_map(|r| r["metadata"]["name"].as_str().map(str::to_owned))
        .find(|n| n != "again")
        .expect("the in-place restore exists");
    let restored = restored_list(root.path(), &name);
    let mut entries: Vec<&String> = restored.values().flatten().collect();
    entries.sort();
    assert_eq!(
        entries,
        [
            "shop/api-token(skipped)",
            "shop/cm-0(skipped)",
            "shop/cm-1(skipped)",
            "shop/cm-2(skipped)",
            "shop/db-password(skipped)"
        ],
        "{restored:?}"
    );
    let versions_after: Vec<Value> = ["ConfigMap", "Secret"]
        .iter()
        .flat_map(|kind| live(kind))
        .map(|o| o["metadata"]["resourceVersion"].clone())
        .collect();
    assert_eq!(
        versions_after, versions_before,
        "a skipped item was written"
    );
}

/// The restored-resource list a restore stored in the location rooted at `root`.
fn restored_list(root: &Path, name: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let path = root
        .join(BUCKET)
        .join("restores")
        .join(name)
        .join(format!("restore-{name}-resource-list.json.gz"));
    let file = std::fs::File::open(&path).unwrap();
    hawser_core::archive::gzjson::read_gz_json(file, 1 << 20).unwrap()
}

#[tokio::test]
async fn an_api_outage_longer_than_the_resource_timeout_still_ends_the_restore_completed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend([
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "250ms",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;
    create_backup(&cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "base").await;
    assert_eq!(phase(&done), "Completed");
    // Reads of the Restore take a while, so the final write is still under way when the API goes.
    slow_reads(&cluster, "restores");
    create_restore(
        &cluster,
        "through-outage",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    poll(&server, "storing the record of through-outage", || {
        restore_record(root.path(), "through-outage")
    })
    .await;
    let outage = Duration::from_secs(4);
    cluster.sim.faults().refuse(Some(outage));
    let outage_start = std::time::Instant::now();
    let done = wait_final(&cluster, &server, "Restore", "through-outage").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    assert!(outage_start.elapsed() >= outage - Duration::from_millis(200));
    assert_eq!(
        restore_record(root.path(), "through-outage").unwrap()["status"]["phase"],
        "Completed"
    );
}

#[tokio::test]
async fn a_corrupt_archive_ends_the_restore_failed_with_a_reason_and_creates_nothing() {
    let (cluster, root, server) = backed_up(2).await;
    // The stored archive is replaced by bytes that are not gzip.
    let archive = root.path().join(BUCKET).join("backups/base/base.tar.gz");
    std::fs::write(&archive, b"this is not a backup archive").unwrap();
    create_restore(
        &cluster,
        "from-garbage",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-garbage"}}),
    );
    let done = wait_final(&cluster, &server, "Restore", "from-garbage").await;
    assert_eq!(phase(&done), "Failed", "{done:#}");
    let reason = done["status"]["failureReason"].as_str().unwrap_or_default();
    assert!(reason.contains("base.tar.gz"), "{reason}");
    assert!(
        cluster
            .store()
            .get("v1", "Namespace", "", "shop-garbage")
            .is_none()
    );
    assert_eq!(
        restore_record(root.path(), "from-garbage").unwrap()["status"]["phase"],
        "Failed"
    );
}

#[tokio::test]
async fn a_hostile_archive_gives_item_errors_through_the_server_and_creates_only_good_items() {
    let (cluster, root, server) = backed_up(1).await;
    let config_map = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "web"}});
    let archive = restore_support::HandArchive::new()
        .file("metadata/version", b"1.1.0\n")
        .item(
            "resources/namespaces/cluster/web.json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}),
        )
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &config_map("good"),
        )
        .item(
            "resources/configmaps/namespaces/web/../../../../escape.json",
            &config_map("escape"),
        )
        .file(
            "resources/configmaps/namespaces/web/broken.json",
            b"{\"kind\": ",
        )
        .raw(
            b"resources/configmaps/namespaces/web/link.json",
            tar::EntryType::Symlink,
            b"/etc/passwd",
            b"",
        )
        .gzipped();
    let dir = root.path().join(BUCKET).join("backups/hand");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hand.tar.gz"), archive).unwrap();
    let store = cluster.store();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "hand", "namespace": NS},
            "spec": {"storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();

    create_restore(&cluster, "hostile", json!({"backupName": "hand"}));
    let done = wait_final(&cluster, &server, "Restore", "hostile").await;
    assert_eq!(phase(&done), "PartiallyFailed", "{done:#}");
    assert_eq!(done["status"]["errors"], 3, "{done:#}");
    assert!(store.get("v1", "ConfigMap", "web", "good").is_some());
    for name in ["escape", "broken", "link"] {
        assert!(
            store.get("v1", "ConfigMap", "web", name).is_none(),
            "{name} created"
        );
    }
    assert_eq!(
        restore_record(root.path(), "hostile").unwrap()["status"]["phase"],
        "PartiallyFailed"
    );
}

#[tokio::test]
async fn filters_and_the_update_policy_apply_through_the_server() {
    let (cluster, _root, server) = backed_up(3).await;
    let store = cluster.store();
    // A live ConfigMap and a live Secret that differ from the backed-up ones.
    let mut changed = store.get("v1", "ConfigMap", "shop", "cm-1").unwrap();
    changed["data"] = json!({"index": "changed"});
    store.insert(changed).unwrap();
    let mut secret = store.get("v1", "Secret", "shop", "db-password").unwrap();
    secret["data"] = json!({"value": "Y2hhbmdlZA=="});
    let secret = store.insert(secret).unwrap();
    create_restore(
        &cluster,
        "configmaps-back",
        json!({"backupName": "base", "includedResources": ["configmaps"], "existingResourcePolicy": "update"}),
    );
    let done = wait_final(&cluster, &server, "Restore", "configmaps-back").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let cm = store.get("v1", "ConfigMap", "shop", "cm-1").unwrap();
    assert_eq!(
        cm["data"]["index"], "1",
        "the update policy puts the backed-up data back"
    );
    assert_eq!(
        cm["metadata"]["labels"]["velero.io/restore-name"],
        "configmaps-back"
    );
    // The Secrets are filtered out: the changed one keeps its change (the update policy would
    // have put the backed-up data back), and no Secret was written to.
    let after = store.get("v1", "Secret", "shop", "db-password").unwrap();
    assert_eq!(after["data"]["value"], "Y2hhbmdlZA==");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        secret["metadata"]["resourceVersion"]
    );
    assert!(
        after["metadata"]
            .get("labels")
            .is_none_or(|l| l.get("velero.io/restore-name").is_none()),
        "{after:#}"
    );
}

/// Gives the Backup `name` the label of schedule `schedule`, as a Schedule's backups have.
fn label_with_schedule(cluster: &Cluster, name: &str, schedule: &str) {
    let mut backup = cluster.get("velero.io/v1", "Backup", name).unwrap();
    backup["metadata"]["labels"] = json!({"velero.io/schedule-name": schedule});
    cluster.store().insert(backup).unwrap();
}

/// Replaces the object with itself without `status`, as a client replacing the whole object
/// does (Velero's CRDs have no status subresource).
fn remove_status(cluster: &Cluster, kind: &str, name: &str) {
    let mut object = cluster.get("velero.io/v1", kind, name).unwrap();
    object.as_object_mut().unwrap().remove("status");
    cluster.store().insert(object).unwrap();
}

#[tokio::test]
async fn a_restore_killed_after_its_record_is_completed_after_restart() {
    // A writable location keeps the record with the restore's artifacts; a read-only one
    // cannot, and the record is kept in the cluster instead.
    for access in ["ReadWrite", "ReadOnly"] {
        let (cluster, root, mut first) = backed_up(3).await;
        label_with_schedule(&cluster, "base", "nightly");
        let mut location = cluster
            .get("velero.io/v1", "BackupStorageLocation", "default")
            .unwrap();
        location["spec"]["accessMode"] = json!(access);
        cluster.store().insert(location).unwrap();
        // Slow creates keep the restore running until its status writes are blocked.
        let slow = cluster.sim.faults().latency(
            LatencyFault::new(Duration::from_millis(1500))
                .verbs(&["create"])
                .resources(&["configmaps"]),
        );
        create_restore(
            &cluster,
            "nightly-copy",
            json!({"scheduleName": "nightly", "namespaceMapping": {"shop": "shop-copy"}}),
        );
        let started = wait_in_progress(&cluster, &first, "Restore", "nightly-copy").await;
        assert_eq!(started["spec"]["backupName"], "base", "{access}");
        let uid = started["metadata"]["uid"].as_str().unwrap().to_owned();
        let blocked = cluster.sim.faults().status(
            kube_sim::StatusFault::new(503)
                .verbs(&["patch"])
                .resources(&["restores"]),
        );
        cluster.sim.faults().remove(slow);
        let in_cluster = || {
            cluster
                .store()
                .get("v1", "ConfigMap", NS, &format!("hawser-restore-{uid}"))
        };
        let recorded = poll(&first, "the restore record", || match access {
            "ReadOnly" => in_cluster().map(|cm| {
                let json = cm["data"]["restore-nightly-copy-status.json"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                serde_json::from_str::<Value>(&json).unwrap()
            }),
            _ => restore_record(root.path(), "nightly-copy"),
        })
        .await;
        first.kill().await;
        assert_eq!(recorded["status"]["phase"], "Completed", "{access}");
        let object = cluster
            .get("velero.io/v1", "Restore", "nightly-copy")
            .unwrap();
        assert_eq!(phase(&object), "InProgress", "{access}");
        cluster.sim.faults().remove(blocked);

        let second = Server::start(&cluster, root.path(), FAST).await;
        let done = wait_final(&cluster, &second, "Restore", "nightly-copy").await;
        assert_eq!(phase(&done), "Completed", "{access}: {}", second.log_text());
        assert_eq!(
            done["status"]["completionTimestamp"], recorded["status"]["completionTimestamp"],
            "{access}"
        );
        match access {
            "ReadOnly" => {
                assert!(
                    !root.path().join(BUCKET).join("restores").exists(),
                    "a read-only location was written to"
                );
                let cm = in_cluster().unwrap();
                assert_eq!(cm["metadata"]["ownerReferences"][0]["uid"], json!(uid));
            }
            _ => assert!(in_cluster().is_none(), "{access}: a record in the cluster"),
        }
    }
}

#[tokio::test]
async fn a_status_removed_by_a_client_is_restored_from_the_record_without_running_again() {
    let (cluster, root, server) = backed_up(2).await;
    create_restore(
        &cluster,
        "copy",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "copy").await;
    assert_eq!(phase(&restored), "Completed", "{}", server.log_text());
    let backed = cluster.get("velero.io/v1", "Backup", "base").unwrap();
    let archive = server_support::artifact(root.path(), "base", "base.tar.gz");
    let archive_before = std::fs::metadata(&archive).unwrap().modified().unwrap();
    let restore_log = root
        .path()
        .join(BUCKET)
        .join("restores/copy/restore-copy-logs.gz");
    let log_before = std::fs::read(&restore_log).unwrap();

    for (kind, name, before) in [("Backup", "base", &backed), ("Restore", "copy", &restored)] {
        remove_status(&cluster, kind, name);
        let again = wait_final(&cluster, &server, kind, name).await;
        assert_eq!(phase(&again), "Completed", "{kind}: {}", server.log_text());
        for field in [
            "startTimestamp",
            "completionTimestamp",
            "progress",
            "errors",
        ] {
            assert_eq!(
                again["status"][field], before["status"][field],
                "{kind} status.{field}"
            );
        }
    }
    // Neither ran again: the archive and the restore log are the ones first written.
    assert_eq!(
        std::fs::metadata(&archive).unwrap().modified().unwrap(),
        archive_before
    );
    assert_eq!(std::fs::read(&restore_log).unwrap(), log_before);
    assert_metrics(
        &server,
        &[
            "velero_backup_attempt_total{schedule=\"\"} 1",
            "velero_restore_attempt_total{schedule=\"\"} 1",
        ],
    )
    .await;
}

/// Stores `archive` as the contents of backup `name` in the filesystem location under `root`
/// and creates its Backup object as `Completed`.
fn put_hand_backup(cluster: &Cluster, root: &Path, name: &str, archive: &[u8]) {
    let dir = root.join(BUCKET).join("backups").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.tar.gz")), archive).unwrap();
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();
}

/// The results file of restore `restore`.
fn results_of(root: &Path, restore: &str) -> Value {
    let path = restore_artifact(root, restore, &format!("restore-{restore}-results.gz"));
    serde_json::from_reader(flate2::read::GzDecoder::new(
        std::fs::File::open(path).unwrap(),
    ))
    .unwrap()
}

fn errors_of(root: &Path, restore: &str) -> Vec<String> {
    let results = results_of(root, restore);
    let mut all = Vec::new();
    for scope in ["velero", "cluster"] {
        for m in results["errors"][scope].as_array().into_iter().flatten() {
            all.push(m.as_str().unwrap().to_owned());
        }
    }
    for list in results["errors"]["namespaces"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for m in list.as_array().into_iter().flatten() {
            all.push(m.as_str().unwrap().to_owned());
        }
    }
    all
}

fn web_namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}})
}

fn web_config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "web"}})
}

#[tokio::test]
async fn alias_directories_are_item_errors_and_nothing_under_them_is_created() {
    let (cluster, root, server) = backed_up(1).await;
    let token = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": name, "namespace": "web",
                "annotations": {"kubernetes.io/service-account.name": "builder"}},
            "data": {"token": "c3RvbGVu"}})
    };
    let entries: Vec<(&str, Value)> = vec![
        (
            "resources/node/cluster/n1.json",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
        ),
        ("resources/secret/namespaces/web/tok.json", token("tok")),
        ("resources/Secrets/namespaces/web/tok2.json", token("tok2")),
        (
            "resources/backup.velero.io/namespaces/velero/planted.json",
            json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                "metadata": {"name": "planted", "namespace": NS}, "spec": {}}),
        ),
        (
            "resources/restore.velero.io/namespaces/velero/evil.json",
            json!({"apiVersion": "velero.io/v1", "kind": "Restore",
                "metadata": {"name": "evil", "namespace": NS}, "spec": {"backupName": "base"}}),
        ),
    ];
    let mut archive = restore_support::HandArchive::new()
        .file("metadata/version", b"1.1.0\n")
        .item("resources/namespaces/cluster/web.json", &web_namespace())
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &web_config_map("good"),
        );
    for (path, object) in &entries {
        archive = archive.item(path, object);
    }
    put_hand_backup(&cluster, root.path(), "aliases", &archive.gzipped());

    create_restore(
        &cluster,
        "aliases",
        json!({"backupName": "aliases", "excludedResources": ["secrets"]}),
    );
    let done = wait_final(&cluster, &server, "Restore", "aliases").await;
    assert_eq!(phase(&done), "PartiallyFailed", "{done:#}");
    assert_eq!(done["status"]["errors"], entries.len(), "{done:#}");
    let errors = errors_of(root.path(), "aliases");
    for (path, _) in &entries {
        assert!(
            errors
                .iter()
                .any(|m| m.contains(path) && m.contains("not the canonical name")),
            "{path}: {errors:#?}"
        );
    }
    let store = cluster.store();
    assert!(store.get("v1", "ConfigMap", "web", "good").is_some());
    assert!(store.get("v1", "Node", "", "n1").is_none());
    for name in ["tok", "tok2"] {
        assert!(store.get("v1", "Secret", "web", name).is_none(), "{name}");
    }
    assert!(store.get("velero.io/v1", "Backup", NS, "planted").is_none());
    assert!(store.get("velero.io/v1", "Restore", NS, "evil").is_none());
}

#[tokio::test]
async fn a_cluster_admin_binding_under_an_alias_is_refused_in_a_one_namespace_restore() {
    let (cluster, root, server) = backed_up(1).await;
    let binding = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "web"}]})
    };
    let entries = [
        "resources/clusterrolebinding.rbac.authorization.k8s.io/cluster/own-1.json",
        "resources/ClusterRoleBinding.rbac.authorization.k8s.io/namespaces/web/own-2.json",
        "resources/clusterrolebinding.rbac.authorization.k8s.io/namespaces/web/own-3.json",
    ];
    let mut archive = restore_support::HandArchive::new()
        .item("resources/namespaces/cluster/web.json", &web_namespace())
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &web_config_map("good"),
        );
    for (i, path) in entries.iter().enumerate() {
        archive = archive.item(path, &binding(&format!("own-{}", i + 1)));
    }
    put_hand_backup(&cluster, root.path(), "escalate", &archive.gzipped());

    create_restore(
        &cluster,
        "escalate",
        json!({"backupName": "escalate", "includedNamespaces": ["web"]}),
    );
    let done = wait_final(&cluster, &server, "Restore", "escalate").await;
    assert_eq!(phase(&done), "PartiallyFailed", "{done:#}");
    let errors = errors_of(root.path(), "escalate");
    assert_eq!(errors.len(), entries.len(), "{errors:#?}");
    for path in entries {
        assert!(
            errors.iter().any(|m| m.contains(path)),
            "{path}: {errors:#?}"
        );
    }
    let store = cluster.store();
    for i in 1..=entries.len() {
        assert!(
            store
                .get(
                    "rbac.authorization.k8s.io/v1",
                    "ClusterRoleBinding",
                    "",
                    &format!("own-{i}")
                )
                .is_none()
        );
    }
    assert!(store.get("v1", "ConfigMap", "web", "good").is_some());
}

/// How far a restore may raise the server's peak memory: the 16 MiB budget of waiting items
/// of `RestoreOptions::default()` plus a fixed 32 MiB for the rest (decompression and tar
/// buffers, the results and log of the restore, the allocator's slack).
const RESTORE_MEMORY_BOUND_KIB: u64 = (16 << 10) + RESTORE_MARGIN_KIB;
/// The fixed part of [`RESTORE_MEMORY_BOUND_KIB`].
const RESTORE_MARGIN_KIB: u64 = 32 << 10;

#[tokio::test]
async fn a_64_mib_long_name_leaves_the_servers_peak_memory_within_the_budget() {
    let (cluster, root, server) = backed_up(1).await;
    let pid = server.pid().unwrap();
    let size: u64 = 64 << 20;
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    let namespace = web_namespace().to_string();
    let mut h = tar::Header::new_gnu();
    h.set_size(namespace.len() as u64);
    h.set_mode(0o755);
    tar.append_data(
        &mut h,
        "resources/namespaces/cluster/web.json",
        namespace.as_bytes(),
    )
    .unwrap();
    let mut long = tar::Header::new_gnu();
    long.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    long.set_entry_type(tar::EntryType::GNULongName);
    long.set_size(size);
    long.set_cksum();
    tar.append(&long, std::io::Read::take(std::io::repeat(b'a'), size))
        .unwrap();
    for (path, object) in [
        (
            "resources/configmaps/namespaces/web/victim.json",
            web_config_map("victim"),
        ),
        (
            "resources/configmaps/namespaces/web/good.json",
            web_config_map("good"),
        ),
    ] {
        let data = object.to_string();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        tar.append_data(&mut h, path, data.as_bytes()).unwrap();
    }
    let archive = tar.into_inner().unwrap().finish().unwrap();
    assert!(archive.len() < 1 << 20, "{} bytes", archive.len());
    put_hand_backup(&cluster, root.path(), "longname", &archive);

    let before = peak_rss_kib(pid);
    create_restore(&cluster, "longname", json!({"backupName": "longname"}));
    let done = wait_final(&cluster, &server, "Restore", "longname").await;
    let after = peak_rss_kib(pid);
    eprintln!("peak RSS before {before} KiB, after {after} KiB");
    assert_eq!(phase(&done), "PartiallyFailed", "{done:#}");
    let errors = errors_of(root.path(), "longname");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("victim.json")
            && errors[0].contains("extension header of 67108864 bytes"),
        "{errors:#?}"
    );
    let store = cluster.store();
    assert!(store.get("v1", "ConfigMap", "web", "good").is_some());
    assert!(store.get("v1", "ConfigMap", "web", "victim").is_none());
    assert!(
        after - before <= RESTORE_MEMORY_BOUND_KIB,
        "peak RSS grew by {} KiB",
        after - before
    );
}

#[tokio::test]
async fn fifty_filtered_out_one_mib_namespaces_are_not_kept() {
    let (cluster, root, server) = backed_up(1).await;
    let pid = server.pid().unwrap();
    let large = "x".repeat(1 << 20);
    let mut archive = restore_support::HandArchive::new()
        .item("resources/namespaces/cluster/web.json", &web_namespace())
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &web_config_map("good"),
        );
    for i in 0..50 {
        archive = archive.item(
            &format!("resources/namespaces/cluster/junk-{i}.json"),
            &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": format!("junk-{i}"), "annotations": {"filler": large}}}),
        );
    }
    put_hand_backup(&cluster, root.path(), "junk", &archive.gzipped());

    let before = peak_rss_kib(pid);
    create_restore(
        &cluster,
        "junk",
        json!({"backupName": "junk", "includedNamespaces": ["web"]}),
    );
    let done = wait_final(&cluster, &server, "Restore", "junk").await;
    let after = peak_rss_kib(pid);
    eprintln!("peak RSS before {before} KiB, after {after} KiB");
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let store = cluster.store();
    assert!(store.get("v1", "ConfigMap", "web", "good").is_some());
    assert!(store.get("v1", "Namespace", "", "junk-0").is_none());
    // Nothing of the junk is restorable, so nothing is kept: only the fixed margin applies
    // (keeping the fifty objects took about 58 MiB).
    assert!(
        after - before <= RESTORE_MARGIN_KIB,
        "peak RSS grew by {} KiB",
        after - before
    );
}

#[tokio::test]
async fn an_encrypted_archive_holds_no_secret_in_clear_and_restores_with_its_key() {
    use base64::Engine as _;
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    let key = [42u8; 32];
    cluster
        .store()
        .insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "archive-key", "namespace": NS},
            "data": {"key": base64::engine::general_purpose::STANDARD.encode(key)}
        }))
        .unwrap();
    let mut sealed = server_support::filesystem_location_object("default", root.path());
    sealed["spec"]["config"]["archiveEncryptionSecret"] = json!("archive-key/key");
    cluster.store().insert(sealed).unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "sealed", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "sealed").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());

    // The bucket holds the sealed archive: no Secret, no name, in clear.
    let archive = std::fs::read(server_support::artifact(
        root.path(),
        "sealed",
        "sealed.tar.gz",
    ))
    .unwrap();
    assert_eq!(&archive[..8], b"HWSRAE01");
    for clear in [&b"db-password"[..], b"c2VjcmV0", b"secret"] {
        assert!(!archive.windows(clear.len()).any(|w| w == clear));
    }
    let record = server_support::backup_record(root.path(), "sealed").unwrap();
    let id = hawser_store::crypt::ArchiveKey::from_secret(&key).unwrap();
    assert_eq!(
        record["metadata"]["annotations"]["hawser.io/archive-key-id"],
        id.id()
    );

    // Restored through the key, into another namespace.
    create_restore(
        &cluster,
        "unsealed",
        json!({"backupName": "sealed", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "unsealed").await;
    assert_eq!(phase(&restored), "Completed", "{}", server.log_text());
    let secret = cluster
        .store()
        .get("v1", "Secret", "shop-copy", "db-password")
        .unwrap();
    assert_eq!(secret["data"]["value"], "c2VjcmV0");

    // A location without the key cannot read it, and says why.
    let mut plain = cluster
        .get("velero.io/v1", "BackupStorageLocation", "default")
        .unwrap();
    plain["spec"]["config"]
        .as_object_mut()
        .unwrap()
        .remove("archiveEncryptionSecret");
    cluster.store().insert(plain).unwrap();
    create_restore(
        &cluster,
        "keyless",
        json!({"backupName": "sealed", "namespaceMapping": {"shop": "shop-keyless"}}),
    );
    let keyless = wait_final(&cluster, &server, "Restore", "keyless").await;
    assert_eq!(phase(&keyless), "Failed", "{keyless:#}");
    assert!(
        keyless["status"]["failureReason"]
            .as_str()
            .unwrap()
            .contains("the archive is encrypted, and its location names no archive key"),
        "{keyless:#}"
    );
}

/// A restore into a new cluster, as Velero does it: claims lose the annotations that tie them
/// to the old cluster (the node a `WaitForFirstConsumer` class picked, the provisioner), and
/// Velero's `change-storage-class` ConfigMap maps the classes of claims and StatefulSet claim
/// templates (a mapping to a class the cluster lacks is a warning and changes nothing), and its
/// `change-image-name` ConfigMap renames container images.
#[tokio::test]
async fn a_disaster_recovery_restore_maps_storage_classes_and_images_and_frees_claims_from_old_nodes()
 {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 1);
    let store = cluster.store();
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop", "annotations": {
                "volume.kubernetes.io/selected-node": "node-of-the-old-cluster",
                "volume.kubernetes.io/storage-provisioner": "disk.csi.example.com",
                "team": "storage"
            }},
            "spec": {"storageClassName": "old-class", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "logs", "namespace": "shop"},
            "spec": {"storageClassName": "other-class", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
    let template = json!({"metadata": {"labels": {"app": "db"}},
                          "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}});
    store
        .insert(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"serviceName": "db", "replicas": 0,
                     "selector": {"matchLabels": {"app": "db"}}, "template": template,
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                         "spec": {"storageClassName": "old-class", "accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}}}]}
        }))
        .unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "dr",
        json!({"includedNamespaces": ["shop"], "snapshotVolumes": false}),
    );
    let done = wait_final(&cluster, &server, "Backup", "dr").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");

    // The new cluster has a class of its own, and Velero's plugin ConfigMap naming it.
    store
        .insert(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "new-class"}, "provisioner": "disk.csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .unwrap();
    // Velero's plugin ConfigMaps: storage classes, and images from the new cluster's registry.
    let plugin_config = |action: &str, data: Value| {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{action}-config"), "namespace": NS, "labels": {
                    "velero.io/plugin-config": "",
                    format!("velero.io/{action}"): "RestoreItemAction"
                }},
                "data": data
            }))
            .unwrap();
    };
    plugin_config(
        "change-storage-class",
        json!({"old-class": "new-class", "other-class": "missing-class"}),
    );
    plugin_config(
        "change-image-name",
        json!({"registry": "postgres, mirror.example.com/postgres", "unused": "no comma"}),
    );
    create_restore(
        &cluster,
        "dr-back",
        json!({"backupName": "dr", "namespaceMapping": {"shop": "shop-dr"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "dr-back").await;
    assert_eq!(phase(&restored), "Completed", "{restored:#}");
    assert_eq!(restored["status"]["warnings"], 1, "{restored:#}");
    let warnings = restore_warnings(root.path(), "dr-back");
    assert!(
        warnings[0].contains(
            "maps storage class other-class to missing-class, which does not exist in this cluster"
        ),
        "{warnings:?}"
    );

    let claim = store
        .get("v1", "PersistentVolumeClaim", "shop-dr", "data")
        .unwrap();
    assert_eq!(claim["spec"]["storageClassName"], "new-class", "{claim:#}");
    let annotations = &claim["metadata"]["annotations"];
    assert!(
        annotations
            .get("volume.kubernetes.io/selected-node")
            .is_none()
            && annotations
                .get("volume.kubernetes.io/storage-provisioner")
                .is_none()
            && annotations["team"] == "storage",
        "{claim:#}"
    );
    let logs = store
        .get("v1", "PersistentVolumeClaim", "shop-dr", "logs")
        .unwrap();
    assert_eq!(logs["spec"]["storageClassName"], "other-class");
    let set = store
        .get("apps/v1", "StatefulSet", "shop-dr", "db")
        .unwrap();
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"], "new-class",
        "{set:#}"
    );
    assert_eq!(
        set["spec"]["template"]["spec"]["containers"][0]["image"], "mirror.example.com/postgres:17",
        "{set:#}"
    );
}

fn restore_warnings(root: &Path, restore: &str) -> Vec<String> {
    results_of(root, restore)["warnings"]["velero"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Velero's resource modifiers: a ConfigMap's rules patch the items they select (JSON Patch,
/// JSON Merge Patch, strategic merge patch) before they are created; a rule that fails is an
/// error on the item's namespace and the item is created as the other rules left it; a
/// missing or malformed ConfigMap makes the restore `FailedValidation` naming it, before
/// anything is created.
#[tokio::test]
async fn resource_modifiers_patch_the_items_they_select_and_a_bad_config_map_fails_validation() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    let store = cluster.store();
    store
        .insert(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "app", "image": "registry.old/app:1"},
                         {"name": "proxy", "image": "registry.old/proxy:1"}]}}}
        }))
        .unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "app", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "app").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");

    let modifiers = |name: &str, rules: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": NS},
               "data": {"rules.yaml": rules}})
    };
    store
        .insert(modifiers(
            "move",
            r#"
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps, namespaces: [shop]}
  patches:
  - {operation: replace, path: /spec/replicas, value: "2"}
- conditions: {groupResource: "*.apps", resourceNameRegex: "^web$"}
  strategicPatches:
  - patchData: |
      spec:
        template:
          spec:
            containers:
            - name: app
              image: registry.new/app:1
- conditions:
    groupResource: configmaps
    resourceNameRegex: "^cm-1$"
    matches: [{path: /data/index, value: '"1"'}]
  mergePatches:
  - patchData: '{"metadata": {"labels": {"moved": "true"}}, "data": {"index": null}}'
- conditions: {groupResource: secrets, resourceNameRegex: "^api-token$"}
  patches:
  - {operation: remove, path: /data/missing}
"#,
        ))
        .unwrap();
    create_restore(
        &cluster,
        "moved",
        json!({"backupName": "app", "namespaceMapping": {"shop": "shop-new"},
               "resourceModifier": {"kind": "ConfigMap", "name": "move"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "moved").await;
    assert_eq!(phase(&restored), "PartiallyFailed", "{restored:#}");
    assert_eq!(restored["status"]["errors"], 1, "{restored:#}");
    let errors = errors_of(root.path(), "moved");
    assert!(
        errors[0].contains("api-token") && errors[0].contains("error in applying JSON Patch"),
        "{errors:?}"
    );
    let web = store
        .get("apps/v1", "Deployment", "shop-new", "web")
        .unwrap();
    assert_eq!(web["spec"]["replicas"], 2, "{web:#}");
    let containers = &web["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "registry.new/app:1", "{web:#}");
    assert_eq!(containers[1]["image"], "registry.old/proxy:1", "{web:#}");
    assert_eq!(web["metadata"]["labels"]["velero.io/restore-name"], "moved");
    let cm1 = store.get("v1", "ConfigMap", "shop-new", "cm-1").unwrap();
    assert_eq!(cm1["metadata"]["labels"]["moved"], "true", "{cm1:#}");
    assert!(cm1["data"].get("index").is_none(), "{cm1:#}");
    let cm0 = store.get("v1", "ConfigMap", "shop-new", "cm-0").unwrap();
    assert_eq!(cm0["data"]["index"], "0", "{cm0:#}");
    // The rule that failed left its item as the other rules made it, and it was created.
    assert!(store.get("v1", "Secret", "shop-new", "api-token").is_some());

    // A missing ConfigMap, and one that is not the format: FailedValidation, nothing created.
    store
        .insert(modifiers("typo", "version: v1\nresourceModifierRule: []\n"))
        .unwrap();
    for (name, config, expected) in [
        (
            "no-rules",
            "absent",
            format!("failed to get resource modifiers configmap {NS}/absent"),
        ),
        (
            "bad-rules",
            "typo",
            format!("Error in parsing resource modifiers provided in configmap {NS}/typo"),
        ),
    ] {
        let target = format!("shop-{name}");
        create_restore(
            &cluster,
            name,
            json!({"backupName": "app", "namespaceMapping": {"shop": target},
                   "resourceModifier": {"kind": "configmap", "name": config}}),
        );
        let failed = wait_final(&cluster, &server, "Restore", name).await;
        assert_eq!(phase(&failed), "FailedValidation", "{failed:#}");
        let messages = failed["status"]["validationErrors"].to_string();
        assert!(messages.contains(&expected), "{failed:#}");
        assert!(
            store.get("v1", "Namespace", "", &target).is_none(),
            "{name}: the restore created its namespace"
        );
    }
}

/// Velero's restore init-container hooks: a Pod's `init.hook.restore.velero.io/*` annotations
/// and the Restore's `spec.hooks` init containers (by target namespace and labels) are put in
/// front of the restored Pods' own init containers, without a warning; a hook container
/// without a command fails its Pod alone.
#[tokio::test]
async fn restore_init_hooks_are_put_into_the_restored_pods() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let store = cluster.store();
    store
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    store
        .insert(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": "shop"}}))
        .unwrap();
    let pod = |name: &str, app: &str, annotations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": app},
                         "annotations": annotations},
            "spec": {"initContainers": [{"name": "own", "image": "busybox", "command": ["true"]}],
                     "containers": [{"name": app, "image": "busybox"}]}})
    };
    store
        .insert(pod(
            "db-0",
            "db",
            json!({"init.hook.restore.velero.io/container-image": "busybox",
                   "init.hook.restore.velero.io/container-name": "prepare-db",
                   "init.hook.restore.velero.io/command": "[\"/bin/sh\", \"-c\", \"echo ready\"]"}),
        ))
        .unwrap();
    store.insert(pod("web-0", "web", json!({}))).unwrap();
    store.insert(pod("cache-0", "cache", json!({}))).unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "hooked", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "hooked").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");

    let hooks = |container: Value| {
        json!({"resources": [{"name": "warm", "includedNamespaces": ["shop-*"],
            "labelSelector": {"matchLabels": {"app": "web"}},
            "postHooks": [{"init": {"initContainers": [container]}}]}]})
    };
    create_restore(
        &cluster,
        "hooked-back",
        json!({"backupName": "hooked", "namespaceMapping": {"shop": "shop-copy"},
               "hooks": hooks(json!({"name": "warm-cache", "image": "busybox", "command": ["true"]}))}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "hooked-back").await;
    assert_eq!(phase(&restored), "Completed", "{restored:#}");
    assert!(
        restored["status"].get("warnings").is_none_or(|w| w == 0),
        "{restored:#}"
    );
    let init_names = |namespace: &str, name: &str| -> Vec<String> {
        let pod = store.get("v1", "Pod", namespace, name).unwrap();
        pod["spec"]["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(init_names("shop-copy", "db-0"), ["prepare-db", "own"]);
    let db = store.get("v1", "Pod", "shop-copy", "db-0").unwrap();
    assert_eq!(
        db["spec"]["initContainers"][0]["command"],
        json!(["/bin/sh", "-c", "echo ready"])
    );
    assert_eq!(init_names("shop-copy", "web-0"), ["warm-cache", "own"]);
    assert_eq!(init_names("shop-copy", "cache-0"), ["own"]);

    // A hook container without a command: its Pod fails alone.
    create_restore(
        &cluster,
        "bad-hook",
        json!({"backupName": "hooked", "namespaceMapping": {"shop": "shop-bad"},
               "hooks": hooks(json!({"name": "warm-cache", "image": "busybox"}))}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "bad-hook").await;
    assert_eq!(phase(&restored), "PartiallyFailed", "{restored:#}");
    let errors = errors_of(root.path(), "bad-hook");
    assert!(
        errors.len() == 1
            && errors[0].contains("pods/shop-bad/web-0")
            && errors[0].contains("hook spec warm: it has no command"),
        "{errors:?}"
    );
    assert!(store.get("v1", "Pod", "shop-bad", "web-0").is_none());
    assert_eq!(init_names("shop-bad", "db-0"), ["prepare-db", "own"]);
}
