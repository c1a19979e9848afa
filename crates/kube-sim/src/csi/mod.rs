//! The CSI side of a cluster, opt-in: the `snapshot.storage.k8s.io/v1` CRDs, a snapshot
//! controller and a provisioner for one simulated driver.
//!
//! It is a client of the API like the real external controllers, so it runs against kube-sim
//! or a real API server alike. [`CsiSim::start`] installs the CRDs, a StorageClass and a
//! VolumeSnapshotClass (labelled `velero.io/csi-volumesnapshot-class: "true"`), then every
//! [`CsiConfig::tick`]:
//!
//! * **provisioner**: a PersistentVolumeClaim without a volume, of any StorageClass whose
//!   provisioner is the driver, gets a PersistentVolume of the driver (`csi.volumeHandle`
//!   `vol-<claim uid>`, the class's reclaim policy), bound both ways.
//!   A claim whose `dataSource` is a VolumeSnapshot waits until that snapshot is ready; its
//!   volume carries the annotation [`RESTORED_FROM`] with the snapshot's handle.
//! * **snapshot controller**: a VolumeSnapshot of a claim gets a VolumeSnapshotContent
//!   (`snapcontent-<snapshot uid>`, the class's `deletionPolicy`) with its `snapshotHandle`
//!   (`snap-<snapshot uid>`: the snapshot is cut) and, [`CsiConfig::ready_after`] later,
//!   `readyToUse: true` on both (as a driver that uploads its snapshots reports them). A VolumeSnapshot naming an
//!   existing content (a pre-provisioned one, as a restore creates) is bound to it and ready at
//!   once. A content whose snapshot is gone is deleted when its policy is `Delete`.
//! * **faults**, per source claim, by its annotation [`SNAPSHOT_FAULT`]: `never-ready` (the
//!   snapshot stays `readyToUse: false`) or `error` (the snapshot reports `status.error`).
//!
//! Finalizers, volume attachment and the data itself are not simulated.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use install::snapshot_crds;

mod install;

/// The driver's name.
pub const DRIVER: &str = "csi.sim.hawser.io";
/// The StorageClass whose claims the provisioner serves.
pub const STORAGE_CLASS: &str = "sim-csi";
/// The VolumeSnapshotClass of the driver.
pub const SNAPSHOT_CLASS: &str = "sim-csi-snapclass";
/// Annotation of a claim choosing a snapshot fault: `never-ready` or `error`.
pub const SNAPSHOT_FAULT: &str = "sim.hawser.io/snapshot-fault";
/// Annotation of a provisioned volume: the handle of the snapshot it was restored from.
pub const RESTORED_FROM: &str = "sim.hawser.io/restored-from";
/// Annotation of a content: the uid of the snapshot it was bound to.
const BOUND_TO: &str = "sim.hawser.io/bound-to";

/// Settings of the CSI side.
#[derive(Debug, Clone)]
pub struct CsiConfig {
    /// How long a new snapshot takes to become ready.
    pub ready_after: Duration,
    /// How often the controllers look at the cluster.
    pub tick: Duration,
}

impl Default for CsiConfig {
    fn default() -> Self {
        Self {
            ready_after: Duration::from_millis(500),
            tick: Duration::from_millis(100),
        }
    }
}

/// The running CSI side; dropping it stops its controllers.
#[derive(Debug)]
pub struct CsiSim {
    task: JoinHandle<()>,
    /// Rounds finished without an error so far.
    rounds: Arc<AtomicU64>,
}

impl Drop for CsiSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Errors of [`CsiSim::start`].
#[derive(Debug, thiserror::Error)]
pub enum CsiError {
    #[error("installing {what}")]
    Install {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("the snapshot CRDs were not established within 30 s")]
    NotEstablished,
}

impl CsiSim {
    /// Installs the CRDs and classes (existing ones are kept) and starts the controllers.
    pub async fn start(client: Client, config: CsiConfig) -> Result<CsiSim, CsiError> {
        install::install(&client).await?;
        let rounds = Arc::new(AtomicU64::new(0));
        let finished = rounds.clone();
        let task = tokio::spawn(async move {
            let mut state = State::default();
            loop {
                match round(&client, &config, &mut state).await {
                    Ok(()) => {
                        finished.fetch_add(1, Ordering::Release);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "CSI simulator round failed; trying again");
                    }
                }
                tokio::time::sleep(config.tick).await;
            }
        });
        Ok(CsiSim { task, rounds })
    }

    /// Returns once a whole round has run without an error that began after this call (a
    /// failed round does not count): everything written
    /// before the call has been seen by the controllers, and what they do about it is done.
    /// The signal for a test that something did *not* happen.
    pub async fn next_round(&self) {
        // The round under way may have listed before the call: the one after it has not.
        let wanted = self.rounds.load(Ordering::Acquire) + 2;
        while self.rounds.load(Ordering::Acquire) < wanted {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A `v1` type (every type the CSI side touches is at `v1`).
fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

fn crds() -> ApiResource {
    resource(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}
fn snapshots() -> ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "VolumeSnapshot",
        "volumesnapshots",
    )
}
fn contents() -> ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
    )
}
fn classes() -> ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
    )
}
fn claims() -> ApiResource {
    resource("", "PersistentVolumeClaim", "persistentvolumeclaims")
}
fn volumes() -> ApiResource {
    resource("", "PersistentVolume", "persistentvolumes")
}
fn storage_classes() -> ApiResource {
    resource("storage.k8s.io", "StorageClass", "storageclasses")
}

/// An API of the `v1` type `kind` (`plural`) of `group` (`""`: the core group), in `namespace`
/// or across all: what the controllers here use, and what tests of the CSI side read with.
pub fn dynamic_api(
    client: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    api(client, &resource(group, kind, plural), namespace)
}

fn api(client: &Client, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

async fn list(client: &Client, ar: &ApiResource) -> Result<Vec<Value>, kube::Error> {
    let items = api(client, ar, None).list(&Default::default()).await?.items;
    Ok(items
        .into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

async fn create(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) -> Result<Value, kube::Error> {
    let object: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    let created = api(client, ar, namespace)
        .create(&PostParams::default(), &object)
        .await?;
    serde_json::to_value(created).map_err(kube::Error::SerdeError)
}

async fn merge(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    patch: Value,
    status: bool,
) -> Result<(), kube::Error> {
    let api = api(client, ar, namespace);
    let params = PatchParams::default();
    if status {
        api.patch_status(name, &params, &Patch::Merge(patch))
            .await?;
    } else {
        api.patch(name, &params, &Patch::Merge(patch)).await?;
    }
    Ok(())
}

/// What the controllers remember between rounds: when each snapshot was first seen bound.
#[derive(Debug, Default)]
struct State {
    bound_at: BTreeMap<String, Instant>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

async fn round(client: &Client, config: &CsiConfig, state: &mut State) -> Result<(), kube::Error> {
    let snapshot_list = list(client, &snapshots()).await?;
    let content_list = list(client, &contents()).await?;
    let claim_list = list(client, &claims()).await?;
    let volume_list = list(client, &volumes()).await?;
    let class_list = list(client, &classes()).await?;
    let storage_class_list = list(client, &storage_classes()).await?;
    provision(
        client,
        (&claim_list, &storage_class_list),
        &snapshot_list,
        &content_list,
    )
    .await?;
    snapshot(
        client,
        config,
        state,
        &snapshot_list,
        &content_list,
        &claim_list,
        &volume_list,
        &class_list,
    )
    .await?;
    clean_up(client, &snapshot_list, &content_list).await
}

/// The provisioner (see the module docs).
async fn provision(
    client: &Client,
    (claims_now, storage_classes_now): (&[Value], &[Value]),
    snapshots_now: &[Value],
    contents_now: &[Value],
) -> Result<(), kube::Error> {
    for claim in claims_now {
        let class_name = text(claim, "/spec/storageClassName");
        let Some(class) = storage_classes_now
            .iter()
            .find(|c| text(c, "/metadata/name") == class_name && text(c, "/provisioner") == DRIVER)
        else {
            continue;
        };
        if !text(claim, "/spec/volumeName").is_empty() {
            continue;
        }
        let namespace = text(claim, "/metadata/namespace");
        let name = text(claim, "/metadata/name");
        let uid = text(claim, "/metadata/uid");
        let mut size = claim
            .pointer("/spec/resources/requests/storage")
            .cloned()
            .unwrap_or(json!("1Gi"));
        let mut annotations = json!({"pv.kubernetes.io/provisioned-by": DRIVER});
        if text(claim, "/spec/dataSource/kind") == "VolumeSnapshot" {
            let source = text(claim, "/spec/dataSource/name");
            let Some(snap) = snapshots_now.iter().find(|s| {
                text(s, "/metadata/namespace") == namespace && text(s, "/metadata/name") == source
            }) else {
                continue;
            };
            if snap.pointer("/status/readyToUse") != Some(&json!(true)) {
                continue;
            }
            let content = text(snap, "/status/boundVolumeSnapshotContentName");
            let handle = contents_now
                .iter()
                .find(|c| text(c, "/metadata/name") == content)
                .map(|c| text(c, "/status/snapshotHandle"))
                .unwrap_or_default();
            annotations[RESTORED_FROM] = json!(handle);
            if let Some(restore_size) = snap.pointer("/status/restoreSize") {
                size = restore_size.clone();
            }
        }
        let volume_name = format!("pvc-{uid}");
        let volume = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume_name, "annotations": annotations},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": claim.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
                "persistentVolumeReclaimPolicy": match text(class, "/reclaimPolicy") {
                    "" => "Delete",
                    policy => policy,
                },
                "storageClassName": class_name,
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": name, "uid": uid},
                "csi": {"driver": DRIVER, "volumeHandle": format!("vol-{uid}")}
            }
        });
        match create(client, &volumes(), None, volume).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
        merge(
            client,
            &volumes(),
            None,
            &volume_name,
            json!({"status": {"phase": "Bound"}}),
            true,
        )
        .await?;
        merge(
            client,
            &claims(),
            Some(namespace),
            name,
            json!({"spec": {"volumeName": volume_name}}),
            false,
        )
        .await?;
        merge(
            client,
            &claims(),
            Some(namespace),
            name,
            json!({"status": {"phase": "Bound", "capacity": {"storage": size}, "accessModes": claim.pointer("/spec/accessModes")}}),
            true,
        )
        .await?;
    }
    Ok(())
}

/// The snapshot controller (see the module docs).
#[allow(clippy::too_many_arguments)] // one round's lists, read once
async fn snapshot(
    client: &Client,
    config: &CsiConfig,
    state: &mut State,
    snapshots_now: &[Value],
    contents_now: &[Value],
    claims_now: &[Value],
    volumes_now: &[Value],
    classes_now: &[Value],
) -> Result<(), kube::Error> {
    let now = jiff::Timestamp::now();
    let now_nanos = i64::try_from(now.as_nanosecond()).unwrap_or(i64::MAX);
    for snap in snapshots_now {
        let namespace = text(snap, "/metadata/namespace");
        let name = text(snap, "/metadata/name");
        let uid = text(snap, "/metadata/uid");
        if snap.pointer("/status/readyToUse") == Some(&json!(true))
            || snap.pointer("/status/error").is_some()
        {
            continue;
        }
        let pre_provisioned = text(snap, "/spec/source/volumeSnapshotContentName");
        if !pre_provisioned.is_empty() {
            let Some(content) = contents_now
                .iter()
                .find(|c| text(c, "/metadata/name") == pre_provisioned)
            else {
                continue;
            };
            let handle = text(content, "/spec/source/snapshotHandle").to_owned();
            merge(
                client,
                &contents(),
                None,
                pre_provisioned,
                json!({"metadata": {"annotations": {BOUND_TO: uid}}}),
                false,
            )
            .await?;
            merge(client, &contents(), None, pre_provisioned, json!({"status": {"snapshotHandle": handle, "readyToUse": true, "creationTime": now_nanos}}), true).await?;
            merge(client, &snapshots(), Some(namespace), name, json!({"status": {"boundVolumeSnapshotContentName": pre_provisioned, "readyToUse": true, "creationTime": now.to_string()}}), true).await?;
            continue;
        }
        let claim_name = text(snap, "/spec/source/persistentVolumeClaimName");
        let Some(claim) = claims_now.iter().find(|c| {
            text(c, "/metadata/namespace") == namespace && text(c, "/metadata/name") == claim_name
        }) else {
            continue;
        };
        let fault = claim
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(SNAPSHOT_FAULT))
            .and_then(Value::as_str)
            .unwrap_or("");
        if fault == "error" {
            merge(client, &snapshots(), Some(namespace), name, json!({"status": {"readyToUse": false, "error": {"message": "simulated snapshot failure: the driver refused to snapshot the volume", "time": now.to_string()}}}), true).await?;
            continue;
        }
        let content_name = format!("snapcontent-{uid}");
        let content = contents_now
            .iter()
            .find(|c| text(c, "/metadata/name") == content_name);
        if content.is_none() {
            let volume_name = text(claim, "/spec/volumeName");
            let Some(volume) = volumes_now
                .iter()
                .find(|v| text(v, "/metadata/name") == volume_name)
            else {
                continue;
            };
            let class_name = text(snap, "/spec/volumeSnapshotClassName");
            let policy = classes_now
                .iter()
                .find(|c| text(c, "/metadata/name") == class_name)
                .map(|c| text(c, "/deletionPolicy"))
                .filter(|p| !p.is_empty())
                .unwrap_or("Delete");
            create(
                client,
                &contents(),
                None,
                json!({
                    "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
                    "metadata": {"name": content_name, "annotations": {BOUND_TO: uid}},
                    "spec": {
                        "deletionPolicy": policy,
                        "driver": text(volume, "/spec/csi/driver"),
                        "source": {"volumeHandle": text(volume, "/spec/csi/volumeHandle")},
                        "volumeSnapshotClassName": class_name,
                        "volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "namespace": namespace, "name": name, "uid": uid}
                    }
                }),
            )
            .await?;
            merge(
                client,
                &contents(),
                None,
                &content_name,
                json!({"status": {"snapshotHandle": format!("snap-{uid}"), "readyToUse": false}}),
                true,
            )
            .await?;
            merge(client, &snapshots(), Some(namespace), name, json!({"status": {"boundVolumeSnapshotContentName": content_name, "readyToUse": false}}), true).await?;
            state.bound_at.insert(uid.to_owned(), Instant::now());
            continue;
        }
        let since = *state
            .bound_at
            .entry(uid.to_owned())
            .or_insert_with(Instant::now);
        if fault == "never-ready" || since.elapsed() < config.ready_after {
            continue;
        }
        let size = claim
            .pointer("/status/capacity/storage")
            .or_else(|| claim.pointer("/spec/resources/requests/storage"))
            .cloned()
            .unwrap_or(json!("1Gi"));
        merge(client, &contents(), None, &content_name, json!({"status": {"readyToUse": true, "restoreSize": 1_073_741_824_u64, "creationTime": now_nanos}}), true).await?;
        merge(client, &snapshots(), Some(namespace), name, json!({"status": {"boundVolumeSnapshotContentName": content_name, "readyToUse": true, "restoreSize": size, "creationTime": now.to_string()}}), true).await?;
        state.bound_at.remove(uid);
    }
    Ok(())
}

/// Deletes the contents, policy `Delete`, whose bound snapshot is gone.
async fn clean_up(
    client: &Client,
    snapshots_now: &[Value],
    contents_now: &[Value],
) -> Result<(), kube::Error> {
    let live: HashSet<&str> = snapshots_now
        .iter()
        .map(|s| text(s, "/metadata/uid"))
        .collect();
    for content in contents_now {
        let bound_to = content
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(BOUND_TO))
            .and_then(Value::as_str)
            .unwrap_or("");
        if bound_to.is_empty()
            || live.contains(bound_to)
            || text(content, "/spec/deletionPolicy") != "Delete"
        {
            continue;
        }
        let name = text(content, "/metadata/name");
        match api(client, &contents(), None)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
