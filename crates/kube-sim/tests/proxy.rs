//! Proxy mode against a real API server (`HAWSER_TEST_REAL_KUBE`, see `real_kube`): requests
//! reach it and come back, and the injected faults behave as they do on the in-memory server.
//! Every test works in a namespace of its own (`proxy-<random>`), deleted at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test assertions

mod server_support;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_sim::{
    DropResponseFault, HangFault, KubeSim, LatencyFault, SimConfig, StatusFault, Upstream,
};
use serde_json::{Value, json};
use server_support::{Raw, cm, real_kube};
use tokio::time::Instant;

/// A proxying simulator in front of the real server, without a namespace.
async fn proxy(upstream: Upstream) -> (server_support::Sim, Raw) {
    server_support::start_with(SimConfig {
        upstream: Some(upstream),
        ..SimConfig::default()
    })
    .await
}

/// A proxying simulator in front of the real server, and a namespace of the test's own there.
struct Env {
    sim: KubeSim,
    raw: Raw,
    /// A client of the real server itself, to look behind the proxy.
    direct: kube::Client,
    ns: String,
}

async fn env(test: &str) -> Env {
    let real = real_kube::real_kube(test);
    let upstream = Upstream::from_kubeconfig(&real.kubeconfig).expect("the kubeconfig reads");
    let sim = KubeSim::start(SimConfig {
        upstream: Some(upstream),
        ..SimConfig::default()
    })
    .await
    .expect("the proxy starts");
    let raw = Raw::new(&sim.api_url());
    let direct = direct_client(&real.kubeconfig).await;
    let ns = format!("proxy-{:08x}", rand::random::<u32>());
    let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(direct.clone())
        .create(&PostParams::default(), &body)
        .await
        .expect("the test namespace is created upstream");
    Env {
        sim,
        raw,
        direct,
        ns,
    }
}

async fn direct_client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

impl Env {
    fn cms(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.ns)
    }

    /// The real server's ConfigMaps of the test namespace, bypassing the proxy.
    fn upstream_cms(&self) -> Api<ConfigMap> {
        Api::namespaced(self.direct.clone(), &self.ns)
    }

    async fn upstream_has(&self, name: &str) -> bool {
        self.upstream_cms().get_opt(name).await.unwrap().is_some()
    }

    async fn finish(self) {
        Api::<Namespace>::all(self.direct.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await
            .expect("the test namespace is deleted");
        self.sim.shutdown().await;
    }
}

/// An open watch body read line by line.
struct WatchLines {
    body: Incoming,
    buf: Vec<u8>,
}

#[derive(Debug)]
enum Next {
    Line(Value),
    /// The body ended cleanly.
    End,
    /// The body broke off (a cut stream).
    Broken,
    /// Nothing arrived in time.
    Quiet,
}

impl WatchLines {
    async fn open(base: &str, path: &str) -> WatchLines {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let req = Request::get(format!("{base}{path}"))
            .body(Full::default())
            .unwrap();
        let resp = client.request(req).await.expect("the watch opens");
        assert_eq!(resp.status(), StatusCode::OK);
        WatchLines {
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }

    async fn next(&mut self, within: Duration) -> Next {
        let deadline = Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Next::Line(serde_json::from_slice(&line).expect("a JSON event per line"));
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return Next::Quiet,
                Ok(None) => return Next::End,
                Ok(Some(Err(_))) => return Next::Broken,
                Ok(Some(Ok(f))) => {
                    if let Some(d) = f.data_ref() {
                        self.buf.extend_from_slice(d);
                    }
                }
            }
        }
    }

    /// The next event about `name`, skipping others.
    async fn event_for(&mut self, name: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Next::Line(ev) if ev["object"]["metadata"]["name"] == name => return ev,
                Next::Line(_) => {}
                other => panic!("no event for {name}: {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn crud_through_the_proxy_happens_upstream() {
    let env = env("crud_through_the_proxy_happens_upstream").await;
    let through =
        kube::Client::try_from(kube::Config::new(env.sim.api_url().parse().unwrap())).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(through, &env.ns);
    let body =
        serde_json::from_value(json!({"metadata": {"name": "c1"}, "data": {"k": "v"}})).unwrap();
    let created = cms.create(&PostParams::default(), &body).await.unwrap();
    let upstream = env.upstream_cms().get("c1").await.unwrap();
    assert_eq!(upstream.metadata.uid, created.metadata.uid);

    cms.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v2"}})),
    )
    .await
    .unwrap();
    let upstream = env.upstream_cms().get("c1").await.unwrap();
    assert_eq!(upstream.data.unwrap()["k"], "v2");
    let listed = cms.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    cms.delete("c1", &DeleteParams::default()).await.unwrap();
    assert!(!env.upstream_has("c1").await);

    let log: Vec<(String, u16)> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps" && r.namespace == env.ns)
        .map(|r| (r.verb, r.code))
        .collect();
    let expected = [
        ("create", 201),
        ("patch", 200),
        ("list", 200),
        ("delete", 200),
    ];
    assert_eq!(
        log,
        expected.map(|(v, c)| (v.to_string(), c)),
        "each request is logged with the upstream's code"
    );
    env.finish().await;
}

#[tokio::test]
async fn a_status_fault_answers_without_reaching_the_upstream() {
    let env = env("a_status_fault_answers_without_reaching_the_upstream").await;
    env.sim.faults().status(
        StatusFault::new(503)
            .retry_after(2)
            .verbs(&["create"])
            .resources(&["configmaps"])
            .namespace(&env.ns)
            .count(1),
    );
    let seq = env.sim.last_request_seq();
    let a = env.raw.post(&env.cms(), &cm("blocked", json!({}))).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.header("retry-after"), Some("2"));
    let status = a.json();
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["details"]["retryAfterSeconds"], 2);
    assert!(
        !env.upstream_has("blocked").await,
        "the create never got there"
    );
    let log = env.sim.requests_since(seq);
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].verb.as_str(), log[0].code), ("create", 503));

    // The count is used up: the retry goes through.
    let a = env.raw.post(&env.cms(), &cm("blocked", json!({}))).await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert!(env.upstream_has("blocked").await);
    env.finish().await;
}

#[tokio::test]
async fn refuse_closes_the_listener_then_proxying_resumes() {
    let env = env("refuse_closes_the_listener_then_proxying_resumes").await;
    let version = env.raw.get("/version").await.json();
    let real = env.direct.apiserver_version().await.unwrap();
    assert_eq!(version["gitVersion"], real.git_version, "answered upstream");

    let addr = env.sim.api_addr();
    env.sim.faults().refuse(None);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = tokio::net::TcpStream::connect(addr)
        .await
        .expect_err("the listener is closed");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(
        env.raw
            .try_send(Method::GET, "/version", &[], "")
            .await
            .is_err()
    );

    env.sim.faults().clear();
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "listening again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(env.raw.get(&env.cms()).await.status, StatusCode::OK);
    env.finish().await;
}

#[tokio::test]
async fn a_watch_is_streamed_stalled_and_cut() {
    let env = env("a_watch_is_streamed_stalled_and_cut").await;
    let list = env.raw.get(&env.cms()).await.json();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let path = format!(
        "{}?watch=true&resourceVersion={rv}&timeoutSeconds=120",
        env.cms()
    );
    let mut watch = WatchLines::open(&env.sim.api_url(), &path).await;

    // An event arrives while the stream stays open.
    let body = serde_json::from_value(json!({"metadata": {"name": "w1"}})).unwrap();
    env.upstream_cms()
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    let ev = watch.event_for("w1", Duration::from_secs(10)).await;
    assert_eq!(ev["type"], "ADDED");

    // Stalled: nothing is relayed until the stall ends, then the pending event is.
    env.sim.faults().stall_watches(None);
    let body = serde_json::from_value(json!({"metadata": {"name": "w2"}})).unwrap();
    env.upstream_cms()
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    assert!(matches!(
        watch.next(Duration::from_millis(1500)).await,
        Next::Quiet
    ));
    env.sim.faults().clear();
    let ev = watch.event_for("w2", Duration::from_secs(10)).await;
    assert_eq!(ev["type"], "ADDED");

    let seq = env.sim.last_request_seq();
    env.sim.faults().cut_watches();
    let next = watch.next(Duration::from_secs(5)).await;
    assert!(matches!(next, Next::Broken), "cut mid-stream: {next:?}");
    assert!(env.sim.requests_since(seq).is_empty());
    env.finish().await;
}

#[tokio::test]
async fn a_dropped_answer_hides_a_create_that_happened_upstream() {
    let env = env("a_dropped_answer_hides_a_create_that_happened_upstream").await;
    env.sim.faults().drop_response(
        DropResponseFault::new()
            .verbs(&["create"])
            .resources(&["configmaps"])
            .namespace(&env.ns)
            .count(1),
    );
    let seq = env.sim.last_request_seq();
    let sent = env
        .raw
        .try_send(
            Method::POST,
            &env.cms(),
            &[("content-type", "application/json")],
            cm("dropped", json!({})).to_string(),
        )
        .await;
    assert!(sent.is_err(), "the connection closed without an answer");
    assert!(env.upstream_has("dropped").await, "the create happened");
    let log = env.sim.requests_since(seq);
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].verb.as_str(), log[0].code),
        ("create", 0),
        "logged unanswered"
    );
    env.finish().await;
}

#[tokio::test]
async fn a_hung_create_is_never_forwarded() {
    let env = env("a_hung_create_is_never_forwarded").await;
    env.sim.faults().hang(
        HangFault::new()
            .verbs(&["create"])
            .namespace(&env.ns)
            .hold_for(Duration::from_secs(1))
            .count(1),
    );
    let started = Instant::now();
    let sent = env
        .raw
        .try_send(
            Method::POST,
            &env.cms(),
            &[("content-type", "application/json")],
            cm("hung", json!({})).to_string(),
        )
        .await;
    assert!(sent.is_err(), "closed without an answer");
    assert!(started.elapsed() >= Duration::from_secs(1), "held first");
    assert!(!env.upstream_has("hung").await);
    env.finish().await;
}

#[tokio::test]
async fn latency_delays_the_proxied_answer() {
    let env = env("latency_delays_the_proxied_answer").await;
    let body = serde_json::from_value(json!({"metadata": {"name": "slow"}})).unwrap();
    env.upstream_cms()
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    let path = format!("{}/slow", env.cms());
    env.raw.get(&path).await; // a warm connection to the upstream
    env.sim.faults().latency(
        LatencyFault::new(Duration::from_millis(1500))
            .verbs(&["get"])
            .resources(&["configmaps"])
            .count(1),
    );
    let started = Instant::now();
    assert_eq!(env.raw.get(&path).await.status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    let started = Instant::now();
    assert_eq!(env.raw.get(&path).await.status, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "only the counted request waits"
    );
    env.finish().await;
}

#[tokio::test]
async fn the_upstream_certificate_is_checked_against_the_ca() {
    let real = real_kube::real_kube("the_upstream_certificate_is_checked_against_the_ca");
    let from_kubeconfig = Upstream::from_kubeconfig(&real.kubeconfig).unwrap();
    // The serving certificate kube-apiserver generated, followed by its CA.
    let ca = std::fs::read(real.dir.join("certs/apiserver.crt")).expect("the serving certificate");
    let mut checked = from_kubeconfig.clone();
    checked.insecure_skip_tls_verify = false;
    let (sim, c) = proxy(checked.clone().ca_pem(ca)).await;
    assert_eq!(c.get("/version").await.status, StatusCode::OK);
    sim.shutdown().await;

    let (sim, c) = proxy(checked).await;
    let a = c.get("/version").await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.text());
    sim.shutdown().await;
}
