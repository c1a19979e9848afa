//! What a restore changes in an archived object before it creates it (velero-compat §7.5), and
//! which archived objects it skips entirely. Only the built-in actions listed below are done;
//! there are no plugins.
//!
//! * Skipped: pods in `Succeeded`/`Failed`, mirror pods, Jobs with `status.completionTime`,
//!   auto-generated `<sa>-token-*` service-account token Secrets, PersistentVolumes with
//!   reclaim policy `Delete` (re-provisioned dynamically, as Velero does for a PV without a
//!   snapshot).
//! * Metadata removed: `generateName`, `selfLink`, `uid`, `resourceVersion`, `generation`,
//!   `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `ownerReferences`.
//!   `managedFields` are kept in the object that is created (the API server accepts them on
//!   create), so no separate patch re-applies them.
//! * `status` removed, and handed back separately when status is to be restored (§7.7).
//! * Labels `velero.io/backup-name` and `velero.io/restore-name` added, and hawser's
//!   `hawser.io/restore-uid` (the restore's uid, so that a rerun knows its own objects).
//! * Service: `clusterIP`/`clusterIPs` cleared unless headless; `nodePort`s and
//!   `healthCheckNodePort` cleared unless `preserveNodePorts` or set explicitly (found in the
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation or in `managedFields`).
//! * Pod: `nodeName` and `priority` cleared; legacy `<sa>-token-*` volumes and mounts dropped.
//! * Job: `controller-uid` labels removed from the selector and the pod template.
//! * PVC: the annotations Velero removes: `pv.kubernetes.io/bind-completed`,
//!   `pv.kubernetes.io/bound-by-controller`, both `storage-provisioner` keys,
//!   `volume.kubernetes.io/selected-node` (a node of the old cluster would keep a
//!   `WaitForFirstConsumer` claim `Pending`), `velero.io/volume-snapshot-name` and
//!   `velero.io/data-upload-name`.
//! * Storage classes: with Velero's `change-storage-class` mapping, a PVC's, a PV's and a
//!   StatefulSet's claim templates' `storageClassName` of an old class becomes the new one.
//! * Images: with Velero's `change-image-name` rules, the container images of Pods and
//!   workloads are renamed ([`super::images`]).
//! * PV: annotations `pv.kubernetes.io/bind-completed` and
//!   `pv.kubernetes.io/bound-by-controller` removed; PV `claimRef.uid`/`resourceVersion`
//!   removed and `claimRef.namespace` mapped; a PVC bound to a re-provisioned PV loses
//!   `spec.volumeName`.
//! * CSI snapshots: an archived VolumeSnapshotContent is skipped (the restore makes a new one
//!   from its VolumeSnapshot, see [`crate::csi::restored_content`]); a VolumeSnapshot's source
//!   becomes that new content; a PVC with a snapshot in the archive loses `spec.volumeName` and
//!   gets the snapshot as its `dataSource`, so it is provisioned from it, and its PV is not
//!   restored (the caller skips it, knowing the snapshots only once it has read the archive).
//! * ServiceAccount: `<sa>-token-*` entries dropped from `secrets`.
//! * RoleBinding and ClusterRoleBinding: the namespaces of `subjects` mapped.
//! * Secret of type `kubernetes.io/service-account-token`: the `kubernetes.io/service-account.uid`
//!   annotation and the `token` and `ca.crt` data keys removed (the cluster fills them in).
//! * APIServices labelled `kube-aggregator.kubernetes.io/automanaged` skipped (the API server
//!   registers them itself).
//! * CustomResourceDefinition `v1` with `preserveUnknownFields: true`: set to false, and each
//!   version's schema gets `x-kubernetes-preserve-unknown-fields: true`.
//! * Mutating and validating webhook configurations `v1`: a webhook's `sideEffects` other than
//!   `None` or `NoneOnDryRun` becomes `None`.
//! * Pods: Velero's restore init-container hooks ([`super::init_hooks`]), from the Pod's
//!   annotations or the Restore's `spec.hooks`; an invalid one refuses the Pod.
//! * Then the restore's resource modifiers ([`super::modifiers`]), which see the item with its
//!   archived namespace and labels, as in Velero.
//! * Last, on namespaced objects, `metadata.namespace` set to the target namespace of the
//!   namespace the item was archived under, and the restore labels above added.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::images::ImageNames;
use super::init_hooks::InitHooks;
use super::modifiers::ResourceModifiers;
use crate::json::str_at;
use crate::label::valid_label_value;

/// Label naming the backup an object was restored from.
pub const BACKUP_NAME_LABEL: &str = "velero.io/backup-name";
/// Label naming the restore that created an object.
pub const RESTORE_NAME_LABEL: &str = "velero.io/restore-name";
/// hawser's label carrying the `metadata.uid` of the restore that created an object, so that
/// the same restore, run again after an interruption, knows its own objects.
pub const RESTORE_UID_LABEL: &str = "hawser.io/restore-uid";

/// Metadata fields a restore removes.
pub const REMOVED_METADATA: [&str; 9] = [
    "generateName",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
];

const BIND_ANNOTATIONS: [&str; 2] = [
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
];
/// The annotations Velero's restore action removes from a claim: the binding's, the
/// provisioner's (a new cluster provisions again), the node a `WaitForFirstConsumer` class
/// picked (the new cluster may have no such node: the claim would stay `Pending`), and the
/// names of the snapshot and data upload it was backed up through.
const CLAIM_ANNOTATIONS: [&str; 7] = [
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/selected-node",
    "velero.io/volume-snapshot-name",
    "velero.io/data-upload-name",
];
const MIRROR_POD: &str = "kubernetes.io/config.mirror";
const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// The label of the APIServices the API server registers for its own groups.
const AUTOMANAGED_APISERVICE: &str = "kube-aggregator.kubernetes.io/automanaged";
const CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

/// Why an archived object is not restored at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemSkip {
    /// A pod in phase `Succeeded` or `Failed`.
    FinishedPod,
    /// A mirror (static) pod.
    MirrorPod,
    /// A Job that has completed.
    CompletedJob,
    /// A token Secret the cluster generates for a service account.
    ServiceAccountToken,
    /// A PersistentVolume with reclaim policy `Delete` and no snapshot, or one whose claim is
    /// restored from a CSI snapshot: its claim gets a new volume from dynamic provisioning.
    DynamicallyReprovisioned,
    /// A VolumeSnapshotContent: the restore makes a new one for its VolumeSnapshot.
    SnapshotContent,
    /// An APIService the API server registers itself (labelled
    /// `kube-aggregator.kubernetes.io/automanaged`).
    AutomanagedApiService,
}

impl ItemSkip {
    /// Stable short name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FinishedPod => "finished_pod",
            Self::MirrorPod => "mirror_pod",
            Self::CompletedJob => "completed_job",
            Self::ServiceAccountToken => "service_account_token",
            Self::DynamicallyReprovisioned => "dynamically_reprovisioned",
            Self::SnapshotContent => "restored_through_its_snapshot",
            Self::AutomanagedApiService => "automanaged_apiservice",
        }
    }
}

/// What the cleaning step needs to know about the restore.
#[derive(Debug, Clone, Copy)]
pub struct CleanContext<'a> {
    /// The backup's name (value of [`BACKUP_NAME_LABEL`]).
    pub backup_name: &'a str,
    /// The restore's name (value of [`RESTORE_NAME_LABEL`]).
    pub restore_name: &'a str,
    /// The restore's `metadata.uid` (value of [`RESTORE_UID_LABEL`]; none when empty).
    pub restore_uid: &'a str,
    /// `spec.preserveNodePorts == true`.
    pub preserve_node_ports: bool,
    /// Source → target namespaces.
    pub namespace_mapping: &'a BTreeMap<String, String>,
    /// Names of the archived PersistentVolumes skipped as
    /// [`ItemSkip::DynamicallyReprovisioned`]: claims bound to them lose `spec.volumeName`.
    pub reprovisioned_pvs: &'a BTreeSet<String>,
    /// The archived CSI snapshots of claims: (source namespace, claim) → VolumeSnapshot name.
    pub snapshots: &'a BTreeMap<(String, String), String>,
    /// Velero's `change-storage-class` mapping (old class → new class), only the entries whose
    /// new class exists: claims, volumes and StatefulSet claim templates of an old class get
    /// the new one.
    pub storage_classes: &'a BTreeMap<String, String>,
    /// Velero's `change-image-name` rules (see [`super::images`]).
    pub image_names: &'a ImageNames,
    /// The restore's resource modifiers, applied after the cleaning of the item's type and
    /// before the restore labels and the target namespace are set.
    pub modifiers: Option<&'a ResourceModifiers>,
    /// The restore's init-container hooks, put into Pods ([`super::init_hooks`]).
    pub init_hooks: &'a InitHooks,
}

impl CleanContext<'_> {
    fn target<'b>(&'b self, source: &'b str) -> &'b str {
        self.namespace_mapping
            .get(source)
            .map_or(source, String::as_str)
    }
}

/// An object ready to create, and the archived status when status is to be restored.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    /// The object to create.
    pub object: Value,
    /// The archived `status`, present only when the caller asked for it and there was one.
    pub status: Option<Value>,
    /// The errors of resource-modifier rules that failed (the object is as they found it).
    pub modifier_errors: Vec<String>,
    /// Why the object must not be created (a restore init hook of a Pod that is not valid).
    pub refused: Option<String>,
}

/// Whether `obj` of type `group_resource` is skipped entirely, and why.
pub fn skip_reason(group_resource: &str, obj: &Value) -> Option<ItemSkip> {
    match group_resource {
        "pods" => {
            if matches!(str_at(obj, "/status/phase"), Some("Succeeded" | "Failed")) {
                Some(ItemSkip::FinishedPod)
            } else if obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(MIRROR_POD))
                .is_some()
            {
                Some(ItemSkip::MirrorPod)
            } else {
                None
            }
        }
        "jobs.batch" => obj
            .pointer("/status/completionTime")
            .is_some_and(|v| !v.is_null())
            .then_some(ItemSkip::CompletedJob),
        "secrets" if str_at(obj, "/type") == Some(SA_TOKEN_TYPE) => {
            let name = str_at(obj, "/metadata/name").unwrap_or("");
            let sa = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(SA_NAME_ANNOTATION))
                .and_then(Value::as_str)
                .unwrap_or("");
            (!sa.is_empty() && name.starts_with(&format!("{sa}-token-")))
                .then_some(ItemSkip::ServiceAccountToken)
        }
        "persistentvolumes" => (str_at(obj, "/spec/persistentVolumeReclaimPolicy")
            == Some("Delete"))
        .then_some(ItemSkip::DynamicallyReprovisioned),
        crate::csi::VOLUME_SNAPSHOT_CONTENTS => Some(ItemSkip::SnapshotContent),
        "apiservices.apiregistration.k8s.io" => obj
            .pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED_APISERVICE))
            .is_some()
            .then_some(ItemSkip::AutomanagedApiService),
        _ => None,
    }
}

/// Cleans `obj` of type `group_resource`, archived under `source_namespace` (`None` for a
/// cluster-scoped item), for creation (see the module docs). `with_status` asks for the
/// archived status to be handed back.
pub fn clean(
    group_resource: &str,
    mut obj: Value,
    source_namespace: Option<&str>,
    ctx: &CleanContext<'_>,
    with_status: bool,
) -> Cleaned {
    let status = obj.as_object_mut().and_then(|o| o.remove("status"));
    let status = status.filter(|s| with_status && !s.is_null());
    strip_metadata(&mut obj);
    clean_type(group_resource, &mut obj, source_namespace, ctx);
    let refused = match (group_resource, source_namespace) {
        ("pods", Some(ns)) => ctx.init_hooks.apply(&mut obj, ctx.target(ns)).err(),
        _ => None,
    };
    // As in Velero: the modifiers see the item with its archived namespace and labels.
    let modifier_errors = ctx
        .modifiers
        .map(|m| m.apply(&mut obj, group_resource))
        .unwrap_or_default();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        add_restore_labels(meta, ctx);
        match source_namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => {
                meta.insert("namespace".into(), Value::from(ctx.target(ns)));
            }
            None => {
                meta.remove("namespace");
            }
        }
    }
    Cleaned {
        object: obj,
        status,
        modifier_errors,
        refused,
    }
}

/// Velero's restore item actions for the item's type.
fn clean_type(
    group_resource: &str,
    obj: &mut Value,
    source_namespace: Option<&str>,
    ctx: &CleanContext<'_>,
) {
    ctx.image_names.apply(obj, group_resource);
    match group_resource {
        "services" => super::service::clean(obj, ctx.preserve_node_ports),
        "pods" => clean_pod(obj),
        "jobs.batch" => clean_job(obj),
        "persistentvolumeclaims" => {
            remove_annotations(obj, &CLAIM_ANNOTATIONS);
            map_storage_class(obj, "/spec/storageClassName", ctx);
            let snapshot = source_namespace.and_then(|ns| {
                let name = str_at(obj, "/metadata/name").unwrap_or_default();
                ctx.snapshots.get(&(ns.to_owned(), name.to_owned()))
            });
            let reprovisioned = str_at(obj, "/spec/volumeName")
                .is_some_and(|pv| ctx.reprovisioned_pvs.contains(pv));
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                if reprovisioned || snapshot.is_some() {
                    spec.remove("volumeName");
                }
                if let Some(snapshot) = snapshot {
                    let source = serde_json::json!({
                        "apiGroup": crate::csi::SNAPSHOT_GROUP,
                        "kind": "VolumeSnapshot",
                        "name": snapshot
                    });
                    spec.insert("dataSource".into(), source.clone());
                    spec.insert("dataSourceRef".into(), source);
                }
            }
        }
        crate::csi::VOLUME_SNAPSHOTS => {
            let target = source_namespace
                .map(|ns| ctx.target(ns))
                .unwrap_or_default();
            let name = str_at(obj, "/metadata/name").unwrap_or_default();
            let content = crate::csi::restored_content_name(ctx.restore_name, target, name);
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert(
                    "source".into(),
                    serde_json::json!({"volumeSnapshotContentName": content}),
                );
            }
        }
        "persistentvolumes" => {
            clean_pv(obj, ctx);
            map_storage_class(obj, "/spec/storageClassName", ctx);
        }
        "statefulsets.apps" => {
            let templates = obj
                .pointer("/spec/volumeClaimTemplates")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            for i in 0..templates {
                map_storage_class(
                    obj,
                    &format!("/spec/volumeClaimTemplates/{i}/spec/storageClassName"),
                    ctx,
                );
            }
        }
        "serviceaccounts" => clean_service_account(obj),
        "rolebindings.rbac.authorization.k8s.io"
        | "clusterrolebindings.rbac.authorization.k8s.io" => map_subjects(obj, ctx),
        "secrets" if str_at(obj, "/type") == Some(SA_TOKEN_TYPE) => {
            remove_annotations(obj, &[SA_UID_ANNOTATION]);
            if let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut) {
                data.remove("token");
                data.remove("ca.crt");
            }
        }
        "customresourcedefinitions.apiextensions.k8s.io" => super::extensions::clean_crd(obj),
        "mutatingwebhookconfigurations.admissionregistration.k8s.io"
        | "validatingwebhookconfigurations.admissionregistration.k8s.io" => {
            super::extensions::reset_side_effects(obj);
        }
        _ => {}
    }
}

/// The Namespace object a restore creates for target namespace `target`: labels, annotations
/// and spec of the archived Namespace object (when the archive has one), the restore labels,
/// and name `target`.
pub fn namespace_object(target: &str, archived: Option<&Value>, ctx: &CleanContext<'_>) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), Value::from(target));
    for key in ["labels", "annotations"] {
        if let Some(v) = archived
            .and_then(|a| a.pointer(&format!("/metadata/{key}")))
            .filter(|v| v.is_object())
        {
            meta.insert(key.into(), v.clone());
        }
    }
    add_restore_labels(&mut meta, ctx);
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        // The API server sets this label from the name; an archived value names the source.
        labels.remove("kubernetes.io/metadata.name");
    }
    let mut ns = Map::new();
    ns.insert("apiVersion".into(), Value::from("v1"));
    ns.insert("kind".into(), Value::from("Namespace"));
    ns.insert("metadata".into(), Value::Object(meta));
    if let Some(spec) = archived
        .and_then(|a| a.get("spec"))
        .filter(|v| v.is_object())
    {
        ns.insert("spec".into(), spec.clone());
    }
    Value::Object(ns)
}

/// Removes the metadata fields of [`REMOVED_METADATA`]; used on archived objects before create
/// and on live objects before comparison.
pub fn strip_metadata(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in REMOVED_METADATA {
            meta.remove(field);
        }
    }
}

/// The object under `key` of `map`, made an empty object first when absent or not an object.
fn object_entry<'m>(
    map: &'m mut Map<String, Value>,
    key: &str,
) -> Option<&'m mut Map<String, Value>> {
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.to_string(), Value::Object(Map::new()));
    }
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Sets the backup and restore labels in `meta`.
fn add_restore_labels(meta: &mut Map<String, Value>, ctx: &CleanContext<'_>) {
    if let Some(labels) = object_entry(meta, "labels") {
        labels.insert(
            BACKUP_NAME_LABEL.into(),
            Value::from(valid_label_value(ctx.backup_name)),
        );
        labels.insert(
            RESTORE_NAME_LABEL.into(),
            Value::from(valid_label_value(ctx.restore_name)),
        );
        if !ctx.restore_uid.is_empty() {
            labels.insert(
                RESTORE_UID_LABEL.into(),
                Value::from(valid_label_value(ctx.restore_uid)),
            );
        }
    }
}

fn remove_annotations(obj: &mut Value, keys: &[&str]) {
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        for k in keys {
            a.remove(*k);
        }
    }
}

fn is_legacy_token_volume(name: &str, service_account: &str) -> bool {
    name.starts_with(&format!("{service_account}-token-"))
}

fn clean_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.remove("nodeName");
    spec.remove("priority");
    let sa = spec
        .get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let is_token = |v: &Value| {
        v.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| is_legacy_token_volume(n, &sa))
    };
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.retain(|v| !is_token(v));
    }
    for key in ["containers", "initContainers"] {
        for container in spec
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(mounts) = container
                .get_mut("volumeMounts")
                .and_then(Value::as_array_mut)
            {
                mounts.retain(|m| !is_token(m));
            }
        }
    }
}

fn clean_job(obj: &mut Value) {
    for pointer in [
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
    ] {
        if let Some(labels) = obj.pointer_mut(pointer).and_then(Value::as_object_mut) {
            for l in CONTROLLER_UID_LABELS {
                labels.remove(l);
            }
        }
    }
}

fn clean_pv(obj: &mut Value, ctx: &CleanContext<'_>) {
    remove_annotations(obj, &BIND_ANNOTATIONS);
    if let Some(claim) = obj
        .pointer_mut("/spec/claimRef")
        .and_then(Value::as_object_mut)
    {
        claim.remove("uid");
        claim.remove("resourceVersion");
        if let Some(ns) = claim.get("namespace").and_then(Value::as_str) {
            let target = ctx.target(ns).to_string();
            claim.insert("namespace".into(), Value::from(target));
        }
    }
}

/// The storage class at `pointer`, replaced by its mapping when it has one.
fn map_storage_class(obj: &mut Value, pointer: &str, ctx: &CleanContext<'_>) {
    if let Some(class) = obj.pointer_mut(pointer)
        && let Some(new) = class.as_str().and_then(|c| ctx.storage_classes.get(c))
    {
        *class = Value::from(new.as_str());
    }
}

fn map_subjects(obj: &mut Value, ctx: &CleanContext<'_>) {
    for subject in obj
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(ns) = subject.get("namespace").and_then(Value::as_str)
            && let Some(target) = ctx.namespace_mapping.get(ns)
        {
            subject["namespace"] = Value::from(target.as_str());
        }
    }
}

fn clean_service_account(obj: &mut Value) {
    let name = str_at(obj, "/metadata/name").unwrap_or("").to_string();
    if let Some(secrets) = obj.get_mut("secrets").and_then(Value::as_array_mut) {
        secrets.retain(|s| {
            !s.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| is_legacy_token_volume(n, &name))
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "clean_tests.rs"]
mod tests;
