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
    /// Hashes of the duplicated item paths: their kept copies are not restored.
    pub duplicates: HashSet<u64>,
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
    Control,
    Skipped(ItemSkip),
}

fn dropped(selection: &RestoreSelection, item: &ArchiveItem) -> Option<Drop> {
    let gr = item.location.group_resource.as_str();
    match selection.check_item(gr, item.location.namespace.as_deref(), &item.object) {
        Ok(()) => skip_reason(gr, &item.object).map(Drop::Skipped),
        Err(FilterSkip::ControlType) => Some(Drop::Control),
        Err(_) => Some(Drop::Filtered),
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
            if report.duplicates.insert(key) {
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
        .filter(|(_, (key, _))| !report.duplicates.contains(key))
        .map(|(name, (_, object))| (name, object))
        .collect();
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

/// Reads the kept items of `gr` back from `reader` (skipping the copies of duplicated paths)
/// and hands each to `send` until it returns `false`.
///
/// # Errors
/// The temporary file could not be read, or holds what was not written.
pub(crate) fn read_back(
    reader: crate::spill::TypeReader,
    duplicates: &HashSet<u64>,
    mut send: impl FnMut(ArchiveItem) -> bool,
) -> std::io::Result<()> {
    let mut failure = None;
    reader.read(|record| {
        if duplicates.contains(&record.key) {
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

    fn checks() -> Checks {
        Checks {
            selection: selection(),
            types: ArchiveTypes::default(),
            hasher: RandomState::new(),
        }
    }

    /// The kept items of `gr`, read back.
    fn kept(waiting: &mut Waiting, report: &PassReport, gr: &str) -> Vec<String> {
        let mut names = Vec::new();
        read_back(waiting.take(gr), &report.duplicates, |item| {
            names.push(item.location.name);
            true
        })
        .unwrap();
        names
    }

    fn pass(bytes: Vec<u8>, checks: &Checks, budget: u64) -> (PassReport, Waiting) {
        let mut waiting = Waiting::new(budget);
        let report = run_pass(
            Cursor::new(bytes),
            ReaderOptions::default(),
            checks,
            &mut waiting,
        )
        .unwrap();
        (report, waiting)
    }

    #[test]
    fn the_pass_counts_skips_keeps_namespaces_and_every_item_to_restore() {
        for budget in [0, u64::MAX] {
            let (report, mut waiting) = pass(archive(), &checks(), budget);
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
            assert_eq!(report.format_version.as_deref(), Some("1.1.0"));
            assert_eq!(waiting.spilled_bytes() > 0, budget == 0);
            // Per type, in archive order, whether from memory or from the file.
            assert_eq!(kept(&mut waiting, &report, "configmaps"), ["a", "b", "c"]);
            assert_eq!(kept(&mut waiting, &report, "secrets"), ["s1", "s2"]);
            assert_eq!(kept(&mut waiting, &report, "services"), ["big"]);
            assert!(kept(&mut waiting, &report, "pods").is_empty(), "skipped");
        }
    }

    #[test]
    fn a_corrupt_stream_is_fatal() {
        let mut bytes = archive();
        bytes.truncate(bytes.len() / 2);
        let mut waiting = Waiting::new(0);
        let err = run_pass(
            Cursor::new(bytes),
            ReaderOptions::default(),
            &checks(),
            &mut waiting,
        )
        .unwrap_err();
        let PassError::Archive(err) = err else {
            panic!("{err:?}")
        };
        assert_eq!(err.category(), "ArchiveCorrupt");
    }

    /// A tar.gz of `(path, json)` entries, written as given (duplicates and aliases included).
    fn hand(entries: &[(&str, Value)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, obj) in entries {
            let data = obj.to_string();
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            tar.append_data(&mut h, path, data.as_bytes()).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    }

    fn served() -> Catalogue {
        let r = |group: &str, kind: &str, plural: &str, namespaced: bool| {
            hawser_core::selection::ApiResource {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
                plural: plural.into(),
                singular: String::new(),
                short_names: vec![],
                namespaced,
                verbs: vec![],
            }
        };
        Catalogue::new(vec![
            r("", "Namespace", "namespaces", false),
            r("", "Node", "nodes", false),
            r("", "Secret", "secrets", true),
            r("", "ConfigMap", "configmaps", true),
            r("velero.io", "Restore", "restores", true),
        ])
    }

    fn checks_for(spec: Value) -> Checks {
        let filters: RestoreFilters = serde_json::from_value(spec).unwrap();
        let catalogue = served();
        Checks {
            selection: RestoreSelection::new(&filters, &catalogue).unwrap(),
            types: ArchiveTypes::new(&catalogue),
            hasher: RandomState::new(),
        }
    }

    fn first_pass(bytes: Vec<u8>, checks: &Checks) -> PassReport {
        pass(bytes, checks, u64::MAX).0
    }

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}, "data": {"token": "c2VjcmV0"}})
    }

    #[test]
    fn items_under_an_alias_directory_are_rejected_and_never_counted() {
        let checks = checks_for(json!({"excludedResources": ["secrets"]}));
        let bytes = hand(&[
            ("resources/node/cluster/n1.json", obj("n1")),
            ("resources/secret/namespaces/web/tok.json", obj("tok")),
            ("resources/Secrets/namespaces/web/tok2.json", obj("tok2")),
            (
                "resources/restore.velero.io/namespaces/velero/r.json",
                obj("r"),
            ),
            ("resources/configmaps/namespaces/web/good.json", obj("good")),
        ]);
        let report = first_pass(bytes, &checks);
        let counts: Vec<&str> = report.counts.keys().map(String::as_str).collect();
        assert_eq!(counts, ["configmaps"]);
        let messages: Vec<&str> = report.rejected.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].contains("resources/node/cluster/n1.json"));
        assert!(messages[0].contains("the cluster serves it as nodes"));
        assert!(messages[1].contains("serves it as secrets"));
        assert_eq!(report.rejected[1].namespace.as_deref(), Some("web"));
        assert!(messages[3].contains("serves it as restores.velero.io"));
    }

    #[test]
    fn a_duplicated_path_is_rejected_once_and_none_of_its_copies_comes_back_whatever_the_budget() {
        let checks = checks_for(json!({}));
        let bytes = hand(&[
            ("resources/configmaps/namespaces/web/a.json", obj("a")),
            ("resources/configmaps/namespaces/web/dup.json", obj("dup")),
            ("resources/configmaps/namespaces/web/dup.json", obj("dup")),
            ("resources/configmaps/namespaces/web/dup.json", obj("dup")),
            ("resources/secrets/namespaces/web/s.json", obj("s")),
            ("resources/secrets/namespaces/web/s.json", obj("s")),
        ]);
        for budget in [0, u64::MAX] {
            let (report, mut waiting) = pass(bytes.clone(), &checks, budget);
            assert_eq!(report.rejected.len(), 2, "{:?}", report.rejected);
            assert!(report.rejected[0].message.contains("more than once"));
            assert_eq!(report.counts.get("configmaps"), Some(&1));
            assert_eq!(report.counts.get("secrets"), None, "no copy is restored");
            assert_eq!(kept(&mut waiting, &report, "configmaps"), ["a"]);
            assert!(kept(&mut waiting, &report, "secrets").is_empty());
        }
    }

    #[test]
    fn only_namespaces_that_pass_the_filter_are_kept_within_the_budget() {
        let checks = checks_for(json!({"includedNamespaces": ["web", "big*"]}));
        let large = "x".repeat(1 << 20);
        let mut entries = vec![(
            "resources/namespaces/cluster/web.json".to_owned(),
            json!({"metadata": {"name": "web", "labels": {"team": "a"}, "uid": "u"}, "status": {}}),
        )];
        for i in 0..12 {
            entries.push((
                format!("resources/namespaces/cluster/other{i}.json"),
                json!({"metadata": {"name": format!("other{i}"), "annotations": {"a": large}}}),
            ));
        }
        for i in 0..10 {
            entries.push((
                format!("resources/namespaces/cluster/big{i}.json"),
                json!({"metadata": {"name": format!("big{i}"), "annotations": {"a": large}}}),
            ));
        }
        let entries: Vec<(&str, Value)> = entries
            .iter()
            .map(|(p, v)| (p.as_str(), v.clone()))
            .collect();
        let report = first_pass(hand(&entries), &checks);
        assert_eq!(
            report.namespaces["web"],
            json!({"metadata": {"labels": {"team": "a"}}})
        );
        assert!(!report.namespaces.keys().any(|n| n.starts_with("other")));
        let kept_big = report
            .namespaces
            .keys()
            .filter(|n| n.starts_with("big"))
            .count();
        assert_eq!(kept_big, 7, "8 MiB hold seven of the 1 MiB objects");
        assert_eq!(report.rejected.len(), 3);
        assert!(report.rejected[0].message.contains("exceed 8388608 bytes"));
    }

    #[test]
    fn rejected_entries_are_capped_escaped_and_cut() {
        let checks = checks_for(json!({}));
        let mut tar = tar::Builder::new(Vec::new());
        for i in 0..(MAX_REJECTED + 5) {
            let path = format!("notes/\x1b[31m{i}\r\n{}.json", "y".repeat(2000));
            let mut h = tar::Header::new_gnu();
            h.set_size(2);
            tar.append_data(&mut h, path, &b"{}"[..]).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
        let report = first_pass(gz.finish().unwrap(), &checks);
        assert_eq!(report.rejected.len(), MAX_REJECTED);
        assert_eq!(report.rejected_more, 5);
        let first = &report.rejected[0].message;
        assert!(first.len() <= MAX_MESSAGE_BYTES + 32, "{}", first.len());
        assert!(!first.contains(['\r', '\n', '\u{1b}']), "{first}");
        assert!(first.contains("\\u{1b}[31m0\\r\\n"), "{first}");
    }
}
