//! The checking pass over the archive, on a blocking thread, the only time the archive is
//! read: entries are read with the untrusted-input checks of [`ArchiveReader`], items under a
//! directory that is not a type's canonical name and items whose path occurs more than once
//! are refused, items that the restore does not restore (filters, skip rules) are dropped, and
//! the others are kept in [`Waiting`] until their type's turn.
//!
//! What the pass keeps besides is bounded too: the archived Namespace objects that pass the
//! namespace filter, reduced to what a target namespace is built from, within
//! [`NAMESPACE_BUDGET`]; the first [`MAX_REJECTED`] rejected entries (escaped and cut to
//! [`MAX_MESSAGE_BYTES`]) and a count of the rest; one keyed 64-bit hash per item path (the
//! reader caps the number of items) to find duplicates.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::io::Read;

use hawser_core::archive::{ArchiveError, ArchiveItem, ArchiveReader, ItemPath, ReadError};
use hawser_core::errors::{MAX_MESSAGE_BYTES, chain_text, printable};
use hawser_core::restore::additional::{ADDED_TYPES, ItemId, needed_by};
use hawser_core::restore::{ArchiveTypes, FilterSkip, ItemSkip, RestoreSelection, skip_reason};
use hawser_core::selection::NAMESPACES;
use serde_json::Value;

use crate::spill::Waiting;

/// Rejected entries kept as messages; the rest are only counted.
pub(crate) const MAX_REJECTED: usize = 1000;
/// Estimated bytes of archived Namespace objects kept by the checking pass.
pub(crate) const NAMESPACE_BUDGET: u64 = 8 << 20;

/// What the items of the archive are checked against.
pub(crate) struct Checks {
    pub selection: RestoreSelection,
    /// The canonical type names of the cluster as the restore started.
    pub types: ArchiveTypes,
    /// Keys the path hashes (random per restore, so paths cannot be chosen to collide).
    pub hasher: RandomState,
}

impl Checks {
    fn key(&self, path: &str) -> u64 {
        self.hasher.hash_one(path)
    }
}

/// Why the checking pass ended without a report.
#[derive(Debug)]
pub(crate) enum PassError {
    /// The archive is unreadable as a whole.
    Archive(ArchiveError),
    /// An item could not be kept (the temporary file).
    Keep(std::io::Error),
}

/// A rejected entry: the source namespace of its path (when it has one) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub namespace: Option<String>,
    pub message: String,
}

/// What the checking pass found.
#[derive(Debug, Default)]
pub(crate) struct PassReport {
    /// Items to restore (kept in [`Waiting`]), per type.
    pub counts: BTreeMap<String, u64>,
    /// Items skipped by a skip rule, per type and reason.
    pub skipped: BTreeMap<(String, &'static str), u64>,
    /// Items of the server's control types that the filters selected, per type: never
    /// restored.
    pub control: BTreeMap<String, u64>,
    /// Names of the PersistentVolumes skipped for dynamic re-provisioning.
    pub reprovisioned_pvs: BTreeSet<String>,
    /// The archived CSI snapshots of claims that are restored: (source namespace, claim) →
    /// VolumeSnapshot name.
    pub snapshots: BTreeMap<(String, String), String>,
    /// The archived Namespace objects by name, reduced to labels, annotations and spec (first
    /// pass only).
    pub namespaces: BTreeMap<String, Value>,
    /// The first [`MAX_REJECTED`] rejected entries.
    pub rejected: Vec<Rejected>,
    /// Rejected entries beyond those.
    pub rejected_more: u64,
    /// Hashes of the item paths kept but not restored: the duplicated ones (none of whose
    /// copies is restored), and the items kept in case a restored item needed them that none
    /// did.
    pub left_out: HashSet<u64>,
    /// Items the filters left out that are restored because a restored item needs them, per
    /// type.
    pub added: BTreeMap<String, u64>,
    /// Contents of `metadata/version`.
    pub format_version: Option<String>,
}

impl PassReport {
    fn reject(&mut self, path: &str, message: &str) {
        if self.rejected.len() >= MAX_REJECTED {
            self.rejected_more += 1;
            return;
        }
        self.rejected.push(Rejected {
            namespace: ItemPath::parse(path).ok().and_then(|p| p.namespace),
            message: printable(message, MAX_MESSAGE_BYTES),
        });
    }
}

/// The parts of an archived Namespace object a target namespace is built from.
fn namespace_parts(object: &Value) -> Value {
    let mut meta = serde_json::Map::new();
    for key in ["labels", "annotations"] {
        if let Some(v) = object.pointer(&format!("/metadata/{key}")) {
            meta.insert(key.into(), v.clone());
        }
    }
    let mut kept = serde_json::Map::new();
    kept.insert("metadata".into(), Value::Object(meta));
    if let Some(spec) = object.get("spec") {
        kept.insert("spec".into(), spec.clone());
    }
    Value::Object(kept)
}

/// A rough size of a JSON value in memory, for the budget of kept Namespace objects.
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
    /// Left out by the filters, but restored if a restored item needs it.
    Candidate(&'static str),
    Control,
    Skipped(ItemSkip),
}

fn dropped(selection: &RestoreSelection, item: &ArchiveItem) -> Option<Drop> {
    let gr = item.location.group_resource.as_str();
    match selection.check_item(gr, item.location.namespace.as_deref(), &item.object) {
        Ok(()) => skip_reason(gr, &item.object).map(Drop::Skipped),
        Err(FilterSkip::ControlType) => Some(Drop::Control),
        Err(why) => match ADDED_TYPES.iter().find(|t| **t == gr) {
            Some(added)
                if selection.admits_as_additional(why)
                    && skip_reason(gr, &item.object).is_none() =>
            {
                Some(Drop::Candidate(added))
            }
            _ => Some(Drop::Filtered),
        },
    }
}

/// The items kept in case a restored item needs them, and what the restored items need.
#[derive(Default)]
struct Additional {
    /// Candidate → its path hash, and for a claim the volume it would bring.
    candidates: HashMap<ItemId, (u64, Option<ItemId>)>,
    needed: HashSet<ItemId>,
}

impl Additional {
    /// The keys of the candidates to restore (`Ok`) and of those to leave out (`Err`).
    fn resolve(mut self) -> impl Iterator<Item = (&'static str, Result<u64, u64>)> {
        // A claim added brings its volume.
        let volumes: Vec<ItemId> = self
            .candidates
            .iter()
            .filter(|(id, _)| self.needed.contains(*id))
            .filter_map(|(_, (_, volume))| volume.clone())
            .collect();
        self.needed.extend(volumes);
        let needed = self.needed;
        self.candidates.into_iter().map(move |(id, (key, _))| {
            let verdict = if needed.contains(&id) {
                Ok(key)
            } else {
                Err(key)
            };
            (id.0, verdict)
        })
    }
}

/// Reads the whole archive from `reader` (see the module docs), keeping the items to restore
/// in `waiting`. A fatal archive error ends the pass with that error.
pub(crate) fn run_pass<R: Read>(
    reader: R,
    options: hawser_core::archive::ReaderOptions,
    checks: &Checks,
    waiting: &mut Waiting,
) -> Result<PassReport, PassError> {
    let selection = &checks.selection;
    let mut archive = ArchiveReader::new(reader, options);
    let mut items = archive.items().map_err(PassError::Archive)?;
    let mut report = PassReport::default();
    // Path hash → whether its first copy was kept.
    let mut seen: HashMap<u64, bool> = HashMap::new();
    let mut namespaces: BTreeMap<String, (u64, Value)> = BTreeMap::new();
    let mut namespace_bytes: u64 = 0;
    let mut additional = Additional::default();
    for next in items.by_ref() {
        let item = match next {
            Ok(item) => item,
            Err(ReadError::Fatal(e)) => return Err(PassError::Archive(e)),
            Err(ReadError::Entry(e)) => {
                report.reject(&e.path, &chain_text(&e));
                continue;
            }
        };
        let gr = item.location.group_resource.as_str();
        if let Err(e) = checks.types.check(gr) {
            let message = format!("archive entry {:?} rejected: {e}", item.path);
            report.reject(&item.path, &message);
            continue;
        }
        let key = checks.key(&item.path);
        if let Some(kept) = seen.get_mut(&key) {
            if report.left_out.insert(key) {
                let message = format!(
                    "archive entry {:?} rejected: the archive holds it more than once; none of its copies is restored",
                    item.path
                );
                report.reject(&item.path, &message);
                if std::mem::take(kept) {
                    uncount(&mut report.counts, gr);
                }
            }
            continue;
        }
        if gr == NAMESPACES
            && item.location.namespace.is_none()
            && selection.namespace_included(&item.location.name)
        {
            let kept = namespace_parts(&item.object);
            let size = estimated_size(&kept);
            if namespace_bytes + size > NAMESPACE_BUDGET {
                let message = format!(
                    "archive entry {:?}: the archived Namespace objects exceed {NAMESPACE_BUDGET} bytes; namespace {} is restored without its archived labels, annotations and spec",
                    item.path, item.location.name
                );
                report.reject(&item.path, &message);
            } else {
                namespace_bytes += size;
                namespaces.insert(item.location.name.clone(), (key, kept));
            }
        }
        let keep = match dropped(selection, &item) {
            Some(Drop::Filtered) => false,
            Some(Drop::Candidate(gr)) => {
                let ns = item.location.namespace.clone();
                let volume = needed_by(gr, ns.as_deref(), &item.object).pop();
                additional
                    .candidates
                    .insert((gr, ns, item.location.name.clone()), (key, volume));
                waiting
                    .push(gr, key, &item.path, &item.bytes)
                    .map_err(PassError::Keep)?;
                false
            }
            Some(Drop::Control) => {
                *report.control.entry(gr.to_owned()).or_default() += 1;
                false
            }
            Some(Drop::Skipped(why)) => {
                if why == ItemSkip::DynamicallyReprovisioned {
                    report.reprovisioned_pvs.insert(item.location.name.clone());
                }
                *report
                    .skipped
                    .entry((gr.to_owned(), why.as_str()))
                    .or_default() += 1;
                false
            }
            None => true,
        };
        seen.insert(key, keep);
        if !keep {
            continue;
        }
        *report.counts.entry(gr.to_owned()).or_default() += 1;
        additional.needed.extend(needed_by(
            gr,
            item.location.namespace.as_deref(),
            &item.object,
        ));
        if gr == hawser_core::csi::VOLUME_SNAPSHOTS
            && let (Some(ns), Some(claim)) = (
                &item.location.namespace,
                item.object
                    .pointer("/spec/source/persistentVolumeClaimName")
                    .and_then(Value::as_str),
            )
        {
            report
                .snapshots
                .insert((ns.clone(), claim.to_owned()), item.location.name.clone());
        }
        waiting
            .push(gr, key, &item.path, &item.bytes)
            .map_err(PassError::Keep)?;
    }
    report.format_version = items.format_version().map(str::to_owned);
    // A duplicated Namespace object is used in none of its versions.
    report.namespaces = namespaces
        .into_iter()
        .filter(|(_, (key, _))| !report.left_out.contains(key))
        .map(|(name, (_, object))| (name, object))
        .collect();
    // Until here `left_out` holds the duplicated paths only.
    for (gr, verdict) in additional.resolve() {
        match verdict {
            Ok(key) if !report.left_out.contains(&key) => {
                *report.counts.entry(gr.to_owned()).or_default() += 1;
                *report.added.entry(gr.to_owned()).or_default() += 1;
            }
            Ok(key) | Err(key) => {
                report.left_out.insert(key);
            }
        }
    }
    Ok(report)
}

/// One item fewer of `gr` to restore.
fn uncount(counts: &mut BTreeMap<String, u64>, gr: &str) {
    if let Some(n) = counts.get_mut(gr) {
        *n -= 1;
        if *n == 0 {
            counts.remove(gr);
        }
    }
}

/// Reads the kept items of `gr` back from `reader` (skipping those of `left_out`)
/// and hands each to `send` until it returns `false`.
///
/// # Errors
/// The temporary file could not be read, or holds what was not written.
pub(crate) fn read_back(
    reader: crate::spill::TypeReader,
    left_out: &HashSet<u64>,
    mut send: impl FnMut(ArchiveItem) -> bool,
) -> std::io::Result<()> {
    let mut failure = None;
    reader.read(|record| {
        if left_out.contains(&record.key) {
            return true;
        }
        let item = ItemPath::parse(record.path)
            .map_err(|e| e.to_string())
            .and_then(|location| {
                let bytes = record.json.to_vec();
                let object = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                Ok(ArchiveItem {
                    path: record.path.to_owned(),
                    location,
                    object,
                    bytes,
                })
            });
        match item {
            Ok(item) => send(item),
            Err(e) => {
                failure = Some(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a kept item of {:?} no longer parses: {e}", record.path),
                ));
                false
            }
        }
    })?;
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "scan_tests.rs"]
mod tests;
