//! The CSI side (`kube_sim::csi`) against kube-sim: provisioning, snapshots becoming ready,
//! the two faults, a restore from a pre-provisioned content, and contents deleted with their
//! snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::{Client, Config};
use kube_sim::csi::{self, CsiConfig, CsiSim, dynamic_api as api};
use kube_sim::{KubeSim, SimConfig};
use serde_json::{Value, json};

struct Cluster {
    _sim: KubeSim,
    client: Client,
    csi: CsiSim,
}

async fn cluster() -> Cluster {
    let sim = KubeSim::start(SimConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();
    let config = CsiConfig {
        ready_after: Duration::from_millis(300),
        ..CsiConfig::default()
    };
    let csi = CsiSim::start(client.clone(), config).await.unwrap();
    Cluster {
        _sim: sim,
        client,
        csi,
    }
}

fn claims(c: &Client) -> Api<DynamicObject> {
    api(
        c,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("default"),
    )
}
fn volumes(c: &Client) -> Api<DynamicObject> {
    api(c, "", "PersistentVolume", "persistentvolumes", None)
}
fn snapshots(c: &Client) -> Api<DynamicObject> {
    api(
        c,
        "snapshot.storage.k8s.io",
        "VolumeSnapshot",
        "volumesnapshots",
        Some("default"),
    )
}
fn contents(c: &Client) -> Api<DynamicObject> {
    api(
        c,
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        None,
    )
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Polls `name` until `done` holds of it (10 s at most); returns it.
async fn until(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(obj) = api.get_opt(name).await.unwrap() {
            let value = serde_json::to_value(obj).unwrap();
            if done(&value) {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: {what}; it is {value}"
            );
        } else {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: {what}; it does not exist"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn claim(name: &str, annotations: Value, data_source: Option<&str>) -> Value {
    let mut claim = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"storageClassName": csi::STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "2Gi"}}}
    });
    if let Some(source) = data_source {
        claim["spec"]["dataSource"] = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": source});
    }
    claim
}

fn snapshot_of(name: &str, claim: &str) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"volumeSnapshotClassName": csi::SNAPSHOT_CLASS, "source": {"persistentVolumeClaimName": claim}}
    })
}

fn ready(v: &Value) -> bool {
    v.pointer("/status/readyToUse") == Some(&json!(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_provisioned_snapshotted_and_restored_from_its_snapshot() {
    let cluster = cluster().await;
    let client = cluster.client.clone();
    create(&claims(&client), claim("data", json!({}), None)).await;
    let bound = until(&claims(&client), "data", "bound", |c| {
        c["spec"]["volumeName"].is_string()
    })
    .await;
    let volume_name = bound["spec"]["volumeName"].as_str().unwrap().to_owned();
    let volume = volumes(&client).get(&volume_name).await.unwrap();
    let volume = serde_json::to_value(volume).unwrap();
    assert_eq!(volume["spec"]["csi"]["driver"], csi::DRIVER);
    assert_eq!(volume["spec"]["claimRef"]["name"], "data");

    create(&snapshots(&client), snapshot_of("data-snap", "data")).await;
    let snap = until(
        &snapshots(&client),
        "data-snap",
        "bound, not yet ready",
        |s| s["status"]["boundVolumeSnapshotContentName"].is_string(),
    )
    .await;
    assert!(
        !ready(&snap),
        "ready only after the configured delay: {snap}"
    );
    let snap = until(&snapshots(&client), "data-snap", "ready", ready).await;
    let content_name = snap["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap()
        .to_owned();
    let content = until(&contents(&client), &content_name, "ready", ready).await;
    assert_eq!(content["spec"]["deletionPolicy"], "Delete");
    assert_eq!(
        content["spec"]["source"]["volumeHandle"],
        volume["spec"]["csi"]["volumeHandle"]
    );
    let handle = content["status"]["snapshotHandle"]
        .as_str()
        .unwrap()
        .to_owned();

    // What a restore does: a pre-provisioned content with the handle, a snapshot naming it, a
    // claim from the snapshot.
    create(
        &contents(&client),
        json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
            "metadata": {"name": "restored-content"},
            "spec": {"deletionPolicy": "Retain", "driver": csi::DRIVER,
                     "source": {"snapshotHandle": handle},
                     "volumeSnapshotRef": {"namespace": "default", "name": "restored-snap"}}
        }),
    )
    .await;
    create(
        &snapshots(&client),
        json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": "restored-snap", "namespace": "default"},
            "spec": {"source": {"volumeSnapshotContentName": "restored-content"}}
        }),
    )
    .await;
    create(
        &claims(&client),
        claim("data-again", json!({}), Some("restored-snap")),
    )
    .await;
    let restored = until(&claims(&client), "data-again", "bound", |c| {
        c["spec"]["volumeName"].is_string()
    })
    .await;
    let volume = volumes(&client)
        .get(restored["spec"]["volumeName"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(
        volume.metadata.annotations.unwrap().get(csi::RESTORED_FROM),
        Some(&handle),
        "the new volume is provisioned from the snapshot's handle"
    );

    // The first snapshot deleted: its content (policy Delete) goes; the Retain one stays.
    snapshots(&client)
        .delete("data-snap", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while contents(&client)
        .get_opt(&content_name)
        .await
        .unwrap()
        .is_some()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "content deleted with its snapshot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    snapshots(&client)
        .delete("restored-snap", &DeleteParams::default())
        .await
        .unwrap();
    cluster.csi.next_round().await;
    assert!(
        contents(&client)
            .get_opt("restored-content")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_fault_keeps_it_unready_or_reports_an_error() {
    let cluster = cluster().await;
    let client = cluster.client.clone();
    create(
        &claims(&client),
        claim("stuck", json!({csi::SNAPSHOT_FAULT: "never-ready"}), None),
    )
    .await;
    create(
        &claims(&client),
        claim("broken", json!({csi::SNAPSHOT_FAULT: "error"}), None),
    )
    .await;
    for name in ["stuck", "broken"] {
        until(&claims(&client), name, "bound", |c| {
            c["spec"]["volumeName"].is_string()
        })
        .await;
        create(
            &snapshots(&client),
            snapshot_of(&format!("{name}-snap"), name),
        )
        .await;
    }
    let broken = until(&snapshots(&client), "broken-snap", "an error", |s| {
        s["status"]["error"].is_object()
    })
    .await;
    assert!(
        broken["status"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("simulated snapshot failure"),
        "{broken}"
    );
    until(&snapshots(&client), "stuck-snap", "bound", |s| {
        s["status"]["boundVolumeSnapshotContentName"].is_string()
    })
    .await;
    // A plain snapshot cut after the stuck one was bound: once it is ready, the delay after
    // which the stuck one would have been ready has passed. Then one more round.
    create(&claims(&client), claim("fine", json!({}), None)).await;
    until(&claims(&client), "fine", "bound", |c| {
        c["spec"]["volumeName"].is_string()
    })
    .await;
    create(&snapshots(&client), snapshot_of("fine-snap", "fine")).await;
    until(&snapshots(&client), "fine-snap", "ready", ready).await;
    cluster.csi.next_round().await;
    let stuck = serde_json::to_value(snapshots(&client).get("stuck-snap").await.unwrap()).unwrap();
    assert!(!ready(&stuck), "never ready: {stuck}");
}
