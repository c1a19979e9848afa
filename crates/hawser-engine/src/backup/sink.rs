//! The archive side of a backup: one blocking task that receives pages of selected items
//! through a bounded channel and writes them into a streaming [`ArchiveWriter`] whose bytes go
//! straight to the storage location's upload.

use hawser_core::archive::gzjson::ResourceList;
use hawser_core::archive::{ArchiveStats, ArchiveWriteError, ArchiveWriter, ItemId, WriterOptions};
use hawser_store::BlockingWriter;
use tokio::sync::mpsc;

use super::error::BackupError;
use super::progress::ProgressHandle;

/// Items of one type that passed selection, at most one LIST page of them.
#[derive(Debug)]
pub(crate) struct Batch {
    /// `GroupResource.String()` of the type.
    pub group_resource: String,
    /// The preferred version the items were read at.
    pub version: String,
    /// `apiVersion` of the items.
    pub api_version: String,
    /// Kind of the items.
    pub kind: String,
    /// The objects (with `apiVersion` and `kind` set).
    pub items: Vec<serde_json::Value>,
}

/// What the archive task reports when the archive is stored.
#[derive(Debug, Default)]
pub(crate) struct SinkReport {
    pub resource_list: ResourceList,
    pub stats: ArchiveStats,
    pub size: u64,
    /// Items that could not be written (namespace, message): per-item errors.
    pub item_errors: Vec<(Option<String>, String)>,
}

/// Runs on a blocking thread until the channel closes, then finishes the archive and waits for
/// the upload. Any stream failure ends it at once; dropping the unfinished writer aborts the
/// upload, so no partial archive is stored.
pub(crate) fn write_archive(
    out: BlockingWriter,
    options: WriterOptions,
    mut batches: mpsc::Receiver<Batch>,
    progress: ProgressHandle,
) -> Result<SinkReport, BackupError> {
    let key = out.key().to_owned();
    let mut archive = ArchiveWriter::new(out, options).map_err(BackupError::Archive)?;
    let mut report = SinkReport::default();
    while let Some(batch) = batches.blocking_recv() {
        let mut written = 0u64;
        for item in &batch.items {
            let namespace = str_at(item, "/metadata/namespace").filter(|ns| !ns.is_empty());
            let name = str_at(item, "/metadata/name").unwrap_or_default();
            let id = match namespace {
                Some(ns) => ItemId::namespaced(&batch.group_resource, ns, name),
                None => ItemId::cluster(&batch.group_resource, name),
            };
            match archive.write_item(&id, &batch.version, item) {
                Ok(()) => {
                    report
                        .resource_list
                        .add(&batch.api_version, &batch.kind, namespace, name);
                    written += 1;
                }
                Err(
                    e @ (ArchiveWriteError::InvalidItem { .. }
                    | ArchiveWriteError::Serialize { .. }),
                ) => {
                    let message = format!(
                        "error backing up item {}/{}: {}",
                        batch.group_resource,
                        name,
                        super::error_text(&e)
                    );
                    report
                        .item_errors
                        .push((namespace.map(str::to_owned), message));
                }
                Err(e) => return Err(BackupError::Archive(e)),
            }
        }
        progress.items_written(written);
    }
    let (out, stats) = archive.finish().map_err(BackupError::Archive)?;
    report.stats = stats;
    report.size = out
        .finish()
        .map_err(|source| BackupError::storage(key, source))?;
    Ok(report)
}

fn str_at<'a>(obj: &'a serde_json::Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(serde_json::Value::as_str)
}
