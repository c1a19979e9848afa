//! Objects as Velero writes them read into the types, and are written back unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use hawser_api::labels::{HAWSER_OWNER, STORAGE_LOCATION};
use hawser_api::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationAccessMode,
    BackupStorageLocationPhase, DeleteBackupRequest, DeleteBackupRequestPhase, DownloadRequest,
    DownloadRequestPhase, DownloadTargetKind, GoDuration, HookErrorMode, PhasedResource, Restore,
    RestorePhase, Schedule, SchedulePhase, ServerStatusRequest, ServerStatusRequestPhase,
    phase_str,
};
use serde_json::{Value, json};

/// A `velero-backup.json` as Velero 1.x uploads it next to the archive (after finalizing).
fn velero_backup_json() -> Value {
    json!({
        "kind": "Backup",
        "apiVersion": "velero.io/v1",
        "metadata": {
            "name": "nginx-daily-20240301100000",
            "namespace": "velero",
            "uid": "3c1c4c4e-4b7a-4f44-9d2e-0f5e2b0c9a11",
            "resourceVersion": "184467",
            "generation": 6,
            "creationTimestamp": "2024-03-01T10:00:00Z",
            "labels": {
                "velero.io/schedule-name": "nginx-daily",
                "velero.io/storage-location": "default"
            },
            "annotations": {
                "velero.io/resource-timeout": "10m0s",
                "velero.io/source-cluster-k8s-gitversion": "v1.29.2",
                "velero.io/source-cluster-k8s-major-version": "1",
                "velero.io/source-cluster-k8s-minor-version": "29"
            },
            "ownerReferences": [{
                "apiVersion": "velero.io/v1",
                "kind": "Schedule",
                "name": "nginx-daily",
                "uid": "7f0e9a52-1111-4c3a-8d1e-2b7c5e6f8a90",
                "controller": true
            }]
        },
        "spec": {
            "metadata": {},
            "includedNamespaces": ["nginx-example"],
            "excludedNamespaces": ["kube-system"],
            "excludedResources": ["secrets"],
            "labelSelector": {"matchLabels": {"app": "nginx"}},
            "ttl": "720h0m0s",
            "hooks": {
                "resources": [{
                    "name": "fsfreeze",
                    "includedNamespaces": ["nginx-example"],
                    "labelSelector": {"matchLabels": {"app": "nginx"}},
                    "pre": [{"exec": {
                        "container": "fsfreeze",
                        "command": ["/sbin/fsfreeze", "--freeze", "/var/log/nginx"],
                        "onError": "Fail",
                        "timeout": "30s"
                    }}],
                    "post": [{"exec": {"command": ["/sbin/fsfreeze", "--unfreeze", "/var/log/nginx"]}}]
                }]
            },
            "storageLocation": "default",
            "volumeSnapshotLocations": ["default"],
            "defaultVolumesToFsBackup": false,
            "orderedResources": {"pods": "nginx-example/web-0,nginx-example/web-1"},
            "csiSnapshotTimeout": "10m0s",
            "itemOperationTimeout": "4h0m0s",
            "snapshotMoveData": false,
            "datamover": "velero",
            "uploaderConfig": {"parallelFilesUpload": 4}
        },
        "status": {
            "version": 1,
            "formatVersion": "1.1.0",
            "expiration": "2024-03-31T10:00:00Z",
            "phase": "Completed",
            "startTimestamp": "2024-03-01T10:00:01Z",
            "completionTimestamp": "2024-03-01T10:00:09Z",
            "volumeSnapshotsAttempted": 1,
            "volumeSnapshotsCompleted": 1,
            "warnings": 2,
            "progress": {"totalItems": 22, "itemsBackedUp": 22},
            "csiVolumeSnapshotsAttempted": 0,
            "backupItemOperationsAttempted": 1,
            "backupItemOperationsCompleted": 1,
            "hookStatus": {"hooksAttempted": 2}
        }
    })
}

#[test]
fn velero_backup_json_reads_and_writes_back_unchanged() {
    let input = velero_backup_json();
    let backup: Backup = serde_json::from_value(input.clone()).unwrap();

    assert_eq!(backup.phase(), BackupPhase::Completed);
    assert_eq!(backup.spec.ttl, Some(GoDuration::from_hours(720)));
    assert_eq!(backup.spec.data_mover.as_deref(), Some("velero"));
    let hook = &backup
        .spec
        .hooks
        .as_ref()
        .unwrap()
        .resources
        .as_ref()
        .unwrap()[0];
    let pre = &hook.pre.as_ref().unwrap()[0].exec;
    assert_eq!(pre.on_error, Some(HookErrorMode::Fail));
    assert_eq!(pre.timeout, Some(GoDuration::from_secs(30)));
    let status = backup.status.as_ref().unwrap();
    assert_eq!(status.progress.as_ref().unwrap().items_backed_up, Some(22));
    assert_eq!(status.warnings, Some(2));
    assert_eq!(status.errors, None);
    assert_eq!(
        backup
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get(STORAGE_LOCATION)
            .map(String::as_str),
        Some("default")
    );

    assert_eq!(serde_json::to_value(&backup).unwrap(), input);
}

#[test]
fn unknown_fields_and_phases_never_fail_a_read() {
    let mut input = velero_backup_json();
    input["spec"]["someFutureOption"] = json!({"nested": [1, 2]});
    input["status"]["someFutureCounter"] = json!(3);
    input["status"]["phase"] = json!("Paused");
    input["extraTopLevel"] = json!(true);
    let backup: Backup = serde_json::from_value(input).unwrap();
    assert_eq!(backup.phase(), BackupPhase::Unknown("Paused".into()));
    // The unknown phase is written back verbatim.
    assert_eq!(
        serde_json::to_value(&backup).unwrap()["status"]["phase"],
        "Paused"
    );
}

#[test]
fn a_hand_written_backup_without_status_or_phase_is_new() {
    let minimal = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": "b1", "namespace": "velero"}, "spec": {}});
    let backup: Backup = serde_json::from_value(minimal.clone()).unwrap();
    assert_eq!(backup.status, None);
    assert_eq!(PhasedResource::phase(&backup), BackupPhase::New);

    for status in [json!({}), json!({"phase": ""}), json!({"phase": null})] {
        let mut object = minimal.clone();
        object["status"] = status.clone();
        let backup: Backup = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(backup.phase(), BackupPhase::New, "status {status}");
        assert_eq!(
            Backup::phase_from_json(&object),
            BackupPhase::New,
            "status {status}"
        );
    }
}

#[test]
fn phase_is_read_from_raw_json() {
    let input = velero_backup_json();
    assert_eq!(phase_str(&input), "Completed");
    assert_eq!(Backup::phase_from_json(&input), BackupPhase::Completed);
    assert!(Backup::is_final(&Backup::phase_from_json(&input)));
    assert_eq!(phase_str(&json!({"status": {"phase": 7}})), "");
    assert_eq!(
        Restore::phase_from_json(&json!({"status": {"phase": "Finalizing"}})),
        RestorePhase::Finalizing
    );
    assert_eq!(<Backup as PhasedResource>::KIND_LABEL, "backup");
    assert_eq!(<Restore as PhasedResource>::KIND_LABEL, "restore");
}

#[test]
fn owner_annotation_is_read() {
    let mut input = velero_backup_json();
    let backup: Backup = serde_json::from_value(input.clone()).unwrap();
    assert_eq!(backup.owner(), None);
    input["metadata"]["annotations"][HAWSER_OWNER] = json!("hawser-7f3a");
    let backup: Backup = serde_json::from_value(input).unwrap();
    assert_eq!(backup.owner(), Some("hawser-7f3a"));
}

#[test]
fn velero_restore_reads_and_writes_back_unchanged() {
    let input = json!({
        "apiVersion": "velero.io/v1",
        "kind": "Restore",
        "metadata": {
            "name": "nginx-daily-20240301100000-20240302080000",
            "namespace": "velero",
            "finalizers": ["restores.velero.io/external-resources-finalizer"],
            "creationTimestamp": "2024-03-02T08:00:00Z"
        },
        "spec": {
            "backupName": "nginx-daily-20240301100000",
            "includedNamespaces": ["*"],
            "excludedResources": ["nodes", "events", "events.events.k8s.io", "backups.velero.io",
                "restores.velero.io", "resticrepositories.velero.io", "csinodes.storage.k8s.io",
                "volumeattachments.storage.k8s.io", "backuprepositories.velero.io"],
            "namespaceMapping": {"nginx-example": "nginx-copy"},
            "orLabelSelectors": [{"matchLabels": {"app": "nginx"}}, {"matchLabels": {"app": "db"}}],
            "restorePVs": true,
            "restoreStatus": {"includedResources": ["deployments.apps"]},
            "preserveNodePorts": false,
            "existingResourcePolicy": "update",
            "itemOperationTimeout": "4h0m0s",
            "resourceModifier": {"kind": "configmap", "name": "modifiers"},
            "hooks": {"resources": [{
                "name": "restore-hook-1",
                "includedNamespaces": ["nginx-copy"],
                "postHooks": [
                    {"init": {
                        "initContainers": [{"name": "restore-hook-init", "image": "alpine:latest",
                            "command": ["/bin/ash", "-c", "echo hi"],
                            "volumeMounts": [{"mountPath": "/restores", "name": "data"}]}],
                        "timeout": "2m0s"
                    }},
                    {"exec": {
                        "container": "nginx",
                        "command": ["/bin/bash", "-c", "nginx -s reload"],
                        "onError": "Continue",
                        "execTimeout": "1m0s",
                        "waitTimeout": "5m0s",
                        "waitForReady": true
                    }}
                ]
            }]},
            "uploaderConfig": {"writeSparseFiles": true, "parallelFilesDownload": 8}
        },
        "status": {
            "phase": "PartiallyFailed",
            "warnings": 3,
            "errors": 1,
            "startTimestamp": "2024-03-02T08:00:01Z",
            "completionTimestamp": "2024-03-02T08:00:30Z",
            "progress": {"totalItems": 9, "itemsRestored": 9},
            "restoreItemOperationsAttempted": 0,
            "hookStatus": {"hooksAttempted": 2, "hooksFailed": 1}
        }
    });
    let restore: Restore = serde_json::from_value(input.clone()).unwrap();
    assert_eq!(restore.phase(), RestorePhase::PartiallyFailed);
    assert!(Restore::is_final(&restore.phase()));
    assert_eq!(restore.spec.restore_pvs, Some(true));
    let hooks = restore
        .spec
        .hooks
        .as_ref()
        .unwrap()
        .resources
        .as_ref()
        .unwrap()[0]
        .post_hooks
        .as_ref()
        .unwrap();
    let init = hooks[0].init.as_ref().unwrap();
    assert_eq!(
        init.init_containers.as_ref().unwrap()[0].0["image"],
        "alpine:latest"
    );
    let exec = hooks[1].exec.as_ref().unwrap();
    assert_eq!(exec.wait_timeout, Some(GoDuration::from_mins(5)));
    assert_eq!(serde_json::to_value(&restore).unwrap(), input);
}

#[test]
fn velero_bsl_reads_and_writes_back_unchanged() {
    let input = json!({
        "apiVersion": "velero.io/v1",
        "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": "velero"},
        "spec": {
            "provider": "aws",
            "objectStorage": {"bucket": "velero", "prefix": "cluster-a", "caCert": "LS0tLS1CRUdJTg=="},
            "config": {"region": "minio", "s3ForcePathStyle": "true", "s3Url": "http://minio.velero.svc:9000"},
            "credential": {"name": "cloud-credentials", "key": "cloud"},
            "default": true,
            "accessMode": "ReadOnly",
            "backupSyncPeriod": "1m0s",
            "validationFrequency": "0s"
        },
        "status": {
            "phase": "Available",
            "lastSyncedTime": "2024-03-01T10:00:30Z",
            "lastValidationTime": "2024-03-01T10:00:00Z"
        }
    });
    let bsl: BackupStorageLocation = serde_json::from_value(input.clone()).unwrap();
    assert!(bsl.spec.default);
    assert!(bsl.is_read_only());
    assert!(bsl.is_available());
    assert_eq!(
        bsl.spec.access_mode,
        Some(BackupStorageLocationAccessMode::ReadOnly)
    );
    assert_eq!(bsl.spec.validation_frequency, Some(GoDuration::ZERO));
    assert_eq!(
        bsl.spec.object_storage.ca_cert.as_ref().unwrap().0,
        b"-----BEGIN"
    );
    assert_eq!(
        bsl.status.as_ref().unwrap().phase,
        Some(BackupStorageLocationPhase::Available)
    );
    assert_eq!(serde_json::to_value(&bsl).unwrap(), input);

    // `default: false` is omitted, as Go's omitempty does.
    let mut not_default = input;
    not_default["spec"]["default"] = json!(false);
    let bsl: BackupStorageLocation = serde_json::from_value(not_default).unwrap();
    assert!(
        serde_json::to_value(&bsl).unwrap()["spec"]
            .get("default")
            .is_none()
    );
}

#[test]
fn schedule_and_requests_read_and_write_back_unchanged() {
    let schedule = json!({
        "apiVersion": "velero.io/v1", "kind": "Schedule",
        "metadata": {"name": "nginx-daily", "namespace": "velero"},
        "spec": {
            "schedule": "0 1 * * *",
            "template": {"includedNamespaces": ["nginx-example"], "ttl": "168h0m0s",
                "metadata": {"labels": {"team": "web"}}},
            "useOwnerReferencesInBackup": true,
            "paused": true,
            "skipImmediately": false
        },
        "status": {"phase": "Enabled", "lastBackup": "2024-03-01T01:00:00Z", "lastSkipped": "2024-02-28T01:00:00Z"}
    });
    let parsed: Schedule = serde_json::from_value(schedule.clone()).unwrap();
    assert_eq!(
        parsed.status.as_ref().unwrap().phase,
        SchedulePhase::Enabled
    );
    assert!(parsed.spec.paused);
    assert_eq!(serde_json::to_value(&parsed).unwrap(), schedule);

    let dbr = json!({
        "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
        "metadata": {"generateName": "nginx-backup-", "name": "nginx-backup-x7k2p", "namespace": "velero",
            "labels": {"velero.io/backup-name": "nginx-backup", "velero.io/backup-uid": "3c1c4c4e"}},
        "spec": {"backupName": "nginx-backup"},
        "status": {"phase": "Processed", "errors": ["error deleting backup from object storage"]}
    });
    let parsed: DeleteBackupRequest = serde_json::from_value(dbr.clone()).unwrap();
    assert_eq!(
        parsed.status.as_ref().unwrap().phase,
        DeleteBackupRequestPhase::Processed
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), dbr);

    let download = json!({
        "apiVersion": "velero.io/v1", "kind": "DownloadRequest",
        "metadata": {"name": "nginx-backup-0b1f", "namespace": "velero"},
        "spec": {"target": {"kind": "RestoreLog", "name": "nginx-restore"}},
        "status": {"phase": "Processed", "downloadURL": "https://bucket.example/restores/x?sig=1",
            "expiration": "2024-03-01T10:10:00Z"}
    });
    let parsed: DownloadRequest = serde_json::from_value(download.clone()).unwrap();
    assert_eq!(parsed.spec.target.kind, DownloadTargetKind::RestoreLog);
    assert!(parsed.spec.target.kind.is_restore_kind());
    assert_eq!(
        parsed.status.as_ref().unwrap().phase,
        DownloadRequestPhase::Processed
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), download);

    let ssr = json!({
        "apiVersion": "velero.io/v1", "kind": "ServerStatusRequest",
        "metadata": {"generateName": "velero-cli-", "name": "velero-cli-6wkzd", "namespace": "velero"},
        "spec": {},
        "status": {"phase": "Processed", "processedTimestamp": "2024-03-01T10:00:00Z",
            "serverVersion": "v1.13.0",
            "plugins": [{"name": "velero.io/aws", "kind": "ObjectStore"}]}
    });
    let parsed: ServerStatusRequest = serde_json::from_value(ssr.clone()).unwrap();
    assert_eq!(
        parsed.status.as_ref().unwrap().phase,
        ServerStatusRequestPhase::Processed
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), ssr);
}

#[test]
fn a_server_status_request_without_spec_reads() {
    for object in [
        json!({"apiVersion": "velero.io/v1", "kind": "ServerStatusRequest", "metadata": {"name": "s"}}),
        json!({"apiVersion": "velero.io/v1", "kind": "ServerStatusRequest", "metadata": {"name": "s"}, "spec": null}),
    ] {
        let ssr: ServerStatusRequest = serde_json::from_value(object).unwrap();
        assert_eq!(ssr.status, None);
    }
}

#[test]
fn an_unknown_download_kind_or_access_mode_does_not_fail_the_read() {
    let download = json!({"apiVersion": "velero.io/v1", "kind": "DownloadRequest",
        "metadata": {"name": "d"}, "spec": {"target": {"kind": "BackupSomethingNew", "name": "b"}}});
    let parsed: DownloadRequest = serde_json::from_value(download).unwrap();
    assert_eq!(
        parsed.spec.target.kind,
        DownloadTargetKind::Unknown("BackupSomethingNew".into())
    );

    let bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "x"},
        "spec": {"provider": "aws", "objectStorage": {"bucket": "b"}, "accessMode": "WriteOnce"}});
    let parsed: BackupStorageLocation = serde_json::from_value(bsl).unwrap();
    assert!(!parsed.is_read_only());
    assert!(parsed.spec.access_mode.as_ref().unwrap().is_unknown());
}

#[test]
fn a_bad_duration_is_an_error_naming_the_value() {
    let mut input = velero_backup_json();
    input["spec"]["ttl"] = json!("30 days");
    let err = serde_json::from_value::<Backup>(input).unwrap_err();
    assert!(err.to_string().contains("30 days"), "{err}");
}

#[test]
fn yaml_as_kubectl_prints_it_reads() {
    let yaml = r#"
apiVersion: velero.io/v1
kind: Backup
metadata:
  name: manual
  namespace: velero
spec:
  includedNamespaces:
  - "*"
  ttl: 1h30m
  snapshotVolumes: false
status:
  phase: InProgress
  startTimestamp: "2024-03-01T10:00:01Z"
"#;
    let backup: Backup = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(backup.phase(), BackupPhase::InProgress);
    assert_eq!(
        backup.spec.ttl.map(|d| d.to_string()).as_deref(),
        Some("1h30m0s")
    );
    assert_eq!(backup.spec.snapshot_volumes, Some(false));
}

fn url_of<K: kube::Resource<DynamicType = ()>>() -> String {
    K::url_path(&(), Some("velero"))
}

#[test]
fn clients_address_velero_s_resources() {
    assert_eq!(
        url_of::<Backup>(),
        "/apis/velero.io/v1/namespaces/velero/backups"
    );
    assert_eq!(
        url_of::<Restore>(),
        "/apis/velero.io/v1/namespaces/velero/restores"
    );
    assert_eq!(
        url_of::<BackupStorageLocation>(),
        "/apis/velero.io/v1/namespaces/velero/backupstoragelocations"
    );
    assert_eq!(
        url_of::<Schedule>(),
        "/apis/velero.io/v1/namespaces/velero/schedules"
    );
    assert_eq!(
        url_of::<DeleteBackupRequest>(),
        "/apis/velero.io/v1/namespaces/velero/deletebackuprequests"
    );
    assert_eq!(
        url_of::<DownloadRequest>(),
        "/apis/velero.io/v1/namespaces/velero/downloadrequests"
    );
    assert_eq!(
        url_of::<ServerStatusRequest>(),
        "/apis/velero.io/v1/namespaces/velero/serverstatusrequests"
    );
    assert_eq!(
        <Backup as kube::Resource>::api_version(&()),
        hawser_api::API_VERSION
    );
}

/// What a list or watch of Backups relies on: one unreadable object (here a Velero-style CRD
/// without duration validation let `ttl: "1d"` through, and a spec-less Backup) must not hide
/// the others. kube's `DeserializeGuard` isolates it, and keeps its name for a Warning.
#[test]
fn a_list_with_an_unreadable_backup_still_yields_the_others() {
    let list = json!({
        "apiVersion": "velero.io/v1",
        "kind": "BackupList",
        "metadata": {"resourceVersion": "10"},
        "items": [
            velero_backup_json(),
            {"apiVersion": "velero.io/v1", "kind": "Backup",
             "metadata": {"name": "bad-ttl", "namespace": "velero"}, "spec": {"ttl": "1d"}},
            {"apiVersion": "velero.io/v1", "kind": "Backup",
             "metadata": {"name": "no-spec", "namespace": "velero"}},
        ]
    });
    let parsed: kube::core::ObjectList<kube::core::DeserializeGuard<Backup>> =
        serde_json::from_value(list).unwrap();
    let results: Vec<_> = parsed.items.into_iter().map(|g| g.0).collect();
    assert_eq!(results[0].as_ref().unwrap().phase(), BackupPhase::Completed);
    let bad = results[1].as_ref().unwrap_err();
    assert_eq!(bad.metadata.name.as_deref(), Some("bad-ttl"));
    assert!(bad.error.contains("1d"), "{}", bad.error);
    assert_eq!(
        results[2].as_ref().unwrap_err().metadata.name.as_deref(),
        Some("no-spec")
    );
}
