//! The asynchronous end of a backup with item operations (CSI snapshots cut while it was
//! `InProgress`): `WaitingForPluginOperations` until every operation has ended, then
//! `Finalizing`, then `Completed` or `PartiallyFailed`. The caller writes those phases; this
//! module does the work of each, from what is stored, so that a backup taken up again after a
//! restart goes on where it was.
//!
//! * [`SnapshotOperations::poll`]: one round over the unfinished operations. A snapshot ready
//!   to use completes its operation; one that reports an error, or whose VolumeSnapshot is
//!   gone, fails it; one still not ready when `spec.itemOperationTimeout` (default 4h) has passed
//!   since the operation was created fails it with the timeout named. A snapshot that cannot be
//!   read (the API unreachable past the read budget) stays as it was until the next round.
//! * [`store`] / [`load`]: `<backup>-itemoperations.json.gz`, stored after every round that
//!   changed something.
//! * [`SnapshotOperations::finalize`]: reads each snapshot once more and writes its result
//!   into its entry of `<backup>-volumeinfo.json.gz` (stored when the backup left
//!   `InProgress`; made again from the operations when it does not decode), deletes the
//!   VolumeSnapshot objects (their contents, set to
//!   `Retain` when cut, keep the snapshots, as in Velero), adds one error per failed operation to
//!   the results file and the log (once, should finalizing run again), and returns the final
//!   phase. The archive keeps the VolumeSnapshots and contents as they were when cut (with their
//!   snapshot handles); it is not rewritten with their ready state.

use std::io::Cursor;
use std::time::Duration;

use hawser_api::labels::BACKUP_UID;
use hawser_api::phase::BackupPhase;
use hawser_api::{Backup, BackupStatus, count};
use hawser_core::archive::gzjson::{Results, Scope, gunzip_limited, read_gz_json};
use hawser_core::csi::{
    BackupOperation, DEFAULT_OPERATION_TIMEOUT, OperationPhase, SnapshotState, snapshot_state,
};
use hawser_core::layout::Layout;
use hawser_core::restore::volume_data::VolumeSideFiles;
use hawser_core::selection::ApiResource;
use hawser_store::Location;
use serde_json::{Value, json};

use super::error::BackupError;
use super::results::BackupLog;
use super::snapshots::read_snapshot;
use super::volume_info;
use crate::cluster::path::Collection;
use crate::cluster::request;

/// Largest operations, results or log file read back (64 MiB).
const READ_LIMIT: u64 = 64 << 20;

/// Whether every operation has ended.
#[must_use]
pub fn all_done(operations: &[BackupOperation]) -> bool {
    operations.iter().all(|o| o.status.phase.is_done())
}

/// How many operations ended `Completed` and how many `Failed` (or `Canceled`).
#[must_use]
pub fn counts(operations: &[BackupOperation]) -> (u64, u64) {
    let count = |f: fn(OperationPhase) -> bool| {
        operations.iter().filter(|o| f(o.status.phase)).count() as u64
    };
    (
        count(|p| p == OperationPhase::Completed),
        count(|p| matches!(p, OperationPhase::Failed | OperationPhase::Canceled)),
    )
}

/// `status` with the counts of `operations` in it: attempted, completed and failed, and the
/// CSI snapshot counts Velero writes alongside (every operation here is a snapshot's).
#[must_use]
pub fn with_counts(operations: &[BackupOperation], status: BackupStatus) -> BackupStatus {
    let (completed, failed) = counts(operations);
    let attempted = Some(count(operations.len() as u64));
    BackupStatus {
        backup_item_operations_attempted: attempted,
        backup_item_operations_completed: Some(count(completed)),
        backup_item_operations_failed: Some(count(failed)),
        csi_volume_snapshots_attempted: attempted,
        csi_volume_snapshots_completed: Some(count(completed)),
        ..status
    }
}

/// Stores `<backup>-itemoperations.json.gz`.
///
/// # Errors
/// [`BackupError::Encode`] or [`BackupError::Storage`].
pub async fn store(
    location: &Location,
    backup: &str,
    operations: &[BackupOperation],
) -> Result<(), BackupError> {
    super::store::put_gz(
        location,
        &Layout::new(None).backup_item_operations(backup),
        &operations,
    )
    .await
}

/// Reads `<backup>-itemoperations.json.gz`.
///
/// # Errors
/// [`BackupError::Storage`] or [`BackupError::Decode`].
pub async fn load(location: &Location, backup: &str) -> Result<Vec<BackupOperation>, BackupError> {
    let key = Layout::new(None).backup_item_operations(backup);
    let bytes = location
        .get(&key)
        .await
        .map_err(|source| BackupError::storage(key.clone(), source))?;
    let operations: Option<Vec<BackupOperation>> = read_gz_json(Cursor::new(bytes), READ_LIMIT)
        .map_err(|source| BackupError::Decode { key, source })?;
    Ok(operations.unwrap_or_default())
}

/// Reads `<backup>-volumeinfo.json.gz` (an empty list when there is none).
///
/// # Errors
/// [`BackupError::Storage`] or [`BackupError::Decode`].
pub async fn load_volume_info(
    location: &Location,
    backup: &str,
) -> Result<Vec<Value>, BackupError> {
    load_list(location, Layout::new(None).backup_volume_info(backup)).await
}

/// Reads the volume side files of `backup` that name data hawser cannot restore (see
/// [`hawser_core::restore::volume_data`]); an absent file is an empty list.
///
/// # Errors
/// [`BackupError::Storage`] or [`BackupError::Decode`].
pub async fn load_volume_side_files(
    location: &Location,
    backup: &str,
) -> Result<VolumeSideFiles, BackupError> {
    let layout = Layout::new(None);
    Ok(VolumeSideFiles {
        pod_volume_backups: load_list(location, layout.backup_pod_volume_backups(backup)).await?,
        native_snapshots: load_list(location, layout.backup_volume_snapshots(backup)).await?,
        volume_info: load_volume_info(location, backup).await?,
    })
}

/// Reads the gzipped JSON list at `key`; an absent file (or `null`) is an empty list.
async fn load_list(location: &Location, key: String) -> Result<Vec<Value>, BackupError> {
    let bytes = match location.get(&key).await {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(source) => return Err(BackupError::storage(key, source)),
    };
    let info: Option<Vec<Value>> = read_gz_json(Cursor::new(bytes), READ_LIMIT)
        .map_err(|source| BackupError::Decode { key, source })?;
    Ok(info.unwrap_or_default())
}

/// Reads `<backup>-results.gz`.
///
/// # Errors
/// [`BackupError::Storage`] or [`BackupError::Decode`].
pub async fn load_results(location: &Location, backup: &str) -> Result<Results, BackupError> {
    let key = Layout::new(None).backup_results(backup);
    let bytes = location
        .get(&key)
        .await
        .map_err(|source| BackupError::storage(key.clone(), source))?;
    read_gz_json(Cursor::new(bytes), READ_LIMIT)
        .map_err(|source| BackupError::Decode { key, source })
}

/// The snapshot operations of backups, against one cluster.
#[derive(Clone)]
pub struct SnapshotOperations {
    client: kube::Client,
    snapshots: ApiResource,
    contents: ApiResource,
    api_retry: Duration,
    clock: hawser_core::clock::Clock,
}

fn snapshot_type(kind: &str, plural: &str, namespaced: bool) -> ApiResource {
    ApiResource {
        group: hawser_core::csi::SNAPSHOT_GROUP.to_owned(),
        version: "v1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
        singular: String::new(),
        short_names: Vec::new(),
        namespaced,
        verbs: Vec::new(),
    }
}

impl SnapshotOperations {
    /// Operations read through `client`, each read retried for up to `api_retry`, timed by
    /// `clock`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        api_retry: Duration,
        clock: hawser_core::clock::Clock,
    ) -> Self {
        Self {
            client,
            snapshots: snapshot_type("VolumeSnapshot", "volumesnapshots", true),
            contents: snapshot_type("VolumeSnapshotContent", "volumesnapshotcontents", false),
            api_retry,
            clock,
        }
    }

    /// How often to poll while nothing changes: after 50 ms, then twice as long each time, up
    /// to a twentieth of the backup's operation timeout (at most 1 s).
    #[must_use]
    pub fn polling(backup: &Backup) -> hawser_core::backoff::Backoff {
        super::snapshots::poll_backoff(operation_timeout(backup))
    }

    /// One round over the unfinished operations (see the module docs); `true` when one of
    /// them ended.
    pub async fn poll(&self, backup: &Backup, operations: &mut [BackupOperation]) -> bool {
        let timeout = operation_timeout(backup);
        let now = self.clock.now();
        let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut changed = false;
        for operation in operations.iter_mut().filter(|o| !o.status.phase.is_done()) {
            let r = &operation.spec.resource_identifier;
            let (namespace, name) = (r.namespace.clone(), r.name.clone());
            let read = match read_snapshot(
                &self.client,
                &self.snapshots,
                &self.contents,
                &namespace,
                &name,
                self.api_retry,
            )
            .await
            {
                Ok(None) => Some(Err(format!("VolumeSnapshot {namespace}/{name} is gone"))),
                Ok(Some((snapshot, content))) => {
                    match snapshot_state(&snapshot, content.as_ref()) {
                        SnapshotState::Ready { .. } => Some(Ok(())),
                        SnapshotState::Failed(why) => Some(Err(format!(
                            "VolumeSnapshot {namespace}/{name} failed: {why}"
                        ))),
                        SnapshotState::Pending | SnapshotState::Cut { .. } => None,
                    }
                }
                // Unreadable past the read budget: as it was, until the next round.
                Err(_) => None,
            };
            let expired = operation
                .status
                .created
                .as_deref()
                .and_then(|c| c.parse::<jiff::Timestamp>().ok())
                .and_then(|created| hawser_api::time::add(created, timeout.into()))
                .is_some_and(|deadline| now >= deadline);
            let ended = match read {
                Some(result) => Some(result.err()),
                None if expired => Some(Some(format!(
                    "VolumeSnapshot {namespace}/{name} was not ready to use within the item operation timeout ({})",
                    hawser_core::duration::GoDuration::from(timeout)
                ))),
                None => None,
            };
            if let Some(error) = ended {
                operation.finish(error, &stamp);
                changed = true;
            }
        }
        changed
    }

    /// Ends a backup whose operations have all ended (see the module docs): `outcome` with its
    /// final phase, counts and results.
    ///
    /// # Errors
    /// Storing or reading an artifact failed; the backup can be finalized again.
    pub async fn finalize(
        &self,
        location: &Location,
        backup: &Backup,
        operations: &[BackupOperation],
        mut outcome: super::BackupOutcome,
    ) -> Result<super::BackupOutcome, BackupError> {
        let name = backup.metadata.name.clone().unwrap_or_default();
        let layout = Layout::new(None);
        // Stored when the backup left InProgress; each snapshot's entry gets its result. A
        // file that does not decode (not hawser's writing) is made again from the operations.
        let mut volume_info = match load_volume_info(location, &name).await {
            Ok(info) => info,
            Err(e @ BackupError::Decode { .. }) => {
                tracing::warn!(backup = %name, error = %e.full_message(), "the stored volume info does not decode; it is made again from the snapshots");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        for operation in operations {
            let r = &operation.spec.resource_identifier;
            let read = read_snapshot(
                &self.client,
                &self.snapshots,
                &self.contents,
                &r.namespace,
                &r.name,
                self.api_retry,
            )
            .await
            .ok()
            .flatten();
            let content = read.as_ref().and_then(|(_, content)| content.as_ref());
            match volume_info
                .iter_mut()
                .find(|i| volume_info::is_of(i, operation))
            {
                Some(info) => volume_info::finish(info, operation, content),
                None => {
                    if let Some((snapshot, _)) = &read {
                        volume_info.push(volume_info::of_operation(operation, snapshot, content));
                    }
                }
            }
            let path = Collection::of(&self.snapshots).item_path(Some(&r.namespace), &r.name);
            match request::delete(&self.client, &path, self.api_retry).await {
                Ok(()) => {}
                Err(e) if request::code(&e) == Some(404) => {}
                Err(e) => {
                    tracing::warn!(backup = %name, snapshot = %format!("{}/{}", r.namespace, r.name), error = %request::text(&e), "the VolumeSnapshot could not be deleted; its content keeps the snapshot")
                }
            }
        }
        super::store::put_gz(location, &layout.backup_volume_info(&name), &volume_info).await?;
        store(location, &name, operations).await?;

        let mut results = load_results(location, &name).await?;
        let mut log = BackupLog::new(
            format!(
                "{}/{name}",
                backup.metadata.namespace.as_deref().unwrap_or_default()
            ),
            self.clock.clone(),
        );
        for operation in operations.iter().filter(|o| !o.status.error.is_empty()) {
            let message = format!(
                "operation {} of {} failed: {}",
                operation.spec.operation_id,
                operation.spec.backup_item_action,
                operation.status.error
            );
            let scope = Scope::of(Some(&operation.spec.resource_identifier.namespace));
            let already = match &scope {
                Scope::Namespace(ns) => results
                    .errors
                    .namespaces
                    .get(ns)
                    .is_some_and(|m| m.contains(&message)),
                _ => results.errors.velero.contains(&message),
            };
            if !already {
                log.line("error", &message);
                results.errors.push(&scope, message);
            }
        }
        let (completed, failed) = counts(operations);
        log.info(&format!(
            "Item operations ended: {completed} completed, {failed} failed"
        ));
        super::store::put_gz(location, &layout.backup_results(&name), &results).await?;
        append_log(location, &layout.backup_log(&name), log).await?;

        outcome.phase = if results.errors.count() > 0 {
            BackupPhase::PartiallyFailed
        } else {
            BackupPhase::Completed
        };
        outcome.results = results;
        outcome.completed = self.clock.now();
        outcome.operations = operations.to_vec();
        Ok(outcome)
    }

    /// Deletes the snapshots `operations` cut, for the deletion of their backup: each content
    /// is set to `deletionPolicy: Delete`, then deleted, so that the driver deletes the snapshot.
    /// A content already gone counts as deleted. The errors, one per content that was not.
    pub async fn delete_snapshots(
        &self,
        operations: &[BackupOperation],
        backup_uid: &str,
        volume_info: &[Value],
    ) -> SnapshotDeletion {
        let mut done = SnapshotDeletion::default();
        let contents = operations
            .iter()
            .flat_map(|o| &o.spec.post_operation_items)
            .filter(|i| i.resource == self.contents.plural);
        for content in contents {
            let path = Collection::of(&self.contents).item_path(None, &content.name);
            let live = match request::get_opt(&self.client, &path, self.api_retry).await {
                Ok(Some(live)) => live,
                Ok(None) => continue,
                Err(e) => {
                    done.errors.push(format!(
                        "reading VolumeSnapshotContent {} (the backup's snapshot) failed: {}",
                        content.name,
                        request::text(&e)
                    ));
                    continue;
                }
            };
            if let Err(why) = owned_content(&live, &content.name, backup_uid, volume_info) {
                tracing::warn!(content = %content.name, reason = %why, "a VolumeSnapshotContent the backup's item operations name is left as it is");
                done.left_alone.push(format!(
                    "VolumeSnapshotContent {} was left as it is: {why}",
                    content.name
                ));
                continue;
            }
            let patch = json!({"spec": {"deletionPolicy": "Delete"}});
            let deleted =
                match request::merge_patch(&self.client, &path, &patch, self.api_retry).await {
                    Ok(_) => request::delete(&self.client, &path, self.api_retry).await,
                    Err(e) => Err(e),
                };
            match deleted {
                Ok(()) => {}
                Err(e) if request::code(&e) == Some(404) => {}
                Err(e) => done.errors.push(format!(
                    "deleting VolumeSnapshotContent {} (the backup's snapshot) failed: {}",
                    content.name,
                    request::text(&e)
                )),
            }
        }
        done
    }
}

/// What deleting a backup's snapshots did besides deleting them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SnapshotDeletion {
    /// Deletions that failed (the backup's files are kept, so a new request finds them).
    pub errors: Vec<String>,
    /// Contents the operations name that are not this backup's own: not touched, and why.
    pub left_alone: Vec<String>,
}

/// Whether the live VolumeSnapshotContent `live` (named `name`) is the backup's own: labelled
/// with the backup's uid when the backup cut it, and holding the snapshot handle the backup's
/// volume info recorded for it. The bucket is not trusted: an item operations file naming any
/// content must not get it deleted.
fn owned_content(
    live: &Value,
    name: &str,
    backup_uid: &str,
    volume_info: &[Value],
) -> Result<(), String> {
    let label = hawser_core::csi::labelled_backup_uid(live);
    if backup_uid.is_empty() || label != Some(backup_uid) {
        return Err(format!(
            "its label {BACKUP_UID} is {} and the backup's uid {backup_uid:?}",
            label.map_or_else(|| "absent".to_owned(), |l| format!("{l:?}"))
        ));
    }
    let handle = live
        .pointer("/status/snapshotHandle")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let recorded = volume_info.iter().find_map(|info| {
        let csi = info.get("csiSnapshotInfo")?;
        (csi.get("vscName")?.as_str()? == name)
            .then(|| csi.get("snapshotHandle").and_then(Value::as_str))
            .flatten()
    });
    match recorded {
        Some(recorded) if !handle.is_empty() && recorded == handle => Ok(()),
        Some(recorded) => Err(format!(
            "its snapshot handle {handle:?} is not the one the backup's volume info recorded, {recorded:?}"
        )),
        None => Err("the backup's volume info records no snapshot handle for it".to_owned()),
    }
}

/// `spec.itemOperationTimeout`, else Velero's default.
fn operation_timeout(backup: &Backup) -> Duration {
    backup
        .spec
        .item_operation_timeout
        .and_then(|t| t.to_std())
        .filter(|t| !t.is_zero())
        .unwrap_or(DEFAULT_OPERATION_TIMEOUT)
}

/// Appends the lines of `log` to the stored log at `key`.
async fn append_log(location: &Location, key: &str, log: BackupLog) -> Result<(), BackupError> {
    let mut text = match location.get(key).await {
        Ok(bytes) => gunzip_limited(Cursor::new(bytes), READ_LIMIT).map_err(|source| {
            BackupError::Decode {
                key: key.to_owned(),
                source,
            }
        })?,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(source) => return Err(BackupError::storage(key.to_owned(), source)),
    };
    text.extend(log.into_bytes());
    super::store::put_gzip(location, key, &text).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(uid: Option<&str>, handle: &str) -> Value {
        let mut c =
            json!({"metadata": {"name": "snapcontent-1"}, "status": {"snapshotHandle": handle}});
        if let Some(uid) = uid {
            c["metadata"]["labels"] = json!({BACKUP_UID: uid});
        }
        c
    }

    fn info(name: &str, handle: &str) -> Vec<Value> {
        vec![json!({"csiSnapshotInfo": {"vscName": name, "snapshotHandle": handle}})]
    }

    #[test]
    fn only_a_content_with_the_backups_uid_and_recorded_handle_is_its_own() {
        let mine = info("snapcontent-1", "snap-a");
        assert_eq!(
            owned_content(
                &content(Some("uid-1"), "snap-a"),
                "snapcontent-1",
                "uid-1",
                &mine
            ),
            Ok(())
        );
        let refused = [
            (
                content(None, "snap-a"),
                "uid-1",
                mine.clone(),
                "unlabelled (made before, or by another tool)",
            ),
            (
                content(Some("uid-2"), "snap-a"),
                "uid-1",
                mine.clone(),
                "another backup's",
            ),
            (
                content(Some("uid-1"), "snap-b"),
                "uid-1",
                mine.clone(),
                "another handle than recorded",
            ),
            (
                content(Some("uid-1"), "snap-a"),
                "uid-1",
                info("other", "snap-a"),
                "not in the volume info",
            ),
            (
                content(Some("uid-1"), ""),
                "uid-1",
                info("snapcontent-1", ""),
                "no handle at all",
            ),
            (
                content(Some(""), "snap-a"),
                "",
                mine.clone(),
                "a backup without a uid",
            ),
        ];
        for (live, uid, volume_info, why) in refused {
            assert!(
                owned_content(&live, "snapcontent-1", uid, &volume_info).is_err(),
                "{why}"
            );
        }
    }
}
