//! The storage-location [`RecordSource`] recovery reads: a Backup's `velero-backup.json` (its
//! commit marker, carrying the final status) and a Restore's status record
//! (`restores/<name>/restore-<name>-status.json`).
//!
//! A restore from a `ReadOnly` location cannot store its record there. Its record is kept in
//! the cluster instead: the ConfigMap `hawser-restore-<uid>` in the server namespace (data key
//! `restore-<name>-status.json`, the same JSON), owned by the Restore so that it goes when the
//! Restore is deleted. Recovery reads that ConfigMap first, by the Restore's uid.
//!
//! Which answers mean what:
//! - the location answers and has no record of this object: no record (`Ok(None)`), so recovery
//!   marks the object `Failed` with the restart reason;
//! - the object itself is gone: no record (its status cannot be written anyway);
//! - anything that keeps the location from being read — the API or the store cannot answer, the
//!   BackupStorageLocation, its credential Secret or the restore's Backup is missing, the
//!   location's spec cannot describe a store — is an error: recovery leaves the object as it is
//!   and tries again, because the record may well be there once the location can be read (a
//!   backup whose artifacts were written must never be reported `Failed` for that). Which
//!   location is read does not depend on flags: the claim wrote the resolved
//!   `spec.storageLocation` into the Backup;
//! - a record whose `metadata.uid` is not the object's (or that has none) belongs to another
//!   object of the same name: not this object's record. Except for a Backup that backup sync
//!   created from the record (in another cluster the backup had another uid): the sync names
//!   the record's uid in the annotation `hawser.io/record-uid`, and that uid counts too.

use std::collections::BTreeMap;

use bytes::Bytes;
use hawser_api::labels::HAWSER_RECORD_UID;
use hawser_status::{Kind, ObjectKey, RecordError, RecordSource, RecordedOutcome};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::Value;

use crate::context::backup_location_name;
use crate::locations::Locations;

/// Records in the storage locations of the server namespace.
#[derive(Clone)]
pub struct StorageRecords {
    client: kube::Client,
    locations: Locations,
    default_location: String,
}

impl StorageRecords {
    /// Records reached through `locations`; backups without `spec.storageLocation` use
    /// `default_location`.
    #[must_use]
    pub fn new(client: kube::Client, locations: Locations, default_location: String) -> Self {
        Self {
            client,
            locations,
            default_location,
        }
    }

    /// The recorded outcome of `object` (a Backup or Restore as JSON, as just read): what
    /// [`RecordSource::outcome`] answers, without reading the object again.
    ///
    /// # Errors
    /// [`RecordError`] when the record cannot be read (see the module docs).
    pub async fn outcome_of_object(
        &self,
        kind: Kind,
        object: &Value,
    ) -> Result<Option<RecordedOutcome>, RecordError> {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
        let bytes = match kind {
            Kind::Backup => {
                self.backup_record(namespace, object, name, (kind, name))
                    .await?
            }
            Kind::Restore => {
                let uid = text("/metadata/uid");
                let in_cluster = cluster_record(&self.client, namespace, uid, name)
                    .await
                    .map_err(|e| record_error(kind, namespace, name, e))?;
                if in_cluster.is_some() {
                    in_cluster
                } else {
                    let backup_name = text("/spec/backupName");
                    if backup_name.is_empty() {
                        return Ok(None);
                    }
                    let Some(backup) = self.object(Kind::Backup, namespace, backup_name).await?
                    else {
                        return Err(record_error(
                            kind,
                            namespace,
                            name,
                            MissingBackup(backup_name.to_owned()),
                        ));
                    };
                    self.backup_record(namespace, &backup, backup_name, (kind, name))
                        .await?
                }
            }
        };
        Ok(bytes.and_then(|b| outcome_of(object, &b, kind, name)))
    }

    async fn object(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, RecordError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &kind.api_resource());
        let obj = api
            .get_opt(name)
            .await
            .map_err(|e| record_error(kind, namespace, name, e))?;
        Ok(obj.and_then(|o| serde_json::to_value(o).ok()))
    }

    async fn backup_record(
        &self,
        namespace: &str,
        backup: &Value,
        name: &str,
        key: (Kind, &str),
    ) -> Result<Option<Bytes>, RecordError> {
        let location_name = backup_location_name(backup, &self.default_location);
        let location = self
            .locations
            .open_named(&location_name)
            .await
            .map_err(|e| record_error(key.0, namespace, key.1, e))?;
        let read = match key.0 {
            Kind::Backup => location.backup_metadata(name).await,
            Kind::Restore => location.restore_record(key.1).await,
        };
        read.map_err(|e| record_error(key.0, namespace, key.1, e))
    }
}

/// The Backup a Restore restores from does not exist (its record is in that backup's location).
#[derive(Debug, thiserror::Error)]
#[error("the restore's Backup {0} does not exist, so its storage location is unknown")]
struct MissingBackup(String);

fn record_error(
    kind: Kind,
    namespace: &str,
    name: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> RecordError {
    RecordError {
        key: ObjectKey::new(kind, namespace, name),
        source: Box::new(e),
    }
}

impl RecordSource for StorageRecords {
    async fn outcome(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<RecordedOutcome>, RecordError> {
        match self.object(kind, namespace, name).await? {
            Some(object) => self.outcome_of_object(kind, &object).await,
            None => Ok(None),
        }
    }
}

/// The name of the ConfigMap holding the record of the Restore with `uid`.
fn cluster_record_name(uid: &str) -> String {
    format!("hawser-restore-{uid}")
}

/// The data key of a restore record in its ConfigMap (the file name it has in a location).
fn cluster_record_key(name: &str) -> String {
    format!("restore-{name}-status.json")
}

/// The record of the Restore `name` with `uid` kept in the cluster, when there is one.
async fn cluster_record(
    client: &kube::Client,
    namespace: &str,
    uid: &str,
    name: &str,
) -> Result<Option<Bytes>, kube::Error> {
    if uid.is_empty() {
        return Ok(None);
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .get_opt(&cluster_record_name(uid))
        .await?
        .and_then(|cm| cm.data?.remove(&cluster_record_key(name)))
        .map(Bytes::from))
}

/// Keeps the record `bytes` of the Restore `restore` (as JSON) in the cluster (see the module
/// docs); an existing record of the same Restore is replaced. Retried as the server's object
/// calls are ([`crate::objects::retried`]).
pub(crate) async fn store_cluster_record(
    ctx: &crate::context::Context,
    restore: &Value,
    bytes: Bytes,
) -> Result<(), String> {
    let text = |p: &str| restore.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (namespace, name, uid) = (
        text("/metadata/namespace"),
        text("/metadata/name"),
        text("/metadata/uid"),
    );
    let json = String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?;
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(cluster_record_name(uid)),
            namespace: Some(namespace.to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: "velero.io/v1".to_owned(),
                kind: "Restore".to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(cluster_record_key(name), json)])),
        ..ConfigMap::default()
    };
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let params = PostParams::default();
    let written = match crate::objects::retried(ctx, || api.create(&params, &config_map)).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let record_name = cluster_record_name(uid);
            crate::objects::retried(ctx, || api.replace(&record_name, &params, &config_map)).await
        }
        other => other,
    };
    written
        .map(drop)
        .map_err(|e| format!("ConfigMap {namespace}/{}: {e}", cluster_record_name(uid)))
}

/// Deletes the record of the Restore with `uid` kept in the cluster, if there is one.
pub(crate) async fn remove_cluster_record(
    client: &kube::Client,
    namespace: &str,
    uid: &str,
) -> Result<(), kube::Error> {
    if uid.is_empty() {
        return Ok(());
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api
        .delete(
            &cluster_record_name(uid),
            &kube::api::DeleteParams::default(),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The record of the Restore `restore` (as JSON) kept in the cluster, for reading back.
pub(crate) async fn read_cluster_record(
    client: &kube::Client,
    restore: &Value,
) -> Result<Option<Bytes>, String> {
    let text = |p: &str| restore.pointer(p).and_then(Value::as_str).unwrap_or("");
    cluster_record(
        client,
        text("/metadata/namespace"),
        text("/metadata/uid"),
        text("/metadata/name"),
    )
    .await
    .map_err(|e| e.to_string())
}

/// The recorded outcome in `bytes`, when it is a record of `object`.
fn outcome_of(object: &Value, bytes: &[u8], kind: Kind, name: &str) -> Option<RecordedOutcome> {
    let record: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(%kind, name, error = %e, "the stored record is not valid JSON; ignoring it");
            return None;
        }
    };
    let uid = |v: &Value| {
        v.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    // A Backup that backup sync created from this record has a uid of its own; the sync wrote
    // the record's uid into an annotation, so the record still counts as the object's own (a
    // client removing such a backup's status gets it back from the record, as for any other).
    let synced_from = (kind == Kind::Backup)
        .then(|| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(HAWSER_RECORD_UID))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .flatten();
    let record_uid = uid(&record);
    let ours = record_uid.is_some() && (record_uid == uid(object) || record_uid == synced_from);
    if !ours {
        tracing::info!(%kind, name, "the stored record belongs to another object of this name");
        return None;
    }
    let mut status = record.get("status")?.as_object()?.clone();
    let phase = status.remove("phase")?.as_str()?.to_owned();
    Some(RecordedOutcome { phase, status })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_record_gives_its_phase_and_other_status_fields() {
        let object = json!({"metadata": {"uid": "u1"}});
        let record =
            json!({"metadata": {"uid": "u1"}, "status": {"phase": "Completed", "errors": 0}});
        let out = outcome_of(&object, record.to_string().as_bytes(), Kind::Backup, "b").unwrap();
        assert_eq!(out.phase, "Completed");
        assert_eq!(out.status.get("errors"), Some(&json!(0)));
        assert!(!out.status.contains_key("phase"));
    }

    #[test]
    fn a_record_of_an_earlier_object_of_the_same_name_is_not_used() {
        let object = json!({"metadata": {"uid": "new"}});
        let record = json!({"metadata": {"uid": "old"}, "status": {"phase": "Completed"}});
        assert_eq!(
            outcome_of(&object, record.to_string().as_bytes(), Kind::Backup, "b"),
            None
        );
    }

    #[test]
    fn a_synced_backup_owns_the_record_it_was_created_from() {
        let synced = json!({"metadata": {"uid": "here",
            "annotations": {HAWSER_RECORD_UID: "there"}}});
        let record = json!({"metadata": {"uid": "there"}, "status": {"phase": "Completed"}});
        let bytes = record.to_string();
        let out = outcome_of(&synced, bytes.as_bytes(), Kind::Backup, "b").unwrap();
        assert_eq!(out.phase, "Completed");
        // Only backups are synced; a Restore with such an annotation gains nothing.
        assert_eq!(
            outcome_of(&synced, bytes.as_bytes(), Kind::Restore, "r"),
            None
        );
        let other = json!({"metadata": {"uid": "else"}, "status": {"phase": "Completed"}});
        assert_eq!(
            outcome_of(&synced, other.to_string().as_bytes(), Kind::Backup, "b"),
            None
        );
    }

    #[test]
    fn garbage_uidless_and_phaseless_records_are_no_record() {
        let object = json!({"metadata": {"uid": "u1"}});
        let record = json!({"metadata": {}, "status": {"phase": "Completed"}});
        assert_eq!(
            outcome_of(&object, record.to_string().as_bytes(), Kind::Backup, "b"),
            None
        );
        assert_eq!(outcome_of(&object, b"{not json", Kind::Restore, "r"), None);
        let record = json!({"metadata": {"uid": "u1"}, "status": {"errors": 1}});
        assert_eq!(
            outcome_of(&object, record.to_string().as_bytes(), Kind::Restore, "r"),
            None
        );
    }
}
