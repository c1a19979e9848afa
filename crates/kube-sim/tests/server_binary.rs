//! The `kube-sim` binary contract: first two stdout lines, kubeconfig, `--load`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use http::StatusCode;
use server_support::Raw;

#[tokio::test]
async fn binary_prints_urls_writes_kubeconfig_and_loads_objects() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let objects = dir.path().join("objects.yaml");
    std::fs::write(
        &objects,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loaded, namespace: app}\ndata: {a: '1'}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .arg("--load")
        .arg(&objects)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let api = lines.next().unwrap().unwrap();
    let admin = lines.next().unwrap().unwrap();
    let api_url = api
        .strip_prefix("api: ")
        .expect("first line is the API URL")
        .to_string();
    let admin_url = admin
        .strip_prefix("admin: ")
        .expect("second line is the admin URL")
        .to_string();
    assert!(api_url.starts_with("http://127.0.0.1:"));

    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(kc.contains(&format!("server: {api_url}")), "{kc}");

    let c = Raw::new(&api_url);
    let cm = c.get("/api/v1/namespaces/app/configmaps/loaded").await;
    assert_eq!(
        cm.status,
        StatusCode::OK,
        "--load created the namespace first, then the ConfigMap"
    );
    assert_eq!(Raw::new(&admin_url).get("/healthz").await.text(), "ok");
    child.kill().unwrap();
    let _ = child.wait();
}
