//! Volume data a backup holds that hawser cannot restore: what Velero's file-system backup
//! (`<backup>-podvolumebackups.json.gz`), its native snapshots (`<backup>-volumesnapshots.json.gz`)
//! and its data mover (`<backup>-volumeinfo.json.gz` entries with `snapshotDataMoved`) left in
//! the location. A restore of such a backup still restores the objects; [`warnings`] says, per
//! kind of data, which volumes come back without it, and [`left_by_deletion`] what deleting the
//! backup leaves behind.

use serde_json::Value;

use crate::json::text;

/// Volumes named in one warning; the others are counted.
const NAMES_PER_WARNING: usize = 10;

/// The side files of one backup, as read from its location (absent files are empty lists).
#[derive(Debug, Default, Clone)]
pub struct VolumeSideFiles {
    /// `<backup>-podvolumebackups.json.gz`: PodVolumeBackup objects.
    pub pod_volume_backups: Vec<Value>,
    /// `<backup>-volumesnapshots.json.gz`: Velero's native volume snapshots.
    pub native_snapshots: Vec<Value>,
    /// `<backup>-volumeinfo.json.gz`: Velero's `BackupVolumeInfo` entries.
    pub volume_info: Vec<Value>,
}

/// `a, b, c and 4 more`.
fn listed(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(NAMES_PER_WARNING)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(NAMES_PER_WARNING) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// Each kind of volume data in `files` that hawser does not manage: what it is (naming the
/// volumes), what a restore does without it, and what deleting the backup leaves.
fn held(files: &VolumeSideFiles) -> Vec<(String, &'static str, &'static str)> {
    let mut out = Vec::new();
    let pod_volumes: Vec<String> = files
        .pod_volume_backups
        .iter()
        .map(|b| {
            format!(
                "{}/{} volume {}",
                text(b, "/spec/pod/namespace"),
                text(b, "/spec/pod/name"),
                text(b, "/spec/volume")
            )
        })
        .collect();
    if !pod_volumes.is_empty() {
        out.push((
            format!(
                "file-system backups of {} pod volumes ({})",
                pod_volumes.len(),
                listed(&pod_volumes)
            ),
            "restoring pod volume data is not built in hawser, so those volumes were restored without their data",
            "hawser does not manage the backup repositories (kopia/) that hold them, so that data stays in the storage location",
        ));
    }
    let native: Vec<String> = files
        .native_snapshots
        .iter()
        .map(|s| text(s, "/spec/persistentVolumeName").to_owned())
        .collect();
    if !native.is_empty() {
        out.push((
            format!(
                "native (VolumeSnapshotLocation) snapshots of {} volumes ({})",
                native.len(),
                listed(&native)
            ),
            "hawser does not restore native snapshots, so those volumes were restored without their data",
            "hawser takes and deletes no native snapshots, so they stay with the volume provider",
        ));
    }
    let moved: Vec<String> = files
        .volume_info
        .iter()
        .filter(|i| i.get("snapshotDataMoved").and_then(Value::as_bool) == Some(true))
        .map(|i| format!("{}/{}", text(i, "/pvcNamespace"), text(i, "/pvcName")))
        .collect();
    if !moved.is_empty() {
        out.push((
            format!(
                "snapshot data of {} claims ({}) moved into the storage location by a data mover",
                moved.len(),
                listed(&moved)
            ),
            "restoring moved data is not built in hawser, so those claims were restored without their data",
            "hawser does not manage the backup repositories (kopia/) that hold it, so that data stays in the storage location",
        ));
    }
    out
}

/// One warning per kind of volume data in `files` that a restore does not bring back; empty
/// when there is none.
#[must_use]
pub fn warnings(files: &VolumeSideFiles) -> Vec<String> {
    held(files)
        .into_iter()
        .map(|(what, restore, _)| format!("the backup holds {what}: {restore}"))
        .collect()
}

/// One note per kind of volume data in `files` that deleting the backup does not delete.
#[must_use]
pub fn left_by_deletion(files: &VolumeSideFiles) -> Vec<String> {
    held(files)
        .into_iter()
        .map(|(what, _, deletion)| format!("the backup's {what} were not deleted: {deletion}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_backup_without_such_data_warns_of_nothing() {
        let files = VolumeSideFiles {
            volume_info: vec![json!({"pvcName": "data", "backupMethod": "CSISnapshot"})],
            ..VolumeSideFiles::default()
        };
        assert!(warnings(&files).is_empty());
    }

    #[test]
    fn each_kind_of_data_is_one_warning_naming_its_volumes() {
        let files = VolumeSideFiles {
            pod_volume_backups: vec![
                json!({"spec": {"pod": {"namespace": "shop", "name": "db-0"}, "volume": "data"}}),
            ],
            native_snapshots: (0..12)
                .map(|i| json!({"spec": {"persistentVolumeName": format!("pv-{i}")}}))
                .collect(),
            volume_info: vec![
                json!({"pvcNamespace": "shop", "pvcName": "logs", "snapshotDataMoved": true}),
                json!({"pvcNamespace": "shop", "pvcName": "kept", "snapshotDataMoved": false}),
            ],
        };
        let warnings = warnings(&files);
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(
            warnings[0].contains("1 pod volumes (shop/db-0 volume data)"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("12 volumes (pv-0, ") && warnings[1].contains("pv-9 and 2 more)"),
            "{warnings:?}"
        );
        assert!(warnings[2].contains("1 claims (shop/logs)"), "{warnings:?}");
        let left = left_by_deletion(&files);
        assert_eq!(left.len(), 3, "{left:#?}");
        assert!(
            left[0].starts_with("the backup's file-system backups of 1 pod volumes (shop/db-0 volume data) were not deleted: "),
            "{left:?}"
        );
    }
}
