//! kube-rs typed and dynamic CRUD against the simulator, checking the answers a real cluster gives.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

#[path = "kube_rs_common.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

#[tokio::test]
async fn config_map_lifecycle() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");

    let mut cm = config_map("cm1", &[("a", "1")]);
    cm.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.as_deref().is_some_and(|u| !u.is_empty()),
        "uid assigned"
    );
    let rv: u64 = meta
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .expect("numeric resourceVersion");
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(meta.generation, None, "ConfigMaps do not use generation");

    let got = cms.get("cm1").await.unwrap();
    assert_eq!(got.data, cm.data);
    assert_eq!(got.metadata.uid, meta.uid);

    cms.create(&PostParams::default(), &config_map("cm2", &[]))
        .await
        .unwrap();
    let selected = cms
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1);
    assert_eq!(selected.items[0].metadata.name.as_deref(), Some("cm1"));
    let not_web = cms
        .list(&ListParams::default().labels("app!=web"))
        .await
        .unwrap();
    assert_eq!(
        not_web
            .items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["cm2"]
    );
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=cm2"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let list_rv: u64 = by_name.metadata.resource_version.unwrap().parse().unwrap();
    assert!(
        list_rv > rv,
        "list resourceVersion is the current global revision"
    );

    let mut updated = got.clone();
    updated.data = Some(BTreeMap::from([("a".into(), "2".into())]));
    let replaced = cms
        .replace("cm1", &PostParams::default(), &updated)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv, "resourceVersion grows on update");
    assert_eq!(replaced.data.unwrap()["a"], "2");

    let deleted = cms.delete("cm1", &DeleteParams::default()).await.unwrap();
    let status = deleted
        .right()
        .expect("a ConfigMap delete answers a Status, not the object");
    let details = status.details.expect("details in delete status");
    assert_eq!(details.name, "cm1");
    assert_eq!(details.kind, "configmaps");
    assert!(cms.get_opt("cm1").await.unwrap().is_none());
}

#[tokio::test]
async fn missing_object_is_not_found() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let err = cms.get("nope").await.unwrap_err();
    assert_eq!(api_error(&err), (404, "NotFound".to_string()));
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert_eq!(status.message, "configmaps \"nope\" not found");
    assert!(cms.get_opt("nope").await.unwrap().is_none());
    let err = cms
        .delete("nope", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 404);
}

#[tokio::test]
async fn create_existing_is_already_exists() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .unwrap();
    let err = cms
        .create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (409, "AlreadyExists".to_string()));
}

#[tokio::test]
async fn stale_replace_is_conflict() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = cms
        .create(&PostParams::default(), &config_map("c", &[("a", "1")]))
        .await
        .unwrap();
    let mut second = first.clone();
    second.data = Some(BTreeMap::from([("a".into(), "2".into())]));
    cms.replace("c", &PostParams::default(), &second)
        .await
        .unwrap();
    let mut stale = first.clone();
    stale.data = Some(BTreeMap::from([("a".into(), "3".into())]));
    let err = cms
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (409, "Conflict".to_string()));
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["a"], "2");
}

#[tokio::test]
async fn create_in_missing_namespace_is_not_found() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let err = cms
        .create(&PostParams::default(), &config_map("c", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (404, "NotFound".to_string()));
}

#[tokio::test]
async fn namespace_lifecycle() {
    let (_sim, client) = start().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let defaults = nss.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = defaults
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&n.to_string()), "{n} present in {names:?}");
    }

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    let created = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(
        created
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/metadata.name"))
            .map(String::as_str),
        Some("team-a")
    );
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );

    let cms: Api<ConfigMap> = Api::namespaced(client, "team-a");
    cms.create(&PostParams::default(), &config_map("inside", &[]))
        .await
        .unwrap();

    let deleted = nss
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    let ns = deleted
        .left()
        .expect("a Namespace delete answers the object, not a Status");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let gone = eventually(Duration::from_secs(10), || async {
        nss.get_opt("team-a").await.unwrap().is_none()
    })
    .await;
    assert!(gone, "the namespace disappears once its content is deleted");
    assert!(
        cms.get_opt("inside").await.unwrap().is_none(),
        "namespace content deleted"
    );
}

#[tokio::test]
async fn deployment_generation() {
    let (_sim, client) = start().await;
    let deps: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}}
        }
    }))
    .unwrap();
    let created = deps.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    let mut scaled = created.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(3);
    let scaled = deps
        .replace("web", &PostParams::default(), &scaled)
        .await
        .unwrap();
    assert_eq!(
        scaled.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );

    let mut labelled = scaled.clone();
    labelled.metadata.labels = Some(BTreeMap::from([("x".into(), "y".into())]));
    let labelled = deps
        .replace("web", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata-only change keeps generation"
    );

    let listed = deps.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.as_ref().unwrap().replicas, Some(3));
}

#[tokio::test]
async fn dynamic_api_on_custom_resources() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let gvk = GroupVersionKind::gvk("simtest.example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);

    let obj = DynamicObject::new("w1", &ar)
        .within("default")
        .data(json!({"spec": {"size": 3}}));
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.types.as_ref().map(|t| t.kind.as_str()),
        Some("Widget")
    );
    assert_eq!(created.data["spec"]["size"], 3);

    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].types.as_ref().map(|t| t.api_version.as_str()),
        Some("simtest.example.com/v1"),
        "custom resource list items carry apiVersion/kind"
    );

    let mut changed = created.clone();
    changed.data["spec"]["size"] = json!(4);
    let replaced = api
        .replace("w1", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));

    // The typed view of the same objects.
    let typed: Api<Widget> = Api::namespaced(client, "default");
    assert_eq!(typed.get("w1").await.unwrap().spec.size, 4);

    let deleted = api.delete("w1", &DeleteParams::default()).await.unwrap();
    let status = deleted
        .right()
        .expect("a custom resource delete answers a Status, not the object");
    let d = status.details.expect("details");
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("w1", "simtest.example.com", "widgets")
    );
    let err = api.get("w1").await.unwrap_err();
    assert_eq!(api_error(&err), (404, "NotFound".to_string()));
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert_eq!(
        status.message,
        "widgets.simtest.example.com \"w1\" not found"
    );
}

#[tokio::test]
async fn list_pagination_through_kube_rs() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..7 {
        cms.create(&PostParams::default(), &config_map(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());
}
