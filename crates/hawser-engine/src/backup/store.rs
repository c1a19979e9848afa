//! Writing the backup's files to its storage location.

use bytes::Bytes;
use hawser_api::phase::BackupPhase;
use hawser_core::archive::gzjson::{Results, to_gz_json};
use hawser_core::layout::Layout;
use hawser_store::Location;

use super::{BackupError, Notes, sink, snapshots};

/// Stores `value` as gzipped JSON at `key`.
pub(crate) async fn put_gz<T: serde::Serialize + ?Sized>(
    location: &Location,
    key: &str,
    value: &T,
) -> Result<(), BackupError> {
    put_encoded(location, key, to_gz_json(value)).await
}

/// Stores `text` gzipped at `key`.
pub(crate) async fn put_gzip(
    location: &Location,
    key: &str,
    text: &[u8],
) -> Result<(), BackupError> {
    put_encoded(
        location,
        key,
        hawser_core::archive::gzjson::gzip_bytes(text),
    )
    .await
}

async fn put_encoded(
    location: &Location,
    key: &str,
    encoded: Result<Vec<u8>, hawser_core::archive::gzjson::GzJsonError>,
) -> Result<(), BackupError> {
    let bytes = encoded.map_err(|source| BackupError::Encode {
        key: key.to_owned(),
        source,
    })?;
    put_bytes(location, key, bytes).await
}

pub(crate) async fn put_bytes(
    location: &Location,
    key: &str,
    bytes: Vec<u8>,
) -> Result<(), BackupError> {
    location
        .put(key, Bytes::from(bytes))
        .await
        .map_err(|source| BackupError::storage(key.to_owned(), source))
}

/// The files beside the archive: the resource list, the results, the item operations and the
/// volume info (or Velero's empty side files), then the log with the final line; the phase
/// they add up to.
pub(super) async fn store_side_files(
    location: &Location,
    layout: &Layout,
    name: &str,
    mut notes: Notes,
    resource_list: sink::ResourceEntries,
    items: u64,
    taken: &snapshots::Taken,
) -> Result<(BackupPhase, Results), BackupError> {
    let operations = &taken.operations;
    let results = notes.messages.to_results();
    let list = tokio::task::spawn_blocking(move || resource_list.into_gz_json())
        .await
        .map_err(BackupError::WriterGone)?
        .map_err(BackupError::TemporaryFile)?;
    put_bytes(location, &layout.backup_resource_list(name), list).await?;
    put_gz(location, &layout.backup_results(name), &results).await?;
    // What Velero writes for a backup without volumes or plugin operations, so that Velero's
    // clients (`describe`, DownloadRequests) find every file they look for; the operations and
    // the volume info when there are some.
    let mut written = Vec::new();
    if !operations.is_empty() {
        let key = layout.backup_item_operations(name);
        put_gz(location, &key, operations).await?;
        written.push(key);
    }
    if !taken.volume_info.is_empty() {
        let key = layout.backup_volume_info(name);
        put_gz(location, &key, &taken.volume_info).await?;
        written.push(key);
    }
    for (key, json) in layout.empty_backup_side_files(name) {
        if !written.contains(&key) {
            put_gzip(location, &key, json.as_bytes()).await?;
        }
    }
    let phase = match (results.errors.count() > 0, operations.is_empty()) {
        (false, true) => BackupPhase::Completed,
        (true, true) => BackupPhase::PartiallyFailed,
        (false, false) => BackupPhase::WaitingForPluginOperations,
        (true, false) => BackupPhase::WaitingForPluginOperationsPartiallyFailed,
    };
    notes.log.info(&format!(
        "Backup finished: {items} items, {} warnings, {} errors, phase {phase:?}",
        results.warnings.count(),
        results.errors.count()
    ));
    put_gzip(location, &layout.backup_log(name), &notes.log.into_bytes()).await?;
    Ok((phase, results))
}
