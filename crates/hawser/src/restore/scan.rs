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
