//! Where kube-sim knowingly answers differently from a real kube-apiserver (v1.37.2, seen through
//! proxy mode): each test pins kube-sim's answer and names the real one, so that a change to either
//! side is noticed. The list, with the rest, is in docs/kube-sim.md ("Differences found against the
//! real API server").
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use http::{Method, StatusCode};
use serde_json::json;
use server_support::{cm, rv, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Real: the version it was built as (v1.37.2 here). kube-sim: always v1.33.0.
#[tokio::test]
async fn version_is_fixed_at_1_33() {
    let (_sim, c) = start().await;
    let version = c.get("/version").await.json();
    assert_eq!(version["gitVersion"], "v1.33.0");
}

/// Real: 410 "The resourceVersion for the provided list is too old." for an old exact list, even
/// with nothing compacted. kube-sim: the past state, from its history.
#[tokio::test]
async fn an_old_exact_list_is_served_from_history() {
    let (_sim, c) = start().await;
    let first = c.post(CMS, &cm("a", json!({}))).await.json();
    c.post(CMS, &cm("b", json!({}))).await;
    let old = c
        .get(&format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ))
        .await;
    assert_eq!(old.status, StatusCode::OK);
    assert_eq!(old.json()["items"].as_array().unwrap().len(), 1);
}

/// Real: 405 with a JSON `Status` (reason `MethodNotAllowed`). kube-sim: plain text.
#[tokio::test]
async fn post_on_a_named_resource_is_a_plain_text_405() {
    let (_sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let answer = c
        .send(
            Method::POST,
            &format!("{CMS}/a"),
            &[("content-type", "application/json")],
            cm("a", json!({})).to_string(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        answer
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/plain")
    );
}

/// Real: the Namespace a delete returns has no `deletionGracePeriodSeconds`, and a create in it
/// right after the delete is 403 `NamespaceTerminating` until the namespace controller is done.
/// kube-sim: `deletionGracePeriodSeconds: 0`, and an empty namespace is gone at once (404).
#[tokio::test]
async fn a_deleted_empty_namespace_goes_at_once() {
    let (_sim, c) = start().await;
    c.post(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "brief"}}),
    )
    .await;
    let deleted = c.delete("/api/v1/namespaces/brief", "").await.json();
    assert_eq!(deleted["metadata"]["deletionGracePeriodSeconds"], 0);
    let create = c
        .post(
            "/api/v1/namespaces/brief/configmaps",
            &cm("late", json!({})),
        )
        .await;
    assert_eq!(create.status, StatusCode::NOT_FOUND);
}
