//! The backup engine against kube-sim with a filesystem storage location: what lands in the
//! archive (file by file), the resource list, results and log, filters, paging and LIST
//! failures. Storage failures are in `backup_storage.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod backup_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::collections::BTreeSet;
use std::io::{Cursor, Read};
use std::time::Duration;

use hawser_api::Backup;
use hawser_api::phase::BackupPhase;
use hawser_core::archive::gzjson::{ResourceList, Results, read_gz_json};
use hawser_core::archive::{ArchiveReader, ReaderOptions};
use hawser_core::layout::Layout;
use hawser_core::selection::BOTH_SELECTORS_MESSAGE;
use hawser_engine::backup::{self, BackupError, BackupOptions, BackupOutcome, Progress};
use hawser_store::{AccessMode, Location, LocationSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};
use kube_sim::{KubeSim, LatencyFault, SimConfig, StatusFault};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::watch;

const BUCKET: &str = "backups-bucket";
const CONFIGMAPS: usize = 5;

/// A simulator with two application namespaces:
/// `shop`: 5 ConfigMaps (`cm-0`, `cm-1` labelled `tier=front`), 2 Secrets, a Deployment
/// (`tier=front`), 2 Widgets (a custom resource); `other`: one ConfigMap, one Secret.
struct Cluster {
    sim: KubeSim,
    client: Client,
}

async fn cluster() -> Cluster {
    let sim = KubeSim::start(SimConfig::default())
        .await
        .expect("simulator starts");
    let url = sim.api_url().parse().expect("api_url is a URI");
    let client = Client::try_from(Config::new(url)).expect("client builds");
    install_widget_crd(&client).await;
    let store = sim.store();
    for ns in ["shop", "other"] {
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    for i in 0..CONFIGMAPS {
        let labels = if i < 2 {
            json!({"tier": "front"})
        } else {
            json!({"tier": "back"})
        };
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "shop", "labels": labels},
                "data": {"index": i.to_string()}
            }))
            .unwrap();
    }
    for name in ["db-password", "api-token"] {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "shop"},
                "type": "Opaque", "data": {"value": "c2VjcmV0"}
            }))
            .unwrap();
    }
    store
        .insert(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "front"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
                }
            }
        }))
        .unwrap();
    for (name, size) in [("small", 1), ("large", 9)] {
        store
            .insert(json!({
                "apiVersion": "shop.example.com/v1", "kind": "Widget",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"size": size}
            }))
            .unwrap();
    }
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "elsewhere", "namespace": "other"},
            "data": {"k": "v"}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "elsewhere", "namespace": "other"},
            "type": "Opaque"
        }))
        .unwrap();
    Cluster { sim, client }
}

async fn install_widget_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.shop.example.com"},
        "spec": {
            "group": "shop.example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(
            crds,
            "widgets.shop.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("CRD established within 10s")
    .unwrap();
}

/// A filesystem location rooted in a fresh temporary directory.
fn location(dir: &TempDir) -> Location {
    let spec =
        LocationSpec::new("filesystem", BUCKET).with_config("root", dir.path().to_str().unwrap());
    Location::new(&spec).unwrap()
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(key.to_owned(), value.to_owned())].into()),
        ..LabelSelector::default()
    }
}

async fn get(location: &Location, key: &str) -> Vec<u8> {
    location
        .get(key)
        .await
        .unwrap_or_else(|e| panic!("{key} is stored: {e}"))
        .to_vec()
}

/// Every entry of the stored archive: path → object (versioned copies included).
async fn archive_entries(
    location: &Location,
    name: &str,
) -> (Option<String>, Vec<(String, Value)>) {
    let bytes = get(location, &Layout::new(None).backup_contents(name)).await;
    let options = ReaderOptions {
        include_versioned_copies: true,
        ..ReaderOptions::default()
    };
    let mut reader = ArchiveReader::new(Cursor::new(bytes), options);
    let mut items = reader.items().unwrap();
    let mut entries = Vec::new();
    for item in items.by_ref() {
        let item = item.unwrap();
        entries.push((item.path, item.object));
    }
    (items.format_version().map(str::to_owned), entries)
}

async fn resource_list(location: &Location, name: &str) -> ResourceList {
    let bytes = get(location, &Layout::new(None).backup_resource_list(name)).await;
    read_gz_json(Cursor::new(bytes), 1 << 20).unwrap()
}

async fn results(location: &Location, name: &str) -> Results {
    let bytes = get(location, &Layout::new(None).backup_results(name)).await;
    read_gz_json(Cursor::new(bytes), 1 << 20).unwrap()
}

fn paths(entries: &[(String, Value)]) -> BTreeSet<String> {
    entries.iter().map(|(p, _)| p.clone()).collect()
}

fn both_copies(group_resource: &str, version: &str, place: &str, name: &str) -> [String; 2] {
    [
        format!("resources/{group_resource}/{place}/{name}.json"),
        format!("resources/{group_resource}/{version}-preferredversion/{place}/{name}.json"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_filter_writes_each_selected_item_with_its_namespace_and_crd() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = Backup::named("b1").including_namespaces(&["shop"]);
    let (progress_tx, progress_rx) = watch::channel(Progress::default());
    let options = BackupOptions::default()
        .with_page_size(2)
        .with_progress(progress_tx);

    let outcome = backup_support::check_and_run(client, &location, &backup, options)
        .await
        .unwrap();

    let (version, entries) = archive_entries(&location, "b1").await;
    assert_eq!(version.as_deref(), Some("1.1.0"));
    let mut expected = BTreeSet::new();
    for i in 0..CONFIGMAPS {
        expected.extend(both_copies(
            "configmaps",
            "v1",
            "namespaces/shop",
            &format!("cm-{i}"),
        ));
    }
    for name in ["db-password", "api-token"] {
        expected.extend(both_copies("secrets", "v1", "namespaces/shop", name));
    }
    expected.extend(both_copies(
        "deployments.apps",
        "v1",
        "namespaces/shop",
        "web",
    ));
    for name in ["small", "large"] {
        expected.extend(both_copies(
            "widgets.shop.example.com",
            "v1",
            "namespaces/shop",
            name,
        ));
    }
    expected.extend(both_copies("namespaces", "v1", "cluster", "shop"));
    expected.extend(both_copies(
        "customresourcedefinitions.apiextensions.k8s.io",
        "v1",
        "cluster",
        "widgets.shop.example.com",
    ));
    // kube-sim may create service accounts or root-CA ConfigMaps in new namespaces; whatever it
    // adds must still belong to `shop`, and everything the fixture made must be there.
    let found = paths(&entries);
    let missing: Vec<_> = expected.difference(&found).collect();
    assert!(missing.is_empty(), "missing from the archive: {missing:?}");
    for path in &found {
        assert!(
            path.contains("/namespaces/shop/")
                || path.contains("/cluster/shop.json")
                || path.ends_with("/cluster/widgets.shop.example.com.json"),
            "{path} does not belong to the backup"
        );
    }

    // Items carry their type (a LIST's items do not) and their data, byte-identical in both copies.
    let object = |path: &str| {
        entries
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, o)| o.clone())
            .unwrap()
    };
    let cm = object("resources/configmaps/namespaces/shop/cm-3.json");
    assert_eq!(cm["apiVersion"], "v1");
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["data"]["index"], "3");
    assert_eq!(
        cm,
        object("resources/configmaps/v1-preferredversion/namespaces/shop/cm-3.json")
    );
    let widget = object("resources/widgets.shop.example.com/namespaces/shop/large.json");
    assert_eq!(widget["apiVersion"], "shop.example.com/v1");
    assert_eq!(widget["spec"]["size"], 9);
    assert_eq!(
        object("resources/deployments.apps/namespaces/shop/web.json")["spec"]["replicas"],
        2
    );

    // The resource list names every item once, under apiVersion/Kind.
    let list = resource_list(&location, "b1").await;
    assert_eq!(
        list.get("v1/ConfigMap"),
        [
            "shop/cm-0",
            "shop/cm-1",
            "shop/cm-2",
            "shop/cm-3",
            "shop/cm-4"
        ]
    );
    assert_eq!(
        list.get("v1/Secret"),
        ["shop/api-token", "shop/db-password"]
    );
    assert_eq!(list.get("apps/v1/Deployment"), ["shop/web"]);
    assert_eq!(
        list.get("shop.example.com/v1/Widget"),
        ["shop/large", "shop/small"]
    );
    assert_eq!(list.get("v1/Namespace"), ["shop"]);
    assert_eq!(
        list.get("apiextensions.k8s.io/v1/CustomResourceDefinition"),
        ["widgets.shop.example.com"]
    );
    assert_eq!(list.len() as u64, outcome.items_backed_up);
    assert_eq!(
        entries.len() as u64,
        outcome.items_backed_up * 2,
        "two copies of each item"
    );

    // Completed, with empty results, a log, and no metadata file (the caller commits it).
    assert_eq!(outcome.phase, BackupPhase::Completed);
    assert_eq!((outcome.warnings(), outcome.errors()), (0, 0));
    assert_eq!(results(&location, "b1").await, Results::default());
    let mut log = String::new();
    gunzip_text(
        &get(&location, &Layout::new(None).backup_log("b1")).await,
        &mut log,
    );
    assert!(
        log.contains("Starting backup") && log.contains("backup=velero/b1"),
        "{log}"
    );
    assert!(
        !location.backup_exists("b1").await.unwrap(),
        "velero-backup.json is the caller's to write"
    );

    // ConfigMaps were read two per page, following continue tokens, only in `shop`.
    let cm_lists: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.verb == "list" && r.resource == "configmaps")
        .collect();
    assert!(
        cm_lists
            .iter()
            .all(|r| r.namespace == "shop" && r.path.contains("limit=2")),
        "{cm_lists:?}"
    );
    assert!(
        cm_lists
            .iter()
            .filter(|r| r.path.contains("continue="))
            .count()
            >= 2,
        "{cm_lists:?}"
    );

    // Progress ends at the number of items backed up.
    let progress = *progress_rx.borrow();
    assert_eq!(
        progress,
        Progress {
            items_backed_up: outcome.items_backed_up,
            total_items: outcome.items_backed_up
        }
    );
}

/// Gunzips text with the archive helpers.
fn gunzip_text(bytes: &[u8], out: &mut String) {
    let data = hawser_core::archive::gzjson::gunzip_limited(Cursor::new(bytes), 1 << 20).unwrap();
    Cursor::new(data).read_to_string(out).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selector_keeps_only_matching_items() {
    let Cluster { sim: _sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let mut backup = Backup::named("front").including_namespaces(&["shop"]);
    backup.spec.label_selector = Some(selector("tier", "front"));

    let outcome =
        backup_support::check_and_run(client.clone(), &location, &backup, BackupOptions::default())
            .await
            .unwrap();

    let list = resource_list(&location, "front").await;
    assert_eq!(list.get("v1/ConfigMap"), ["shop/cm-0", "shop/cm-1"]);
    assert_eq!(list.get("apps/v1/Deployment"), ["shop/web"]);
    assert!(list.get("v1/Secret").is_empty());
    assert!(list.get("shop.example.com/v1/Widget").is_empty());
    // The namespace of the backed-up items is kept.
    assert_eq!(list.get("v1/Namespace"), ["shop"]);
    assert_eq!(outcome.phase, BackupPhase::Completed);

    // OR selectors: one LIST per selector, items matching several are stored once.
    let mut backup = Backup::named("either").including_namespaces(&["shop"]);
    backup.spec.or_label_selectors =
        Some(vec![selector("tier", "front"), selector("app", "nothing")]);
    let outcome =
        backup_support::check_and_run(client, &location, &backup, BackupOptions::default())
            .await
            .unwrap();
    let list = resource_list(&location, "either").await;
    assert_eq!(list.get("v1/ConfigMap"), ["shop/cm-0", "shop/cm-1"]);
    assert_eq!(outcome.items_backed_up as usize, list.len());
    let (_, entries) = archive_entries(&location, "either").await;
    assert_eq!(
        entries.len(),
        list.len() * 2,
        "each item twice (unversioned and preferred), no duplicates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_namespaces_backup_lists_cluster_wide_and_takes_cluster_types() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = Backup::named("full");

    let outcome =
        backup_support::check_and_run(client, &location, &backup, BackupOptions::default())
            .await
            .unwrap();

    let list = resource_list(&location, "full").await;
    let configmaps = list.get("v1/ConfigMap");
    assert!(
        configmaps.contains(&"other/elsewhere") && configmaps.contains(&"shop/cm-4"),
        "{configmaps:?}"
    );
    let namespaces = list.get("v1/Namespace");
    for ns in ["default", "other", "shop"] {
        assert!(namespaces.contains(&ns), "{namespaces:?}");
    }
    assert_eq!(
        list.get("apiextensions.k8s.io/v1/CustomResourceDefinition"),
        ["widgets.shop.example.com"]
    );
    assert_eq!(outcome.phase, BackupPhase::Completed);
    // One LIST per type, cluster-wide.
    assert!(
        sim.requests()
            .iter()
            .filter(|r| r.verb == "list" && r.resource == "configmaps")
            .all(|r| r.namespace.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_and_failing_reads_are_retried_honouring_retry_after() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    // Each kind of answer a busy API server gives, once: a 503 Status, the plain-text 429 of
    // priority and fairness whose only hint is its `Retry-After` header, and a 500 with
    // `retryAfterSeconds` in its Status.
    let faults = sim.faults();
    faults.status(
        StatusFault::new(503)
            .verbs(&["list"])
            .resources(&["secrets"])
            .count(1),
    );
    faults.status(
        StatusFault::new(429)
            .plain()
            .retry_after(1)
            .verbs(&["list"])
            .resources(&["configmaps"])
            .count(1),
    );
    faults.status(
        StatusFault::new(500)
            .retry_after(1)
            .verbs(&["get"])
            .resources(&["customresourcedefinitions"])
            .count(1),
    );
    let backup = Backup::named("busy").including_namespaces(&["shop"]);
    let before = sim.last_request_seq();
    let started = std::time::Instant::now();

    let outcome =
        backup_support::check_and_run(client, &location, &backup, BackupOptions::default())
            .await
            .unwrap();

    let elapsed = started.elapsed();
    assert_eq!(
        (outcome.phase.clone(), outcome.errors(), outcome.warnings()),
        (BackupPhase::Completed, 0, 0),
        "{:?}",
        outcome.results
    );
    let list = resource_list(&location, "busy").await;
    assert_eq!(list.get("v1/ConfigMap").len(), CONFIGMAPS);
    assert_eq!(list.get("v1/Secret").len(), 2);
    assert!(
        !list
            .get("apiextensions.k8s.io/v1/CustomResourceDefinition")
            .is_empty(),
        "{list:?}"
    );
    // Each refused read was sent again (the same path), and answered.
    let log = sim.requests_since(before);
    for (verb, resource, code) in [
        ("list", "secrets", 503),
        ("list", "configmaps", 429),
        ("get", "customresourcedefinitions", 500),
    ] {
        let refused = log
            .iter()
            .find(|r| r.verb == verb && r.resource == resource && r.code == code)
            .unwrap_or_else(|| panic!("no {code} for {verb} {resource}"));
        let again: Vec<u16> = log
            .iter()
            .filter(|r| r.seq > refused.seq && r.path == refused.path)
            .map(|r| r.code)
            .collect();
        assert!(
            matches!(again.first(), Some(200 | 404)),
            "{verb} {}: {again:?}",
            refused.path
        );
    }
    // Two of the three asked for a one-second pause.
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanished_type_is_a_warning_and_a_failed_list_an_error() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    sim.faults().status(
        StatusFault::new(404)
            .verbs(&["list"])
            .resources(&["widgets"]),
    );
    sim.faults().status(
        StatusFault::new(500)
            .verbs(&["list"])
            .resources(&["secrets"]),
    );
    let backup = Backup::named("b2").including_namespaces(&["shop"]);
    // A 500 that lasts longer than the read budget is an error of that type.
    let options = BackupOptions::default().with_api_retry(Duration::from_millis(300));

    let outcome = backup_support::check_and_run(client, &location, &backup, options)
        .await
        .unwrap();

    assert_eq!(outcome.phase, BackupPhase::PartiallyFailed);
    let stored = results(&location, "b2").await;
    assert_eq!(stored, outcome.results);
    let warnings = &stored.warnings.namespaces["shop"];
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("widgets.shop.example.com") && warnings[0].contains("404"),
        "{warnings:?}"
    );
    let errors = &stored.errors.namespaces["shop"];
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("secrets"), "{errors:?}");
    assert_eq!((outcome.warnings(), outcome.errors()), (1, 1));
    // Everything else is still backed up.
    let list = resource_list(&location, "b2").await;
    assert_eq!(list.get("v1/ConfigMap").len(), CONFIGMAPS);
    assert!(list.get("v1/Secret").is_empty());

    // The record carries the final status.
    let record = backup::record(&backup, &outcome).unwrap();
    assert_eq!(record["kind"], "Backup");
    assert_eq!(record["status"]["phase"], "PartiallyFailed");
    assert_eq!(record["status"]["warnings"], 1);
    assert_eq!(record["status"]["errors"], 1);
    assert_eq!(record["status"]["formatVersion"], "1.1.0");
    assert_eq!(record["status"]["version"], 1);
    assert_eq!(
        record["status"]["progress"]["itemsBackedUp"],
        outcome.items_backed_up
    );
    assert!(
        record["status"]["startTimestamp"].is_string()
            && record["status"]["completionTimestamp"].is_string()
    );
}

#[test]
fn record_expiration_is_start_plus_ttl() {
    let started: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let outcome = BackupOutcome {
        phase: BackupPhase::Completed,
        started,
        completed: "2026-01-01T00:05:00Z".parse().unwrap(),
        items_backed_up: 7,
        results: Results::default(),
        archive_bytes: 100,
        failure_reason: None,
        operations: Vec::new(),
        archive_key_id: None,
        hooks: backup::hooks::Tally::default(),
    };
    let record = backup::record(&Backup::named("b"), &outcome).unwrap();
    assert_eq!(
        record["status"]["expiration"], "2026-01-31T00:00:00Z",
        "default ttl is 720h"
    );
    assert_eq!(
        record["status"]["completionTimestamp"],
        "2026-01-01T00:05:00Z"
    );
    assert_eq!(record["status"]["progress"]["totalItems"], 7);
    let mut backup = Backup::named("b");
    backup.spec.ttl = Some("1h".parse().unwrap());
    let record = backup::record(&backup, &outcome).unwrap();
    assert_eq!(record["status"]["expiration"], "2026-01-01T01:00:00Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spec_is_a_validation_error_and_stores_nothing() {
    let Cluster { sim: _sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let mut backup = Backup::named("bad");
    backup.spec.label_selector = Some(selector("a", "b"));
    backup.spec.or_label_selectors = Some(vec![selector("c", "d")]);

    let error =
        backup_support::check_and_run(client.clone(), &location, &backup, BackupOptions::default())
            .await
            .unwrap_err();

    match &error {
        BackupError::Validation { messages } => {
            assert_eq!(messages, &[BOTH_SELECTORS_MESSAGE.to_owned()])
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(error.phase(), BackupPhase::FailedValidation);
    // On disk, not through the location's listing (which hides unfinished uploads).
    assert_eq!(store_common::files_under(dir.path()), Vec::<String>::new());

    // A read-only location refuses the backup before any LIST.
    let spec = LocationSpec::new("filesystem", BUCKET)
        .with_config("root", dir.path().to_str().unwrap())
        .with_access_mode(AccessMode::ReadOnly);
    let read_only = Location::new(&spec).unwrap();
    let error = backup_support::check_and_run(
        client,
        &read_only,
        &Backup::named("ro"),
        BackupOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, BackupError::ReadOnlyLocation), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_continue_token_resumes_the_list_with_the_offered_token() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    sim.faults().latency(
        LatencyFault::new(Duration::from_millis(300))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let backup = Backup::named("b4").including_namespaces(&["shop"]);
    let task = {
        let (client, location, backup) = (client.clone(), location.clone(), backup.clone());
        tokio::spawn(async move {
            let options = BackupOptions::default().with_page_size(2);
            backup_support::check_and_run(client, &location, &backup, options).await
        })
    };
    // After the first page, a write and a compaction make the first page's token too old.
    tokio::time::timeout(Duration::from_secs(10), async {
        while !sim
            .requests()
            .iter()
            .any(|r| r.verb == "list" && r.resource == "configmaps")
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the first ConfigMap page is served");
    sim.store()
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "other"}}))
        .unwrap();
    sim.store().compact_history();

    let outcome = task.await.unwrap().unwrap();

    let cm_lists: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.verb == "list" && r.resource == "configmaps")
        .collect();
    assert!(cm_lists.iter().any(|r| r.code == 410), "{cm_lists:?}");
    let list = resource_list(&location, "b4").await;
    assert_eq!(
        list.get("v1/ConfigMap"),
        [
            "shop/cm-0",
            "shop/cm-1",
            "shop/cm-2",
            "shop/cm-3",
            "shop/cm-4"
        ]
    );
    let warnings = &outcome.results.warnings.namespaces["shop"];
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("continue token expired")),
        "{warnings:?}"
    );
    assert_eq!(outcome.phase, BackupPhase::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_resources_lead_their_type_and_unbuilt_fields_are_warnings() {
    let Cluster { sim, client } = cluster().await;
    sim.store()
        .insert(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let mut backup = Backup::named("ordered").including_namespaces(&["shop"]);
    backup.spec.ordered_resources = Some(
        [(
            "configmaps".to_owned(),
            "shop/cm-3,shop/cm-1,shop/gone".to_owned(),
        )]
        .into(),
    );
    backup.spec.volume_group_snapshot_label_key = Some("group".to_owned());

    // Pages of 2: the held items of the ordered type go out in several batches too.
    let options = BackupOptions::default().with_page_size(2);
    let outcome = backup_support::check_and_run(client, &location, &backup, options)
        .await
        .unwrap();

    let (_, entries) = archive_entries(&location, "ordered").await;
    let configmaps: Vec<&str> = entries
        .iter()
        .filter_map(|(p, _)| p.strip_prefix("resources/configmaps/namespaces/shop/"))
        .collect();
    assert_eq!(
        configmaps,
        [
            "cm-3.json",
            "cm-1.json",
            "cm-0.json",
            "cm-2.json",
            "cm-4.json"
        ],
        "the named items first, in the given order, then the rest in listing order"
    );
    let stored = results(&location, "ordered").await;
    let warnings = &stored.warnings.velero;
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("spec.volumeGroupSnapshotLabelKey")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("configmaps shop/gone")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("1 PersistentVolumeClaims were backed up as objects only")),
        "{warnings:?}"
    );
    assert_eq!(outcome.phase, BackupPhase::Completed);
    assert_eq!(outcome.warnings(), 3);
    let mut log = String::new();
    gunzip_text(
        &get(&location, &Layout::new(None).backup_log("ordered")).await,
        &mut log,
    );
    assert!(log.contains("spec.volumeGroupSnapshotLabelKey"), "{log}");
}
