//! Chainable builders for tests (compiled for this crate's tests and with the `testing` feature).
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use hawser_api::testing::WithMeta;
//! use hawser_api::{Backup, BackupPhase, PhasedResource};
//! let backup = Backup::named("b1").in_phase(BackupPhase::InProgress).owned_by("instance-1");
//! assert_eq!(backup.phase(), BackupPhase::InProgress);
//! assert_eq!(backup.owner(), Some("instance-1"));
//! # }
//! ```
//!
//! Every object is created in the namespace [`NAMESPACE`] (`velero`, Velero's default server
//! namespace) unless [`WithMeta::in_namespace`] says otherwise.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels::{HAWSER_OWNER, STORAGE_LOCATION};
use crate::{
    Backup, BackupPhase, BackupStatus, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, BackupStorageLocationStatus, DeleteBackupRequest,
    DeleteBackupRequestSpec, ObjectStorageLocation, Restore, RestorePhase, RestoreSpec,
    RestoreStatus, Schedule, ScheduleSpec,
};

/// Namespace of built objects.
pub const NAMESPACE: &str = "velero";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(NAMESPACE.to_owned()),
        ..ObjectMeta::default()
    }
}

/// Builders on `metadata`, for every object.
pub trait WithMeta: kube::Resource + Sized {
    /// Sets the namespace.
    #[must_use]
    fn in_namespace(mut self, namespace: &str) -> Self {
        self.meta_mut().namespace = Some(namespace.to_owned());
        self
    }

    /// Adds a label.
    #[must_use]
    fn with_label(mut self, key: &str, value: &str) -> Self {
        self.meta_mut()
            .labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds an annotation.
    #[must_use]
    fn with_annotation(mut self, key: &str, value: &str) -> Self {
        self.meta_mut()
            .annotations
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets the UID.
    #[must_use]
    fn with_uid(mut self, uid: &str) -> Self {
        self.meta_mut().uid = Some(uid.to_owned());
        self
    }

    /// Sets the resourceVersion.
    #[must_use]
    fn with_resource_version(mut self, version: &str) -> Self {
        self.meta_mut().resource_version = Some(version.to_owned());
        self
    }

    /// Sets the [`HAWSER_OWNER`] annotation to a server instance id.
    #[must_use]
    fn owned_by(self, instance: &str) -> Self {
        self.with_annotation(HAWSER_OWNER, instance)
    }
}

impl<K: kube::Resource + Sized> WithMeta for K {}

impl Backup {
    /// A Backup of everything, in [`NAMESPACE`], without status.
    pub fn named(name: &str) -> Self {
        Self {
            metadata: meta(name),
            ..Self::default()
        }
    }

    /// Sets `status.phase`.
    #[must_use]
    pub fn in_phase(mut self, phase: BackupPhase) -> Self {
        self.status.get_or_insert_with(BackupStatus::default).phase = phase;
        self
    }

    /// Sets `spec.storageLocation` and the `velero.io/storage-location` label.
    #[must_use]
    pub fn in_location(mut self, location: &str) -> Self {
        self.spec.storage_location = Some(location.to_owned());
        self.with_label(STORAGE_LOCATION, location)
    }

    /// Sets `spec.includedNamespaces`.
    #[must_use]
    pub fn including_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.spec.included_namespaces =
            Some(namespaces.iter().map(|ns| (*ns).to_owned()).collect());
        self
    }

    /// Replaces the whole status.
    #[must_use]
    pub fn with_status(mut self, status: BackupStatus) -> Self {
        self.status = Some(status);
        self
    }
}

impl Restore {
    /// A Restore with an empty spec, in [`NAMESPACE`], without status.
    pub fn named(name: &str) -> Self {
        Self {
            metadata: meta(name),
            ..Self::default()
        }
    }

    /// Sets `spec.backupName`.
    #[must_use]
    pub fn from_backup(mut self, backup: &str) -> Self {
        self.spec = RestoreSpec {
            backup_name: Some(backup.to_owned()),
            ..self.spec
        };
        self
    }

    /// Sets `status.phase`.
    #[must_use]
    pub fn in_phase(mut self, phase: RestorePhase) -> Self {
        self.status.get_or_insert_with(RestoreStatus::default).phase = phase;
        self
    }

    /// Replaces the whole status.
    #[must_use]
    pub fn with_status(mut self, status: RestoreStatus) -> Self {
        self.status = Some(status);
        self
    }
}

impl BackupStorageLocation {
    /// A `filesystem` location with bucket `backups`, in [`NAMESPACE`], not yet validated.
    pub fn named(name: &str) -> Self {
        Self {
            metadata: meta(name),
            spec: BackupStorageLocationSpec {
                provider: "filesystem".to_owned(),
                object_storage: ObjectStorageLocation {
                    bucket: "backups".to_owned(),
                    ..ObjectStorageLocation::default()
                },
                ..BackupStorageLocationSpec::default()
            },
            status: None,
        }
    }

    /// Sets the provider and bucket.
    #[must_use]
    pub fn with_bucket(mut self, provider: &str, bucket: &str) -> Self {
        self.spec.provider = provider.to_owned();
        self.spec.object_storage.bucket = bucket.to_owned();
        self
    }

    /// Sets `spec.default`.
    #[must_use]
    pub fn as_default(mut self) -> Self {
        self.spec.default = true;
        self
    }

    /// Sets `status.phase`.
    #[must_use]
    pub fn in_phase(mut self, phase: BackupStorageLocationPhase) -> Self {
        self.status
            .get_or_insert_with(BackupStorageLocationStatus::default)
            .phase = Some(phase);
        self
    }
}

impl Schedule {
    /// A Schedule running daily (`@daily`) with an empty Backup template, in [`NAMESPACE`].
    pub fn named(name: &str) -> Self {
        Self {
            metadata: meta(name),
            spec: ScheduleSpec {
                schedule: "@daily".to_owned(),
                ..ScheduleSpec::default()
            },
            status: None,
        }
    }
}

impl DeleteBackupRequest {
    /// A request to delete `backup`, in [`NAMESPACE`].
    pub fn for_backup(name: &str, backup: &str) -> Self {
        Self {
            metadata: meta(name),
            spec: DeleteBackupRequestSpec {
                backup_name: backup.to_owned(),
            },
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{DeleteBackupRequestPhase, PhasedResource};

    #[test]
    fn builders_set_what_they_say() {
        let backup = Backup::named("b1")
            .in_phase(BackupPhase::InProgress)
            .in_location("primary")
            .owned_by("instance-1")
            .with_uid("u1")
            .including_namespaces(&["app"]);
        assert_eq!(backup.metadata.name.as_deref(), Some("b1"));
        assert_eq!(backup.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(backup.phase(), BackupPhase::InProgress);
        assert_eq!(backup.owner(), Some("instance-1"));
        assert_eq!(backup.spec.storage_location.as_deref(), Some("primary"));
        assert_eq!(
            backup.metadata.labels.as_ref().unwrap()[STORAGE_LOCATION],
            "primary"
        );
        assert_eq!(
            backup.spec.included_namespaces,
            Some(vec!["app".to_owned()])
        );

        let restore = Restore::named("r1")
            .from_backup("b1")
            .in_phase(RestorePhase::Finalizing);
        assert_eq!(restore.spec.backup_name.as_deref(), Some("b1"));
        assert_eq!(restore.phase(), RestorePhase::Finalizing);

        let bsl = BackupStorageLocation::named("default")
            .with_bucket("aws", "velero")
            .as_default()
            .in_phase(BackupStorageLocationPhase::Available);
        assert!(bsl.is_available() && bsl.spec.default);
        assert_eq!(bsl.spec.object_storage.bucket, "velero");

        let dbr = DeleteBackupRequest::for_backup("d1", "b1");
        assert_eq!(dbr.spec.backup_name, "b1");
        assert_eq!(
            dbr.status.map(|s| s.phase).unwrap_or_default(),
            DeleteBackupRequestPhase::New
        );
        assert_eq!(
            Schedule::named("s")
                .in_namespace("other")
                .metadata
                .namespace
                .as_deref(),
            Some("other")
        );
    }

    #[test]
    fn built_objects_serialize_as_velero_objects() {
        let json = serde_json::to_value(Backup::named("b1").in_phase(BackupPhase::Queued)).unwrap();
        assert_eq!(json["apiVersion"], "velero.io/v1");
        assert_eq!(json["kind"], "Backup");
        assert_eq!(json["status"]["phase"], "Queued");
        assert_eq!(json["spec"], serde_json::json!({}));
    }
}
