//! Proxy mode against a real API server (`HAWSER_TEST_REAL_KUBE`, a directory made by
//! `scripts/real-cluster.sh up`): requests reach it, and faults and the request log apply in
//! front of it. Each test works in a namespace of its own on the shared server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use http::StatusCode;
use kube_sim::{DropResponseFault, KubeSim, LatencyFault, SimConfig, StatusFault, Upstream};
use serde_json::{Value, json};
use server_support::{Raw, cm};

/// The real API server's `up` directory, or `None` after saying why the test did not run
/// (`HAWSER_TEST_REQUIRE_REAL=1` makes that a failure).
fn real_server(test: &str) -> Option<PathBuf> {
    match std::env::var_os("HAWSER_TEST_REAL_KUBE") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => {
            assert!(
                std::env::var("HAWSER_TEST_REQUIRE_REAL").as_deref() != Ok("1"),
                "{test}: HAWSER_TEST_REQUIRE_REAL=1 but HAWSER_TEST_REAL_KUBE is not set"
            );
            println!(
                "{test}: not run: HAWSER_TEST_REAL_KUBE is not set (scripts/real-cluster.sh up DIR)"
            );
            None
        }
    }
}

/// A proxy in front of the real server, a raw client of the proxy, a direct client of the real
/// server, and a fresh namespace.
struct Setup {
    sim: KubeSim,
    proxy: Raw,
    direct: Direct,
    namespace: String,
}

/// Requests straight to the real server, past the proxy and its faults.
struct Direct {
    upstream: Upstream,
    client: reqwest::Client,
}

impl Direct {
    async fn get(&self, path: &str) -> (u16, Value) {
        let answer = self
            .client
            .get(format!("{}{path}", self.upstream.server))
            .bearer_auth(self.upstream.token.as_deref().unwrap_or_default())
            .send()
            .await
            .unwrap();
        let code = answer.status().as_u16();
        let body = answer.bytes().await.unwrap();
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }
}

impl Setup {
    async fn start(test: &str) -> Option<Self> {
        let dir = real_server(test)?;
        let upstream = Upstream::from_kubeconfig(dir.join("kubeconfig")).unwrap();
        let sim = KubeSim::start(SimConfig {
            upstream: Some(upstream.clone()),
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let proxy = Raw::new(&sim.api_url());
        let namespace = format!("proxy-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let created = proxy
            .post(
                "/api/v1/namespaces",
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(upstream.insecure)
            .build()
            .unwrap();
        Some(Setup {
            sim,
            proxy,
            direct: Direct { upstream, client },
            namespace,
        })
    }

    fn configmaps(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.namespace)
    }

    async fn finish(self) {
        self.proxy
            .delete(&format!("/api/v1/namespaces/{}", self.namespace), "")
            .await;
        self.sim.shutdown().await;
    }
}

#[tokio::test]
async fn requests_reach_the_real_server_and_are_logged() {
    let Some(s) = Setup::start("requests_reach_the_real_server_and_are_logged").await else {
        return;
    };
    let created = s
        .proxy
        .post(&s.configmaps(), &cm("one", json!({"app": "x"})))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let uid = created.json()["metadata"]["uid"].clone();
    let (code, stored) = s.direct.get(&format!("{}/one", s.configmaps())).await;
    assert_eq!(code, 200);
    assert_eq!(stored["metadata"]["uid"], uid);
    // The real server's own answers come back unchanged: its validation, its 404.
    let invalid = s
        .proxy
        .post(&s.configmaps(), &cm("Not_Valid", json!({})))
        .await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    let missing = s.proxy.get(&format!("{}/none", s.configmaps())).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["reason"], "NotFound");

    let log = s.sim.requests();
    let create = log
        .iter()
        .find(|r| r.verb == "create" && r.resource == "configmaps" && r.code == 201)
        .expect("the create is logged");
    assert_eq!(create.namespace, s.namespace);
    assert!(
        log.iter()
            .any(|r| r.verb == "get" && r.name == "none" && r.code == 404),
        "{log:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_status_fault_answers_in_front_and_the_real_server_is_untouched() {
    let Some(s) =
        Setup::start("a_status_fault_answers_in_front_and_the_real_server_is_untouched").await
    else {
        return;
    };
    s.sim.faults().status(
        StatusFault::new(503)
            .retry_after(2)
            .verbs(&["create"])
            .resources(&["configmaps"])
            .count(1),
    );
    let refused = s
        .proxy
        .post(&s.configmaps(), &cm("blocked", json!({})))
        .await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), Some("2"));
    let (code, _) = s.direct.get(&format!("{}/blocked", s.configmaps())).await;
    assert_eq!(
        code, 404,
        "the refused create never reached the real server"
    );
    // The fault was used up: the next create goes through.
    let created = s
        .proxy
        .post(&s.configmaps(), &cm("blocked", json!({})))
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    s.finish().await;
}

#[tokio::test]
async fn a_write_whose_answer_is_dropped_still_lands_and_latency_delays_answers() {
    let Some(s) =
        Setup::start("a_write_whose_answer_is_dropped_still_lands_and_latency_delays_answers")
            .await
    else {
        return;
    };
    s.sim
        .faults()
        .drop_response(DropResponseFault::new().verbs(&["create"]).count(1));
    let lost = s
        .proxy
        .try_send(
            http::Method::POST,
            &s.configmaps(),
            &[("content-type", "application/json")],
            cm("landed", json!({})).to_string(),
        )
        .await;
    assert!(lost.is_err(), "the answer was dropped");
    let (code, _) = s.direct.get(&format!("{}/landed", s.configmaps())).await;
    assert_eq!(code, 200, "the write itself reached the real server");

    s.sim.faults().latency(
        LatencyFault::new(Duration::from_millis(400))
            .verbs(&["get"])
            .resources(&["configmaps"]),
    );
    let started = Instant::now();
    let slow = s.proxy.get(&format!("{}/landed", s.configmaps())).await;
    assert_eq!(slow.status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(400));
    s.finish().await;
}

#[tokio::test]
async fn a_watch_streams_events_and_ends_when_watches_are_cut() {
    let Some(s) = Setup::start("a_watch_streams_events_and_ends_when_watches_are_cut").await else {
        return;
    };
    let listed = s.proxy.get(&s.configmaps()).await.json();
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let watcher = Raw::new(&s.proxy.base);
    let path = format!(
        "{}?watch=true&resourceVersion={rv}&timeoutSeconds=60",
        s.configmaps()
    );
    let watch = tokio::spawn(async move {
        watcher
            .watch_lines(&path, 100, Duration::from_secs(20))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let created = s.proxy.post(&s.configmaps(), &cm("seen", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cut_at = Instant::now();
    s.sim.faults().cut_watches();
    let (status, events) = watch.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(
        cut_at.elapsed() < Duration::from_secs(5),
        "the cut ended the stream, not its timeout"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "ADDED" && e["object"]["metadata"]["name"] == "seen"),
        "{events:?}"
    );
    s.finish().await;
}
