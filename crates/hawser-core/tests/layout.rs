//! Bucket layout keys (velero-compat §5.1), checked against the literal paths.

use hawser_core::layout::{DownloadTargetKind, Layout};

#[test]
fn backup_keys_at_the_bucket_root() {
    let l = Layout::new(None);
    assert_eq!(l.root(), "");
    let cases = [
        (l.backups_dir(), "backups/"),
        (l.backup_dir("b1"), "backups/b1/"),
        (l.backup_metadata("b1"), "backups/b1/velero-backup.json"),
        (l.backup_contents("b1"), "backups/b1/b1.tar.gz"),
        (l.backup_log("b1"), "backups/b1/b1-logs.gz"),
        (
            l.backup_resource_list("b1"),
            "backups/b1/b1-resource-list.json.gz",
        ),
        (l.backup_results("b1"), "backups/b1/b1-results.gz"),
        (
            l.backup_item_operations("b1"),
            "backups/b1/b1-itemoperations.json.gz",
        ),
        (
            l.backup_volume_snapshots("b1"),
            "backups/b1/b1-volumesnapshots.json.gz",
        ),
        (
            l.backup_pod_volume_backups("b1"),
            "backups/b1/b1-podvolumebackups.json.gz",
        ),
        (
            l.backup_volume_info("b1"),
            "backups/b1/b1-volumeinfo.json.gz",
        ),
        (
            l.backup_csi_volume_snapshots("b1"),
            "backups/b1/b1-csi-volumesnapshots.json.gz",
        ),
        (
            l.backup_csi_volume_snapshot_contents("b1"),
            "backups/b1/b1-csi-volumesnapshotcontents.json.gz",
        ),
        (
            l.backup_csi_volume_snapshot_classes("b1"),
            "backups/b1/b1-csi-volumesnapshotclasses.json.gz",
        ),
        (l.revision(), "metadata/revision"),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn restore_keys() {
    let l = Layout::new(Some("cluster-a"));
    let cases = [
        (l.restores_dir(), "cluster-a/restores/"),
        (l.restore_dir("r1"), "cluster-a/restores/r1/"),
        (
            l.restore_log("r1"),
            "cluster-a/restores/r1/restore-r1-logs.gz",
        ),
        (
            l.restore_results("r1"),
            "cluster-a/restores/r1/restore-r1-results.gz",
        ),
        (
            l.restore_resource_list("r1"),
            "cluster-a/restores/r1/restore-r1-resource-list.json.gz",
        ),
        (
            l.restore_item_operations("r1"),
            "cluster-a/restores/r1/restore-r1-itemoperations.json.gz",
        ),
        (
            l.restore_volume_info("r1"),
            "cluster-a/restores/r1/r1-volumeinfo.json.gz",
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn prefix_slashes_are_trimmed() {
    for prefix in [
        "team/velero",
        "team/velero/",
        "/team/velero",
        "//team/velero//",
    ] {
        let l = Layout::new(Some(prefix));
        assert_eq!(l.root(), "team/velero/", "{prefix}");
        assert_eq!(
            l.backup_contents("b1"),
            "team/velero/backups/b1/b1.tar.gz",
            "{prefix}"
        );
        assert_eq!(l.revision(), "team/velero/metadata/revision", "{prefix}");
    }
    for prefix in [Some(""), Some("/"), Some("//"), None] {
        assert_eq!(
            Layout::new(prefix).backup_metadata("b"),
            "backups/b/velero-backup.json",
            "{prefix:?}"
        );
    }
}

#[test]
fn every_download_kind_maps_to_its_key() {
    let l = Layout::new(Some("p"));
    let cases = [
        ("BackupLog", "p/backups/n/n-logs.gz"),
        ("BackupContents", "p/backups/n/n.tar.gz"),
        (
            "BackupVolumeSnapshots",
            "p/backups/n/n-volumesnapshots.json.gz",
        ),
        (
            "BackupItemOperations",
            "p/backups/n/n-itemoperations.json.gz",
        ),
        ("BackupResourceList", "p/backups/n/n-resource-list.json.gz"),
        ("BackupResults", "p/backups/n/n-results.gz"),
        ("RestoreLog", "p/restores/n/restore-n-logs.gz"),
        ("RestoreResults", "p/restores/n/restore-n-results.gz"),
        (
            "RestoreResourceList",
            "p/restores/n/restore-n-resource-list.json.gz",
        ),
        (
            "RestoreItemOperations",
            "p/restores/n/restore-n-itemoperations.json.gz",
        ),
        (
            "CSIBackupVolumeSnapshots",
            "p/backups/n/n-csi-volumesnapshots.json.gz",
        ),
        (
            "CSIBackupVolumeSnapshotContents",
            "p/backups/n/n-csi-volumesnapshotcontents.json.gz",
        ),
        ("BackupVolumeInfos", "p/backups/n/n-volumeinfo.json.gz"),
        ("RestoreVolumeInfo", "p/restores/n/n-volumeinfo.json.gz"),
    ];
    assert_eq!(cases.len(), DownloadTargetKind::ALL.len());
    for (kind, want) in cases {
        let parsed =
            DownloadTargetKind::parse(kind).unwrap_or_else(|| panic!("{kind} should parse"));
        assert_eq!(parsed.as_str(), kind);
        assert_eq!(l.download_key(parsed, "n"), want, "{kind}");
        assert_eq!(parsed.is_gzipped_for_cli(), kind != "BackupContents");
    }
    assert_eq!(DownloadTargetKind::parse("backuplog"), None);
}

#[test]
fn backup_names_from_listing_prefixes() {
    let l = Layout::new(Some("p"));
    assert_eq!(l.backup_name_from_prefix("p/backups/b1/"), Some("b1"));
    assert_eq!(l.backup_name_from_prefix("p/backups/b1"), Some("b1"));
    assert_eq!(l.backup_name_from_prefix("p/backups/"), None);
    assert_eq!(l.backup_name_from_prefix("p/restores/r1/"), None);
    assert_eq!(l.backup_name_from_prefix("backups/b1/"), None);
    assert_eq!(l.backup_name_from_prefix("p/backups/a/b/"), None);
}

#[test]
fn only_known_top_level_directories_are_allowed() {
    let l = Layout::new(Some("p"));
    let good = [
        "p/backups/",
        "p/restores/",
        "p/restic/",
        "p/kopia/",
        "p/metadata/",
        "p/plugins/",
    ];
    assert_eq!(l.check_top_level_dirs(&good), Ok(()));
    assert_eq!(
        l.check_top_level_dirs(&["p/backups/", "p/stuff/"]),
        Err("Backup store contains invalid top-level directories: [stuff]".to_string())
    );
    assert_eq!(
        l.check_top_level_dirs(&["p/a/", "p/b/", "p/c/", "p/d/"]),
        Err("Backup store contains 4 invalid top-level directories: [a b c ...]".to_string())
    );
    assert!(
        Layout::new(None)
            .check_top_level_dirs(&["backups/", "other/"])
            .is_err()
    );
}

#[test]
fn empty_side_files_are_velero_s() {
    let layout = Layout::new(Some("p"));
    let backup: Vec<(String, &str)> = layout.empty_backup_side_files("b1").into();
    assert_eq!(
        backup,
        [
            (
                "p/backups/b1/b1-podvolumebackups.json.gz".to_owned(),
                "null\n"
            ),
            (
                "p/backups/b1/b1-volumesnapshots.json.gz".to_owned(),
                "null\n"
            ),
            ("p/backups/b1/b1-itemoperations.json.gz".to_owned(), "[]\n"),
            ("p/backups/b1/b1-volumeinfo.json.gz".to_owned(), "[]\n"),
        ]
    );
    let restore: Vec<(String, &str)> = layout.empty_restore_side_files("r1").into();
    assert_eq!(
        restore,
        [
            (
                "p/restores/r1/restore-r1-itemoperations.json.gz".to_owned(),
                "[]\n"
            ),
            ("p/restores/r1/r1-volumeinfo.json.gz".to_owned(), "[]\n"),
        ]
    );
    // Each is what a download of its kind points at.
    assert_eq!(
        layout.download_key(DownloadTargetKind::BackupVolumeInfos, "b1"),
        backup[3].0
    );
    assert_eq!(
        layout.download_key(DownloadTargetKind::RestoreItemOperations, "r1"),
        restore[0].0
    );
}
