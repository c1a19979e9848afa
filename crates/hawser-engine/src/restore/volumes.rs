//! The volumes a restore has provisioned from CSI snapshots, looked at once every item is
//! restored:
//!
//! * `<restore>-volumeinfo.json.gz` lists them (Velero's `RestoreVolumeInfo`, which
//!   `velero restore describe` reads for its "CSI Snapshot Restores");
//! * as Velero's restore finalizer does, each new volume gets the reclaim policy and labels
//!   its original had (the `pvInfo` of the backup's volume info), once its claim is bound.
//!   A provisioner makes the new volume with its class's reclaim policy, which need not be the
//!   one the backed-up volume had.
//!
//! Only claims this restore created, provisioned from a VolumeSnapshot this restore created,
//! are touched. A claim is waited on for up to the resource timeout (as in Velero), all of them
//! [`Restorer::concurrency`] at a time. A claim that does not bind in time, or stays `Pending`
//! because its class binds `WaitForFirstConsumer` (its volume is made when a Pod uses it), is a
//! warning naming what its volume did not get; a patch the API server refuses is an error.

use std::time::Duration;

use futures::StreamExt;
use hawser_core::csi::restored_content_name;
use hawser_core::duration::GoDuration;
use hawser_core::json::text;
use hawser_core::poll::poll_until;
use serde_json::{Map, Value, json};

use super::apply::Restorer;
use super::results::Scope;
use crate::cluster::path::encode;
use crate::cluster::request;

/// How often a claim is looked at while it binds.
const BIND_POLL: Duration = Duration::from_secs(1);

/// One claim provisioned from a snapshot.
struct Provisioned {
    namespace: String,
    claim: String,
    /// Its entry in the backup's volume info (`null` when it has none).
    backed_up: Value,
    /// The restore's entry for it.
    info: Value,
}

/// Settles the claims provisioned from snapshots (see the module docs), given the backup's
/// volume info; the restore's volume info.
pub(crate) async fn settle(
    restorer: &Restorer,
    backup_info: &[Value],
    timeout: Duration,
) -> Vec<Value> {
    let mut provisioned = Vec::new();
    for ((source, claim), snapshot) in &restorer.snapshots {
        let namespace = restorer.selection.target_namespace(source);
        let report = &restorer.report;
        if !report.was_created("PersistentVolumeClaim", namespace, claim)
            || !report.was_created("VolumeSnapshot", namespace, snapshot)
        {
            continue;
        }
        let backed_up = backup_info.iter().find(|i| {
            text(i, "/pvcNamespace") == source
                && text(i, "/pvcName") == claim
                && text(i, "/backupMethod") == "CSISnapshot"
        });
        let csi = |key: &str| backed_up.and_then(|i| i.pointer(&format!("/csiSnapshotInfo/{key}")));
        let info = json!({
            "pvcName": claim,
            "pvcNamespace": namespace,
            "restoreMethod": "CSISnapshot",
            "snapshotDataMoved": false,
            "csiSnapshotInfo": {
                "snapshotHandle": csi("snapshotHandle").cloned().unwrap_or_else(|| json!("")),
                "size": csi("size").cloned().unwrap_or_else(|| json!(0)),
                "driver": csi("driver").cloned().unwrap_or_else(|| json!("")),
                "vscName": restored_content_name(&restorer.restore_name, namespace, snapshot),
            },
        });
        provisioned.push(Provisioned {
            namespace: namespace.to_owned(),
            claim: claim.clone(),
            backed_up: backed_up.cloned().unwrap_or_default(),
            info,
        });
    }
    futures::stream::iter(provisioned)
        .map(|p| settle_one(restorer, p, timeout))
        .buffered(restorer.concurrency.max(1))
        .collect()
        .await
}

/// How waiting for a claim's volume ended.
enum Bound {
    /// Bound to this volume.
    Volume(Value),
    /// Pending until a Pod uses it: its class binds `WaitForFirstConsumer`.
    FirstConsumer(String),
}

async fn settle_one(restorer: &Restorer, mut p: Provisioned, timeout: Duration) -> Value {
    let backed_up = std::mem::take(&mut p.backed_up);
    let wanted = backed_up.get("pvInfo").filter(|i| i.is_object());
    let Some(wanted) = wanted else {
        // Nothing to give back (a backup from before `pvInfo`): the volume's name if it is
        // there already.
        if let Some(Bound::Volume(volume)) = bound_volume(restorer, &p).await {
            p.info["pvName"] = json!(text(&volume, "/metadata/name"));
        }
        return p.info;
    };
    let original = text(&backed_up, "/pvName");
    let left = |why: String| {
        format!(
            "the volume of PersistentVolumeClaim {}/{} did not get the reclaim policy and labels of the backed-up volume {original}: {why}",
            p.namespace, p.claim
        )
    };
    let scope = Scope::Namespace(p.namespace.clone());
    match poll_until(timeout, BIND_POLL, || bound_volume(restorer, &p)).await {
        None => restorer.report.warn(
            scope,
            left(format!(
                "the claim was not bound within {}",
                GoDuration::from(timeout)
            )),
        ),
        Some(Bound::FirstConsumer(class)) => restorer.report.warn(
            scope,
            left(format!(
                "the claim is Pending until a Pod uses it (StorageClass {class} binds WaitForFirstConsumer)"
            )),
        ),
        Some(Bound::Volume(volume)) => {
            let name = text(&volume, "/metadata/name").to_owned();
            p.info["pvName"] = json!(name);
            if let Some(patch) = patch_for(&volume, wanted) {
                let path = format!("/api/v1/persistentvolumes/{}", encode(&name));
                match request::merge_patch(&restorer.client, &path, &patch, restorer.api_retry).await {
                    Ok(_) => restorer.report.info(&format!(
                        "PersistentVolume {name} of claim {}/{} got the reclaim policy and labels of the backed-up volume {original}",
                        p.namespace, p.claim
                    )),
                    Err(e) => restorer.report.error(
                        scope,
                        left(format!("patching PersistentVolume {name} failed: {}", request::text(&e))),
                    ),
                }
            }
        }
    }
    p.info
}

/// The claim's volume once both are bound to each other, or why it will not be soon; `None`
/// while it is not (or cannot be read: the next poll tries again).
async fn bound_volume(restorer: &Restorer, p: &Provisioned) -> Option<Bound> {
    let client = &restorer.client;
    let claim_path = format!(
        "/api/v1/namespaces/{}/persistentvolumeclaims/{}",
        encode(&p.namespace),
        encode(&p.claim)
    );
    // Sent once per poll: the poll is the retry.
    let claim = request::get(client, &claim_path, Duration::ZERO)
        .await
        .ok()?;
    let volume_name = text(&claim, "/spec/volumeName");
    if text(&claim, "/status/phase") == "Pending" && volume_name.is_empty() {
        let class = text(&claim, "/spec/storageClassName");
        let class_path = format!("/apis/storage.k8s.io/v1/storageclasses/{}", encode(class));
        let mode = request::get(client, &class_path, Duration::ZERO).await.ok();
        if mode.is_some_and(|c| text(&c, "/volumeBindingMode") == "WaitForFirstConsumer") {
            return Some(Bound::FirstConsumer(class.to_owned()));
        }
        return None;
    }
    if volume_name.is_empty() {
        return None;
    }
    let volume_path = format!("/api/v1/persistentvolumes/{}", encode(volume_name));
    let volume = request::get(client, &volume_path, Duration::ZERO)
        .await
        .ok()?;
    let bound_here = text(&volume, "/spec/claimRef/namespace") == p.namespace
        && text(&volume, "/spec/claimRef/name") == p.claim;
    bound_here.then_some(Bound::Volume(volume))
}

/// The merge patch that gives `volume` the reclaim policy and labels of `wanted` (a
/// `pvInfo`), if it lacks any of them. Labels the provisioner set are kept.
fn patch_for(volume: &Value, wanted: &Value) -> Option<Value> {
    let mut patch = Map::new();
    let policy = text(wanted, "/reclaimPolicy");
    if !policy.is_empty() && policy != text(volume, "/spec/persistentVolumeReclaimPolicy") {
        patch.insert(
            "spec".to_owned(),
            json!({"persistentVolumeReclaimPolicy": policy}),
        );
    }
    let labels: Map<String, Value> = wanted
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, value)| {
            volume
                .pointer("/metadata/labels")
                .and_then(|l| l.get(key.as_str()))
                != Some(value)
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if !labels.is_empty() {
        patch.insert("metadata".to_owned(), json!({"labels": labels}));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_carries_only_what_the_volume_lacks() {
        let wanted = json!({"reclaimPolicy": "Retain", "labels": {"tier": "gold", "a/b": "c"}});
        let fresh = json!({"metadata": {"labels": {"topology": "zone-1"}},
                           "spec": {"persistentVolumeReclaimPolicy": "Delete"}});
        assert_eq!(
            patch_for(&fresh, &wanted),
            Some(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"},
                        "metadata": {"labels": {"tier": "gold", "a/b": "c"}}}))
        );
        let done = json!({"metadata": {"labels": {"tier": "gold", "a/b": "c", "x": "y"}},
                          "spec": {"persistentVolumeReclaimPolicy": "Retain"}});
        assert_eq!(patch_for(&done, &wanted), None);
        let no_policy = json!({"reclaimPolicy": "", "labels": {}});
        assert_eq!(patch_for(&fresh, &no_policy), None);
    }
}
