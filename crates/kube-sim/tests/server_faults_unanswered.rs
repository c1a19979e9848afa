//! Requests that never get their answer: `drop-response` (applied, then the connection closes)
//! and `hang` (held unserved, then the connection closes), through the handle, the admin HTTP API
//! and a kube-rs client with a read timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod server_support;

use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube_sim::{DropResponseFault, HangFault, KubeSim};
use serde_json::{Value, json};
use server_support::{Raw, cm, start};
use tokio::time::Instant;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const MERGE: &str = "application/merge-patch+json";

fn set_k(value: &str) -> String {
    json!({"data": {"k": value}}).to_string()
}

async fn data_k(c: &Raw, name: &str) -> Value {
    c.get(&format!("{CMS}/{name}")).await.json()["data"]["k"].clone()
}

/// A kube-rs client that gives up on an answer after `timeout`.
fn kube_client(sim: &KubeSim, timeout: Duration) -> kube::Client {
    let mut config = kube::Config::new(sim.api_url().parse().unwrap());
    config.read_timeout = Some(timeout);
    config.reset_reader_on_write = true;
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn dropped_answer_to_a_patch_is_a_transport_error_but_the_patch_is_stored() {
    let (sim, c) = start().await;
    let list_rv = c.post(CMS, &cm("a", json!({}))).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let w = Raw::new(&c.base);
    let watch = tokio::spawn(async move {
        w.watch_lines(
            &format!("{CMS}?watch=true&resourceVersion={list_rv}"),
            1,
            Duration::from_secs(5),
        )
        .await
    });
    sim.faults().drop_response(
        DropResponseFault::new()
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .name("a")
            .count(1),
    );
    let seq = sim.last_request_seq();

    let err = c
        .try_send(
            Method::PATCH,
            &format!("{CMS}/a"),
            &[("content-type", MERGE)],
            set_k("x"),
        )
        .await;
    assert!(
        err.is_err(),
        "the client gets no answer: {:?}",
        err.map(|a| a.status)
    );
    assert_eq!(data_k(&c, "a").await, "x", "the patch was applied");
    let (_, events) = watch.await.unwrap();
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["data"]["k"], "x",
        "watchers saw the write"
    );
    let codes: Vec<u16> = sim
        .requests_since(seq)
        .iter()
        .filter(|r| r.verb == "patch")
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, vec![0], "logged as not answered");

    let again = c
        .patch(&format!("{CMS}/a"), MERGE, &json!({"data": {"k": "y"}}))
        .await;
    assert_eq!(again.status, StatusCode::OK, "the count was used up");
}

#[tokio::test]
async fn dropped_answers_to_create_and_update_via_admin_api() {
    let (sim, c) = start().await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    let r = admin
        .post(
            "/faults",
            &json!({"kind": "drop-response", "verbs": ["create", "update"], "resources": ["configmaps"], "count": 2}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        admin.get("/faults").await.json()[0]["kind"],
        "drop-response"
    );

    let created = c
        .try_send(
            Method::POST,
            CMS,
            &[("content-type", "application/json")],
            cm("b", json!({})).to_string(),
        )
        .await;
    assert!(created.is_err(), "POST: no answer");
    let stored = c.get(&format!("{CMS}/b")).await;
    assert_eq!(
        stored.status,
        StatusCode::OK,
        "POST: the object was created"
    );

    let mut body = stored.json();
    body["data"]["k"] = json!("put");
    let updated = c
        .try_send(
            Method::PUT,
            &format!("{CMS}/b"),
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await;
    assert!(updated.is_err(), "PUT: no answer");
    assert_eq!(data_k(&c, "b").await, "put", "PUT: the update was stored");
    assert_eq!(admin.get("/faults").await.json(), json!([]));
}

#[tokio::test]
async fn held_dropped_answer_lasts_until_the_client_gives_up() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    sim.faults()
        .drop_response(DropResponseFault::new().verbs(&["patch"]).hold().count(1));
    let client = kube_client(&sim, Duration::from_millis(500));
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let started = Instant::now();
    let err = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "held"}})),
        )
        .await
        .expect_err("the answer never comes");
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a transport error, not an API status: {err:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "held past the client timeout"
    );
    assert_eq!(data_k(&c, "a").await, "held", "the patch was applied");

    // A bounded hold closes the connection by itself.
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin
        .post(
            "/faults",
            &json!({"kind": "drop-response", "verbs": ["patch"], "holdSeconds": 0.3, "count": 1}),
        )
        .await;
    let started = Instant::now();
    let ended = tokio::time::timeout(
        Duration::from_secs(5),
        c.try_send(
            Method::PATCH,
            &format!("{CMS}/a"),
            &[("content-type", MERGE)],
            set_k("timed"),
        ),
    )
    .await
    .expect("the connection closes after holdSeconds");
    assert!(ended.is_err());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(data_k(&c, "a").await, "timed");
}

#[tokio::test]
async fn hang_times_the_client_out_applies_nothing_and_blocks_no_other_request() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    c.post(CMS, &cm("other", json!({}))).await;
    let seq = sim.last_request_seq();
    let id = sim.faults().hang(
        HangFault::new()
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .name("a"),
    );

    // A client without a timeout stays held while everything else is served.
    let raw = Raw::new(&c.base);
    let held = tokio::spawn(async move {
        raw.try_send(
            Method::PATCH,
            &format!("{CMS}/a"),
            &[("content-type", MERGE)],
            set_k("held"),
        )
        .await
        .map(|a| a.status)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let other = c
        .patch(&format!("{CMS}/other"), MERGE, &json!({"data": {"k": "x"}}))
        .await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(c.get(&format!("{CMS}/a")).await.status, StatusCode::OK);
    assert_eq!(c.get(CMS).await.status, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "other requests are not blocked"
    );
    assert!(!held.is_finished());

    // kube-rs with a short read timeout sees a timeout.
    let api: Api<ConfigMap> =
        Api::default_namespaced(kube_client(&sim, Duration::from_millis(400)));
    let started = Instant::now();
    let err = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "kube"}})),
        )
        .await
        .expect_err("no answer within the timeout");
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a timeout, not a status: {err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(data_k(&c, "a").await, "v", "nothing was applied");

    // Removing the fault ends the hold: the held request's connection closes, still unapplied,
    // and new requests are answered again.
    assert!(sim.faults().remove(id));
    let held = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("the held request ends when the fault goes")
        .unwrap();
    assert!(held.is_err(), "closed without an answer: {held:?}");
    assert_eq!(
        data_k(&c, "a").await,
        "v",
        "nothing was applied, even after the hang"
    );
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "after"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "after");
    let hung: Vec<u16> = sim
        .requests_since(seq)
        .iter()
        .filter(|r| r.verb == "patch" && r.name == "a")
        .map(|r| r.code)
        .collect();
    assert_eq!(
        hung,
        vec![0, 0, 200],
        "hung requests are logged as not answered"
    );
}

#[tokio::test]
async fn timed_hang_via_admin_api_and_clear() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin
        .post(
            "/faults",
            &json!({"kind": "hang", "verbs": ["get"], "name": "a", "holdSeconds": 0.3}),
        )
        .await;
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        c.try_send(Method::GET, &format!("{CMS}/a"), &[], ""),
    )
    .await
    .expect("a timed hold ends");
    assert!(r.is_err(), "closed without an answer");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Until cleared: DELETE /faults lets the held request go.
    admin.send(Method::DELETE, "/faults", &[], "").await;
    admin
        .post("/faults", &json!({"kind": "hang", "name": "a"}))
        .await;
    let raw = Raw::new(&c.base);
    let held = tokio::spawn(async move {
        raw.try_send(Method::GET, &format!("{CMS}/a"), &[], "")
            .await
            .is_err()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "held until cleared");
    assert_eq!(admin.get("/faults").await.json()[0]["kind"], "hang");
    admin.send(Method::DELETE, "/faults", &[], "").await;
    let closed = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("clear lets go")
        .unwrap();
    assert!(closed);
    assert_eq!(
        c.get(&format!("{CMS}/a")).await.status,
        StatusCode::OK,
        "answered again"
    );
}
