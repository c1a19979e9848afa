//! Where kube-sim knowingly answers differently from a real kube-apiserver (v1.37.2, seen through
//! proxy mode): each test pins kube-sim's answer, and with `HAWSER_TEST_KUBE=real` the real one,
//! so that a change to either side is noticed. The list, with the rest, is in docs/kube-sim.md
//! ("Differences found against the real API server").
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;
use server_support::{cm, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Real: the version it was built as (v1.37.2 here). kube-sim: always v1.33.0.
#[tokio::test]
async fn version_is_fixed_at_1_33() {
    let (sim, c) = start().await;
    let version = c.get("/version").await.json();
    let expected = if sim.real().is_some() {
        "v1.37.2"
    } else {
        "v1.33.0"
    };
    assert_eq!(version["gitVersion"], expected);
}

/// Real: 405 with a JSON `Status` (reason `MethodNotAllowed`). kube-sim: plain text.
#[tokio::test]
async fn post_on_a_named_resource_is_a_plain_text_405() {
    let (sim, c) = start().await;
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
    if sim.real().is_some() {
        assert_eq!(answer.json()["reason"], "MethodNotAllowed");
        return;
    }
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
    let (sim, c) = start().await;
    c.post(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "brief"}}),
    )
    .await;
    let deleted = c.delete("/api/v1/namespaces/brief", "").await.json();
    let create = c
        .post(
            "/api/v1/namespaces/brief/configmaps",
            &cm("late", json!({})),
        )
        .await;
    if sim.real().is_some() {
        assert_eq!(
            deleted["metadata"]["deletionGracePeriodSeconds"],
            json!(null)
        );
        assert_eq!(create.status, StatusCode::FORBIDDEN, "{}", create.text());
        return;
    }
    assert_eq!(deleted["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(create.status, StatusCode::NOT_FOUND);
}

/// Real: a watch from a resourceVersion the server has not reached yet stays open and sends
/// nothing (90 s seen). kube-sim: one ERROR event with code 504 after about 3 s, then the end.
#[tokio::test]
async fn a_watch_from_a_future_resource_version_gets_a_504_error_event() {
    let (sim, c) = start().await;
    let (status, lines) = c
        .watch_lines(
            &format!("{CMS}?watch=true&resourceVersion=999999999"),
            3,
            Duration::from_secs(8),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    if sim.real().is_some() {
        assert_eq!(lines, Vec::<serde_json::Value>::new());
        return;
    }
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 504);
}
