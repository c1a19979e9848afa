//! Fault injection and the request log, through the handle and the admin HTTP API.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_support::{Raw, cm, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Waits (up to 2 s) until `addr` accepts connections.
async fn listening_again(addr: std::net::SocketAddr) {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not listening again on {addr}");
}

#[tokio::test]
async fn refuse_gives_connection_refused_then_recovers_on_the_same_port() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let addr = sim.api_addr();
    // An open watch is dropped by the refusal.
    let c2 = Raw::new(&c.base);
    let watch = tokio::spawn(async move {
        c2.watch_lines(
            &format!("{CMS}?watch=true&timeoutSeconds=30"),
            100,
            Duration::from_secs(10),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    sim.faults().refuse(None);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, lines) = tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("watch ends when refused")
        .unwrap();
    assert_eq!(
        lines.len(),
        1,
        "only the initial ADDED arrived before the cut"
    );

    let err = tokio::net::TcpStream::connect(addr)
        .await
        .expect_err("the listener is closed");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(c.try_send(Method::GET, "/version", &[], "").await.is_err());
    // The admin listener keeps answering.
    let admin = Raw::new(&sim.admin_url().unwrap());
    let faults = admin.get("/faults").await.json();
    assert_eq!(faults[0]["kind"], "refuse");

    sim.faults().clear();
    listening_again(addr).await;
    assert_eq!(c.get(&format!("{CMS}/a")).await.status, StatusCode::OK);
}

/// While refused, the port stays the sim's: another server on the machine picking a free port
/// cannot get it and answer in the sim's place.
#[tokio::test]
async fn a_refused_port_stays_bound() {
    let (sim, _) = start().await;
    let addr = sim.api_addr();
    sim.faults().refuse(None);
    // The first attempt may still reach the closing listener (reset); one that the sim's
    // socket refuses shows the refusal in place.
    let mut refused = None;
    for _ in 0..100 {
        match tokio::net::TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                refused = Some(e);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(refused.is_some(), "{addr} refuses connections");
    // A connection made before the refusal took effect was closed by this side first, so
    // nothing lingers on the port but the sim's own socket.
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    let taken = other
        .bind(addr)
        .expect_err("the refused port is still held");
    assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse);
    drop(other);
    sim.faults().clear();
    listening_again(addr).await;
}

#[tokio::test]
async fn timed_refusal_via_admin_api_ends_by_itself() {
    let (sim, c) = start().await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    let r = admin
        .post("/faults", &json!({"kind": "refuse", "seconds": 0.3}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(c.try_send(Method::GET, "/version", &[], "").await.is_err());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(c.get("/version").await.status, StatusCode::OK);
}

#[tokio::test]
async fn status_fault_with_count_matchers_and_retry_after() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    sim.faults().status(
        StatusFault::new(503)
            .retry_after(2)
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .count(2),
    );
    // Non-matching verbs pass.
    assert_eq!(c.get(&format!("{CMS}/a")).await.status, StatusCode::OK);
    for _ in 0..2 {
        let r = c
            .patch(
                &format!("{CMS}/a"),
                "application/merge-patch+json",
                &json!({"data": {"k": "x"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.header("retry-after"), Some("2"));
        let s = r.json();
        assert_eq!(s["reason"], "ServiceUnavailable");
        assert_eq!(s["details"]["retryAfterSeconds"], 2);
        assert_eq!(s["code"], 503);
    }
    let ok = c
        .patch(
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            &json!({"data": {"k": "x"}}),
        )
        .await;
    assert_eq!(
        ok.status,
        StatusCode::OK,
        "the fault answered only two requests"
    );
    assert!(sim.faults().list().is_empty());
}

#[tokio::test]
async fn plain_429_and_timed_faults_via_admin() {
    let (sim, c) = start().await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin
        .post("/faults", &json!({"kind": "status", "code": 429, "shape": "plain", "retryAfterSeconds": 1, "seconds": 0.3}))
        .await;
    let r = c.get(CMS).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.text(), "Too many requests, please try again later.\n");
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        c.get(CMS).await.status,
        StatusCode::OK,
        "the timed fault expired"
    );

    admin
        .post(
            "/faults",
            &json!({"kind": "status", "code": 504, "name": "x"}),
        )
        .await;
    assert_eq!(
        c.get(&format!("{CMS}/x")).await.status,
        StatusCode::GATEWAY_TIMEOUT
    );
    assert_eq!(
        c.get(&format!("{CMS}/y")).await.status,
        StatusCode::NOT_FOUND
    );
    let cleared = admin.send(Method::DELETE, "/faults", &[], "").await;
    assert_eq!(cleared.status, StatusCode::OK);
    assert_eq!(
        c.get(&format!("{CMS}/x")).await.status,
        StatusCode::NOT_FOUND
    );
    let bad = admin.post("/faults", &json!({"kind": "nonsense"})).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn latency_fault_delays_matching_requests() {
    let (sim, c) = start().await;
    sim.faults().latency(
        LatencyFault::new(Duration::from_millis(300))
            .verbs(&["list"])
            .count(1),
    );
    let t = tokio::time::Instant::now();
    c.get("/api/v1/namespaces/default/configmaps/x").await;
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "get is not delayed"
    );
    let t = tokio::time::Instant::now();
    c.get(CMS).await;
    assert!(t.elapsed() >= Duration::from_millis(300), "list is delayed");
}

#[tokio::test]
async fn cut_watches_ends_open_streams() {
    let (sim, c) = start().await;
    let c2 = Raw::new(&c.base);
    let watch = tokio::spawn(async move {
        c2.watch_lines(
            &format!("{CMS}?watch=true&timeoutSeconds=30"),
            100,
            Duration::from_secs(10),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = tokio::time::Instant::now();
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin.post("/faults", &json!({"kind": "cut-watches"})).await;
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("watch is cut")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        c.get(CMS).await.status,
        StatusCode::OK,
        "the API keeps serving"
    );
}

#[tokio::test]
async fn request_log_records_verbs_codes_and_faulted_requests() {
    let (sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let seq = sim.last_request_seq();
    sim.faults()
        .status(StatusFault::new(500).verbs(&["delete"]).count(1));
    c.delete(&format!("{CMS}/a"), "{}").await;
    c.get(&format!("{CMS}/a")).await;
    c.send(
        Method::GET,
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
        &[],
        "",
    )
    .await;
    let recs = sim.requests_since(seq);
    let summary: Vec<(String, String, String, u16)> = recs
        .iter()
        .map(|r| (r.verb.clone(), r.resource.clone(), r.name.clone(), r.code))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("delete".into(), "configmaps".into(), "a".into(), 500),
            ("get".into(), "configmaps".into(), "a".into(), 200),
            ("watch".into(), "pods".into(), String::new(), 200),
        ]
    );
    assert_eq!(recs[0].namespace, "default");
    assert!(recs[0].time.ends_with('Z') && recs[0].time.contains('.'));

    let admin = Raw::new(&sim.admin_url().unwrap());
    let via_http: Value = admin.get(&format!("/requests?since={seq}")).await.json();
    assert_eq!(via_http.as_array().unwrap().len(), 3);
    assert_eq!(via_http[0]["verb"], "delete");
    assert_eq!(via_http[0]["code"], 500);
    admin.send(Method::DELETE, "/requests", &[], "").await;
    assert!(sim.requests().iter().all(|r| r.seq > seq + 3));
}

#[tokio::test]
async fn server_timeout_500_with_reason_override() {
    let (sim, c) = start().await;
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin
        .post("/faults", &json!({"kind": "status", "code": 500, "reason": "ServerTimeout", "retryAfterSeconds": 2, "resources": ["configmaps"], "subresource": ""}))
        .await;
    let r = c.get(CMS).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.json()["reason"], "ServerTimeout");
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(
        c.get("/api/v1/namespaces/default").await.status,
        StatusCode::OK,
        "other resources are served"
    );
}

#[tokio::test]
async fn stalled_watches_send_nothing_until_resumed() {
    let (sim, c) = start().await;
    let list_rv = c.get(CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let admin = Raw::new(&sim.admin_url().unwrap());
    admin
        .post("/faults", &json!({"kind": "stall-watches"}))
        .await;
    let c2 = Raw::new(&c.base);
    let path = format!("{CMS}?watch=true&timeoutSeconds=1&resourceVersion={list_rv}");
    let watch =
        tokio::spawn(async move { c2.watch_lines(&path, 1, Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.post(CMS, &cm("during-stall", json!({}))).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !watch.is_finished(),
        "a stalled watch neither sends nor closes at its timeout"
    );
    sim.faults().clear();
    let (_, lines) = tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "during-stall");
}
