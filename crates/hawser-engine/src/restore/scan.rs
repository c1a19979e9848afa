//! One pass over the archive, on a blocking thread: entries are read with the untrusted-input
//! checks of [`ArchiveReader`], items that the restore does not restore (filters, skip rules)
//! are dropped, the streamed type's items go to the async side through a bounded channel, and
//! items of the look-ahead types are kept within a byte budget.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use hawser_core::archive::{ArchiveError, ArchiveItem, ArchiveReader, EntryError, ReadError};
use hawser_core::restore::{ItemSkip, RestoreSelection, skip_reason};
use hawser_core::selection::NAMESPACES;
use serde_json::Value;
use tokio::sync::mpsc;

/// What one pass does.
pub(crate) struct PassPlan {
    /// The first pass: collect the per-type counts, the skipped items, the archived Namespace
    /// objects and the rejected entries (later passes see the same archive and ignore them).
    pub first: bool,
    /// The type whose items are sent to `stream` as they are read.
    pub stream: Option<(String, mpsc::Sender<ArchiveItem>)>,
    /// Types whose items are kept in memory.
    pub look_ahead: BTreeSet<String>,
    /// Bytes (estimated) the kept items may take.
    pub budget: u64,
}

/// Items of one type kept in memory, and their estimated size.
#[derive(Debug, Default)]
pub(crate) struct Buffered {
    pub bytes: u64,
    pub items: Vec<ArchiveItem>,
}

/// What a pass found.
#[derive(Debug, Default)]
pub(crate) struct PassReport {
    /// Look-ahead types whose items were all kept.
    pub buffered: BTreeMap<String, Buffered>,
    /// Items to restore, per type (first pass only).
    pub counts: BTreeMap<String, u64>,
    /// Items skipped by a skip rule, per type and reason (first pass only).
    pub skipped: BTreeMap<(String, &'static str), u64>,
    /// Names of the PersistentVolumes skipped for dynamic re-provisioning (first pass only).
    pub reprovisioned_pvs: BTreeSet<String>,
    /// The archived Namespace objects by name (first pass only).
    pub namespaces: BTreeMap<String, Value>,
    /// Rejected entries (first pass only).
    pub entry_errors: Vec<EntryError>,
    /// Contents of `metadata/version`.
    pub format_version: Option<String>,
}

/// A rough size of a JSON value in memory, for the look-ahead budget.
fn estimated_size(v: &Value) -> u64 {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 16,
        Value::String(s) => 24 + s.len() as u64,
        Value::Array(a) => 24 + a.iter().map(estimated_size).sum::<u64>(),
        Value::Object(m) => {
            32 + m
                .iter()
                .map(|(k, v)| 24 + k.len() as u64 + estimated_size(v))
                .sum::<u64>()
        }
    }
}

/// Why an item read from the archive is not restored.
enum Drop {
    Filtered,
    Skipped(ItemSkip),
}

fn dropped(selection: &RestoreSelection, item: &ArchiveItem) -> Option<Drop> {
    let gr = item.location.group_resource.as_str();
    if selection
        .check_item(gr, item.location.namespace.as_deref(), &item.object)
        .is_err()
    {
        return Some(Drop::Filtered);
    }
    skip_reason(gr, &item.object).map(Drop::Skipped)
}

/// Reads the whole archive from `reader` once (see the module docs). A fatal archive error
/// ends the pass with that error.
pub(crate) fn run_pass<R: Read>(
    reader: R,
    options: hawser_core::archive::ReaderOptions,
    selection: &RestoreSelection,
    plan: PassPlan,
) -> Result<PassReport, ArchiveError> {
    let mut archive = ArchiveReader::new(reader, options);
    let mut items = archive.items()?;
    let mut report = PassReport::default();
    let mut overflowed: BTreeSet<String> = BTreeSet::new();
    let mut used: u64 = 0;
    let mut stream = plan.stream;
    for next in items.by_ref() {
        let item = match next {
            Ok(item) => item,
            Err(ReadError::Fatal(e)) => return Err(e),
            Err(ReadError::Entry(e)) => {
                if plan.first {
                    report.entry_errors.push(e);
                }
                continue;
            }
        };
        let gr = item.location.group_resource.clone();
        if plan.first && gr == NAMESPACES && item.location.namespace.is_none() {
            report
                .namespaces
                .insert(item.location.name.clone(), item.object.clone());
        }
        match dropped(selection, &item) {
            Some(Drop::Filtered) => continue,
            Some(Drop::Skipped(why)) => {
                if plan.first {
                    if why == ItemSkip::DynamicallyReprovisioned {
                        report.reprovisioned_pvs.insert(item.location.name.clone());
                    }
                    *report.skipped.entry((gr, why.as_str())).or_default() += 1;
                }
                continue;
            }
            None => {}
        }
        if plan.first {
            *report.counts.entry(gr.clone()).or_default() += 1;
        }
        if let Some((streamed, sender)) = &stream
            && *streamed == gr
        {
            if sender.blocking_send(item).is_err() {
                // The restoring side stopped; nothing more is wanted from this pass.
                stream = None;
            }
            continue;
        }
        if !plan.look_ahead.contains(&gr) || overflowed.contains(&gr) {
            continue;
        }
        let size = estimated_size(&item.object);
        if used + size > plan.budget {
            // This type does not fit: a later pass restores it; free what it held.
            overflowed.insert(gr.clone());
            if let Some(b) = report.buffered.remove(&gr) {
                used -= b.bytes;
            }
            continue;
        }
        used += size;
        let b = report.buffered.entry(gr).or_default();
        b.bytes += size;
        b.items.push(item);
    }
    report.format_version = items.format_version().map(str::to_owned);
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use std::io::Cursor;

    use hawser_core::archive::{ArchiveWriter, ItemId, ReaderOptions, WriterOptions};
    use hawser_core::restore::RestoreFilters;
    use hawser_core::selection::Catalogue;
    use serde_json::json;

    use super::*;

    /// configmaps a, b, c; secrets s1, s2; a large Service; a finished pod; namespace `shop`.
    fn archive() -> Vec<u8> {
        let options = WriterOptions { mtime: 0, level: 1 };
        let mut w = ArchiveWriter::new(Vec::new(), options).unwrap();
        let mut put = |gr: &str, ns: Option<&str>, obj: Value| {
            let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
            let id = match ns {
                Some(ns) => ItemId::namespaced(gr, ns, &name),
                None => ItemId::cluster(gr, &name),
            };
            w.write_item(&id, "v1", &obj).unwrap();
        };
        put(
            "namespaces",
            None,
            json!({"kind": "Namespace", "metadata": {"name": "shop"}}),
        );
        // Interleaved, as a concurrent backup writes them.
        for (gr, name) in [
            ("configmaps", "a"),
            ("secrets", "s1"),
            ("configmaps", "b"),
            ("secrets", "s2"),
            ("configmaps", "c"),
        ] {
            put(
                gr,
                Some("shop"),
                json!({"metadata": {"name": name, "namespace": "shop"}}),
            );
        }
        let big = "x".repeat(10_000);
        put(
            "services",
            Some("shop"),
            json!({"metadata": {"name": "big"}, "spec": {"note": big}}),
        );
        put(
            "pods",
            Some("shop"),
            json!({"metadata": {"name": "done"}, "status": {"phase": "Succeeded"}}),
        );
        w.finish().unwrap().0
    }

    fn selection() -> RestoreSelection {
        RestoreSelection::new(&RestoreFilters::default(), &Catalogue::default()).unwrap()
    }

    fn names(items: &[ArchiveItem]) -> Vec<&str> {
        items.iter().map(|i| i.location.name.as_str()).collect()
    }

    #[test]
    fn checking_pass_counts_skips_and_keeps_namespaces_without_buffering() {
        let plan = PassPlan {
            first: true,
            stream: None,
            look_ahead: BTreeSet::new(),
            budget: u64::MAX,
        };
        let report = run_pass(
            Cursor::new(archive()),
            ReaderOptions::default(),
            &selection(),
            plan,
        )
        .unwrap();
        let counts: Vec<(&str, u64)> = report
            .counts
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            counts,
            [
                ("configmaps", 3),
                ("namespaces", 1),
                ("secrets", 2),
                ("services", 1)
            ]
        );
        assert_eq!(report.skipped[&("pods".to_owned(), "finished_pod")], 1);
        assert!(report.namespaces.contains_key("shop"));
        assert!(report.buffered.is_empty());
        assert_eq!(report.format_version.as_deref(), Some("1.1.0"));
    }

    #[test]
    fn streamed_type_goes_to_the_channel_and_look_ahead_keeps_what_fits() {
        let (sender, mut receiver) = mpsc::channel(16);
        let plan = PassPlan {
            first: false,
            stream: Some(("configmaps".to_owned(), sender)),
            look_ahead: ["secrets", "services"].map(str::to_owned).into(),
            budget: 4_000,
        };
        let report = run_pass(
            Cursor::new(archive()),
            ReaderOptions::default(),
            &selection(),
            plan,
        )
        .unwrap();
        let mut streamed = Vec::new();
        while let Ok(item) = receiver.try_recv() {
            streamed.push(item);
        }
        assert_eq!(names(&streamed), ["a", "b", "c"]);
        // The secrets fit; the Service does not, so a later pass streams it.
        let kept: Vec<&str> = report.buffered.keys().map(String::as_str).collect();
        assert_eq!(kept, ["secrets"]);
        assert_eq!(names(&report.buffered["secrets"].items), ["s1", "s2"]);
        assert!(report.counts.is_empty(), "only the checking pass counts");
    }

    #[test]
    fn a_type_that_overflows_midway_is_dropped_whole() {
        let plan = PassPlan {
            first: false,
            stream: None,
            look_ahead: ["configmaps"].map(str::to_owned).into(),
            // Room for about two of the three ConfigMaps.
            budget: 2 * estimated_size(&json!({"metadata": {"name": "a", "namespace": "shop"}}))
                + 10,
        };
        let report = run_pass(
            Cursor::new(archive()),
            ReaderOptions::default(),
            &selection(),
            plan,
        )
        .unwrap();
        assert!(report.buffered.is_empty(), "{:?}", report.buffered.keys());
    }

    #[test]
    fn a_corrupt_stream_is_fatal() {
        let mut bytes = archive();
        bytes.truncate(bytes.len() / 2);
        let plan = PassPlan {
            first: true,
            stream: None,
            look_ahead: BTreeSet::new(),
            budget: 0,
        };
        let err = run_pass(
            Cursor::new(bytes),
            ReaderOptions::default(),
            &selection(),
            plan,
        )
        .unwrap_err();
        assert_eq!(err.category(), "ArchiveCorrupt");
    }
}
