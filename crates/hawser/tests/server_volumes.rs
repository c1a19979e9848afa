//! CSI volume snapshots through the `hawser server` process, with kube-sim's CSI side on: a
//! backup of a namespace with a Deployment, its Pod and claim ends `Completed` through
//! `WaitingForPluginOperations` and `Finalizing`, a restore into another namespace brings the
//! claim back provisioned from the snapshot, and deleting the backup deletes the snapshot; a snapshot that never becomes ready ends the
//! backup `PartiallyFailed` at the operation timeout, the operation named; a server killed
//! while the backup waits is replaced by one that takes the backup up again and completes it; an
//! API outage past `--resource-timeout` while the backup leaves any of its phases still ends it
//! `Completed`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;

use std::time::Duration;

use cli_support::{Cluster, NS};
use futures::StreamExt;
use kube::api::{DynamicObject, WatchEvent, WatchParams};
use kube_sim::csi::{self, CsiConfig, CsiSim, dynamic_api};
use serde_json::{Value, json};
use server_support::backup_record as record;
use server_support::csi::{application, client, create, patch};
use server_support::*;

/// Records every phase the Backup `name` shows, from now until it is final.
fn watch_phases(cluster: &Cluster, name: &str) -> tokio::task::JoinHandle<Vec<String>> {
    let backups = dynamic_api(&client(cluster), "velero.io", "Backup", "backups", Some(NS));
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut phases: Vec<String> = Vec::new();
        let mut stream = backups.watch(&params, "0").await.unwrap().boxed();
        while let Some(event) = stream.next().await {
            let object = match event.unwrap() {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
                _ => continue,
            };
            let phase = object.data["status"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if phases.last() != Some(&phase) && !phase.is_empty() {
                phases.push(phase.clone());
            }
            if matches!(
                phase.as_str(),
                "Completed" | "PartiallyFailed" | "Failed" | "FailedValidation"
            ) {
                return phases;
            }
        }
        phases
    })
}

fn archive(root: &std::path::Path, name: &str) -> Vec<String> {
    archive_paths(&artifact(root, name, &format!("{name}.tar.gz")))
}

#[tokio::test]
async fn a_volume_is_snapshotted_through_waiting_and_finalizing_restored_and_deleted_with_its_backup()
 {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_millis(1500), "").await;
    // The volume is kept when released and labelled: a restore gives both to the volume it
    // provisions anew (whose class says Delete).
    let original = keep_and_label_the_volume(&cluster).await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    let phases = watch_phases(&cluster, "with-data");

    create_backup(
        &cluster,
        "with-data",
        json!({"includedNamespaces": ["shop"], "itemOperationTimeout": "1m"}),
    );

    let done = wait_final(&cluster, &server, "Backup", "with-data").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(
        phases.await.unwrap(),
        [
            "Queued",
            "InProgress",
            "WaitingForPluginOperations",
            "Finalizing",
            "Completed"
        ]
    );
    let status = &done["status"];
    assert_eq!(status["backupItemOperationsAttempted"], 1, "{status:#}");
    assert_eq!(status["backupItemOperationsCompleted"], 1, "{status:#}");
    assert_eq!(status["csiVolumeSnapshotsCompleted"], 1, "{status:#}");
    server_checks::assert_metrics(
        &server,
        &[
            r#"velero_csi_snapshot_attempt_total{schedule="",backupName="with-data"} 1"#,
            r#"velero_csi_snapshot_success_total{schedule="",backupName="with-data"} 1"#,
            r#"velero_csi_snapshot_failure_total{schedule="",backupName="with-data"} 0"#,
        ],
    )
    .await;
    let paths = archive(root.path(), "with-data");
    for prefix in [
        "resources/deployments.apps/namespaces/shop/db.json",
        "resources/pods/namespaces/shop/db-0.json",
        "resources/persistentvolumeclaims/namespaces/shop/data.json",
        "resources/persistentvolumes/cluster/pvc-",
        "resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/shop/velero-data-",
        "resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/snapcontent-",
    ] {
        assert!(
            paths.iter().any(|p| p.starts_with(prefix)),
            "{prefix} in {paths:#?}"
        );
    }
    let record: Value = serde_json::from_slice(
        &std::fs::read(artifact(root.path(), "with-data", "velero-backup.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["status"]["phase"], "Completed");
    let info: Value = serde_json::from_str(&gunzip(&artifact(
        root.path(),
        "with-data",
        "with-data-volumeinfo.json.gz",
    )))
    .unwrap();
    let entry = &info[0];
    assert_eq!(info.as_array().map(Vec::len), Some(1), "{info:#}");
    assert_eq!(entry["pvcNamespace"], "shop", "{info:#}");
    assert_eq!(entry["pvcName"], "data", "{info:#}");
    assert_eq!(entry["pvName"], original.as_str(), "{info:#}");
    assert_eq!(entry["backupMethod"], "CSISnapshot", "{info:#}");
    assert_eq!(entry["preserveLocalSnapshot"], true, "{info:#}");
    assert_eq!(entry["result"], "succeeded", "{info:#}");
    assert_eq!(entry["pvInfo"]["reclaimPolicy"], "Retain", "{info:#}");
    assert_eq!(entry["pvInfo"]["labels"]["tier"], "gold", "{info:#}");
    assert!(
        entry["csiSnapshotInfo"]["snapshotHandle"]
            .as_str()
            .is_some_and(|h| h.starts_with("snap-")),
        "{info:#}"
    );

    let described = cluster
        .hawser(&["backup", "describe", "with-data", "--details"])
        .await;
    assert_eq!(described.code, 0, "{}", described.stderr);
    // Velero's layout: with --details each operation (its phase in the block after the items
    // it updates), without it the counts.
    for line in [
        "Backup Item Operations:\n  Operation for volumesnapshots.snapshot.storage.k8s.io shop/velero-data-",
        "    Backup Item Action Plugin:  velero.io/csi-volumesnapshot-backupper\n    Operation ID:               shop/velero-data-",
        "    Items to Update:\n",
        "    Phase:                 Completed\n",
    ] {
        assert!(
            described.stdout.contains(line),
            "{line}\n{}",
            described.stdout
        );
    }

    // Restored into another namespace: the claim comes back provisioned from the snapshot.
    create_restore(
        &cluster,
        "back",
        json!({"backupName": "with-data", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "back").await;
    assert_eq!(
        phase(&restored),
        "Completed",
        "{restored:#}\n{}",
        server.log_text()
    );
    let client = client(&cluster);
    let claims = dynamic_api(
        &client,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("shop-copy"),
    );
    let volume_name = poll(&server, "the restored claim bound", || {
        cluster
            .store()
            .get("v1", "PersistentVolumeClaim", "shop-copy", "data")
            .and_then(|c| c["spec"]["volumeName"].as_str().map(str::to_owned))
    })
    .await;
    let claim = claims.get("data").await.unwrap();
    assert_eq!(
        claim.data["spec"]["dataSource"]["kind"], "VolumeSnapshot",
        "{:?}",
        claim.data
    );
    let volume = cluster
        .store()
        .get("v1", "PersistentVolume", "", &volume_name)
        .unwrap();
    let handle = volume["metadata"]["annotations"][csi::RESTORED_FROM]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        handle.starts_with("snap-"),
        "provisioned from the snapshot: {volume:#}"
    );
    // The new volume got the original's reclaim policy and labels before the restore ended.
    assert_eq!(
        volume["spec"]["persistentVolumeReclaimPolicy"], "Retain",
        "{volume:#}"
    );
    assert_eq!(volume["metadata"]["labels"]["tier"], "gold", "{volume:#}");
    let restored_info: Value = serde_json::from_str(&gunzip(&restore_artifact(
        root.path(),
        "back",
        "back-volumeinfo.json.gz",
    )))
    .unwrap();
    assert_eq!(
        restored_info,
        json!([{
            "pvcName": "data",
            "pvcNamespace": "shop-copy",
            "pvName": volume_name,
            "restoreMethod": "CSISnapshot",
            "snapshotDataMoved": false,
            "csiSnapshotInfo": {
                "snapshotHandle": entry["csiSnapshotInfo"]["snapshotHandle"],
                "size": entry["csiSnapshotInfo"]["size"],
                "driver": csi::DRIVER,
                "vscName": restored_info[0]["csiSnapshotInfo"]["vscName"],
            },
        }])
    );
    let content = restored_info[0]["csiSnapshotInfo"]["vscName"]
        .as_str()
        .unwrap();
    assert!(
        cluster
            .store()
            .get(
                "snapshot.storage.k8s.io/v1",
                "VolumeSnapshotContent",
                "",
                content
            )
            .is_some(),
        "the restore's content {content} exists"
    );

    // Deleting the backup deletes its snapshot: the content it kept is gone.
    let contents_api = dynamic_api(
        &client,
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        None,
    );
    let kept: Vec<String> = contents_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| {
            c.data["status"]["snapshotHandle"] == handle.as_str()
                || c.data["spec"]["source"]["snapshotHandle"] == handle.as_str()
        })
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(
        kept.iter().any(|n| n.starts_with("snapcontent-")),
        "{kept:?}"
    );
    request_deletion(&cluster, "delete-with-data", "with-data");
    until_gone(&cluster, &server, "Backup", "with-data").await;
    for name in kept.iter().filter(|n| n.starts_with("snapcontent-")) {
        assert!(
            contents_api.get_opt(name).await.unwrap().is_none(),
            "{name} deleted with the backup"
        );
    }
}

#[tokio::test]
async fn a_snapshot_never_ready_ends_the_backup_partially_failed_at_the_timeout() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_millis(200), "never-ready").await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;

    create_backup(
        &cluster,
        "stuck",
        json!({"includedNamespaces": ["shop"], "itemOperationTimeout": "2s"}),
    );

    let done = wait_final(&cluster, &server, "Backup", "stuck").await;
    assert_eq!(
        phase(&done),
        "PartiallyFailed",
        "{done:#}\n{}",
        server.log_text()
    );
    assert_eq!(done["status"]["backupItemOperationsFailed"], 1, "{done:#}");
    assert_eq!(done["status"]["errors"], 1, "{done:#}");
    let results = std::fs::read(artifact(root.path(), "stuck", "stuck-results.gz")).unwrap();
    let results: Value =
        hawser_core::archive::gzjson::read_gz_json(std::io::Cursor::new(results), 1 << 20).unwrap();
    let error = results["errors"]["namespaces"]["shop"][0].as_str().unwrap();
    assert!(
        error.starts_with("operation shop/velero-data-")
            && error.contains("not ready to use within the item operation timeout (2s)"),
        "{error}"
    );
}

#[tokio::test]
async fn a_backup_waiting_when_its_server_is_killed_completes_under_the_next_one() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_secs(4), "").await;
    filesystem_location(&cluster, "default", root.path());
    let mut first = Server::start(&cluster, root.path(), FAST).await;

    create_backup(
        &cluster,
        "survivor",
        json!({"includedNamespaces": ["shop"]}),
    );
    let waiting = wait_for(
        &cluster,
        Some(&first),
        "Backup",
        "survivor",
        Duration::from_secs(20),
        |o| phase(o) == "WaitingForPluginOperations",
    )
    .await;
    first.kill().await;

    let second = Server::start(&cluster, root.path(), FAST).await;
    let done = wait_final(&cluster, &second, "Backup", "survivor").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", second.log_text());
    assert_eq!(
        done["status"]["backupItemOperationsCompleted"], 1,
        "{done:#}"
    );
    assert_ne!(
        done["metadata"]["annotations"]["hawser.io/owner"],
        waiting["metadata"]["annotations"]["hawser.io/owner"],
        "the second server took it over"
    );
}

/// The API goes away for 4 s the moment the record says `recorded`, i.e. while the status
/// write that follows it (out of `InProgress`, out of `WaitingForPluginOperations`, out of
/// `Finalizing`) is under way; the backup still ends `Completed`, after the outage.
async fn outage_when_recorded(recorded: &str) {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_secs(1), "").await;
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend([
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "250ms",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;
    // Writes of the Backup take a while, so the write after the record is under way when the
    // API goes (checked as it goes).
    cluster.sim.faults().latency(
        kube_sim::LatencyFault::new(Duration::from_millis(600))
            .verbs(&["patch", "update"])
            .resources(&["backups"]),
    );
    create_backup(&cluster, "outage", json!({"includedNamespaces": ["shop"]}));
    poll(&server, &format!("the record saying {recorded}"), || {
        record(root.path(), "outage").filter(|r| r["status"]["phase"] == recorded)
    })
    .await;
    let outage = Duration::from_secs(4);
    cluster.sim.faults().refuse(Some(outage));
    let outage_start = std::time::Instant::now();
    // The write that follows the record was in flight when the API went: the API did not
    // hold the recorded phase yet.
    let at_outage = cluster.get("velero.io/v1", "Backup", "outage").unwrap();
    assert_ne!(
        phase(&at_outage),
        recorded,
        "the status write after the record had landed before the outage began"
    );

    let done = wait_for(
        &cluster,
        Some(&server),
        "Backup",
        "outage",
        Duration::from_secs(40),
        is_final,
    )
    .await;

    assert_eq!(
        phase(&done),
        "Completed",
        "after {recorded}: {done:#}\n{}",
        server.log_text()
    );
    assert!(
        outage_start.elapsed() >= outage - Duration::from_millis(200),
        "after {recorded}: the status landed before the outage ended"
    );
    assert_eq!(
        record(root.path(), "outage").unwrap()["status"]["phase"],
        "Completed"
    );
}

#[tokio::test]
async fn an_api_outage_past_the_resource_timeout_while_leaving_in_progress_still_ends_final() {
    outage_when_recorded("WaitingForPluginOperations").await;
}

#[tokio::test]
async fn an_api_outage_past_the_resource_timeout_while_leaving_waiting_still_ends_final() {
    outage_when_recorded("Finalizing").await;
}

#[tokio::test]
async fn an_api_outage_past_the_resource_timeout_while_leaving_finalizing_still_ends_final() {
    outage_when_recorded("Completed").await;
}

#[tokio::test]
async fn a_backup_waiting_for_its_snapshots_does_not_hold_up_the_next_one() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_secs(5), "").await;
    seed(&cluster, 1);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;

    create_backup(&cluster, "slow", json!({"includedNamespaces": ["shop"]}));
    wait_for(
        &cluster,
        Some(&server),
        "Backup",
        "slow",
        Duration::from_secs(20),
        |o| phase(o) == "WaitingForPluginOperations",
    )
    .await;
    create_backup(&cluster, "quick", json!({"includedNamespaces": ["other"]}));

    let quick = wait_final(&cluster, &server, "Backup", "quick").await;
    assert_eq!(phase(&quick), "Completed", "{quick:#}");
    let slow = cluster.get("velero.io/v1", "Backup", "slow").unwrap();
    assert_eq!(
        phase(&slow),
        "WaitingForPluginOperations",
        "the next backup ran while this one waited for its snapshot"
    );
    let slow = wait_final(&cluster, &server, "Backup", "slow").await;
    assert_eq!(phase(&slow), "Completed", "{slow:#}\n{}", server.log_text());
}

/// A resource policy whose volume policy says `skip` for the claim's storage class: the claim
/// is backed up as an object, no snapshot is cut, and the backup says why in its log, not as a
/// warning (the user asked for it).
#[tokio::test]
async fn a_volume_policy_that_skips_a_class_leaves_its_claims_without_snapshots() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::ZERO, "").await;
    filesystem_location(&cluster, "default", root.path());
    let policy = format!(
        "version: v1\nvolumePolicies:\n- conditions: {{storageClass: [{}], capacity: '0,10Gi'}}\n  action: {{type: skip}}\n",
        csi::STORAGE_CLASS
    );
    cluster
        .store()
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "skip-class", "namespace": NS},
            "data": {"policy.yaml": policy}}))
        .unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "skipped",
        json!({"includedNamespaces": ["shop"],
               "resourcePolicy": {"kind": "configmap", "name": "skip-class"}}),
    );
    let done = wait_final(&cluster, &server, "Backup", "skipped").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(done["status"]["warnings"], 0, "{done:#}");
    let paths = archive(root.path(), "skipped");
    assert!(
        paths
            .iter()
            .any(|p| p.contains("persistentvolumeclaims/namespaces/shop/data.json")),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("volumesnapshots")),
        "{paths:?}"
    );
    let log = gunzip(&artifact(root.path(), "skipped", "skipped-logs.gz"));
    assert!(
        log.contains("1 PersistentVolumeClaims were backed up without a snapshot of their volumes: the resource policy says to skip them"),
        "{log}"
    );
    // The volume info names the volume left out, with Velero's reason.
    let info: Value = serde_json::from_str(&gunzip(&artifact(
        root.path(),
        "skipped",
        "skipped-volumeinfo.json.gz",
    )))
    .unwrap();
    assert_eq!(info.as_array().map(Vec::len), Some(1), "{info:#}");
    assert_eq!(info[0]["pvcName"], "data", "{info:#}");
    assert_eq!(info[0]["skipped"], true, "{info:#}");
    assert_eq!(
        info[0]["skippedReason"], "any: skipped due to resource policy ;",
        "{info:#}"
    );
    assert_eq!(info[0]["pvInfo"]["reclaimPolicy"], "Delete", "{info:#}");
    assert!(info[0].get("backupMethod").is_none(), "{info:#}");
}

/// Copies every file of `backups/<from>/` to `backups/<to>/` under the names of `to`, with the
/// record renamed and given `uid`: a backup forged by whoever can write the bucket.
fn forge(root: &std::path::Path, from: &str, to: &str, uid: &str) {
    let source = artifact(root, from, "");
    let target = artifact(root, to, "");
    std::fs::create_dir_all(&target).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().replace(from, to);
        std::fs::copy(entry.path(), target.join(name)).unwrap();
    }
    let mut forged = record(root, to).unwrap();
    forged["metadata"]["name"] = json!(to);
    forged["metadata"]["uid"] = json!(uid);
    std::fs::write(
        artifact(root, to, "velero-backup.json"),
        serde_json::to_vec(&forged).unwrap(),
    )
    .unwrap();
}

#[tokio::test]
async fn a_forged_backup_that_names_another_backups_snapshot_neither_restores_nor_deletes_it() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_millis(200), "").await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "real", json!({"includedNamespaces": ["shop"]}));
    let real = wait_final(&cluster, &server, "Backup", "real").await;
    assert_eq!(phase(&real), "Completed", "{real:#}\n{}", server.log_text());
    let real_uid = real["metadata"]["uid"].as_str().unwrap().to_owned();

    // The content the real backup kept carries its name and uid.
    let contents = dynamic_api(
        &client(&cluster),
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        None,
    );
    let kept: Vec<DynamicObject> = contents
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.data["spec"]["deletionPolicy"] == "Retain")
        .collect();
    assert_eq!(kept.len(), 1, "{kept:#?}");
    let content = kept[0].metadata.name.clone().unwrap();
    let labels = kept[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("velero.io/backup-uid"), Some(&real_uid));
    assert_eq!(
        labels.get("velero.io/backup-name").map(String::as_str),
        Some("real")
    );

    // A forged backup in the bucket whose item operations and volume info are the real ones,
    // and its Backup object as backup sync makes it.
    forge(root.path(), "real", "forged", "uid-of-nothing-here");
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "forged", "namespace": NS,
                         "annotations": {"hawser.io/record-uid": "uid-of-nothing-here"}},
            "spec": {"includedNamespaces": ["shop"], "storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();

    // Restoring it brings back its other items, not the real backup's snapshot.
    create_restore(
        &cluster,
        "from-forged",
        json!({"backupName": "forged", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "from-forged").await;
    assert_eq!(phase(&restored), "PartiallyFailed", "{restored:#}");
    let results = gunzip(
        &root
            .path()
            .join(BUCKET)
            .join("restores/from-forged/restore-from-forged-results.gz"),
    );
    assert!(
        results.contains("not this backup's uid \\\"uid-of-nothing-here\\\""),
        "{results}"
    );
    let handles: Vec<DynamicObject> = contents.list(&Default::default()).await.unwrap().items;
    assert_eq!(
        handles.len(),
        1,
        "no content made for the forged restore: {handles:#?}"
    );
    assert!(
        cluster
            .store()
            .get("apps/v1", "Deployment", "shop-copy", "db")
            .is_some(),
        "the forged backup's other items are restored"
    );

    // A record that copies the real backup's uid is not restored at all.
    forge(root.path(), "real", "twin", &real_uid);
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "twin", "namespace": NS,
                         "annotations": {"hawser.io/record-uid": real_uid}},
            "spec": {"includedNamespaces": ["shop"], "storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .unwrap();
    create_restore(&cluster, "from-twin", json!({"backupName": "twin"}));
    let twin = wait_final(&cluster, &server, "Restore", "from-twin").await;
    assert_eq!(phase(&twin), "FailedValidation", "{twin:#}");
    assert!(
        twin["status"]["validationErrors"][0]
            .as_str()
            .unwrap()
            .contains("claims the uid of Backup real"),
        "{twin:#}"
    );

    request_deletion(&cluster, "delete-forged", "forged");
    until_gone(&cluster, &server, "Backup", "forged").await;
    assert!(
        !artifact(root.path(), "forged", "velero-backup.json").exists(),
        "the forged backup's files stay"
    );
    let still = contents.get_opt(&content).await.unwrap();
    let still = still.expect("the real backup's snapshot content was deleted");
    assert_eq!(still.data["spec"]["deletionPolicy"], "Retain");
    // The request says what it left alone (its final status is written after the Backup goes).
    let request = poll(&server, "the request Processed", || {
        cluster
            .get("velero.io/v1", "DeleteBackupRequest", "delete-forged")
            .filter(|r| r["status"]["phase"] == "Processed")
    })
    .await;
    let errors = request["status"]["errors"].to_string();
    assert!(
        errors.contains(&format!(
            "VolumeSnapshotContent {content} was left as it is"
        )),
        "{errors}"
    );

    // The real backup's own deletion still deletes its snapshot.
    request_deletion(&cluster, "delete-real", "real");
    until_gone(&cluster, &server, "Backup", "real").await;
    assert!(
        contents.get_opt(&content).await.unwrap().is_none(),
        "{content} deleted with its backup\n{}",
        server.log_text()
    );
}

/// `hawser install --rbac minimal`'s rules enforced by a real API server's RBAC: the server,
/// running as the installed ServiceAccount with a token the API server issued for it, backs up
/// a snapshotted volume, restores it into another namespace and deletes the backup with its
/// snapshot, and is refused nothing on the way. Only a real API server decides RBAC, so the
/// default profile leaves this test out (`.config/nextest.toml`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_rbac_enforced_by_a_real_api_server_backs_up_restores_and_deletes_a_snapshot() {
    let cluster = Cluster::start().await;
    let real = cluster.real("minimal_rbac_enforced_by_a_real_api_server");
    let (manifests, _) = cluster.install_dry_run(&["--rbac", "minimal"]).await;
    let rbac: Vec<&Value> = manifests
        .iter()
        .filter(|o| {
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
            ]
            .contains(&o["kind"].as_str().unwrap_or_default())
        })
        .collect();
    assert!(rbac.len() >= 5, "{rbac:#?}");
    assert!(
        rbac.iter()
            .all(|o| o["metadata"]["name"] != "cluster-admin"
                && o["roleRef"]["name"] != "cluster-admin"),
        "{rbac:#?}"
    );
    for object in rbac {
        cluster.store().insert(object.clone()).unwrap();
    }
    let account = cluster.dir().join("velero-account.kubeconfig");
    real.write_service_account_kubeconfig(NS, "velero", &account);

    let root = tempfile::tempdir().unwrap();
    let _csi = application(&cluster, Duration::from_millis(500), "").await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start_with_env(
        &cluster,
        root.path(),
        FAST,
        &[("KUBECONFIG", account.to_str().unwrap())],
    )
    .await;

    // The Secrets of other namespaces are not granted: a backup that includes them says so.
    create_backup(
        &cluster,
        "with-secrets",
        json!({"includedNamespaces": ["shop"]}),
    );
    let partial = wait_final(&cluster, &server, "Backup", "with-secrets").await;
    assert_eq!(phase(&partial), "PartiallyFailed", "{partial:#}");
    let log = gunzip(&artifact(
        root.path(),
        "with-secrets",
        "with-secrets-logs.gz",
    ));
    assert!(
        log.contains(r#"cannot list resource \"secrets\""#)
            || log.contains(r#"cannot list resource "secrets""#),
        "{log}"
    );

    create_backup(
        &cluster,
        "minimal",
        json!({"includedNamespaces": ["shop"], "excludedResources": ["secrets"],
               "itemOperationTimeout": "1m"}),
    );
    let done = wait_final(&cluster, &server, "Backup", "minimal").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(done["status"]["csiVolumeSnapshotsCompleted"], 1, "{done:#}");

    create_restore(
        &cluster,
        "minimal-back",
        json!({"backupName": "minimal", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let restored = wait_final(&cluster, &server, "Restore", "minimal-back").await;
    assert_eq!(
        phase(&restored),
        "Completed",
        "{restored:#}\n{}",
        server.log_text()
    );
    assert!(
        cluster
            .store()
            .get("apps/v1", "Deployment", "shop-copy", "db")
            .is_some()
    );

    let contents =
        cluster
            .store()
            .list("snapshot.storage.k8s.io/v1", "VolumeSnapshotContent", None);
    let kept: Vec<String> = contents
        .iter()
        .filter(|c| c["metadata"]["labels"]["velero.io/backup-name"] == "minimal")
        .filter_map(|c| c["metadata"]["name"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(!kept.is_empty(), "{contents:#?}");
    request_deletion(&cluster, "delete-minimal", "minimal");
    until_gone(&cluster, &server, "Backup", "minimal").await;
    for name in &kept {
        assert!(
            cluster
                .store()
                .get(
                    "snapshot.storage.k8s.io/v1",
                    "VolumeSnapshotContent",
                    "",
                    name
                )
                .is_none(),
            "{name} deleted with the backup\n{}",
            server.log_text()
        );
    }
    // Nothing else was refused: the only refusals logged are the Secrets of `with-secrets`.
    let log = server.log_text();
    assert!(
        log.lines()
            .filter(|l| l.to_lowercase().contains("forbidden"))
            .all(|l| l.contains("with-secrets") && l.contains("secrets")),
        "the API server refused the server something:\n{log}"
    );
}

/// Sets the reclaim policy of the volume of claim `shop/data` to `Retain` and labels it
/// `tier: gold`; its name.
async fn keep_and_label_the_volume(cluster: &Cluster) -> String {
    let claim = cluster
        .store()
        .get("v1", "PersistentVolumeClaim", "shop", "data")
        .unwrap();
    let volume = claim["spec"]["volumeName"].as_str().unwrap().to_owned();
    patch(
        &dynamic_api(
            &client(cluster),
            "",
            "PersistentVolume",
            "persistentvolumes",
            None,
        ),
        &volume,
        json!({"metadata": {"labels": {"tier": "gold"}},
               "spec": {"persistentVolumeReclaimPolicy": "Retain"}}),
    )
    .await;
    volume
}

/// The warnings of a results file (`<name>-results.gz` of a backup, `restore-<name>-results.gz`
/// of a restore) under `velero`, the namespaces and the cluster.
fn warnings_in(path: &std::path::Path) -> Vec<String> {
    let results: Value = serde_json::from_str(&gunzip(path)).unwrap();
    let mut all = Vec::new();
    for (_, scope) in results["warnings"].as_object().into_iter().flatten() {
        let messages: Vec<&Value> = match scope {
            Value::Array(list) => list.iter().collect(),
            Value::Object(by_ns) => by_ns
                .values()
                .flat_map(|v| v.as_array().into_iter().flatten())
                .collect(),
            _ => Vec::new(),
        };
        all.extend(
            messages
                .into_iter()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    all
}

/// The disaster-recovery case, across two clusters that share only the bucket: an application
/// with a claim (scheduled on a node of the old cluster, its volume kept on release and
/// labelled), a StatefulSet's claim template and Velero's restore exec hook annotation is backed up in one
/// kube-sim; a second kube-sim, with a storage class of its own and Velero's
/// `change-storage-class` ConfigMap, syncs the backup and restores it. Every claim binds there
/// (no stale node, class mapped), the new volume has the original's reclaim policy and labels
/// and was provisioned from the old cluster's snapshot, and what hawser did not do (the exec
/// hook) is a warning on the Restore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disaster_recovery_restore_into_another_cluster_binds_every_claim() {
    let root = tempfile::tempdir().unwrap();
    let old = Cluster::start().await;
    let _old_csi = application(&old, Duration::from_millis(200), "").await;
    let old_client = client(&old);
    let claims = dynamic_api(
        &old_client,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("shop"),
    );
    patch(
        &claims,
        "data",
        json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-of-the-old-cluster"}}}),
    )
    .await;
    keep_and_label_the_volume(&old).await;
    create(
        &dynamic_api(&old_client, "apps", "StatefulSet", "statefulsets", Some("shop")),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "cache", "namespace": "shop"},
               "spec": {"serviceName": "cache", "replicas": 0, "selector": {"matchLabels": {"app": "cache"}},
                        "template": {"metadata": {"labels": {"app": "cache"}},
                                     "spec": {"containers": [{"name": "cache", "image": "valkey:8"}]}},
                        "volumeClaimTemplates": [{"metadata": {"name": "data"},
                            "spec": {"storageClassName": csi::STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                                     "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    )
    .await;
    filesystem_location(&old, "default", root.path());
    let old_server = Server::start(&old, root.path(), FAST).await;
    create_backup(&old, "dr", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&old, &old_server, "Backup", "dr").await;
    assert_eq!(
        phase(&done),
        "Completed",
        "{done:#}\n{}",
        old_server.log_text()
    );
    let warnings = warnings_in(&artifact(root.path(), "dr", "dr-results.gz"));
    assert!(warnings.is_empty(), "{warnings:?}");
    let handle = serde_json::from_str::<Value>(&gunzip(&artifact(
        root.path(),
        "dr",
        "dr-volumeinfo.json.gz",
    )))
    .unwrap()[0]["csiSnapshotInfo"]["snapshotHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(old_server);

    // The new cluster: the same driver under a class of its own, and Velero's ConfigMap mapping
    // the old class to it.
    let new = Cluster::start().await;
    let _new_csi = CsiSim::start(client(&new), CsiConfig::default())
        .await
        .unwrap();
    new.store()
        .insert(
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "fast-csi"}, "provisioner": csi::DRIVER,
            "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
        )
        .unwrap();
    new.store()
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "change-storage-class-config", "namespace": NS, "labels": {
                "velero.io/plugin-config": "",
                "velero.io/change-storage-class": "RestoreItemAction"}},
            "data": {csi::STORAGE_CLASS: "fast-csi"}}))
        .unwrap();
    filesystem_location(&new, "default", root.path());
    let args: Vec<&str> = FAST
        .iter()
        .copied()
        .chain(["--backup-sync-period", "1s"])
        .collect();
    let new_server = Server::start(&new, root.path(), &args).await;
    poll(
        &new_server,
        "the backup synced into the new cluster",
        || {
            new.get("velero.io/v1", "Backup", "dr")
                .filter(|b| b["status"]["phase"] == "Completed")
        },
    )
    .await;
    create_restore(&new, "dr-back", json!({"backupName": "dr"}));
    let restored = wait_final(&new, &new_server, "Restore", "dr-back").await;
    assert_eq!(
        phase(&restored),
        "Completed",
        "{restored:#}\n{}",
        new_server.log_text()
    );
    let warnings = warnings_in(&restore_artifact(
        root.path(),
        "dr-back",
        "restore-dr-back-results.gz",
    ));
    assert!(warnings.is_empty(), "{warnings:?}");

    // The claim is bound in the new cluster: mapped class, no node of the old one, its volume
    // provisioned from the old cluster's snapshot with the original's policy and labels.
    let claim = new
        .store()
        .get("v1", "PersistentVolumeClaim", "shop", "data")
        .unwrap();
    assert_eq!(claim["spec"]["storageClassName"], "fast-csi", "{claim:#}");
    assert!(
        claim["metadata"]["annotations"]
            .get("volume.kubernetes.io/selected-node")
            .is_none(),
        "{claim:#}"
    );
    assert_eq!(claim["status"]["phase"], "Bound", "{claim:#}");
    let volume = new
        .store()
        .get(
            "v1",
            "PersistentVolume",
            "",
            claim["spec"]["volumeName"].as_str().unwrap(),
        )
        .unwrap();
    assert_eq!(
        volume["metadata"]["annotations"][csi::RESTORED_FROM],
        handle.as_str(),
        "{volume:#}"
    );
    assert_eq!(volume["spec"]["storageClassName"], "fast-csi", "{volume:#}");
    assert_eq!(
        volume["spec"]["persistentVolumeReclaimPolicy"], "Retain",
        "{volume:#}"
    );
    assert_eq!(volume["metadata"]["labels"]["tier"], "gold", "{volume:#}");
    let set = new
        .store()
        .get("apps/v1", "StatefulSet", "shop", "cache")
        .unwrap();
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"], "fast-csi",
        "{set:#}"
    );
}
