//! Well-known label and annotation keys (velero-compat §1.0) and hawser's own keys.
//!
//! Values used by Velero are kept verbatim so that objects written by either server are read by
//! the other.

/// Label on DeleteBackupRequests, pod volume backups and restored objects: the backup's name
/// (names longer than 63 characters are shortened as Velero's `GetValidName` does).
pub const BACKUP_NAME: &str = "velero.io/backup-name";
/// Label on DeleteBackupRequests, pod volume backups and data uploads: the backup's UID.
pub const BACKUP_UID: &str = "velero.io/backup-uid";
/// Label on restored objects and restore helpers: the restore's name.
pub const RESTORE_NAME: &str = "velero.io/restore-name";
/// Label on restored objects and restore helpers: the restore's UID.
pub const RESTORE_UID: &str = "velero.io/restore-uid";
/// Label on Backups created by a Schedule: the schedule's name.
pub const SCHEDULE_NAME: &str = "velero.io/schedule-name";
/// Label set on every Backup by the server: the name of its BackupStorageLocation.
pub const STORAGE_LOCATION: &str = "velero.io/storage-location";
/// Label that excludes an item or a namespace from backups when set to `"true"`.
pub const EXCLUDE_FROM_BACKUP: &str = "velero.io/exclude-from-backup";
/// Label set by garbage collection when it cannot delete an expired backup.
pub const GC_FAILURE: &str = "velero.io/gc-failure";

/// Values of [`GC_FAILURE`].
pub mod gc_failure {
    /// The backup's storage location does not exist.
    pub const BSL_NOT_FOUND: &str = "BSLNotFound";
    /// The backup's storage location could not be read.
    pub const BSL_CANNOT_GET: &str = "BSLCannotGet";
    /// The backup's storage location is read-only.
    pub const BSL_READ_ONLY: &str = "BSLReadOnly";
}

/// Annotation written on a Backup at start: the source cluster's `gitVersion`.
pub const SOURCE_CLUSTER_K8S_GIT_VERSION: &str = "velero.io/source-cluster-k8s-gitversion";
/// Annotation written on a Backup at start: the source cluster's major version.
pub const SOURCE_CLUSTER_K8S_MAJOR_VERSION: &str = "velero.io/source-cluster-k8s-major-version";
/// Annotation written on a Backup at start: the source cluster's minor version.
pub const SOURCE_CLUSTER_K8S_MINOR_VERSION: &str = "velero.io/source-cluster-k8s-minor-version";
/// Annotation overriding the file-system backup timeout of one Backup or Restore.
pub const POD_VOLUME_TIMEOUT: &str = "velero.io/pod-volume-timeout";
/// Annotation (`"true"`/`"false"`) overriding `spec.restoreStatus` for one object.
pub const RESTORE_STATUS: &str = "velero.io/restore-status";
/// Annotation marking plugin-returned items that skip the exclusion checks.
pub const MUST_INCLUDE_ADDITIONAL_ITEMS: &str = "backup.velero.io/must-include-additional-items";
/// Annotation used internally by backup item actions to drop an item.
pub const SKIP_FROM_BACKUP: &str = "velero.io/skip-from-backup";

/// Finalizer added to every Restore; it removes the restore's files from object storage.
pub const RESTORE_EXTERNAL_RESOURCES_FINALIZER: &str =
    "restores.velero.io/external-resources-finalizer";

/// The prefix of hawser's own labels and annotations. Backup sync drops every one a record in
/// a bucket carries: they are the server's marks, not the bucket's.
pub const HAWSER_PREFIX: &str = "hawser.io/";

/// hawser's annotation on a Backup or Restore: the id of the server instance working on it,
/// written in the same patch that sets `InProgress`.
pub const HAWSER_OWNER: &str = "hawser.io/owner";

/// hawser's annotation on a Backup that backup sync created from a location's
/// `velero-backup.json`: the `metadata.uid` that record carries. The object created here has a
/// uid of its own, so without this the server could not tell that the record is this object's.
pub const HAWSER_RECORD_UID: &str = "hawser.io/record-uid";

/// hawser's annotation on a Backup or Restore whose work was interrupted (its server stopped
/// while it was `InProgress`, with no record) and taken up again: the number of the attempt
/// now running, from 2. Absent on work that ran once.
pub const HAWSER_ATTEMPT: &str = "hawser.io/attempt";

/// hawser's annotation beside [`HAWSER_ATTEMPT`]: why each earlier attempt ended, as a JSON
/// array of strings, oldest first.
pub const HAWSER_INTERRUPTED_ATTEMPTS: &str = "hawser.io/interrupted-attempts";

/// The finalizer Velero's server puts on the Restores it processes, so that deleting a Restore
/// first deletes its files in the storage location.
pub const RESTORE_FILES_FINALIZER: &str = "restores.velero.io/external-resources-finalizer";
