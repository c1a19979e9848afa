//! Watch streams over raw HTTP: resumption, 410 ERROR events, selectors, bookmarks, timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use std::time::Duration;

use http::StatusCode;
use kube_sim::SimConfig;
use serde_json::json;
use server_support::{cm, rv, start, start_with};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn resume_replays_exactly_the_changes_after_the_rv() {
    let (_sim, c) = start().await;
    let a = c.post(CMS, &cm("a", json!({}))).await.json();
    let from = rv(&a);
    c.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"k": "2"}}),
    )
    .await;
    let del = c.delete(&format!("{CMS}/a"), "{}").await.json();
    assert_eq!(del["kind"], "Status");
    let (status, lines) = c
        .watch_lines(
            &format!("{CMS}?watch=true&resourceVersion={from}&timeoutSeconds=1"),
            10,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["MODIFIED", "DELETED"]);
    let deleted_rv = rv(&lines[1]["object"]);
    assert!(
        deleted_rv > rv(&lines[0]["object"]),
        "DELETED carries the deletion RV"
    );
    assert_eq!(lines[0]["object"]["kind"], "ConfigMap");
}

#[tokio::test]
async fn initial_state_then_live_events() {
    let (_sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let c2 = server_support::Raw::new(&c.base);
    let watcher = tokio::spawn(async move {
        c2.watch_lines(
            &format!("{CMS}?watch=1&timeoutSeconds=5"),
            2,
            Duration::from_secs(5),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.post(CMS, &cm("b", json!({}))).await;
    let (_, lines) = watcher.await.unwrap();
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "a");
    assert_eq!(lines[1]["type"], "ADDED");
    assert_eq!(lines[1]["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn too_old_rv_is_a_410_error_event_not_http_410() {
    let (sim, c) = start_with(SimConfig {
        watch_history: 3,
        ..SimConfig::default()
    })
    .await;
    let a = c.post(CMS, &cm("a", json!({}))).await.json();
    for i in 0..5 {
        c.patch(
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            &json!({"data": {"k": i.to_string()}}),
        )
        .await;
    }
    let (status, lines) = c
        .watch_lines(
            &format!("{CMS}?watch=true&resourceVersion={}", rv(&a)),
            5,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        lines.len(),
        1,
        "one ERROR event, then the stream closes: {lines:?}"
    );
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 410);
    assert_eq!(lines[0]["object"]["reason"], "Expired");

    // Compaction through the handle expires continue tokens too.
    for i in 0..3 {
        c.post(CMS, &cm(&format!("p{i}"), json!({}))).await;
    }
    let page = c.get(&format!("{CMS}?limit=1")).await.json();
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    c.post(CMS, &cm("later", json!({}))).await;
    sim.store().compact_history();
    let expired = c.get(&format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(expired.status, StatusCode::GONE);
    assert_eq!(expired.json()["reason"], "Expired");
    assert!(expired.json()["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn selector_watch_sees_objects_leave_and_enter() {
    let (_sim, c) = start().await;
    let a = c.post(CMS, &cm("a", json!({"team": "x"}))).await.json();
    c.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"team": "y"}}}),
    )
    .await;
    c.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"team": "x"}}}),
    )
    .await;
    let (_, lines) = c
        .watch_lines(
            &format!(
                "{CMS}?watch=true&labelSelector=team%3Dx&resourceVersion={}&timeoutSeconds=1",
                rv(&a)
            ),
            5,
            Duration::from_secs(5),
        )
        .await;
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["DELETED", "ADDED"]);
}

#[tokio::test]
async fn bookmarks_and_timeout() {
    let (_sim, c) = start_with(SimConfig {
        bookmark_interval: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .await;
    let list = c.get(CMS).await.json();
    let list_rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let started = tokio::time::Instant::now();
    let (_, lines) = c
        .watch_lines(&format!("{CMS}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion={list_rv}"), 50, Duration::from_secs(5))
        .await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "stream ends at the timeout ({elapsed:?})"
    );
    assert!(lines.len() >= 2, "periodic bookmarks: {lines:?}");
    for l in &lines {
        assert_eq!(l["type"], "BOOKMARK");
        assert_eq!(l["object"]["kind"], "ConfigMap");
        assert_eq!(l["object"]["apiVersion"], "v1");
        assert_eq!(l["object"]["metadata"]["resourceVersion"], list_rv);
    }
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let (_sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    // No resourceVersion: the initial events are a consistent snapshot. With "0" a real API
    // server may answer from a watch cache that has not seen `a` yet.
    let (_, lines) = c
        .watch_lines(
            &format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"),
            2,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let bad = c
        .get(&format!("{CMS}?watch=true&sendInitialEvents=true"))
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
}
