//! Proxy mode in front of another kube-sim (plain HTTP), so it is exercised without a real
//! cluster: the upstream's own request log shows exactly what was forwarded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test assertions

mod server_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::{KubeSim, SimConfig, StatusFault, Upstream};
use serde_json::json;
use server_support::{Raw, cm};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// The upstream: always kube-sim itself (these tests look into its store).
async fn upstream() -> KubeSim {
    KubeSim::start(SimConfig::default())
        .await
        .expect("the upstream starts")
}

async fn proxy_to(upstream: &KubeSim) -> (server_support::Sim, Raw) {
    server_support::start_with(SimConfig {
        upstream: Some(Upstream::new(upstream.api_url()).token("t0ken")),
        ..SimConfig::default()
    })
    .await
}

#[tokio::test]
async fn requests_are_forwarded_and_faults_stop_them_before_the_upstream() {
    let up = upstream().await;
    let (proxy, c) = proxy_to(&up).await;
    assert_eq!(proxy.upstream_url(), Some(up.api_url().as_str()));

    let created = c
        .post(
            &format!("{CMS}?fieldManager=t"),
            &cm("a", json!({"x": "1"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(
        up.store().get("v1", "ConfigMap", "default", "a").is_some(),
        "stored upstream"
    );
    let fwd = up.requests();
    assert_eq!(fwd.len(), 1);
    assert_eq!(
        fwd[0].path,
        format!("{CMS}?fieldManager=t"),
        "path and query kept"
    );
    assert_eq!(fwd[0].verb, "create");
    let mine = proxy.requests();
    assert_eq!(
        (
            mine[0].verb.as_str(),
            mine[0].resource.as_str(),
            mine[0].code
        ),
        ("create", "configmaps", 201)
    );

    // Answered by the proxy's fault: the upstream never sees it.
    proxy
        .faults()
        .status(StatusFault::new(429).plain().retry_after(1).count(1));
    let seq = up.last_request_seq();
    let refused = c.get(&format!("{CMS}/a")).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(up.requests_since(seq).is_empty());

    // Errors come back as the upstream wrote them.
    let missing = c.get(&format!("{CMS}/nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["reason"], "NotFound");
    let seq = proxy.last_request_seq();
    assert_eq!(c.get("/version").await.status, StatusCode::OK);
    assert_eq!(
        proxy.requests_since(seq)[0].resource,
        "",
        "discovery is not a resource"
    );
    proxy.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_proxied_watch_relays_events_and_is_cut() {
    let up = upstream().await;
    let (proxy, c) = proxy_to(&up).await;
    let watch = Raw::new(&c.base);
    let lines = tokio::spawn(async move {
        watch
            .watch_lines(
                &format!("{CMS}?watch=true&timeoutSeconds=30"),
                10,
                Duration::from_secs(10),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    up.store().insert(cm("w", json!({}))).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.faults().cut_watches();
    let (status, lines) = tokio::time::timeout(Duration::from_secs(5), lines)
        .await
        .expect("the cut ends the stream")
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["object"]["metadata"]["name"], "w");
    proxy.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_status() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = unused.local_addr().unwrap();
    drop(unused);
    let (proxy, c) = server_support::start_with(SimConfig {
        upstream: Some(Upstream::new(format!("http://{addr}"))),
        ..SimConfig::default()
    })
    .await;
    let a = c.get("/api/v1/namespaces").await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains(&addr.to_string())
    );
    assert_eq!(proxy.requests()[0].code, 502);
}

#[tokio::test]
async fn store_faults_are_refused_in_proxy_mode() {
    let up = upstream().await;
    let (proxy, _) = proxy_to(&up).await;
    let admin = Raw::new(&proxy.admin_url().unwrap());
    let a = admin.send(Method::POST, "/compact", &[], "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let a = admin
        .post(
            "/faults",
            &json!({"kind": "delay-established", "delaySeconds": 5}),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.json()["error"].as_str().unwrap().contains("proxy mode"));
    let stored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| proxy.store()));
    let msg = stored.expect_err("store() panics in proxy mode");
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(msg.contains("local store is not used"), "{msg}");
}

#[tokio::test]
async fn the_binary_proxies_to_the_kubeconfig_s_cluster() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("upstream");
    up.write_kubeconfig(&kubeconfig).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--upstream-kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let api = out.next().unwrap().unwrap();
    let api = api.strip_prefix("api: ").unwrap();
    let c = Raw::new(api);
    assert_eq!(
        c.post(CMS, &cm("via-binary", json!({}))).await.status,
        StatusCode::CREATED
    );
    assert!(
        up.store()
            .get("v1", "ConfigMap", "default", "via-binary")
            .is_some()
    );
    child.kill().unwrap();
    let _ = child.wait();

    let bad = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--upstream-kubeconfig")
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--upstream-kubeconfig"));
}
