//! The volumes of a description: a backup's `Backup Volumes:` (native snapshots, CSI snapshots
//! and data movements from its volume infos, pod volume backups by phase), and the pod volume
//! grouping a restore's description shares.

use hawser_api::{DataTransferPhase, PodVolumeBackup};
use serde::Deserialize;

use super::backup::BackupExtras;
use super::{Describer, put};

/// One entry of `<backup>-volumeinfo.json.gz` (Velero's `BackupVolumeInfo`), the fields
/// `describe` shows.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeInfo {
    pub pvc_name: String,
    pub pvc_namespace: String,
    pub pv_name: String,
    pub backup_method: String,
    pub snapshot_data_moved: bool,
    pub preserve_local_snapshot: bool,
    pub result: String,
    pub csi_snapshot_info: Option<CsiSnapshotInfo>,
    pub snapshot_data_movement_info: Option<DataMovementInfo>,
    pub native_snapshot_info: Option<NativeSnapshotInfo>,
}

/// A CSI snapshot of a volume info.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsiSnapshotInfo {
    pub snapshot_handle: String,
    pub size: i64,
    pub driver: String,
    pub vsc_name: String,
    #[serde(rename = "operationID")]
    pub operation_id: String,
}

/// The data movement of a volume info.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DataMovementInfo {
    pub data_mover: String,
    pub uploader_type: String,
    #[serde(rename = "operationID")]
    pub operation_id: String,
    pub size: i64,
    pub incremental_size: i64,
}

/// A provider's native snapshot of a volume info.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NativeSnapshotInfo {
    pub snapshot_handle: String,
    pub volume_type: String,
    #[serde(rename = "volumeAZ")]
    pub volume_az: String,
    pub iops: String,
}

/// `Backup Volumes:`.
pub(super) fn backup_volumes(d: &mut Describer, extras: &BackupExtras) {
    d.put("Backup Volumes:\n");
    let infos = match &extras.volumes {
        Ok(infos) => infos,
        // Concluded from the older files: the error names which (Velero's words).
        Err(e) if extras.legacy => {
            put!(d, "\t<error concluding {e}>\n");
            return;
        }
        Err(e) => {
            put!(
                d,
                "\t<error {} backup volume info: {e}>\n",
                e.verb("reading")
            );
            return;
        }
    };
    let native: Vec<&VolumeInfo> = infos
        .iter()
        .filter(|i| i.backup_method == "NativeSnapshot")
        .collect();
    let csi: Vec<&VolumeInfo> = infos
        .iter()
        .filter(|i| i.backup_method == "CSISnapshot")
        .collect();
    if native.is_empty() {
        d.put("\tVelero-Native Snapshots: <none included>\n");
    } else {
        d.put("\tVelero-Native Snapshots:\n");
        for info in native {
            native_lines(d, extras.details, info);
        }
    }
    d.blank();
    if csi.is_empty() {
        let none = if extras.legacy {
            "<none included or not detectable>"
        } else {
            "<none included>"
        };
        put!(d, "\tCSI Snapshots: {none}\n");
    } else {
        d.put("\tCSI Snapshots:\n");
        for info in csi {
            csi_lines(d, extras.details, info);
        }
    }
    d.blank();
    pod_volumes(d, extras.details, &extras.pod_volumes);
}

fn native_lines(d: &mut Describer, details: bool, info: &VolumeInfo) {
    if !details {
        put!(
            d,
            "\t\t{}: specify --details for more information\n",
            info.pv_name
        );
        return;
    }
    let native = info.native_snapshot_info.clone().unwrap_or_default();
    put!(d, "\t\t{}:\n", info.pv_name);
    put!(d, "\t\t\tSnapshot ID:\t{}\n", native.snapshot_handle);
    put!(d, "\t\t\tType:\t{}\n", native.volume_type);
    put!(d, "\t\t\tAvailability Zone:\t{}\n", native.volume_az);
    put!(d, "\t\t\tIOPS:\t{}\n", native.iops);
    put!(d, "\t\t\tResult:\t{}\n", info.result);
}

fn csi_lines(d: &mut Describer, details: bool, info: &VolumeInfo) {
    put!(d, "\t\t{}/{}:\n", info.pvc_namespace, info.pvc_name);
    let more = "included, specify --details for more information";
    if info.preserve_local_snapshot {
        if details {
            let csi = info.csi_snapshot_info.clone().unwrap_or_default();
            d.put("\t\t\tSnapshot:\n");
            if !info.snapshot_data_moved && !csi.operation_id.is_empty() {
                put!(d, "\t\t\t\tOperation ID: {}\n", csi.operation_id);
            }
            put!(d, "\t\t\t\tSnapshot Content Name: {}\n", csi.vsc_name);
            put!(d, "\t\t\t\tStorage Snapshot ID: {}\n", csi.snapshot_handle);
            put!(d, "\t\t\t\tSnapshot Size (bytes): {}\n", csi.size);
            put!(d, "\t\t\t\tCSI Driver: {}\n", csi.driver);
            put!(d, "\t\t\t\tResult: {}\n", info.result);
        } else {
            put!(d, "\t\t\tSnapshot: {more}\n");
        }
    }
    if info.snapshot_data_moved {
        if details {
            let moved = info.snapshot_data_movement_info.clone().unwrap_or_default();
            d.put("\t\t\tData Movement:\n");
            put!(d, "\t\t\t\tOperation ID: {}\n", moved.operation_id);
            let mover = if moved.data_mover.is_empty() {
                "velero"
            } else {
                &moved.data_mover
            };
            put!(d, "\t\t\t\tData Mover: {mover}\n");
            put!(d, "\t\t\t\tUploader Type: {}\n", moved.uploader_type);
            put!(d, "\t\t\t\tMoved data Size (bytes): {}\n", moved.size);
            if moved.incremental_size > 0 {
                put!(
                    d,
                    "\t\t\t\tIncremental data Size (bytes): {}\n",
                    moved.incremental_size
                );
            }
            put!(d, "\t\t\t\tResult: {}\n", info.result);
        } else {
            put!(d, "\t\t\tData Movement: {more}\n");
        }
    }
}

/// Velero's phase groups of pod volume backups and restores, in its order; `In Progress` and a
/// missing phase (`New`) as Velero names them.
pub(super) fn phase_group(phase: Option<&DataTransferPhase>) -> &'static str {
    match phase {
        Some(DataTransferPhase::InProgress) => "In Progress",
        Some(DataTransferPhase::Accepted) => "Accepted",
        Some(DataTransferPhase::Prepared) => "Prepared",
        Some(DataTransferPhase::Canceling) => "Canceling",
        Some(DataTransferPhase::Canceled) => "Canceled",
        Some(DataTransferPhase::Completed) => "Completed",
        Some(DataTransferPhase::Failed) => "Failed",
        Some(DataTransferPhase::New) | None => "New",
        // A phase Velero does not know is in no group, and not listed (as in Velero).
        Some(_) => "",
    }
}

/// A pod volume backup or restore as the grouped lines show it: its phase group (see
/// [`phase_group`]), its pod (`namespace/name`) and its volume, with its progress or size as
/// Velero adds them (`incremental` bytes: backups only).
pub(super) struct PodVolume {
    group: &'static str,
    pod: String,
    volume: String,
}

impl PodVolume {
    pub(super) fn new(
        pod: &k8s_openapi::api::core::v1::ObjectReference,
        volume: &str,
        phase: Option<&DataTransferPhase>,
        progress: Option<&hawser_api::DataTransferProgress>,
        incremental: i64,
    ) -> Self {
        let group = phase_group(phase);
        let total = progress.and_then(|p| p.total_bytes).unwrap_or(0);
        let done = progress.and_then(|p| p.bytes_done).unwrap_or(0);
        let volume = match group {
            "In Progress" if total != 0 => {
                format!("{volume} ({:.2}%)", done as f64 / total as f64 * 100.0)
            }
            "Completed" if incremental > 0 => {
                format!("{volume} (size: {total}, incremental size: {incremental})")
            }
            "Completed" if total > 0 => format!("{volume} (size: {total})"),
            _ => volume.to_owned(),
        };
        let pod = format!(
            "{}/{}",
            pod.namespace.as_deref().unwrap_or_default(),
            pod.name.as_deref().unwrap_or_default()
        );
        Self { group, pod, volume }
    }
}

/// The uploader of the first pod volume (Velero takes it from the first one: all have the same).
pub(super) fn uploader(first: Option<&hawser_api::UploaderType>) -> &str {
    first.map(|u| u.as_str()).unwrap_or_default()
}

/// Lines per phase group: the count, or with details each pod (`namespace/name`, sorted) and
/// its volumes (sorted); `indent` tabs before the group.
pub(super) fn grouped(
    d: &mut Describer,
    details: bool,
    order: &[&str],
    indent: &str,
    volumes: &[PodVolume],
) {
    for group in order {
        let members: Vec<&PodVolume> = volumes.iter().filter(|v| v.group == *group).collect();
        if members.is_empty() {
            continue;
        }
        if !details {
            put!(d, "{indent}{group}:\t{}\n", members.len());
            continue;
        }
        put!(d, "{indent}{group}:\n");
        let mut pods: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for member in members {
            pods.entry(&member.pod).or_default().push(&member.volume);
        }
        for (pod, mut volumes) in pods {
            volumes.sort_unstable();
            put!(d, "{indent}\t{pod}: {}\n", volumes.join(", "));
        }
    }
}

fn pod_volumes(d: &mut Describer, details: bool, backups: &[PodVolumeBackup]) {
    let Some(first) = backups.first() else {
        d.put("\tPod Volume Backups: <none included>\n");
        return;
    };
    let uploader = uploader(first.spec.uploader_type.as_ref());
    if details {
        put!(d, "\tPod Volume Backups - {uploader}:\n");
    } else {
        put!(
            d,
            "\tPod Volume Backups - {uploader} (specify --details for more information):\n"
        );
    }
    let entries: Vec<PodVolume> = backups
        .iter()
        .map(|b| {
            let status = b.status.clone().unwrap_or_default();
            PodVolume::new(
                &b.spec.pod,
                &b.spec.volume,
                status.phase.as_ref(),
                status.progress.as_ref(),
                status.incremental_bytes.unwrap_or(0),
            )
        })
        .collect();
    let order = [
        "Completed",
        "Failed",
        "Canceled",
        "In Progress",
        "Canceling",
        "Prepared",
        "Accepted",
        "New",
    ];
    grouped(d, details, &order, "\t\t", &entries);
}
