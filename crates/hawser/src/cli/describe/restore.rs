//! `restore describe` as Velero's `DescribeRestore` lays it out.

use hawser_api::{PodVolumeRestore, Restore, RestorePhase};
use hawser_core::archive::gzjson::{ResourceList, Results};
use hawser_core::csi::{OperationStatus, ResourceIdentifier};
use serde::Deserialize;

use super::backup::{OperationLines, item_operations};
use super::volumes::{CsiSnapshotInfo, DataMovementInfo, PodVolume, grouped, uploader};
use super::{Describer, Read, Unread, duration, list_or, put, time_or_na, tristate};

/// What a restore's description shows besides the object.
#[derive(Debug)]
pub struct RestoreExtras {
    /// `--details`.
    pub details: bool,
    /// The results file; read only when the restore has warnings or errors.
    pub results: Option<Read<Results>>,
    /// The resource list; read only with `--details`.
    pub resources: Option<Read<ResourceList>>,
    /// The item operations; read only with `--details` when some were attempted.
    pub operations: Option<Read<Vec<RestoreOperation>>>,
    /// The volume infos of the restore.
    pub volumes: Read<Vec<RestoreVolumeInfo>>,
    /// The PodVolumeRestores of this restore.
    pub pod_volumes: Vec<PodVolumeRestore>,
}

/// One entry of `<restore>-itemoperations.json.gz` (Velero's `RestoreOperation`), the fields
/// `describe` shows. hawser's server runs no restore item actions; a restore Velero ran has
/// them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RestoreOperation {
    pub spec: RestoreOperationSpec,
    pub status: OperationStatus,
}

/// What a restore item operation is for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RestoreOperationSpec {
    pub restore_item_action: String,
    pub resource_identifier: ResourceIdentifier,
    #[serde(rename = "operationID")]
    pub operation_id: String,
}

/// One entry of `<restore>-volumeinfo.json.gz` (Velero's `RestoreVolumeInfo`), the fields
/// `describe` shows.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RestoreVolumeInfo {
    pub pvc_name: String,
    pub pvc_namespace: String,
    pub restore_method: String,
    pub snapshot_data_moved: bool,
    pub csi_snapshot_info: Option<CsiSnapshotInfo>,
    pub snapshot_data_movement_info: Option<DataMovementInfo>,
}

/// The description of one restore.
pub fn restore(restore: &Restore, extras: &RestoreExtras, colour: bool) -> String {
    let mut d = Describer::new(colour);
    let spec = &restore.spec;
    let status = restore.status.clone().unwrap_or_default();
    let name = restore.metadata.name.as_deref().unwrap_or_default();
    d.metadata(&restore.metadata);

    d.blank();
    let phase = restore.phase();
    let mut text = phase.as_str().to_owned();
    if restore.metadata.deletion_timestamp.is_some() {
        text.push_str(" (Deleting)");
    }
    let shown = match phase {
        RestorePhase::Completed => d.green(&text),
        RestorePhase::FailedValidation | RestorePhase::PartiallyFailed | RestorePhase::Failed => {
            d.red(&text)
        }
        _ => super::safe(&text),
    };
    let note = if matches!(phase, RestorePhase::Failed | RestorePhase::PartiallyFailed) {
        format!(
            " (run 'velero restore logs {}' for more information)",
            super::safe(name)
        )
    } else {
        String::new()
    };
    d.put_painted(&format!("Phase:\t{shown}{note}\n"));
    if let Some(progress) = &status.progress {
        let (total, done) = (
            progress.total_items.unwrap_or(0),
            progress.items_restored.unwrap_or(0),
        );
        if phase == RestorePhase::InProgress {
            put!(d, "Estimated total items to be restored:\t{total}\n");
            put!(d, "Items restored so far:\t{done}\n");
        } else {
            put!(d, "Total items to be restored:\t{total}\n");
            put!(d, "Items restored:\t{done}\n");
        }
    }

    super::backup::failure_reason(&mut d, status.failure_reason.as_deref());
    d.blank();
    put!(
        d,
        "Started:\t{}\n",
        time_or_na(status.start_timestamp.as_ref())
    );
    put!(
        d,
        "Completed:\t{}\n",
        time_or_na(status.completion_timestamp.as_ref())
    );
    d.validation_errors(status.validation_errors.as_deref());

    let (warnings, errors) = (status.warnings.unwrap_or(0), status.errors.unwrap_or(0));
    match &extras.results {
        None => {}
        Some(Err(e)) => d.unread_results(e),
        Some(Ok(results)) => d.results(results, warnings, errors),
    }

    d.blank();
    put!(
        d,
        "Backup:\t{}\n",
        spec.backup_name.as_deref().unwrap_or_default()
    );

    d.blank();
    d.put("Namespaces:\n");
    let included = match spec.included_namespaces.as_deref() {
        None | Some([]) => "all namespaces found in the backup".to_owned(),
        Some([only]) if only == "*" => "all namespaces found in the backup".to_owned(),
        Some(list) => list.join(", "),
    };
    put!(d, "\tIncluded:\t{included}\n");
    put!(
        d,
        "\tExcluded:\t{}\n",
        list_or(spec.excluded_namespaces.as_deref(), "<none>")
    );

    d.blank();
    d.put("Resources:\n");
    d.old_resource_filters(
        spec.included_resources.as_deref(),
        spec.excluded_resources.as_deref(),
        spec.include_cluster_resources,
    );

    d.blank();
    d.map("Namespace mappings", spec.namespace_mapping.as_ref());

    d.blank();
    d.selectors(
        spec.label_selector.as_ref(),
        spec.or_label_selectors.as_deref(),
    );

    d.blank();
    put!(
        d,
        "Restore PVs:\t{}\n",
        tristate(spec.restore_pvs, "false", "true", "auto")
    );
    if !extras.pod_volumes.is_empty() {
        d.blank();
        pod_volumes(&mut d, extras.details, &extras.pod_volumes);
    }
    match &extras.volumes {
        Ok(infos) => csi_restores(&mut d, infos, extras.details),
        Err(Unread::NotFound) => {}
        Err(e) => put!(
            d,
            "\t<error {} restore volume info: {e}>\n",
            e.verb("reading")
        ),
    }

    d.blank();
    let policy = spec
        .existing_resource_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("<none>");
    put!(d, "Existing Resource Policy: \t{policy}\n");
    put!(
        d,
        "ItemOperationTimeout:\t{}\n",
        duration(spec.item_operation_timeout)
    );

    d.blank();
    put!(
        d,
        "Preserve Service NodePorts:\t{}\n",
        tristate(spec.preserve_node_ports, "false", "true", "auto")
    );
    if let Some(modifier) = &spec.resource_modifier {
        d.blank();
        d.put("Resource modifier:\n");
        put!(d, "\tType:\t{}\n", modifier.kind);
        put!(d, "\tName:\t{}\n", modifier.name);
    }
    super::backup::resource_policy(&mut d, spec.resource_policy.as_ref());
    if let Some(uploader) = &spec.uploader_config {
        d.blank();
        d.put("Uploader config:\n");
        if uploader.write_sparse_files == Some(true) {
            d.put("\tWrite Sparse Files:\ttrue\n");
        }
        if let Some(parallel) = uploader.parallel_files_download.filter(|p| *p > 0) {
            put!(d, "\tParallel Restore:\t{parallel}\n");
        }
    }

    d.blank();
    let counts = [
        status.restore_item_operations_attempted,
        status.restore_item_operations_completed,
        status.restore_item_operations_failed,
    ]
    .map(|n| n.unwrap_or(0));
    item_operations(&mut d, "Restore", counts, extras.operations.as_ref(), |o| {
        OperationLines {
            side: "Restore",
            plugin: &o.spec.restore_item_action,
            resource: &o.spec.resource_identifier,
            operation_id: &o.spec.operation_id,
            post_items: &[],
            status: &o.status,
        }
    });
    if let Some(hooks) = &status.hook_status {
        d.blank();
        put!(
            d,
            "HooksAttempted: \t{}\n",
            hooks.hooks_attempted.unwrap_or(0)
        );
        put!(d, "HooksFailed: \t{}\n", hooks.hooks_failed.unwrap_or(0));
    }
    if let Some(resources) = &extras.resources {
        d.blank();
        d.resource_list("restore", resources);
    }
    d.finish()
}

fn pod_volumes(d: &mut Describer, details: bool, restores: &[PodVolumeRestore]) {
    let Some(first) = restores.first() else {
        return;
    };
    let uploader = uploader(first.spec.uploader_type.as_ref());
    if details {
        put!(d, "{uploader} Restores:\n");
    } else {
        put!(
            d,
            "{uploader} Restores (specify --details for more information):\n"
        );
    }
    let entries: Vec<PodVolume> = restores
        .iter()
        .map(|r| {
            let status = r.status.clone().unwrap_or_default();
            PodVolume::new(
                &r.spec.pod,
                &r.spec.volume,
                status.phase.as_ref(),
                status.progress.as_ref(),
                0,
            )
        })
        .collect();
    let order = [
        "Completed",
        "Canceled",
        "Failed",
        "In Progress",
        "Prepared",
        "Accepted",
        "New",
    ];
    grouped(d, details, &order, "\t", &entries);
}

fn csi_restores(d: &mut Describer, infos: &[RestoreVolumeInfo], details: bool) {
    d.blank();
    let csi = infos.iter().filter(|i| i.restore_method == "CSISnapshot");
    let (moved, local): (Vec<_>, Vec<_>) = csi.partition(|i| i.snapshot_data_moved);
    if moved.is_empty() && local.is_empty() {
        d.put("CSI Snapshot Restores: <none included>\n");
        return;
    }
    d.put("CSI Snapshot Restores:\n");
    for info in local {
        put!(d, "\t{}/{}:\n", info.pvc_namespace, info.pvc_name);
        if details {
            let csi = info.csi_snapshot_info.clone().unwrap_or_default();
            d.put("\t\tSnapshot:\n");
            put!(d, "\t\t\tSnapshot Content Name: {}\n", csi.vsc_name);
            put!(d, "\t\t\tStorage Snapshot ID: {}\n", csi.snapshot_handle);
            put!(d, "\t\t\tCSI Driver: {}\n", csi.driver);
        } else {
            d.put("\t\tSnapshot: specify --details for more information\n");
        }
    }
    for info in moved {
        put!(d, "\t{}/{}:\n", info.pvc_namespace, info.pvc_name);
        if details {
            let moved = info.snapshot_data_movement_info.clone().unwrap_or_default();
            d.put("\t\tData Movement:\n");
            put!(d, "\t\t\tOperation ID: {}\n", moved.operation_id);
            put!(d, "\t\t\tData Mover: {}\n", moved.data_mover);
            put!(d, "\t\t\tUploader Type: {}\n", moved.uploader_type);
        } else {
            d.put("\t\tData Movement: specify --details for more information\n");
        }
    }
}
