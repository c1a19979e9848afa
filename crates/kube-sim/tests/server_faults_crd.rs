//! The `delay-established` fault: a new CRD shows `Established=False` (or no conditions) until the
//! delay is over, watchers see the change, and discovery lists its resources only then.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod server_support;

use std::time::Duration;

use http::StatusCode;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions};
use kube_sim::EstablishDelayFault;
use serde_json::{Value, json};
use server_support::{Raw, start};
use tokio::time::Instant;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn crd(plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

/// The `(status, reason)` of a CRD condition, if present.
fn condition(crd: &Value, kind: &str) -> Option<(String, String)> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
}

fn pair(status: &str, reason: &str) -> Option<(String, String)> {
    Some((status.to_string(), reason.to_string()))
}

async fn discovered(c: &Raw) -> bool {
    let groups = c.get("/apis").await.json();
    groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "example.com")
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}})
}

#[tokio::test]
async fn delayed_crd_is_installing_then_established_and_a_watch_sees_the_change() {
    let (sim, c) = start().await;
    sim.faults().delay_established(
        EstablishDelayFault::new(Duration::from_secs(1)).name("widgets.example.com"),
    );
    let list_rv = c.get(CRDS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let w = Raw::new(&c.base);
    let watch = tokio::spawn(async move {
        w.watch_lines(
            &format!("{CRDS}?watch=true&resourceVersion={list_rv}&fieldSelector=metadata.name%3Dwidgets.example.com"),
            3,
            Duration::from_secs(5),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let created = Instant::now();
    assert_eq!(
        c.post(CRDS, &crd("widgets", "Widget")).await.status,
        StatusCode::CREATED
    );

    let installing = c.get(&format!("{CRDS}/widgets.example.com")).await.json();
    assert_eq!(
        condition(&installing, "NamesAccepted"),
        pair("True", "NoConflicts")
    );
    assert_eq!(
        condition(&installing, "Established"),
        pair("False", "Installing")
    );
    assert!(!discovered(&c).await, "discovery waits for Established");
    assert_eq!(
        c.get("/apis/example.com/v1").await.status,
        StatusCode::NOT_FOUND
    );
    // As on a real server, accepted names are enough for the custom resource handler.
    assert_eq!(
        c.post(WIDGETS, &widget("early")).await.status,
        StatusCode::CREATED
    );

    let (_, events) = watch.await.unwrap();
    assert!(
        created.elapsed() >= Duration::from_secs(1),
        "established after the delay"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["ADDED", "MODIFIED", "MODIFIED"]);
    assert_eq!(
        condition(&events[1]["object"], "Established"),
        pair("False", "Installing")
    );
    assert_eq!(
        condition(&events[2]["object"], "Established"),
        pair("True", "InitialNamesAccepted")
    );
    let established = c.get(&format!("{CRDS}/widgets.example.com")).await.json();
    assert_eq!(
        condition(&established, "Established"),
        pair("True", "InitialNamesAccepted")
    );
    assert!(discovered(&c).await, "listed once established");

    // The fault matches its CRD name only: others are established at once.
    c.post(CRDS, &crd("gadgets", "Gadget")).await;
    let gadgets = c.get(&format!("{CRDS}/gadgets.example.com")).await.json();
    assert_eq!(
        condition(&gadgets, "Established"),
        pair("True", "InitialNamesAccepted")
    );
}

#[tokio::test]
async fn delayed_names_via_admin_api_hide_the_custom_resources_until_established() {
    let (sim, c) = start().await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    let r = admin
        .post(
            "/faults",
            &json!({"kind": "delay-established", "delaySeconds": 0.5, "delayNames": true, "count": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    c.post(CRDS, &crd("widgets", "Widget")).await;
    let pending = c.get(&format!("{CRDS}/widgets.example.com")).await.json();
    assert_eq!(
        pending["status"]["conditions"],
        json!([]),
        "no conditions yet"
    );
    assert_eq!(
        c.post(WIDGETS, &widget("early")).await.status,
        StatusCode::NOT_FOUND,
        "custom resources are not served before the names are accepted"
    );
    let mut served = false;
    for _ in 0..100 {
        if c.get(WIDGETS).await.status == StatusCode::OK {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "served after the delay");
    let done = c.get(&format!("{CRDS}/widgets.example.com")).await.json();
    assert_eq!(
        condition(&done, "NamesAccepted"),
        pair("True", "NoConflicts")
    );
    assert_eq!(
        condition(&done, "Established"),
        pair("True", "InitialNamesAccepted")
    );
    assert!(discovered(&c).await);
    assert_eq!(
        admin.get("/faults").await.json(),
        json!([]),
        "count used up"
    );
}

#[tokio::test]
async fn kube_rs_await_established_waits_out_the_delay() {
    let (sim, _c) = start().await;
    sim.faults()
        .delay_established(EstablishDelayFault::new(Duration::from_millis(800)));
    let client = kube::Client::try_from(kube::Config::new(sim.api_url().parse().unwrap())).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let body: CustomResourceDefinition = serde_json::from_value(crd("widgets", "Widget")).unwrap();
    let started = Instant::now();
    crds.create(&Default::default(), &body).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(
            crds,
            "widgets.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("established within 5s")
    .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(800));
}
