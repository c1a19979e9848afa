//! `hawser server` as a process against kube-sim: what a Backup that leaves things to Velero's
//! defaults gets (the default location, its label and annotations), and how spec fields hawser
//! does not act on are reported instead of silently ignored.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::path::Path;
use std::time::Duration;

use cli_support::Cluster;
use serde_json::{Value, json};
use server_support::{
    FAST, Server, artifact, create_backup, gunzip, phase, poll, seed, wait_final,
};

/// Inserts a filesystem location `name` rooted at `root`, marked `spec.default: true`.
fn default_location(cluster: &Cluster, name: &str, root: &Path) {
    let mut location = server_support::filesystem_location_object(name, root);
    location["spec"]["default"] = true.into();
    cluster.store().insert(location).unwrap();
}

#[tokio::test]
async fn the_newest_default_location_takes_backups_that_name_none() {
    let cluster = Cluster::start().await;
    let (older_root, newer_root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    seed(&cluster, 2);
    default_location(&cluster, "older", older_root.path());
    // Creation timestamps have whole seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    default_location(&cluster, "newer", newer_root.path());
    let older_allowed = ["--filesystem-root", older_root.path().to_str().unwrap()];
    let server = Server::start(
        &cluster,
        newer_root.path(),
        &[FAST, &older_allowed].concat(),
    )
    .await;

    // As Velero: the most recently created keeps `default`, the other is turned off.
    poll(&server, "the older location's default turned off", || {
        let older = cluster.get("velero.io/v1", "BackupStorageLocation", "older")?;
        (older["spec"]["default"] == false).then_some(())
    })
    .await;
    let newer = cluster
        .get("velero.io/v1", "BackupStorageLocation", "newer")
        .unwrap();
    assert_eq!(newer["spec"]["default"], true);

    create_backup(&cluster, "unnamed", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "unnamed").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(done["spec"]["storageLocation"], "newer");
    let metadata = &done["metadata"];
    assert_eq!(metadata["labels"]["velero.io/storage-location"], "newer");
    let annotations = &metadata["annotations"];
    for key in [
        "velero.io/source-cluster-k8s-gitversion",
        "velero.io/source-cluster-k8s-major-version",
        "velero.io/source-cluster-k8s-minor-version",
    ] {
        assert!(
            annotations[key].as_str().is_some_and(|v| !v.is_empty()),
            "{key} missing: {metadata:#}"
        );
    }
    assert!(artifact(newer_root.path(), "unnamed", "velero-backup.json").exists());
    assert!(!artifact(older_root.path(), "unnamed", "velero-backup.json").exists());
}

fn timestamp(object: &Value, field: &str) -> jiff::Timestamp {
    object["status"][field]
        .as_str()
        .unwrap_or_else(|| panic!("status.{field} missing: {object:#}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn backups_sharing_a_namespace_queue_and_others_run_beside_them() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    server_support::filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend(["--concurrent-backups", "2", "--log-level", "info"]);
    let server = Server::start(&cluster, root.path(), &args).await;
    // Every backup lists ConfigMaps for 3 s.
    cluster.sim.faults().latency(
        kube_sim::LatencyFault::new(Duration::from_secs(3))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );

    create_backup(&cluster, "shop-1", json!({"includedNamespaces": ["shop"]}));
    server_support::wait_in_progress(&cluster, &server, "Backup", "shop-1").await;
    create_backup(&cluster, "shop-2", json!({"includedNamespaces": ["sh*"]}));
    let queued = server_support::wait_for(
        &cluster,
        Some(&server),
        "Backup",
        "shop-2",
        Duration::from_secs(10),
        |b| phase(b) == "Queued",
    )
    .await;
    assert_eq!(queued["status"]["queuePosition"], 1, "{queued:#}");
    create_backup(&cluster, "other", json!({"includedNamespaces": ["other"]}));

    let first = wait_final(&cluster, &server, "Backup", "shop-1").await;
    let second = wait_final(&cluster, &server, "Backup", "shop-2").await;
    let other = wait_final(&cluster, &server, "Backup", "other").await;
    for done in [&first, &second, &other] {
        assert_eq!(phase(done), "Completed", "{done:#}\n{}", server.log_text());
        assert_eq!(done["status"]["queuePosition"], 0, "{done:#}");
    }
    // The overlapping backup started only after the first had ended; the other one ran
    // beside it (a second slot was free and it shares no namespace).
    assert!(timestamp(&second, "startTimestamp") >= timestamp(&first, "completionTimestamp"));
    assert!(
        timestamp(&other, "startTimestamp") < timestamp(&first, "completionTimestamp"),
        "{other:#}\n{first:#}\n{}",
        server.log_text()
    );
    let log = server.log_text();
    assert!(
        log.contains("backup shop-1, admitted before it and not finished"),
        "{log}"
    );
}

/// Velero's pod annotation for file-system backup, the server's
/// `--default-volumes-to-fs-backup` and pod volume data in a backup are not acted on: the
/// backup and the restore still complete, each with a warning naming what was not done; the
/// server's defaults are written into the backup's spec when it starts, as Velero does.
#[tokio::test]
async fn pod_annotations_and_server_defaults_hawser_does_not_act_on_are_warned() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 1);
    let store = cluster.store();
    // A real API server admits a Pod only once its ServiceAccount exists.
    store
        .insert(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "default", "namespace": "shop"}}))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "db-0", "namespace": "shop", "annotations": {
                "backup.velero.io/backup-volumes": "data"
            }},
            "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}
        }))
        .unwrap();
    server_support::filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend([
        "--default-volumes-to-fs-backup",
        "--default-item-operation-timeout=2h",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;

    create_backup(
        &cluster,
        "annotated",
        json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "annotated").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    let spec = &done["spec"];
    assert_eq!(spec["defaultVolumesToFsBackup"], true, "{spec:#}");
    assert_eq!(spec["snapshotMoveData"], false, "{spec:#}");
    assert_eq!(spec["itemOperationTimeout"], "2h0m0s", "{spec:#}");
    assert_eq!(spec["csiSnapshotTimeout"], "10m0s", "{spec:#}");
    let results: Value = serde_json::from_str(&gunzip(&artifact(
        root.path(),
        "annotated",
        "annotated-results.gz",
    )))
    .unwrap();
    let warnings: Vec<&str> = results["warnings"]["velero"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert_eq!(done["status"]["warnings"], 2, "{done:#}");
    for wanted in [
        "spec.defaultVolumesToFsBackup: ",
        "pod annotation backup.velero.io/backup-volumes on 1 pod (shop/db-0): file-system backup",
    ] {
        assert!(
            warnings.iter().any(|w| w.starts_with(wanted)),
            "{wanted}: {warnings:#?}"
        );
    }
    let described = cluster.hawser(&["backup", "describe", "annotated"]).await;
    assert!(
        described
            .stdout
            .contains("File System Backup (Default):  true"),
        "{}",
        described.stdout
    );

    // As Velero's file-system backup would have left it: one pod volume backup of db-0.
    let pod_volume_backups = json!([{
        "apiVersion": "velero.io/v1", "kind": "PodVolumeBackup",
        "metadata": {"name": "annotated-x7k2p", "namespace": "velero"},
        "spec": {"pod": {"kind": "Pod", "namespace": "shop", "name": "db-0"}, "volume": "data"}
    }]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, pod_volume_backups.to_string().as_bytes()).unwrap();
    std::fs::write(
        artifact(
            root.path(),
            "annotated",
            "annotated-podvolumebackups.json.gz",
        ),
        gz.finish().unwrap(),
    )
    .unwrap();

    server_support::create_restore(
        &cluster,
        "annotated-back",
        json!({"backupName": "annotated", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "annotated-back").await;
    assert_eq!(phase(&restored), "Completed", "{restored:#}");
    let results: Value = serde_json::from_str(&gunzip(&server_support::restore_artifact(
        root.path(),
        "annotated-back",
        "restore-annotated-back-results.gz",
    )))
    .unwrap();
    let warnings = results["warnings"]["velero"].to_string();
    assert!(
        warnings.contains(
            "the backup holds file-system backups of 1 pod volumes (shop/db-0 volume data): restoring pod volume data is not built in hawser"
        ),
        "{results:#}"
    );

    // Deleting the backup deletes its files; the request says what stays.
    server_support::request_deletion(&cluster, "delete-annotated", "annotated");
    server_support::until_gone(&cluster, &server, "Backup", "annotated").await;
    // Kept, to report what was left; its final status is written after the Backup goes.
    let request = server_support::poll(&server, "the request Processed", || {
        cluster
            .get("velero.io/v1", "DeleteBackupRequest", "delete-annotated")
            .filter(|r| r["status"]["phase"] == "Processed")
    })
    .await;
    let errors = request["status"]["errors"].to_string();
    assert!(
        errors.contains("the backup's file-system backups of 1 pod volumes (shop/db-0 volume data) were not deleted: hawser does not manage the backup repositories"),
        "{request:#}"
    );
}

/// Velero's resource policies: the include/exclude policy of the ConfigMap `spec.resourcePolicy`
/// names is merged into the backup's filters; a volume policy whose action hawser does not take
/// (`fs-backup`) is warned; a missing ConfigMap, or a policy beside old-style filters, is
/// `FailedValidation` before anything is stored.
#[tokio::test]
async fn a_resource_policy_config_map_filters_the_backup_and_its_volume_policies_are_warned() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    server_support::filesystem_location(&cluster, "default", root.path());
    cluster
        .store()
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "no-secrets", "namespace": cli_support::NS},
            "data": {"policy.yaml": "version: v1\nvolumePolicies:\n- conditions: {storageClass: [nfs]}\n  action: {type: fs-backup}\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [secrets]\n"}}))
        .unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;
    let policy = |name: &str| json!({"kind": "configmap", "name": name});
    create_backup(
        &cluster,
        "filtered",
        json!({"includedNamespaces": ["shop"], "resourcePolicy": policy("no-secrets")}),
    );
    let done = wait_final(&cluster, &server, "Backup", "filtered").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    let paths =
        server_support::archive_paths(&artifact(root.path(), "filtered", "filtered.tar.gz"));
    assert!(
        paths.iter().any(|p| p.contains("/configmaps/")),
        "{paths:?}"
    );
    assert!(!paths.iter().any(|p| p.contains("/secrets/")), "{paths:?}");
    let results = gunzip(&artifact(root.path(), "filtered", "filtered-results.gz"));
    assert!(
        results.contains(
            "1 volume policies of ConfigMap no-secrets have actions hawser does not take (fs-backup)"
        ),
        "{results}"
    );

    for (name, spec, expected) in [
        (
            "absent",
            json!({"resourcePolicy": policy("absent")}),
            "fail to get ResourcePolicies velero/absent ConfigMap",
        ),
        (
            "old-filters",
            json!({"includedResources": ["configmaps"], "resourcePolicy": policy("no-secrets")}),
            "They cannot be used with include-exclude policies",
        ),
    ] {
        create_backup(&cluster, name, spec);
        let failed = wait_final(&cluster, &server, "Backup", name).await;
        assert_eq!(phase(&failed), "FailedValidation", "{failed:#}");
        let errors = failed["status"]["validationErrors"].to_string();
        assert!(errors.contains(expected), "{name}: {errors}");
        assert!(
            !artifact(root.path(), name, "").exists(),
            "{name} stored something"
        );
    }
}
