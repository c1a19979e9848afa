use super::*;

fn class(name: &str, driver: &str, default: bool) -> Value {
    let labels = if default {
        json!({CLASS_LABEL: "true"})
    } else {
        json!({})
    };
    json!({"metadata": {"name": name, "labels": labels}, "driver": driver})
}

#[test]
fn the_class_comes_from_the_claim_then_the_backup_then_the_label() {
    let classes = [
        class("fast", "ebs", false),
        class("default-ebs", "ebs", true),
        class("other", "pd", true),
        class("pinned", "ebs", false),
    ];
    let plain = json!({"metadata": {}});
    let none = BTreeMap::new();
    assert_eq!(
        choose_class("ebs", &plain, &none, &classes),
        Ok("default-ebs".into())
    );
    let by_backup = BTreeMap::from([(
        format!("{BACKUP_CLASS_ANNOTATION_PREFIX}ebs"),
        "fast".to_owned(),
    )]);
    assert_eq!(
        choose_class("ebs", &plain, &by_backup, &classes),
        Ok("fast".into())
    );
    let by_claim = json!({"metadata": {"annotations": {CLASS_LABEL: "pinned"}}});
    assert_eq!(
        choose_class("ebs", &by_claim, &by_backup, &classes),
        Ok("pinned".into())
    );

    let wrong_driver = json!({"metadata": {"annotations": {CLASS_LABEL: "other"}}});
    let err = choose_class("ebs", &wrong_driver, &none, &classes).unwrap_err();
    assert!(err.contains("is of driver pd, not ebs"), "{err}");
    let missing = json!({"metadata": {"annotations": {CLASS_LABEL: "gone"}}});
    let err = choose_class("ebs", &missing, &none, &classes).unwrap_err();
    assert!(err.contains("VolumeSnapshotClass gone"), "{err}");
    let err = choose_class("nfs", &plain, &none, &classes).unwrap_err();
    assert!(
        err.contains("no VolumeSnapshotClass of driver nfs"),
        "{err}"
    );
    let two = [class("a", "ebs", true), class("b", "ebs", true)];
    let err = choose_class("ebs", &plain, &none, &two).unwrap_err();
    assert!(
        err.contains("2 VolumeSnapshotClasses of driver ebs") && err.contains("a, b"),
        "{err}"
    );
}

#[test]
fn a_snapshot_name_is_stable_per_backup_and_claim() {
    let a = snapshot_name("data", "uid-1");
    assert_eq!(a, snapshot_name("data", "uid-1"));
    assert!(
        a.starts_with("velero-data-") && a.len() == "velero-data-".len() + 5,
        "{a}"
    );
    assert_ne!(a, snapshot_name("data", "uid-2"));
    assert_ne!(a, snapshot_name("logs", "uid-1"));
    assert!(snapshot_name(&"x".repeat(300), "u").len() <= 253);
}

#[test]
fn the_state_follows_the_snapshot_and_its_content() {
    let snap = |status: Value| json!({"status": status});
    let content = |status: Value| json!({"metadata": {"name": "c1"}, "status": status});
    assert_eq!(
        snapshot_state(&snap(json!({})), None),
        SnapshotState::Pending
    );
    let bound = snap(json!({"boundVolumeSnapshotContentName": "c1"}));
    assert_eq!(
        snapshot_state(&bound, Some(&content(json!({})))),
        SnapshotState::Pending
    );
    let cut = SnapshotState::Cut {
        content: "c1".into(),
        handle: "h".into(),
    };
    assert_eq!(
        snapshot_state(&bound, Some(&content(json!({"snapshotHandle": "h"})))),
        cut
    );
    let ready = snap(json!({"boundVolumeSnapshotContentName": "c1", "readyToUse": true}));
    assert_eq!(
        snapshot_state(
            &ready,
            Some(&content(json!({"snapshotHandle": "h", "readyToUse": true})))
        ),
        SnapshotState::Ready {
            content: "c1".into(),
            handle: "h".into()
        }
    );
    let failed = snap(json!({"error": {"message": "quota"}}));
    assert_eq!(
        snapshot_state(&failed, None),
        SnapshotState::Failed("quota".into())
    );
}

#[test]
fn a_restore_brings_a_snapshot_back_through_a_new_content_with_its_handle() {
    let mut snapshot = json!({"metadata": {"name": "velero-data-abcde", "namespace": "shop"},
                              "spec": {"volumeSnapshotClassName": "fast-snap"}});
    let err = restored_content(&snapshot, "shop", "velero-data-abcde", "c1").unwrap_err();
    assert!(err.contains(HANDLE_ANNOTATION), "{err}");
    let content = json!({"spec": {"driver": "ebs"}, "status": {"snapshotHandle": "snap-1", "restoreSize": 1024}});
    annotate_for_restore(&mut snapshot, &content);
    assert_eq!(
        snapshot["metadata"]["annotations"][RESTORE_SIZE_ANNOTATION],
        "1024"
    );
    let made = restored_content(&snapshot, "shop-copy", "velero-data-abcde", "c1").unwrap();
    assert_eq!(made["metadata"]["name"], "c1");
    assert_eq!(made["spec"]["deletionPolicy"], "Retain");
    assert_eq!(made["spec"]["driver"], "ebs");
    assert_eq!(made["spec"]["source"], json!({"snapshotHandle": "snap-1"}));
    assert_eq!(made["spec"]["volumeSnapshotClassName"], "fast-snap");
    assert_eq!(made["spec"]["volumeSnapshotRef"]["namespace"], "shop-copy");
    assert_ne!(
        restored_content_name("r1", "shop", "s"),
        restored_content_name("r2", "shop", "s")
    );
}

#[test]
fn an_operation_serialises_in_velero_shape() {
    let mut op = BackupOperation::snapshot(
        "b1",
        "u1",
        "shop",
        "velero-data-abcde",
        "snapcontent-1",
        "2026-12-04T00:00:00Z",
    );
    op.finish(None, "2026-12-04T00:01:00Z");
    let v = serde_json::to_value(&op).unwrap();
    assert_eq!(v["spec"]["backupUID"], "u1");
    assert_eq!(v["spec"]["operationID"], "shop/velero-data-abcde");
    assert_eq!(
        v["spec"]["resourceIdentifier"],
        json!({"Group": "snapshot.storage.k8s.io", "Resource": "volumesnapshots", "Namespace": "shop", "Name": "velero-data-abcde"})
    );
    assert_eq!(v["spec"]["postOperationItems"][0]["Name"], "snapcontent-1");
    assert_eq!(v["status"]["phase"], "Completed");
    assert_eq!(v["status"]["nCompleted"], 1);
    let back: BackupOperation = serde_json::from_value(v).unwrap();
    assert_eq!(back, op);
}

fn archived(uid: Option<&str>, handle: &str) -> Value {
    let mut snapshot = json!({
        "metadata": {"name": "vs", "annotations": {
            HANDLE_ANNOTATION: handle, DRIVER_ANNOTATION: "ebs"}},
        "spec": {"source": {"persistentVolumeClaimName": "data"}}
    });
    if let Some(uid) = uid {
        snapshot["metadata"]["labels"] = json!({BACKUP_UID_LABEL: uid});
    }
    snapshot
}

fn info(namespace: &str, claim: &str, handle: &str, driver: &str) -> Value {
    json!({"pvcNamespace": namespace, "pvcName": claim,
        "csiSnapshotInfo": {"snapshotHandle": handle, "driver": driver}})
}

#[test]
fn a_snapshot_is_the_backups_own_only_with_its_uid_and_its_recorded_handle() {
    let recorded = [info("shop", "data", "snap-1", "ebs")];
    assert_eq!(
        own_snapshot(&archived(Some("u1"), "snap-1"), "shop", "u1", &recorded),
        Ok(())
    );
    // Velero's snapshots carry no uid label.
    assert_eq!(
        own_snapshot(&archived(None, "snap-1"), "shop", "u1", &recorded),
        Ok(())
    );
    let other_uid = own_snapshot(&archived(Some("u2"), "snap-1"), "shop", "u1", &recorded);
    assert!(other_uid.unwrap_err().contains("\"u2\""));
    for wrong in [
        info("shop", "data", "snap-2", "ebs"),
        info("shop", "data", "snap-1", "gce"),
        info("other", "data", "snap-1", "ebs"),
        info("shop", "logs", "snap-1", "ebs"),
    ] {
        let got = own_snapshot(&archived(Some("u1"), "snap-1"), "shop", "u1", &[wrong]);
        assert!(got.unwrap_err().contains("records no CSI snapshot"));
    }
    assert!(own_snapshot(&archived(Some("u1"), "snap-1"), "shop", "u1", &[]).is_err());
}

#[test]
fn a_live_content_labelled_with_another_backup_claims_its_handle() {
    let contents = [
        json!({"metadata": {"labels": {BACKUP_UID_LABEL: "u1"}}, "status": {"snapshotHandle": "mine"}}),
        json!({"metadata": {"labels": {BACKUP_UID_LABEL: "u2"}}, "status": {"snapshotHandle": "theirs"}}),
        json!({"metadata": {}, "spec": {"source": {"snapshotHandle": "restored"}}}),
    ];
    assert_eq!(claimed_by_another(&contents, "mine", "u1"), None);
    assert_eq!(claimed_by_another(&contents, "theirs", "u1"), Some("u2"));
    assert_eq!(claimed_by_another(&contents, "restored", "u1"), None);
    assert_eq!(claimed_by_another(&contents, "unknown", "u1"), None);
}
