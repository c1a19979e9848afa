//! The archive layout of velero-compat §5.2: what the writer produces, byte for byte where it
//! matters, and that the reader gives it back; plus the gzip-JSON side files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::io::Read;

use flate2::read::GzDecoder;
use hawser_core::archive::gzjson::{self, GzJsonError, ResourceList, Results};
use hawser_core::archive::{
    ArchiveItem, ArchiveReader, ArchiveWriteError, ArchiveWriter, ItemId, ItemPath, ReaderOptions,
    VersionDir, WriterOptions,
};
use serde_json::{Value, json};

const MTIME: u64 = 1_764_000_000;

fn pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": "u-1", "resourceVersion": "7"}, "status": {"phase": "Running"}})
}

fn sample_archive() -> Vec<u8> {
    let mut w = ArchiveWriter::new(
        Vec::new(),
        WriterOptions {
            mtime: MTIME,
            level: 6,
        },
    )
    .unwrap();
    w.write_item(
        &ItemId::namespaced("pods", "web", "p1"),
        "v1",
        &pod("web", "p1"),
    )
    .unwrap();
    w.write_item(
        &ItemId::namespaced("deployments.apps", "web", "nginx"),
        "v1",
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "web"}}),
    )
    .unwrap();
    w.write_item(
        &ItemId::cluster("namespaces", "web"),
        "v1",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}),
    )
    .unwrap();
    w.write_non_preferred(
        &ItemId::namespaced("horizontalpodautoscalers.autoscaling", "web", "h"),
        "v1",
        &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}}),
    )
    .unwrap();
    let (bytes, stats) = w.finish().unwrap();
    assert_eq!(stats.items, 4);
    assert_eq!(stats.entries, 1 + 3 * 2 + 1);
    bytes
}

#[test]
fn entries_follow_the_velero_layout_with_deterministic_headers() {
    let bytes = sample_archive();
    let mut tar = tar::Archive::new(GzDecoder::new(&bytes[..]));
    let mut seen = Vec::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let h = entry.header();
        assert_eq!(
            h.entry_type(),
            tar::EntryType::Regular,
            "regular files only, no directories"
        );
        assert_eq!(h.mode().unwrap(), 0o755);
        assert_eq!(h.mtime().unwrap(), MTIME);
        assert_eq!(h.uid().unwrap(), 0);
        assert_eq!(h.gid().unwrap(), 0);
        let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
        let mut body = String::new();
        entry.read_to_string(&mut body).unwrap();
        seen.push((path, body));
    }
    let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "metadata/version",
            "resources/pods/namespaces/web/p1.json",
            "resources/pods/v1-preferredversion/namespaces/web/p1.json",
            "resources/deployments.apps/namespaces/web/nginx.json",
            "resources/deployments.apps/v1-preferredversion/namespaces/web/nginx.json",
            "resources/namespaces/cluster/web.json",
            "resources/namespaces/v1-preferredversion/cluster/web.json",
            "resources/horizontalpodautoscalers.autoscaling/v1/namespaces/web/h.json",
        ]
    );
    assert_eq!(seen[0].1, "1.1.0\n");
    // Compact JSON, the same bytes in both copies, and the object as given.
    assert_eq!(seen[1].1, seen[2].1);
    assert!(!seen[1].1.contains('\n') && !seen[1].1.contains(": "));
    assert_eq!(
        serde_json::from_str::<Value>(&seen[1].1).unwrap(),
        pod("web", "p1")
    );
}

#[test]
fn the_same_items_give_the_same_bytes() {
    assert_eq!(sample_archive(), sample_archive());
}

#[test]
fn reader_returns_the_unversioned_copies_and_the_format_version() {
    let bytes = sample_archive();
    let mut reader = ArchiveReader::new(&bytes[..], ReaderOptions::default());
    let mut items = reader.items().unwrap();
    let got: Vec<ArchiveItem> = items.by_ref().map(Result::unwrap).collect();
    assert_eq!(items.format_version(), Some("1.1.0"));
    let paths: Vec<&str> = got.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "resources/pods/namespaces/web/p1.json",
            "resources/deployments.apps/namespaces/web/nginx.json",
            "resources/namespaces/cluster/web.json",
        ]
    );
    assert_eq!(
        got[0].location,
        ItemPath {
            group_resource: "pods".into(),
            version_dir: VersionDir::Unversioned,
            namespace: Some("web".into()),
            name: "p1".into()
        }
    );
    assert_eq!(got[2].location.namespace, None);
    assert_eq!(got[0].object, pod("web", "p1"));

    let mut reader = ArchiveReader::new(
        &bytes[..],
        ReaderOptions {
            include_versioned_copies: true,
            ..ReaderOptions::default()
        },
    );
    let all: Vec<ArchiveItem> = reader.items().unwrap().map(Result::unwrap).collect();
    assert_eq!(all.len(), 7);
    assert_eq!(
        all[1].location.version_dir,
        VersionDir::Preferred("v1".into())
    );
    assert_eq!(all[6].location.version_dir, VersionDir::Other("v1".into()));
}

#[test]
fn item_paths_round_trip() {
    for path in [
        "resources/pods/namespaces/web/p1.json",
        "resources/namespaces/cluster/web.json",
        "resources/deployments.apps/v1-preferredversion/namespaces/web/nginx.json",
        "resources/crontabs.example.com/v1beta1/cluster/c.json",
        "resources/pods/v1/namespaces/web/p.json",
    ] {
        assert_eq!(ItemPath::parse(path).unwrap().to_path(), path);
    }
    for bad in [
        "resources/pods/web/p1.json",
        "resources/pods/namespaces/web/p1.yaml",
        "resources/pods/cluster/.json",
        "resources/pods/-preferredversion/cluster/a.json",
        "resources/pods/namespaces/../p1.json",
        "metadata/version",
    ] {
        assert!(ItemPath::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn writer_refuses_names_that_would_make_unsafe_paths() {
    let mut w = ArchiveWriter::new(Vec::new(), WriterOptions::default()).unwrap();
    let obj = json!({});
    let cases = [
        ItemId::namespaced("pods", "..", "x"),
        ItemId::namespaced("pods", "web", "a/b"),
        ItemId::namespaced("pods", "web", ""),
        ItemId::cluster("../etc", "x"),
        ItemId::cluster("pods", "."),
    ];
    for id in cases {
        let err = w.write_item(&id, "v1", &obj).unwrap_err();
        assert!(
            matches!(err, ArchiveWriteError::InvalidItem { .. }),
            "{id:?}: {err}"
        );
        assert_eq!(err.category(), "InvalidItemPath");
    }
    assert!(
        w.write_item(&ItemId::cluster("pods", "x"), "../v1", &obj)
            .is_err()
    );
    assert_eq!(w.stats().items, 0);
}

#[test]
fn resource_list_has_velero_shape() {
    let mut list = ResourceList::default();
    list.add("apps/v1", "Deployment", Some("web"), "nginx");
    list.add("v1", "Namespace", None, "web");
    list.add("v1", "Pod", Some("web"), "b");
    list.add("v1", "Pod", Some("db"), "a");
    list.add("v1", "Pod", Some("web"), "b");
    assert_eq!(list.len(), 4);
    let json = serde_json::to_string(&list).unwrap();
    assert_eq!(
        json,
        r#"{"apps/v1/Deployment":["web/nginx"],"v1/Namespace":["web"],"v1/Pod":["db/a","web/b"]}"#
    );
    let gz = gzjson::to_gz_json(&list).unwrap();
    let back: ResourceList = gzjson::read_gz_json(&gz[..], 1 << 20).unwrap();
    assert_eq!(back, list);
}

#[test]
fn results_have_velero_shape_with_empty_parts_omitted() {
    let mut results = Results::default();
    assert_eq!(
        serde_json::to_string(&results).unwrap(),
        r#"{"errors":{},"warnings":{}}"#
    );
    results.errors.add(Some("web"), "pods/p1: boom");
    results.warnings.add(None, "slow");
    assert_eq!(
        serde_json::to_string(&results).unwrap(),
        r#"{"errors":{"namespaces":{"web":["pods/p1: boom"]}},"warnings":{"velero":["slow"]}}"#
    );
    assert_eq!(results.errors.count(), 1);
}

#[test]
fn gzip_helpers_enforce_limits_and_reject_non_gzip() {
    let big = gzjson::to_gz_json(&"x".repeat(10_000)).unwrap();
    let err = gzjson::read_gz_json::<_, String>(&big[..], 1_000).unwrap_err();
    assert!(
        matches!(err, GzJsonError::TooLarge { limit: 1_000 }),
        "{err}"
    );
    assert_eq!(
        gzjson::read_gz_json::<_, String>(&big[..], 20_000)
            .unwrap()
            .len(),
        10_000
    );
    let err = gzjson::gunzip_limited(&b"plain text"[..], 100).unwrap_err();
    assert_eq!(err.category(), "GzipReadFailed");
    let err =
        gzjson::read_gz_json::<_, Results>(&gzjson::to_gz_json(&json!([1])).unwrap()[..], 100)
            .unwrap_err();
    assert_eq!(err.category(), "JsonDecodeFailed");
    let mut log = gzjson::gzip_writer(Vec::new());
    std::io::Write::write_all(&mut log, b"line 1\nline 2\n").unwrap();
    let bytes = log.finish().unwrap();
    assert_eq!(
        gzjson::gunzip_limited(&bytes[..], 100).unwrap(),
        b"line 1\nline 2\n"
    );
}
