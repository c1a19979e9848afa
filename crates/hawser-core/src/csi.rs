//! CSI volume snapshots of a backup, the pure part: which VolumeSnapshotClass a claim's driver
//! gets, the VolumeSnapshot to create, what a snapshot's state says, and the item operations
//! file (`<backup>-itemoperations.json.gz`) in Velero's shape.
//!
//! The class, in Velero's order: the claim's annotation `velero.io/csi-volumesnapshot-class`;
//! the backup's annotation `velero.io/csi-volumesnapshot-class_<driver>`; the one class of the
//! driver labelled `velero.io/csi-volumesnapshot-class: "true"`. A named class must exist and
//! be of the driver.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::json::text;

/// The snapshot API group.
pub const SNAPSHOT_GROUP: &str = "snapshot.storage.k8s.io";
/// VolumeSnapshots' group resource.
pub const VOLUME_SNAPSHOTS: &str = "volumesnapshots.snapshot.storage.k8s.io";
/// VolumeSnapshotContents' group resource.
pub const VOLUME_SNAPSHOT_CONTENTS: &str = "volumesnapshotcontents.snapshot.storage.k8s.io";
/// VolumeSnapshotClasses' group resource.
pub const VOLUME_SNAPSHOT_CLASSES: &str = "volumesnapshotclasses.snapshot.storage.k8s.io";
/// Label of the default class of a driver; annotation of a claim naming its class.
pub const CLASS_LABEL: &str = "velero.io/csi-volumesnapshot-class";
/// Prefix of the backup annotation naming the class of a driver (the driver follows).
pub const BACKUP_CLASS_ANNOTATION_PREFIX: &str = "velero.io/csi-volumesnapshot-class_";
/// The item action Velero records for a CSI snapshot's operation.
pub const SNAPSHOT_ACTION: &str = "velero.io/csi-volumesnapshot-backupper";
/// Annotation of an archived VolumeSnapshot: its snapshot handle (what a restore needs).
pub const HANDLE_ANNOTATION: &str = "velero.io/csi-volumesnapshot-handle";
/// Annotation of an archived VolumeSnapshot: its driver.
pub const DRIVER_ANNOTATION: &str = "velero.io/csi-driver-name";
/// Annotation of an archived VolumeSnapshot: its content's restore size in bytes.
pub const RESTORE_SIZE_ANNOTATION: &str = "velero.io/csi-volumesnapshot-restore-size";
/// Annotation of an archived PersistentVolumeClaim: the name of its VolumeSnapshot (Velero's
/// restore provisions the claim from it).
pub const VOLUME_SNAPSHOT_NAME_ANNOTATION: &str = "velero.io/volume-snapshot-name";
/// Velero's default `spec.csiSnapshotTimeout`.
pub const DEFAULT_SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Velero's default `spec.itemOperationTimeout`.
pub const DEFAULT_OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4 * 3600);

/// The VolumeSnapshotClass for a claim of `driver` (see the module docs); the error says why
/// there is none.
pub fn choose_class(
    driver: &str,
    claim: &Value,
    backup_annotations: &BTreeMap<String, String>,
    classes: &[Value],
) -> Result<String, String> {
    let of_driver = |c: &&Value| text(c, "/driver") == driver;
    let named = |name: &str, source: &str| {
        classes
            .iter()
            .find(|c| text(c, "/metadata/name") == name)
            .ok_or_else(|| format!("VolumeSnapshotClass {name}, named by {source}, does not exist"))
            .and_then(|c| {
                if of_driver(&c) {
                    Ok(name.to_owned())
                } else {
                    Err(format!(
                        "VolumeSnapshotClass {name}, named by {source}, is of driver {}, not {driver}",
                        text(c, "/driver")
                    ))
                }
            })
    };
    let claim_choice = claim
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CLASS_LABEL))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    if let Some(name) = claim_choice {
        return named(name, &format!("the claim's annotation {CLASS_LABEL}"));
    }
    let backup_key = format!("{BACKUP_CLASS_ANNOTATION_PREFIX}{driver}");
    if let Some(name) = backup_annotations
        .get(&backup_key)
        .filter(|n| !n.is_empty())
    {
        return named(name, &format!("the backup's annotation {backup_key}"));
    }
    let labelled: Vec<&str> = classes
        .iter()
        .filter(of_driver)
        .filter(|c| {
            c.pointer("/metadata/labels")
                .and_then(|l| l.get(CLASS_LABEL))
                .and_then(Value::as_str)
                == Some("true")
        })
        .map(|c| text(c, "/metadata/name"))
        .collect();
    match labelled.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(format!(
            "no VolumeSnapshotClass of driver {driver} is labelled {CLASS_LABEL}: \"true\"; label one, or name one in the claim's annotation {CLASS_LABEL} or the backup's annotation {backup_key}"
        )),
        many => Err(format!(
            "{} VolumeSnapshotClasses of driver {driver} are labelled {CLASS_LABEL}: \"true\" ({}); label one only",
            many.len(),
            many.join(", ")
        )),
    }
}

/// The name of the VolumeSnapshot of `claim` for the backup with `backup_uid`: Velero's
/// `velero-<claim>-` prefix and five characters that depend on both, so that the same backup
/// taken up again finds its snapshot instead of making another.
#[must_use]
pub fn snapshot_name(claim: &str, backup_uid: &str) -> String {
    let digest = Sha256::new()
        .chain_update(backup_uid.as_bytes())
        .chain_update([0])
        .chain_update(claim.as_bytes())
        .finalize();
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = digest
        .iter()
        .take(5)
        .map(|b| char::from(alphabet[usize::from(*b) % alphabet.len()]))
        .collect();
    let prefix: String = format!("velero-{claim}").chars().take(246).collect();
    format!("{prefix}-{suffix}")
}

/// The labels a backup puts on the VolumeSnapshots it cuts and on their contents: its name (as
/// a valid label value) and its uid. Deleting the backup acts only on contents that carry its
/// uid.
#[must_use]
pub fn backup_labels(backup_name: &str, backup_uid: &str) -> Value {
    json!({
        "velero.io/backup-name": crate::label::valid_label_value(backup_name),
        BACKUP_UID_LABEL: backup_uid,
    })
}

/// Label of [`backup_labels`] holding the backup's uid.
pub const BACKUP_UID_LABEL: &str = "velero.io/backup-uid";

/// The backup uid `object` (a snapshot or a content) is labelled with ([`BACKUP_UID_LABEL`]).
#[must_use]
pub fn labelled_backup_uid(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(BACKUP_UID_LABEL))
        .and_then(Value::as_str)
}

/// Whether the archived `snapshot` of source namespace `namespace` is the backup's own, so that
/// a restore may bring its handle back: a [`BACKUP_UID_LABEL`] it carries is `backup_uid` (a
/// snapshot from Velero carries none), and the backup's volume info (`volume_info`, its
/// `-volumeinfo.json.gz`) records a CSI snapshot of the same claim with the same handle and
/// driver. The error says what does not match. Someone who can write the bucket can write all
/// of these; what keeps another backup's snapshot out is that its live content names another
/// uid ([`claimed_by_another`]).
pub fn own_snapshot(
    snapshot: &Value,
    namespace: &str,
    backup_uid: &str,
    volume_info: &[Value],
) -> Result<(), String> {
    if let Some(uid) = labelled_backup_uid(snapshot).filter(|uid| *uid != backup_uid) {
        return Err(format!(
            "the archived VolumeSnapshot is labelled {BACKUP_UID_LABEL}={uid:?}, not this backup's uid {backup_uid:?}"
        ));
    }
    let annotation = |key: &str| {
        snapshot
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (handle, driver) = (annotation(HANDLE_ANNOTATION), annotation(DRIVER_ANNOTATION));
    let claim = text(snapshot, "/spec/source/persistentVolumeClaimName");
    let recorded = volume_info.iter().any(|info| {
        let csi = info.get("csiSnapshotInfo").unwrap_or(&Value::Null);
        text(info, "/pvcNamespace") == namespace
            && text(info, "/pvcName") == claim
            && text(csi, "/snapshotHandle") == handle
            && text(csi, "/driver") == driver
    });
    if recorded {
        Ok(())
    } else {
        Err(format!(
            "the backup's volume info records no CSI snapshot of claim {namespace}/{claim} with handle {handle:?} and driver {driver:?}"
        ))
    }
}

/// The backup uid of a live VolumeSnapshotContent in `contents` that holds `handle` and is
/// labelled with a backup uid other than `backup_uid`: that snapshot is another backup's.
#[must_use]
pub fn claimed_by_another<'a>(
    contents: &'a [Value],
    handle: &str,
    backup_uid: &str,
) -> Option<&'a str> {
    contents.iter().find_map(|c| {
        let holds = text(c, "/status/snapshotHandle") == handle
            || text(c, "/spec/source/snapshotHandle") == handle;
        let uid = labelled_backup_uid(c)?;
        (holds && uid != backup_uid).then_some(uid)
    })
}

/// The VolumeSnapshot of claim `namespace/claim` for a backup, labelled with the backup's name
/// and uid.
#[must_use]
pub fn volume_snapshot(
    namespace: &str,
    claim: &str,
    class: &str,
    backup_name: &str,
    backup_uid: &str,
) -> Value {
    json!({
        "apiVersion": format!("{SNAPSHOT_GROUP}/v1"),
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": snapshot_name(claim, backup_uid),
            "namespace": namespace,
            "labels": backup_labels(backup_name, backup_uid)
        },
        "spec": {
            "volumeSnapshotClassName": class,
            "source": {"persistentVolumeClaimName": claim}
        }
    })
}

/// Adds to `snapshot` (the copy that goes into the archive) what a restore needs from its
/// `content`: the handle, the driver and the restore size, as annotations.
pub fn annotate_for_restore(snapshot: &mut Value, content: &Value) {
    set_annotation(
        snapshot,
        HANDLE_ANNOTATION,
        text(content, "/status/snapshotHandle"),
    );
    set_annotation(snapshot, DRIVER_ANNOTATION, text(content, "/spec/driver"));
    if let Some(size) = content
        .pointer("/status/restoreSize")
        .and_then(Value::as_i64)
    {
        set_annotation(snapshot, RESTORE_SIZE_ANNOTATION, &size.to_string());
    }
}

/// Sets the annotation `key` of `object` to `value`.
pub fn set_annotation(object: &mut Value, key: &str, value: &str) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(key.to_owned(), json!(value));
        }
    }
}

/// The name of the VolumeSnapshotContent a restore creates for the VolumeSnapshot
/// `namespace/snapshot`: `velero-<snapshot>-` and five characters that depend on the restore
/// and the namespace (contents are cluster-scoped).
#[must_use]
pub fn restored_content_name(restore: &str, namespace: &str, snapshot: &str) -> String {
    snapshot_name(snapshot, &format!("{restore}/{namespace}"))
}

/// The pre-provisioned VolumeSnapshotContent that brings back the archived `snapshot` as
/// `namespace/name`: its handle and driver from the annotations of [`annotate_for_restore`],
/// `deletionPolicy: Retain` (deleting what the restore made never deletes the backup's
/// snapshot). The error says what the archived snapshot lacks.
pub fn restored_content(
    snapshot: &Value,
    namespace: &str,
    name: &str,
    content_name: &str,
) -> Result<Value, String> {
    let annotation = |key: &str| {
        snapshot
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let handle = annotation(HANDLE_ANNOTATION).ok_or_else(|| {
        format!("the archived VolumeSnapshot has no {HANDLE_ANNOTATION} annotation")
    })?;
    let driver = annotation(DRIVER_ANNOTATION).ok_or_else(|| {
        format!("the archived VolumeSnapshot has no {DRIVER_ANNOTATION} annotation")
    })?;
    let mut spec = json!({
        "deletionPolicy": "Retain",
        "driver": driver,
        "source": {"snapshotHandle": handle},
        "volumeSnapshotRef": {
            "apiVersion": format!("{SNAPSHOT_GROUP}/v1"),
            "kind": "VolumeSnapshot",
            "namespace": namespace,
            "name": name
        }
    });
    let class = text(snapshot, "/spec/volumeSnapshotClassName");
    if !class.is_empty() {
        spec["volumeSnapshotClassName"] = json!(class);
    }
    Ok(json!({
        "apiVersion": format!("{SNAPSHOT_GROUP}/v1"),
        "kind": "VolumeSnapshotContent",
        "metadata": {"name": content_name},
        "spec": spec
    }))
}

/// Where one snapshot is, read from its VolumeSnapshot and (once bound) its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotState {
    /// Not bound to a content with a handle yet.
    Pending,
    /// Cut: the content has a snapshot handle; not yet ready to use.
    Cut {
        /// The content's name.
        content: String,
        /// The driver's handle.
        handle: String,
    },
    /// Ready to use.
    Ready {
        /// The content's name.
        content: String,
        /// The driver's handle.
        handle: String,
    },
    /// The snapshot or its content reports an error.
    Failed(String),
}

/// The state of `snapshot` given its bound `content`, if read.
#[must_use]
pub fn snapshot_state(snapshot: &Value, content: Option<&Value>) -> SnapshotState {
    let error = |v: &Value| {
        v.pointer("/status/error/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let Some(message) = error(snapshot).or_else(|| content.and_then(error)) {
        return SnapshotState::Failed(message);
    }
    let name = text(snapshot, "/status/boundVolumeSnapshotContentName");
    let Some(content) = content.filter(|c| !name.is_empty() && text(c, "/metadata/name") == name)
    else {
        return SnapshotState::Pending;
    };
    let handle = text(content, "/status/snapshotHandle");
    if handle.is_empty() {
        return SnapshotState::Pending;
    }
    let ready = |v: &Value| v.pointer("/status/readyToUse") == Some(&Value::Bool(true));
    if ready(snapshot) && ready(content) {
        SnapshotState::Ready {
            content: name.to_owned(),
            handle: handle.to_owned(),
        }
    } else {
        SnapshotState::Cut {
            content: name.to_owned(),
            handle: handle.to_owned(),
        }
    }
}

/// `velero.ResourceIdentifier`: a group resource, a namespace and a name, with Go's field names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceIdentifier {
    /// API group.
    #[serde(rename = "Group", default)]
    pub group: String,
    /// Plural resource.
    #[serde(rename = "Resource", default)]
    pub resource: String,
    /// Namespace, empty for cluster-scoped.
    #[serde(rename = "Namespace", default)]
    pub namespace: String,
    /// Name.
    #[serde(rename = "Name", default)]
    pub name: String,
}

/// What one operation is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationSpec {
    /// The backup's name.
    pub backup_name: String,
    /// The backup's uid.
    #[serde(rename = "backupUID")]
    pub backup_uid: String,
    /// The action that started it.
    pub backup_item_action: String,
    /// The item it is about (the VolumeSnapshot).
    pub resource_identifier: ResourceIdentifier,
    /// Its id.
    #[serde(rename = "operationID")]
    pub operation_id: String,
    /// Items backed up again once it is done (the content).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_operation_items: Vec<ResourceIdentifier>,
}

/// `New`, `InProgress`, `Completed`, `Failed` or `Canceled`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperationPhase {
    /// Not started.
    #[default]
    New,
    /// Started, not finished.
    InProgress,
    /// Finished well.
    Completed,
    /// Finished with an error (or timed out).
    Failed,
    /// Cancelled.
    Canceled,
}

impl OperationPhase {
    /// Velero's name of the phase.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "New",
            Self::InProgress => "InProgress",
            Self::Completed => "Completed",
            Self::Failed => "Failed",
            Self::Canceled => "Canceled",
        }
    }

    /// Whether the operation has ended.
    #[must_use]
    pub fn is_done(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }
}

/// How one operation stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatus {
    /// Its phase (`New` when a file leaves it out, as Go's `omitempty` may).
    #[serde(default)]
    pub phase: OperationPhase,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Units done.
    #[serde(rename = "nCompleted", default, skip_serializing_if = "is_zero")]
    pub n_completed: i64,
    /// Units in all.
    #[serde(rename = "nTotal", default, skip_serializing_if = "is_zero")]
    pub n_total: i64,
    /// What a unit is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation_units: String,
    /// A line for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// When it was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// When it last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One entry of `<backup>-itemoperations.json.gz`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupOperation {
    /// What it is for.
    pub spec: OperationSpec,
    /// How it stands.
    pub status: OperationStatus,
}

impl BackupOperation {
    /// The operation of the VolumeSnapshot `namespace/name`, cut at `now` (RFC 3339), bound to
    /// `content`.
    #[must_use]
    pub fn snapshot(
        backup_name: &str,
        backup_uid: &str,
        namespace: &str,
        name: &str,
        content: &str,
        now: &str,
    ) -> Self {
        Self {
            spec: OperationSpec {
                backup_name: backup_name.to_owned(),
                backup_uid: backup_uid.to_owned(),
                backup_item_action: SNAPSHOT_ACTION.to_owned(),
                resource_identifier: ResourceIdentifier {
                    group: SNAPSHOT_GROUP.to_owned(),
                    resource: "volumesnapshots".to_owned(),
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                },
                operation_id: format!("{namespace}/{name}"),
                post_operation_items: vec![ResourceIdentifier {
                    group: SNAPSHOT_GROUP.to_owned(),
                    resource: "volumesnapshotcontents".to_owned(),
                    namespace: String::new(),
                    name: content.to_owned(),
                }],
            },
            status: OperationStatus {
                phase: OperationPhase::InProgress,
                n_total: 1,
                operation_units: "snapshot".to_owned(),
                description: format!(
                    "waiting for VolumeSnapshot {namespace}/{name} to be ready to use"
                ),
                created: Some(now.to_owned()),
                started: Some(now.to_owned()),
                updated: Some(now.to_owned()),
                ..OperationStatus::default()
            },
        }
    }

    /// `ns/name` of the VolumeSnapshot.
    #[must_use]
    pub fn snapshot_full_name(&self) -> String {
        let r = &self.spec.resource_identifier;
        format!("{}/{}", r.namespace, r.name)
    }

    /// Ends the operation at `now` (RFC 3339): `Completed`, or `Failed` with `error`.
    pub fn finish(&mut self, error: Option<String>, now: &str) {
        self.status.updated = Some(now.to_owned());
        match error {
            None => {
                self.status.phase = OperationPhase::Completed;
                self.status.n_completed = self.status.n_total;
                self.status.description = format!(
                    "VolumeSnapshot {} is ready to use",
                    self.snapshot_full_name()
                );
            }
            Some(error) => {
                self.status.phase = OperationPhase::Failed;
                self.status.error = error;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "csi_tests.rs"]
mod tests;
