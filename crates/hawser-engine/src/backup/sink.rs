//! The archive side of a backup: one blocking task that receives pages of selected items
//! through a bounded channel and writes them into a streaming [`ArchiveWriter`] whose bytes go
//! straight to the storage location's upload.
//!
//! Most items arrive as the JSON text the API server sent ([`Item::Text`]): they are written as
//! they are, with `apiVersion` and `kind` put in front when the LIST left them out, so that a
//! page costs about its own size in memory and no item is encoded again.

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
    /// The items.
    pub items: Vec<Item>,
}

/// One item of a [`Batch`].
#[derive(Debug)]
pub(crate) enum Item {
    /// An object with `apiVersion` and `kind` set.
    Object(serde_json::Value),
    /// An object as the API server sent it.
    Text {
        /// `metadata.namespace`, `None` for a cluster-scoped item.
        namespace: Option<String>,
        /// `metadata.name`.
        name: String,
        /// The object's JSON text.
        json: Box<serde_json::value::RawValue>,
        /// It has the batch's `apiVersion` and `kind` already (a custom resource's does).
        typed: bool,
    },
}

impl Item {
    /// The items of `objects`.
    pub(crate) fn objects(objects: Vec<serde_json::Value>) -> Vec<Self> {
        objects.into_iter().map(Self::Object).collect()
    }
}

/// `json` with `apiVersion` and `kind` put in front, into `out`.
fn typed_text(out: &mut Vec<u8>, api_version: &str, kind: &str, json: &str) {
    out.clear();
    let json = json.trim();
    let rest = json.strip_prefix('{').unwrap_or(json).trim_start();
    out.extend_from_slice(b"{\"apiVersion\":");
    // Strings always encode.
    let _ = serde_json::to_writer(&mut *out, api_version);
    out.extend_from_slice(b",\"kind\":");
    let _ = serde_json::to_writer(&mut *out, kind);
    if !rest.starts_with('}') {
        out.push(b',');
    }
    out.extend_from_slice(rest.as_bytes());
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
    let mut text = Vec::new();
    while let Some(batch) = batches.blocking_recv() {
        let mut written = 0u64;
        for item in &batch.items {
            let (namespace, name, result) = match item {
                Item::Object(object) => {
                    let namespace =
                        str_at(object, "/metadata/namespace").filter(|ns| !ns.is_empty());
                    let name = str_at(object, "/metadata/name").unwrap_or_default();
                    let id = item_id(&batch.group_resource, namespace, name);
                    (
                        namespace,
                        name,
                        archive.write_item(&id, &batch.version, object),
                    )
                }
                Item::Text {
                    namespace,
                    name,
                    json,
                    typed,
                } => {
                    let namespace = namespace.as_deref().filter(|ns| !ns.is_empty());
                    let id = item_id(&batch.group_resource, namespace, name);
                    let bytes = if *typed {
                        json.get().as_bytes()
                    } else {
                        typed_text(&mut text, &batch.api_version, &batch.kind, json.get());
                        &text
                    };
                    (
                        namespace,
                        name.as_str(),
                        archive.write_item_json(&id, &batch.version, bytes),
                    )
                }
            };
            match result {
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

fn item_id(group_resource: &str, namespace: Option<&str>, name: &str) -> ItemId {
    match namespace {
        Some(ns) => ItemId::namespaced(group_resource, ns, name),
        None => ItemId::cluster(group_resource, name),
    }
}

fn str_at<'a>(obj: &'a serde_json::Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(serde_json::Value::as_str)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::typed_text;

    #[test]
    fn typed_text_puts_the_type_in_front_and_stays_json() {
        let mut out = Vec::new();
        for (json, expected) in [
            (
                r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}"#,
            ),
            (" { } ", r#"{"apiVersion":"v1","kind":"ConfigMap"}"#),
            (
                "{ \"metadata\" : {} }",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata" : {} }"#,
            ),
        ] {
            typed_text(&mut out, "v1", "ConfigMap", json);
            assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
            let parsed: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(parsed["kind"], "ConfigMap");
        }
    }
}
