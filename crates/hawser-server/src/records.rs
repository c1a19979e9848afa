//! The storage-location [`RecordSource`] recovery reads: a Backup's `velero-backup.json` (its
//! commit marker, carrying the final status) and a Restore's status record
//! (`restores/<name>/restore-<name>-status.json`).
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
//! - a record whose `metadata.uid` differs from the object's belongs to an earlier object of the
//!   same name: not this object's record.

use bytes::Bytes;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::context::backup_location_name;
use crate::locations::Locations;
use crate::status::{Kind, ObjectKey, RecordError, RecordSource, RecordedOutcome};

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
        let Some(object) = self.object(kind, namespace, name).await? else {
            return Ok(None);
        };
        let bytes = match kind {
            Kind::Backup => {
                self.backup_record(namespace, &object, name, (kind, name))
                    .await?
            }
            Kind::Restore => {
                let Some(backup_name) = object
                    .pointer("/spec/backupName")
                    .and_then(Value::as_str)
                    .filter(|b| !b.is_empty())
                else {
                    return Ok(None);
                };
                let Some(backup) = self.object(Kind::Backup, namespace, backup_name).await? else {
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
        };
        Ok(bytes.and_then(|b| outcome_of(&object, &b, kind, name)))
    }
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
    if let (Some(a), Some(b)) = (uid(object), uid(&record))
        && a != b
    {
        tracing::info!(%kind, name, "the stored record belongs to an earlier object of this name");
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
    fn garbage_and_phaseless_records_are_no_record() {
        let object = json!({"metadata": {}});
        assert_eq!(outcome_of(&object, b"{not json", Kind::Restore, "r"), None);
        let record = json!({"status": {"errors": 1}});
        assert_eq!(
            outcome_of(&object, record.to_string().as_bytes(), Kind::Restore, "r"),
            None
        );
    }
}
