//! What [`CsiSim::start`](super::CsiSim::start) puts in the cluster first: the snapshot CRDs,
//! the StorageClass and the VolumeSnapshotClass.

use std::time::Duration;

use kube::Client;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{CsiError, DRIVER, SNAPSHOT_CLASS, STORAGE_CLASS, api, classes, crds, storage_classes};

/// The VolumeSnapshotClass, VolumeSnapshot and VolumeSnapshotContent CRDs, `v1`.
#[must_use]
pub fn snapshot_crds() -> Vec<Value> {
    [
        ("volumesnapshotclasses", "VolumeSnapshotClass", "Cluster", false),
        ("volumesnapshots", "VolumeSnapshot", "Namespaced", true),
        ("volumesnapshotcontents", "VolumeSnapshotContent", "Cluster", true),
    ]
    .into_iter()
    .map(|(plural, kind, scope, status)| {
        let mut version = json!({
            "name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
        });
        if status {
            version["subresources"] = json!({"status": {}});
        }
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            // A real API server asks for this annotation on a group under `k8s.io`.
            "metadata": {"name": format!("{plural}.snapshot.storage.k8s.io"),
                         "annotations": {"api-approved.kubernetes.io": "unapproved, simulated by kube-sim"}},
            "spec": {
                "group": "snapshot.storage.k8s.io",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                "scope": scope,
                "versions": [version]
            }
        })
    })
    .collect()
}

async fn create_kept(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) -> Result<(), CsiError> {
    let what = format!(
        "{} {}",
        ar.kind,
        object["metadata"]["name"].as_str().unwrap_or_default()
    );
    let api = api(client, ar, namespace);
    let object: DynamicObject = serde_json::from_value(object).map_err(|e| CsiError::Install {
        what: what.clone(),
        source: kube::Error::SerdeError(e),
    })?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(CsiError::Install { what, source }),
    }
}

pub(super) async fn install(client: &Client) -> Result<(), CsiError> {
    for crd in snapshot_crds() {
        create_kept(client, &crds(), None, crd).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let crd_api = api(client, &crds(), None);
    for crd in snapshot_crds() {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        loop {
            let established = crd_api
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .is_some_and(|c| {
                    serde_json::to_value(&c).ok().is_some_and(|v| {
                        v.pointer("/status/conditions")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Established" && c["status"] == "True")
                    })
                });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(CsiError::NotEstablished);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Discovery follows establishment; the first class create may still meet a 404.
    let class = json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
        "metadata": {"name": SNAPSHOT_CLASS, "labels": {"velero.io/csi-volumesnapshot-class": "true"}},
        "driver": DRIVER, "deletionPolicy": "Delete"
    });
    loop {
        match create_kept(client, &classes(), None, class.clone()).await {
            Ok(()) => break,
            Err(CsiError::Install {
                source: kube::Error::Api(s),
                ..
            }) if s.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
    create_kept(
        client,
        &storage_classes(),
        None,
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS},
            "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"
        }),
    )
    .await
}
