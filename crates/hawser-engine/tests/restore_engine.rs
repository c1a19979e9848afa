//! The restore engine against kube-sim with a filesystem storage location: a backup made by
//! the backup engine is restored (round trip, namespace mapping, filters, existing objects,
//! CRDs before their custom resources, namespaces deleted or terminating).
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod restore_support;

use hawser_api::phase::RestorePhase;
use hawser_core::restore::{BACKUP_NAME_LABEL, RESTORE_NAME_LABEL};
use hawser_engine::restore::{self, Progress, RestoreError, RestoreOptions, RestoreOutcome};
use restore_support::*;
use serde_json::json;
use tempfile::TempDir;
use tokio::sync::watch;

const BACKUP: &str = "shop-backup";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapped_round_trip_restores_every_item_cleaned_into_the_target_namespace() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    let restore = restore_of(
        "r1",
        BACKUP,
        json!({"namespaceMapping": {"shop": "shop-copy"}}),
    );
    let (tx, rx) = watch::channel(Progress::default());
    let outcome = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default().with_progress(tx),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    assert_eq!(outcome.errors(), 0);
    let store = sim.store();
    // The target namespace is built from the archived one.
    let ns = store.get("v1", "Namespace", "", "shop-copy").unwrap();
    assert_eq!(ns["metadata"]["labels"]["team"], "shop");
    assert_eq!(ns["metadata"]["annotations"]["owner"], "ops");
    assert_eq!(ns["metadata"]["labels"][RESTORE_NAME_LABEL], "r1");
    // Every archived ConfigMap, Secret and Widget is back with its data, relabelled.
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("shop.example.com/v1", "Widget"),
    ] {
        let original = store.list(api_version, kind, Some("shop"));
        let copies = store.list(api_version, kind, Some("shop-copy"));
        assert_eq!(names(&copies), names(&original), "{kind}");
        for (o, c) in original.iter().zip(&copies) {
            let mut want = user_fields(o);
            let labels = want["metadata"]
                .as_object_mut()
                .unwrap()
                .entry("labels")
                .or_insert(json!({}));
            labels[BACKUP_NAME_LABEL] = json!(BACKUP);
            labels[RESTORE_NAME_LABEL] = json!("r1");
            assert_eq!(user_fields(c), want, "{kind}");
            assert_ne!(c["metadata"]["uid"], o["metadata"]["uid"]);
        }
    }
    // The running pod lost its node and priority; the finished one is not restored.
    let pod = store.get("v1", "Pod", "shop-copy", "web-0").unwrap();
    assert!(pod["spec"].get("nodeName").is_none(), "{pod}");
    assert!(pod["spec"].get("priority").is_none(), "{pod}");
    assert!(store.get("v1", "Pod", "shop-copy", "migrate").is_none());
    // The Service lost its cluster IP and its auto-assigned node port.
    let svc = store.get("v1", "Service", "shop-copy", "web").unwrap();
    assert_ne!(svc["spec"]["clusterIP"], "10.96.0.10");
    assert_ne!(svc["spec"]["ports"][0]["nodePort"], 30080);
    // Status is not restored unless asked.
    let widget = store
        .get("shop.example.com/v1", "Widget", "shop-copy", "large")
        .unwrap();
    assert!(
        widget
            .get("status")
            .is_none_or(|s| s.get("ready").is_none())
    );
    // Nothing of the source namespace changed.
    assert_eq!(store.list("v1", "ConfigMap", Some("shop")).len(), 4);

    let list = restored_list(&location, "r1").await;
    assert_eq!(list.get("v1/Namespace"), ["shop-copy(created)"]);
    assert_eq!(
        list.get("v1/ConfigMap"),
        (0..4)
            .map(|i| format!("shop-copy/cm-{i}(created)"))
            .collect::<Vec<_>>()
    );
    assert_eq!(list.get("v1/Pod"), ["shop-copy/web-0(created)"]);
    // The Widget CRD was in the cluster already, identical: skipped.
    assert_eq!(
        list.get("apiextensions.k8s.io/v1/CustomResourceDefinition"),
        ["widgets.shop.example.com(skipped)"]
    );
    let p = *rx.borrow();
    assert_eq!(p.items_restored, outcome.items_restored);
    assert_eq!(p.total_items, outcome.items_restored);
    assert_eq!(outcome.items_restored as usize, list.len());
    // Everything fits in the memory budget: nothing waits in a temporary file.
    assert_eq!(outcome.spilled_bytes, 0);
    let log = log_text(&location, "r1").await;
    assert!(
        log.contains("Skipped 1 items of pods: finished_pod"),
        "{log}"
    );
    assert!(results(&location, "r1").await.errors.namespaces.is_empty());

    let record = restore::record(&restore, &outcome).unwrap();
    assert_eq!(record["status"]["phase"], "Completed");
    assert_eq!(
        record["status"]["progress"]["itemsRestored"],
        json!(outcome.items_restored)
    );
    assert!(record["status"]["completionTimestamp"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_that_wait_in_the_temporary_file_give_the_same_restore() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    let restore = restore_of("r1", BACKUP, json!({"namespaceMapping": {"shop": "s2"}}));
    let outcome = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default()
            .with_look_ahead_bytes(0)
            .with_concurrency(1),
    )
    .await
    .unwrap();
    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let types = restored_list(&location, "r1").await;
    assert!(outcome.spilled_bytes > 0, "{types:?}");
    assert_eq!(types.len(), outcome.items_restored as usize);
    let store = sim.store();
    assert_eq!(store.list("v1", "ConfigMap", Some("s2")).len(), 4);
    assert_eq!(
        store
            .list("shop.example.com/v1", "Widget", Some("s2"))
            .len(),
        2
    );
    // Read back from the file, each item carries what was archived.
    for original in store.list("v1", "ConfigMap", Some("shop")) {
        let name = original["metadata"]["name"].as_str().unwrap();
        let copy = store.get("v1", "ConfigMap", "s2", name).unwrap();
        assert_eq!(copy["data"], original["data"], "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_restore_only_the_selected_items() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    let restore = restore_of(
        "front",
        BACKUP,
        json!({
            "includedResources": ["configmaps", "secrets"],
            "labelSelector": {"matchLabels": {"tier": "front"}},
            "namespaceMapping": {"shop": "front"}
        }),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;
    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let store = sim.store();
    assert_eq!(
        names(&store.list("v1", "ConfigMap", Some("front"))),
        ["cm-0", "cm-1"]
    );
    assert!(store.list("v1", "Secret", Some("front")).is_empty());
    assert!(store.list("v1", "Pod", Some("front")).is_empty());
    let list = restored_list(&location, "front").await;
    assert_eq!(list.len(), 3, "{list:?}"); // the namespace and two ConfigMaps

    let restore = restore_of(
        "no-cm",
        BACKUP,
        json!({"excludedResources": ["configmaps", "pods", "widgets.shop.example.com"],
            "namespaceMapping": {"shop": "no-cm"}}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;
    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    assert!(store.list("v1", "ConfigMap", Some("no-cm")).is_empty());
    assert!(store.list("v1", "Pod", Some("no-cm")).is_empty());
    assert_eq!(names(&store.list("v1", "Secret", Some("no-cm"))), ["db"]);
    assert_eq!(names(&store.list("v1", "Service", Some("no-cm"))), ["web"]);

    // A namespace filter that excludes the only namespace restores nothing at all.
    let none = restore_of("none", BACKUP, json!({"excludedNamespaces": ["shop"]}));
    let before = store.resource_version();
    let outcome = run_restore(&client, &location, &none, &backup).await;
    assert_eq!(outcome.items_restored, 0);
    assert_eq!(outcome.warnings(), 1, "{:?}", outcome.results);
    assert_eq!(store.resource_version(), before, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spec_is_failed_validation_and_touches_nothing() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    let before = sim.store().resource_version();
    let restore = restore_of(
        "bad",
        BACKUP,
        json!({"includedResources": ["nodes"], "existingResourcePolicy": "overwrite"}),
    );
    let err = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default(),
    )
    .await
    .unwrap_err();
    let RestoreError::Validation { messages } = &err else {
        panic!("expected a validation error, got {err:?}");
    };
    assert_eq!(
        messages,
        &[
            "nodes are non-restorable resources".to_owned(),
            "invalid existingResourcePolicy: overwrite".to_owned()
        ]
    );
    assert_eq!(err.phase(), RestorePhase::FailedValidation);
    assert_eq!(err.category(), "FailedValidation");
    let now = jiff::Timestamp::now();
    let record = restore::record(&restore, &RestoreOutcome::failed(&err, now, now)).unwrap();
    assert_eq!(record["status"]["phase"], "FailedValidation");
    assert_eq!(record["status"]["validationErrors"], json!(messages));
    assert_eq!(sim.store().resource_version(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_with_policy_none_are_kept_and_warned_about() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    change_cm_2(&sim).await;
    sim.store()
        .delete("v1", "ConfigMap", "shop", "cm-3")
        .unwrap();

    let restore = restore_of(
        "again",
        BACKUP,
        json!({"includedResources": ["configmaps"]}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let store = sim.store();
    let cm2 = store.get("v1", "ConfigMap", "shop", "cm-2").unwrap();
    assert_eq!(cm2["data"]["index"], "changed", "policy none leaves it");
    let cm3 = store.get("v1", "ConfigMap", "shop", "cm-3").unwrap();
    assert_eq!(cm3["data"]["index"], "3", "the deleted one is back");
    let cm0 = store.get("v1", "ConfigMap", "shop", "cm-0").unwrap();
    assert!(
        cm0["metadata"]["labels"].get(RESTORE_NAME_LABEL).is_none(),
        "an equal object is not touched without policy update"
    );
    assert_eq!(
        outcome.results.warnings.namespaces["shop"],
        [
            "could not restore, ConfigMap \"cm-2\" already exists. Warning: the in-cluster version is different than the backed-up version"
        ]
    );
    let list = restored_list(&location, "again").await;
    assert_eq!(
        list.get("v1/ConfigMap"),
        [
            "shop/cm-0(skipped)",
            "shop/cm-1(skipped)",
            "shop/cm-2(failed)",
            "shop/cm-3(created)"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_with_policy_update_are_patched_back() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    change_cm_2(&sim).await;

    let restore = restore_of(
        "update",
        BACKUP,
        json!({"includedResources": ["configmaps"], "existingResourcePolicy": "update"}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    assert_eq!(outcome.warnings(), 0, "{:?}", outcome.results);
    let store = sim.store();
    let cm2 = store.get("v1", "ConfigMap", "shop", "cm-2").unwrap();
    assert_eq!(cm2["data"]["index"], "2");
    assert_eq!(cm2["metadata"]["labels"][RESTORE_NAME_LABEL], "update");
    // Equal objects get the restore labels with policy update.
    let cm0 = store.get("v1", "ConfigMap", "shop", "cm-0").unwrap();
    assert_eq!(cm0["metadata"]["labels"][BACKUP_NAME_LABEL], BACKUP);
    let list = restored_list(&location, "update").await;
    assert_eq!(
        list.get("v1/ConfigMap"),
        [
            "shop/cm-0(skipped)",
            "shop/cm-1(skipped)",
            "shop/cm-2(updated)",
            "shop/cm-3(skipped)"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_is_restored_and_established_before_its_custom_resources() {
    let source = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&source.client, &location, BACKUP).await;
    // A fresh cluster that has never heard of Widgets.
    let Cluster { sim, client } = empty_cluster().await;
    let restore = restore_of(
        "to-new",
        BACKUP,
        json!({"restoreStatus": {"includedResources": ["widgets.shop.example.com"]}}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let store = sim.store();
    assert!(
        store
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "",
                WIDGET_CRD
            )
            .is_some()
    );
    let widgets = store.list("shop.example.com/v1", "Widget", Some("shop"));
    assert_eq!(names(&widgets), ["large", "small"]);
    // restoreStatus includes Widgets: the archived status is re-applied.
    let large = store
        .get("shop.example.com/v1", "Widget", "shop", "large")
        .unwrap();
    assert_eq!(large["status"]["ready"], true, "{large}");
    // The CRD was created before any Widget.
    let creates: Vec<String> = sim
        .requests()
        .iter()
        .filter(|r| r.verb == "create")
        .map(|r| r.resource.clone())
        .collect();
    let crd_at = creates
        .iter()
        .position(|r| r == "customresourcedefinitions")
        .expect("the CRD was created");
    let widget_at = creates
        .iter()
        .position(|r| r == "widgets")
        .expect("widgets were created");
    assert!(crd_at < widget_at, "{creates:?}");
    let list = restored_list(&location, "to-new").await;
    assert_eq!(
        list.get("apiextensions.k8s.io/v1/CustomResourceDefinition"),
        ["widgets.shop.example.com(created)"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_namespace_is_restored_in_place() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    let originals = sim.store().list("v1", "ConfigMap", Some("shop"));
    sim.store().delete("v1", "Namespace", "", "shop").unwrap();

    let restore = restore_of("back", BACKUP, json!({}));
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let store = sim.store();
    let ns = store.get("v1", "Namespace", "", "shop").unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["metadata"]["labels"]["team"], "shop");
    let restored = store.list("v1", "ConfigMap", Some("shop"));
    assert_eq!(names(&restored), names(&originals));
    for (o, r) in originals.iter().zip(&restored) {
        assert_eq!(r["data"], o["data"]);
        assert_eq!(r["metadata"]["labels"][RESTORE_NAME_LABEL], "back");
    }
    let list = restored_list(&location, "back").await;
    assert_eq!(list.get("v1/Namespace"), ["shop(created)"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_stuck_terminating_fails_its_items_after_the_timeout() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    // A finalizer nobody removes keeps the namespace terminating.
    let mut held = sim.store().get("v1", "ConfigMap", "shop", "cm-0").unwrap();
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    sim.store().insert(held).unwrap();
    sim.store().delete("v1", "Namespace", "", "shop").unwrap();

    let restore = restore_of("stuck", BACKUP, json!({"includedResources": ["secrets"]}));
    let outcome = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default().with_terminating_timeout(std::time::Duration::from_secs(2)),
    )
    .await
    .unwrap();

    assert_eq!(outcome.phase, RestorePhase::PartiallyFailed);
    let errors = &outcome.results.errors.namespaces["shop"];
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("error restoring secrets/shop/db: namespace shop is not available")
            && errors[0].contains("still terminating"),
        "{errors:?}"
    );
    assert!(sim.store().get("v1", "Secret", "shop", "db").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_shed_with_429_are_sent_again_and_other_failures_are_item_errors() {
    let Cluster { sim, client } = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = back_up_shop(&client, &location, BACKUP).await;
    // Priority and fairness sheds two ConfigMap creates (plain text, `Retry-After: 1`); a
    // Secret create fails with 500, which may have been applied, so it is not sent again.
    sim.faults().status(
        kube_sim::StatusFault::new(429)
            .plain()
            .retry_after(1)
            .verbs(&["create"])
            .resources(&["configmaps"])
            .count(2),
    );
    sim.faults().status(
        kube_sim::StatusFault::new(500)
            .verbs(&["create"])
            .resources(&["secrets"])
            .count(1),
    );
    let before = sim.last_request_seq();
    let restore = restore_of(
        "busy",
        BACKUP,
        json!({"namespaceMapping": {"shop": "shop-busy"}}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    let store = sim.store();
    assert_eq!(
        names(&store.list("v1", "ConfigMap", Some("shop-busy"))),
        names(&store.list("v1", "ConfigMap", Some("shop"))),
        "every ConfigMap is restored"
    );
    let secrets = store.list("v1", "Secret", Some("shop"));
    assert_eq!(
        store.list("v1", "Secret", Some("shop-busy")).len(),
        secrets.len() - 1
    );
    assert_eq!(outcome.phase, RestorePhase::PartiallyFailed);
    assert_eq!(outcome.errors(), 1, "{:?}", outcome.results);
    let log = sim.requests_since(before);
    let sent = |resource: &str, code: u16| {
        log.iter()
            .filter(|r| r.verb == "create" && r.resource == resource && r.code == code)
            .count()
    };
    assert_eq!(sent("configmaps", 429), 2);
    assert_eq!(sent("secrets", 500), 1);
    assert_eq!(
        sent("secrets", 201),
        secrets.len() - 1,
        "the failed Secret create was sent again"
    );
}
