//! An application with a CSI volume on kube-sim's CSI side, for the tests of volumes.

use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube_sim::csi::{self, CsiConfig, CsiSim, dynamic_api};
use serde_json::{Value, json};

use crate::cli_support::Cluster;

pub fn client(cluster: &Cluster) -> kube::Client {
    kube::Client::try_from(kube::Config::new(cluster.sim.api_url().parse().unwrap())).unwrap()
}

pub async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A merge patch of the object `name` of `api`.
pub async fn patch(api: &Api<DynamicObject>, name: &str, patch: Value) {
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

/// The CSI side (snapshots ready `ready_after` after they are cut) and, in namespace `shop`, a
/// Deployment `db` with its Pod and the Pod's claim `data` (bound), the claim annotated with
/// `fault` when given.
pub async fn application(cluster: &Cluster, ready_after: Duration, fault: &str) -> CsiSim {
    let client = client(cluster);
    let csi = CsiSim::start(
        client.clone(),
        CsiConfig {
            ready_after,
            ..CsiConfig::default()
        },
    )
    .await
    .unwrap();
    cluster
        .store()
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    let claims = dynamic_api(
        &client,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("shop"),
    );
    create(
        &claims,
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop", "annotations": {csi::SNAPSHOT_FAULT: fault}},
            "spec": {"storageClassName": csi::STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}
        }),
    )
    .await;
    let template = json!({
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "db", "image": "postgres:17"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    });
    create(
        &dynamic_api(&client, "apps", "Deployment", "deployments", Some("shop")),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db", "namespace": "shop"},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": template}}),
    )
    .await;
    // A real API server admits a Pod only once its ServiceAccount exists.
    create(
        &dynamic_api(&client, "", "ServiceAccount", "serviceaccounts", Some("shop")),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "shop"}}),
    )
    .await;
    let mut pod = template.clone();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["name"] = json!("db-0");
    pod["metadata"]["namespace"] = json!("shop");
    create(&dynamic_api(&client, "", "Pod", "pods", Some("shop")), pod).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while claims.get("data").await.unwrap().data["spec"]["volumeName"]
        .as_str()
        .is_none()
    {
        assert!(tokio::time::Instant::now() < deadline, "the claim is bound");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    csi
}
