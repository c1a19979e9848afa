//! The entries of `<backup>-volumeinfo.json.gz`, Velero's `BackupVolumeInfo`: one per
//! backed-up claim bound to a volume, with the volume's name and `pvInfo` (its reclaim policy
//! and labels, which a restore gives back to the volume it provisions anew).
//!
//! The entries are stored when the backup leaves `InProgress`: a volume left out is `skipped`
//! with Velero's reason, a cut snapshot is a `CSISnapshot` entry with its content and handle.
//! Finalizing adds each snapshot's result and times ([`finish`]).

use hawser_core::csi::{BackupOperation, OperationPhase};
use hawser_core::json::text;
use serde_json::{Value, json};

/// Velero's reason for a volume a resource policy skips.
pub(crate) const SKIPPED_BY_POLICY: &str = "any: skipped due to resource policy ;";
/// Velero's reason for a volume that is not a CSI volume.
pub(crate) const NOT_CSI: &str = "csiSnapshot: skipped b/c it's not a CSI volume;";

/// The entry of `claim`'s `volume` before the backup decides what to do with it.
pub(crate) fn of_volume(claim: &Value, volume: &Value) -> Value {
    json!({
        "pvcName": text(claim, "/metadata/name"),
        "pvcNamespace": text(claim, "/metadata/namespace"),
        "pvName": text(volume, "/metadata/name"),
        "snapshotDataMoved": false,
        "preserveLocalSnapshot": false,
        "skipped": false,
        "pvInfo": {
            "reclaimPolicy": text(volume, "/spec/persistentVolumeReclaimPolicy"),
            "labels": volume.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        },
    })
}

/// `info` as a volume left out for `reason`.
pub(crate) fn skipped(mut info: Value, reason: &str) -> Value {
    info["skipped"] = json!(true);
    info["skippedReason"] = json!(reason);
    info
}

/// `info` as the volume of a snapshot cut, whose content is `content` and whose operation is
/// `operation`; its result comes when the operation ends.
pub(crate) fn cut(mut info: Value, operation: &BackupOperation, content: &Value) -> Value {
    info["backupMethod"] = json!("CSISnapshot");
    // The snapshot stays in the cluster's storage (no data moved): Velero's describe shows it.
    info["preserveLocalSnapshot"] = json!(true);
    info["startTimestamp"] = json!(operation.status.started);
    info["csiSnapshotInfo"] = json!({
        "operationID": operation.spec.operation_id,
        "snapshotHandle": text(content, "/status/snapshotHandle"),
        "driver": text(content, "/spec/driver"),
        "vscName": text(content, "/metadata/name"),
        "size": size(Some(content)),
    });
    info
}

fn size(content: Option<&Value>) -> i64 {
    content
        .and_then(|c| c.pointer("/status/restoreSize"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether `info` is the entry of `operation`'s snapshot.
pub(crate) fn is_of(info: &Value, operation: &BackupOperation) -> bool {
    text(info, "/csiSnapshotInfo/operationID") == operation.spec.operation_id
}

/// Writes the ended `operation`'s result and times into its entry, and the snapshot's size
/// from `content` when it could be read.
pub(crate) fn finish(info: &mut Value, operation: &BackupOperation, content: Option<&Value>) {
    info["result"] = json!(result(operation));
    info["completionTimestamp"] = json!(operation.status.updated);
    if content.is_some() {
        info["csiSnapshotInfo"]["size"] = json!(size(content));
    }
}

fn result(operation: &BackupOperation) -> &'static str {
    if operation.status.phase == OperationPhase::Completed {
        "succeeded"
    } else {
        "failed"
    }
}

/// The entry of a snapshot whose backup stored none while `InProgress` (one taken by an
/// earlier version): what the operation, the snapshot and its content tell.
pub(crate) fn of_operation(
    operation: &BackupOperation,
    snapshot: &Value,
    content: Option<&Value>,
) -> Value {
    let content_name = operation
        .spec
        .post_operation_items
        .first()
        .map(|i| i.name.clone())
        .unwrap_or_default();
    let content_text = |p: &str| content.map(|c| text(c, p)).unwrap_or_default();
    json!({
        "pvcName": text(snapshot, "/spec/source/persistentVolumeClaimName"),
        "pvcNamespace": operation.spec.resource_identifier.namespace,
        "backupMethod": "CSISnapshot",
        "snapshotDataMoved": false,
        "preserveLocalSnapshot": true,
        "skipped": false,
        "result": result(operation),
        "startTimestamp": operation.status.started,
        "completionTimestamp": operation.status.updated,
        "csiSnapshotInfo": {
            "operationID": operation.spec.operation_id,
            "snapshotHandle": content_text("/status/snapshotHandle"),
            "driver": content_text("/spec/driver"),
            "vscName": content_name,
            "size": size(content),
        },
    })
}
