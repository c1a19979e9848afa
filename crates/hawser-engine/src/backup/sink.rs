//! The archive side of a backup: one blocking task that receives pages of selected items
//! through a bounded channel and writes them into a streaming [`ArchiveWriter`] whose bytes go
//! straight to the storage location's upload.
//!
//! Most items arrive as the JSON text the API server sent ([`Item::Text`]): they are written as
//! they are, with `apiVersion` and `kind` put in front when the LIST left them out, so that a
//! page costs about its own size in memory and no item is encoded again.

use std::io::{self, Write};

use hawser_core::archive::{ArchiveStats, ArchiveWriteError, ArchiveWriter, ItemId, WriterOptions};
use hawser_core::json::str_at;
use hawser_store::ArchiveOut;
use tokio::sync::mpsc;

use super::error::BackupError;
use super::progress::ProgressHandle;
use crate::spill::Waiting;

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
#[derive(Debug)]
pub(crate) struct SinkReport {
    pub resource_list: ResourceEntries,
    pub stats: ArchiveStats,
    pub size: u64,
    /// Items that could not be written (namespace, message): per-item errors.
    pub item_errors: Vec<(Option<String>, String)>,
}

/// Runs on a blocking thread until the channel closes, then finishes the archive and waits for
/// the upload. Any stream failure ends it at once; dropping the unfinished writer aborts the
/// upload, so no partial archive is stored.
pub(crate) fn write_archive(
    out: ArchiveOut,
    options: WriterOptions,
    mut batches: mpsc::Receiver<Batch>,
    progress: ProgressHandle,
) -> Result<SinkReport, BackupError> {
    let key = out.key().to_owned();
    let mut archive = ArchiveWriter::new(out, options).map_err(BackupError::Archive)?;
    let mut report = SinkReport {
        resource_list: ResourceEntries::new(),
        stats: ArchiveStats::default(),
        size: 0,
        item_errors: Vec::new(),
    };
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
                        .add(&batch.api_version, &batch.kind, namespace, name)
                        .map_err(BackupError::TemporaryFile)?;
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

/// Bytes of resource-list entries held in memory; the rest wait in a temporary file.
const RESOURCE_LIST_MEMORY: u64 = 1 << 20;

/// The entries of `<backup>-resource-list.json.gz` as the backup goes: `ns/name` (or `name`)
/// per `apiVersion/Kind`, kept in a [`Waiting`] so that memory does not grow with the items.
#[derive(Debug)]
pub(crate) struct ResourceEntries {
    waiting: Waiting,
}

impl ResourceEntries {
    fn new() -> Self {
        Self {
            waiting: Waiting::new(RESOURCE_LIST_MEMORY),
        }
    }

    fn add(
        &mut self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> io::Result<()> {
        let key = format!("{api_version}/{kind}");
        let entry = match namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        };
        self.waiting.push(&key, 0, &entry, &[])
    }

    /// The resource-list file: `{"<apiVersion>/<Kind>": ["ns/name", …]}`, keys and entries
    /// sorted, without repeats, gzipped. A kind whose entries came in ascending order (a LIST's
    /// order) is streamed from where they wait; another is sorted in memory.
    pub(crate) fn into_gz_json(mut self) -> io::Result<Vec<u8>> {
        let mut out = hawser_core::archive::gzjson::gzip_writer(Vec::new());
        out.write_all(b"{")?;
        for (i, key) in self.waiting.kinds().into_iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut out, &key)?;
            out.write_all(b":[")?;
            let entries = self.waiting.take(&key);
            let mut last = String::new();
            let mut ascending = true;
            entries.read(|record| {
                ascending = last.as_str() <= record.path;
                last.clear();
                last.push_str(record.path);
                ascending
            })?;
            let mut list = JsonList {
                out: &mut out,
                last: None,
            };
            if ascending {
                let mut failure = None;
                entries.read(|record| match list.push(record.path) {
                    Ok(()) => true,
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                })?;
                failure.map_or(Ok(()), Err)?;
            } else {
                let mut all = Vec::new();
                entries.read(|record| {
                    all.push(record.path.to_owned());
                    true
                })?;
                all.sort_unstable();
                for entry in &all {
                    list.push(entry)?;
                }
            }
            out.write_all(b"]")?;
        }
        out.write_all(b"}")?;
        out.finish()
    }
}

/// The entries of one JSON list being written, in ascending order; a repeat is left out.
struct JsonList<'a, W: Write> {
    out: &'a mut W,
    last: Option<String>,
}

impl<W: Write> JsonList<'_, W> {
    fn push(&mut self, entry: &str) -> io::Result<()> {
        match &mut self.last {
            Some(last) if last == entry => return Ok(()),
            Some(last) => {
                self.out.write_all(b",")?;
                last.clear();
                last.push_str(entry);
            }
            None => self.last = Some(entry.to_owned()),
        }
        serde_json::to_writer(&mut *self.out, entry)?;
        Ok(())
    }
}

fn item_id(group_resource: &str, namespace: Option<&str>, name: &str) -> ItemId {
    match namespace {
        Some(ns) => ItemId::namespaced(group_resource, ns, name),
        None => ItemId::cluster(group_resource, name),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::{ResourceEntries, typed_text};

    #[test]
    fn the_resource_list_is_sorted_without_repeats_whatever_the_order_of_the_entries() {
        let mut entries = ResourceEntries::new();
        // In order (streamed), out of order (sorted), repeats in both, and cluster-scoped.
        for i in 0..3000 {
            entries
                .add("v1", "ConfigMap", Some("app"), &format!("cm-{i:05}"))
                .unwrap();
        }
        entries
            .add("v1", "ConfigMap", Some("app"), "cm-02999")
            .unwrap();
        for name in ["s3", "s1", "s2", "s1"] {
            entries.add("v1", "Secret", Some("app"), name).unwrap();
        }
        entries.add("v1", "Namespace", None, "app").unwrap();
        let gz = entries.into_gz_json().unwrap();
        let list: hawser_core::archive::gzjson::ResourceList =
            hawser_core::archive::gzjson::read_gz_json(&gz[..], 1 << 30).unwrap();
        let names = list.get("v1/ConfigMap");
        assert_eq!(names.len(), 3000);
        assert_eq!(names[0], "app/cm-00000");
        assert_eq!(names[2999], "app/cm-02999");
        assert_eq!(list.get("v1/Secret"), ["app/s1", "app/s2", "app/s3"]);
        assert_eq!(list.get("v1/Namespace"), ["app"]);
        let text = String::from_utf8(
            hawser_core::archive::gzjson::gunzip_limited(&gz[..], 1 << 30).unwrap(),
        )
        .unwrap();
        assert!(
            text.starts_with(r#"{"v1/ConfigMap":["app/cm-00000","app/cm-00001","#),
            "{}",
            &text[..80]
        );
        assert!(text.ends_with(r#""v1/Secret":["app/s1","app/s2","app/s3"]}"#));
    }

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
