//! kube-runtime against the simulator: watcher, reflector, Controller and the finalizer helper,
//! including recovery from dropped watches and expired history.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

#[path = "kube_rs_common.rs"]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use kube_sim::{SimConfig, StatusFault};
use serde_json::json;

/// A compact description of a watcher event for comparisons.
fn describe(e: &Event<ConfigMap>) -> String {
    match e {
        Event::Init => "Init".into(),
        Event::InitApply(o) => format!("InitApply({})", o.name_any()),
        Event::InitDone => "InitDone".into(),
        Event::Apply(o) => format!(
            "Apply({}:{})",
            o.name_any(),
            o.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default()
        ),
        Event::Delete(o) => format!("Delete({})", o.name_any()),
    }
}

/// The next `n` successful events (errors are skipped: the watcher retries them), or panics
/// after `timeout`.
async fn next_events<S>(stream: &mut S, n: usize, timeout: Duration) -> Vec<String>
where
    S: Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut out = Vec::new();
    let collect = async {
        while out.len() < n {
            match stream.next().await {
                Some(Ok(e)) => out.push(describe(&e)),
                Some(Err(_)) => {}
                None => break,
            }
        }
    };
    if tokio::time::timeout(timeout, collect).await.is_err() {
        panic!("timed out waiting for {n} events, got {out:?}");
    }
    out
}

fn labelled(name: &str, v: &str) -> ConfigMap {
    let mut cm = config_map(name, &[("v", v)]);
    cm.metadata.labels = Some(BTreeMap::from([("t".into(), "w".into())]));
    cm
}

#[tokio::test]
async fn watcher_sees_events_in_order() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &labelled("pre", "0"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("unlabelled", &[]))
        .await
        .unwrap();
    let mut stream =
        watcher::watcher(cms.clone(), watcher::Config::default().labels("t=w")).boxed();
    assert_eq!(
        next_events(&mut stream, 3, Duration::from_secs(10)).await,
        vec!["Init", "InitApply(pre)", "InitDone"]
    );
    cms.create(&PostParams::default(), &labelled("a", "1"))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    cms.delete("pre", &DeleteParams::default()).await.unwrap();
    cms.create(&PostParams::default(), &config_map("other", &[]))
        .await
        .unwrap();
    // Leaving the selection is a delete for this watch.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"t": null}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        next_events(&mut stream, 4, Duration::from_secs(10)).await,
        vec!["Apply(a:1)", "Apply(a:2)", "Delete(pre)", "Delete(a)"]
    );
}

#[tokio::test]
async fn watcher_resumes_after_cut_watches_without_relisting() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut stream =
        watcher::watcher(cms.clone(), watcher::Config::default().labels("t=w")).boxed();
    assert_eq!(
        next_events(&mut stream, 2, Duration::from_secs(10)).await,
        vec!["Init", "InitDone"]
    );
    cms.create(&PostParams::default(), &labelled("a", "1"))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut stream, 1, Duration::from_secs(10)).await,
        vec!["Apply(a:1)"]
    );
    sim.faults().cut_watches();
    cms.create(&PostParams::default(), &labelled("b", "1"))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        next_events(&mut stream, 2, Duration::from_secs(15)).await,
        vec!["Apply(b:1)", "Apply(a:2)"],
        "the watch resumes from the last resourceVersion; nothing is lost or repeated"
    );
    let watches = sim
        .requests()
        .into_iter()
        .filter(|r| r.verb == "watch")
        .count();
    assert!(
        watches >= 2,
        "the client re-opened the watch ({watches} watch requests)"
    );
}

#[tokio::test]
async fn watcher_relists_when_history_expired() {
    let config = SimConfig {
        watch_history: 3,
        ..SimConfig::default()
    };
    let (sim, client) = start_with(config).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut stream =
        watcher::watcher(cms.clone(), watcher::Config::default().labels("t=w")).boxed();
    assert_eq!(
        next_events(&mut stream, 2, Duration::from_secs(10)).await,
        vec!["Init", "InitDone"]
    );
    // Keep the watch from reconnecting while more changes happen than the history holds.
    let block = sim.faults().status(StatusFault::new(500).verbs(&["watch"]));
    sim.faults().cut_watches();
    for i in 0..8 {
        cms.create(&PostParams::default(), &labelled(&format!("c{i}"), "1"))
            .await
            .unwrap();
    }
    sim.faults().remove(block);
    let events = next_events(&mut stream, 10, Duration::from_secs(30)).await;
    assert_eq!(
        events[0], "Init",
        "too old resourceVersion → 410 → full re-list: {events:?}"
    );
    assert_eq!(events.len(), 10);
    let applied: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("InitApply"))
        .collect();
    assert_eq!(applied.len(), 8, "{events:?}");
    assert_eq!(events[9], "InitDone");
}

#[tokio::test]
async fn reflector_store_follows_changes() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &labelled("x", "1"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher::watcher(cms.clone(), watcher::Config::default().labels("t=w")),
    )
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(stream);
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 1);
    cms.create(&PostParams::default(), &labelled("y", "1"))
        .await
        .unwrap();
    cms.delete("x", &DeleteParams::default()).await.unwrap();
    let synced = eventually(Duration::from_secs(10), || {
        let names: Vec<String> = reader.state().iter().map(|o| o.name_any()).collect();
        async move { names == vec!["y".to_string()] }
    })
    .await;
    assert!(
        synced,
        "store holds exactly y: {:?}",
        reader
            .state()
            .iter()
            .map(|o| o.name_any())
            .collect::<Vec<_>>()
    );
    task.abort();
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed")]
struct ReconcileError;

#[tokio::test]
async fn controller_reconciles_each_object_once_and_again_on_change() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    for name in ["w1", "w2", "w3"] {
        widgets
            .create(&PostParams::default(), &widget(name, 1))
            .await
            .unwrap();
    }
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    async fn reconcile(
        w: Arc<Widget>,
        seen: Arc<Mutex<HashMap<String, usize>>>,
    ) -> Result<Action, ReconcileError> {
        *seen.lock().unwrap().entry(w.name_any()).or_default() += 1;
        Ok(Action::await_change())
    }
    fn error_policy(
        _: Arc<Widget>,
        _: &ReconcileError,
        _: Arc<Mutex<HashMap<String, usize>>>,
    ) -> Action {
        Action::requeue(Duration::from_secs(1))
    }
    let controller = Controller::new(widgets.clone(), watcher::Config::default())
        .run(reconcile, error_policy, seen.clone())
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(controller);

    let all = eventually(Duration::from_secs(10), || {
        let n = seen.lock().unwrap().len();
        async move { n == 3 }
    })
    .await;
    assert!(all, "all three reconciled: {:?}", seen.lock().unwrap());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        seen.lock().unwrap().values().all(|c| *c == 1),
        "once each: {:?}",
        seen.lock().unwrap()
    );

    widgets
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap();
    let again = eventually(Duration::from_secs(10), || {
        let c = seen.lock().unwrap().get("w2").copied();
        async move { c == Some(2) }
    })
    .await;
    assert!(
        again,
        "a change triggers a reconcile: {:?}",
        seen.lock().unwrap()
    );
    task.abort();
}

#[tokio::test]
async fn finalizer_helper_add_cleanup_and_removal() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    widgets
        .create(&PostParams::default(), &widget("f", 1))
        .await
        .unwrap();
    const FIN: &str = "simtest.example.com/cleanup";
    let cleaned = Arc::new(Mutex::new(0usize));

    let run = |obj: Widget| {
        let widgets = widgets.clone();
        let cleaned = cleaned.clone();
        async move {
            finalizer(&widgets, FIN, Arc::new(obj), |ev| async move {
                if let FinalizerEvent::Cleanup(_) = ev {
                    *cleaned.lock().unwrap() += 1;
                }
                Ok::<Action, std::io::Error>(Action::await_change())
            })
            .await
        }
    };

    // First pass adds the finalizer (JSON patch: test null + add).
    run(widgets.get("f").await.unwrap()).await.unwrap();
    let with_fin = widgets.get("f").await.unwrap();
    assert_eq!(with_fin.finalizers(), &[FIN.to_string()]);
    // Second pass applies.
    run(with_fin).await.unwrap();
    assert_eq!(*cleaned.lock().unwrap(), 0);

    // Deleting leaves the object with a deletionTimestamp until the finalizer goes.
    let deleted = widgets.delete("f", &DeleteParams::default()).await.unwrap();
    let pending = deleted
        .left()
        .expect("deleting an object with finalizers answers the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let deleting = widgets.get("f").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // Cleanup pass removes the finalizer (JSON patch: test index + remove); the object goes.
    run(deleting).await.unwrap();
    assert_eq!(*cleaned.lock().unwrap(), 1);
    assert!(
        widgets.get_opt("f").await.unwrap().is_none(),
        "object removed with its last finalizer"
    );
}

#[tokio::test]
async fn finalizer_added_next_to_existing_one() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    let mut w = widget("g", 1);
    w.metadata.finalizers = Some(vec!["other.example.com/keep".into()]);
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let obj = widgets.get("g").await.unwrap();
    finalizer(
        &widgets,
        "simtest.example.com/cleanup",
        Arc::new(obj),
        |_| async { Ok::<Action, std::io::Error>(Action::await_change()) },
    )
    .await
    .unwrap();
    assert_eq!(
        widgets.get("g").await.unwrap().finalizers(),
        &[
            "other.example.com/keep".to_string(),
            "simtest.example.com/cleanup".to_string()
        ]
    );
}
