//! The restore's wait for a restored CRD to be `Established` before its custom resources, with
//! kube-sim's `delay-established` fault (until then the CRD's names are accepted, its objects
//! are served, but discovery does not list them, as on a real server between its naming and
//! establishing controllers).
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod restore_support;

use std::time::{Duration, Instant};

use hawser_api::Backup;
use hawser_api::phase::RestorePhase;
use hawser_engine::restore::RestoreOptions;
use hawser_store::Location;
use kube_sim::EstablishDelayFault;
use restore_support::*;
use serde_json::json;
use tempfile::TempDir;

const BACKUP: &str = "shop-backup";

struct Setup {
    /// A fresh cluster that has never heard of Widgets.
    target: Cluster,
    location: Location,
    backup: Backup,
}

/// A backup of `shop` (with its Widgets and their CRD) and a fresh cluster whose next Widget
/// CRD becomes established only `delay` after its creation.
async fn slow_crds(dir: &TempDir, delay: Duration) -> Setup {
    let source = cluster().await;
    let location = location(dir);
    let backup = back_up_shop(&source.client, &location, BACKUP).await;
    let target = empty_cluster().await;
    target
        .sim
        .faults()
        .delay_established(EstablishDelayFault::new(delay).name(WIDGET_CRD));
    Setup {
        target,
        location,
        backup,
    }
}

/// Seconds since the epoch of a request-log time.
fn seconds(time: &str) -> f64 {
    let ts: jiff::Timestamp = time.parse().unwrap();
    ts.as_millisecond() as f64 / 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_wait_for_a_crd_that_is_established_late() {
    let dir = TempDir::new().unwrap();
    let delay = Duration::from_secs(2);
    let Setup {
        target: Cluster { sim, client },
        location,
        backup,
    } = slow_crds(&dir, delay).await;
    let restore = restore_of("slow-crd", BACKUP, json!({}));

    let outcome = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default().with_crd_ready_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let widgets = sim
        .store()
        .list("shop.example.com/v1", "Widget", Some("shop"));
    assert_eq!(names(&widgets), ["large", "small"]);
    // No Widget was created before the CRD had been established.
    let log = sim.requests();
    let crd_created = log
        .iter()
        .find(|r| r.verb == "create" && r.resource == "customresourcedefinitions")
        .expect("the CRD was created");
    let first_widget = log
        .iter()
        .find(|r| r.verb == "create" && r.resource == "widgets")
        .expect("widgets were created");
    let waited = seconds(&first_widget.time) - seconds(&crd_created.time);
    assert!(
        waited >= delay.as_secs_f64() - 0.05,
        "the first Widget was created {waited:.2}s after its CRD, before it was established"
    );
    let list = restored_list(&location, "slow-crd").await;
    assert_eq!(
        list.get("shop.example.com/v1/Widget"),
        ["shop/large(created)", "shop/small(created)"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_not_established_within_the_timeout_is_an_error_and_its_resources_fail() {
    let dir = TempDir::new().unwrap();
    let Setup {
        target: Cluster { sim, client },
        location,
        backup,
    } = slow_crds(&dir, Duration::from_secs(30)).await;
    let restore = restore_of("stuck-crd", BACKUP, json!({}));

    let started = Instant::now();
    let outcome = check_and_run(
        &client,
        &location,
        &restore,
        &backup,
        RestoreOptions::default().with_crd_ready_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let took = started.elapsed();

    assert_eq!(outcome.phase, RestorePhase::PartiallyFailed);
    let cluster_errors = &outcome.results.errors.cluster;
    assert!(
        cluster_errors.iter().any(|e| e
            == "CustomResourceDefinition widgets.shop.example.com was not established within 1s"),
        "{:?}",
        outcome.results
    );
    // The wait gave up at its timeout, not at the establishment 30 s later.
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(20),
        "{took:?}"
    );
    // The Widgets are errors of their own, and none exists.
    let shop_errors = &outcome.results.errors.namespaces["shop"];
    assert_eq!(shop_errors.len(), 2, "{shop_errors:?}");
    assert!(
        shop_errors
            .iter()
            .all(|e| e.contains("widgets.shop.example.com")),
        "{shop_errors:?}"
    );
    assert!(
        sim.store()
            .list("shop.example.com/v1", "Widget", Some("shop"))
            .is_empty()
    );
    // The rest of the backup is restored.
    assert_eq!(sim.store().list("v1", "ConfigMap", Some("shop")).len(), 4);
}
