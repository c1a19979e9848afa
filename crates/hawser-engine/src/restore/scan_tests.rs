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
    read_back(waiting.take(gr), &report.left_out, |item| {
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
        r("", "Pod", "pods", true),
        r("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
        r("", "PersistentVolume", "persistentvolumes", false),
        r(
            "scheduling.k8s.io",
            "PriorityClass",
            "priorityclasses",
            false,
        ),
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

#[test]
fn a_selected_pod_brings_its_claims_their_volumes_and_its_priority_class_past_the_selector() {
    let labelled = |name: &str, spec: Value| json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": spec});
    let plain = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
    let bytes = hand(&[
        (
            "resources/persistentvolumes/cluster/pv-data.json",
            plain(
                "pv-data",
                json!({"persistentVolumeReclaimPolicy": "Retain"}),
            ),
        ),
        (
            "resources/persistentvolumes/cluster/pv-other.json",
            plain(
                "pv-other",
                json!({"persistentVolumeReclaimPolicy": "Retain"}),
            ),
        ),
        (
            "resources/persistentvolumeclaims/namespaces/shop/data.json",
            plain("data", json!({"volumeName": "pv-data"})),
        ),
        (
            "resources/persistentvolumeclaims/namespaces/shop/other.json",
            plain("other", json!({"volumeName": "pv-other"})),
        ),
        (
            "resources/persistentvolumeclaims/namespaces/elsewhere/data.json",
            plain("data", json!({})),
        ),
        (
            "resources/pods/namespaces/shop/web.json",
            labelled(
                "web",
                json!({"priorityClassName": "high", "volumes": [
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
            ),
        ),
        (
            "resources/pods/namespaces/elsewhere/web.json",
            labelled(
                "web",
                json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
            ),
        ),
        (
            "resources/priorityclasses.scheduling.k8s.io/cluster/high.json",
            plain("high", json!(null)),
        ),
        (
            "resources/priorityclasses.scheduling.k8s.io/cluster/low.json",
            plain("low", json!(null)),
        ),
    ]);
    // The namespace filter still holds: `elsewhere`'s claim stays out though its pod needs it.
    let checks = checks_for(json!({
        "labelSelector": {"matchLabels": {"app": "web"}},
        "excludedNamespaces": ["elsewhere"],
        "includeClusterResources": true,
    }));
    let (report, mut waiting) = pass(bytes, &checks, u64::MAX);
    assert_eq!(report.counts["pods"], 1, "{:?}", report.counts);
    for (gr, name) in [
        ("persistentvolumeclaims", "data"),
        ("persistentvolumes", "pv-data"),
        ("priorityclasses.scheduling.k8s.io", "high"),
    ] {
        assert_eq!(report.counts[gr], 1, "{gr}: {:?}", report.counts);
        assert_eq!(report.added[gr], 1, "{gr}: {:?}", report.added);
        assert_eq!(kept(&mut waiting, &report, gr), [name], "{gr}");
    }

    // Set to false, cluster resources stay out even when needed.
    let checks = checks_for(json!({
        "labelSelector": {"matchLabels": {"app": "web"}},
        "includeClusterResources": false,
    }));
    let report = first_pass(
        hand(&[
            (
                "resources/persistentvolumes/cluster/pv-data.json",
                plain(
                    "pv-data",
                    json!({"persistentVolumeReclaimPolicy": "Retain"}),
                ),
            ),
            (
                "resources/persistentvolumeclaims/namespaces/shop/data.json",
                plain("data", json!({"volumeName": "pv-data"})),
            ),
            (
                "resources/pods/namespaces/shop/web.json",
                labelled(
                    "web",
                    json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
                ),
            ),
        ]),
        &checks,
    );
    assert_eq!(
        report.counts.get("persistentvolumes"),
        None,
        "{:?}",
        report.counts
    );
    assert_eq!(report.counts["persistentvolumeclaims"], 1);
}
