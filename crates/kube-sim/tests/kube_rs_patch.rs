//! Every patch type through kube-rs, and status subresource semantics on custom resources.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

#[path = "kube_rs_common.rs"]
mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

#[tokio::test]
async fn merge_patch_on_config_map() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(
            &PostParams::default(),
            &config_map("m", &[("a", "1"), ("b", "2")]),
        )
        .await
        .unwrap();
    let patched = cms
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!(data.get("a"), None, "null deletes");
    assert_eq!(data["b"], "2");
    assert_eq!(data["c"], "3");
    assert_ne!(
        patched.metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn merge_patch_with_stale_resource_version_is_conflict() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("m", &[]))
        .await
        .unwrap();
    let err = cms
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (409, "Conflict".to_string()));
}

#[tokio::test]
async fn patch_of_missing_object_is_not_found() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let err = cms
        .patch(
            "ghost",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (404, "NotFound".to_string()));
}

#[tokio::test]
async fn json_patch_test_and_failure() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("j", &[("a", "1")]))
        .await
        .unwrap();
    let ok: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "2"},
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/labels", "value": {"l": "v"}}
    ]))
    .unwrap();
    let patched = cms
        .patch("j", &PatchParams::default(), &Patch::Json::<()>(ok))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["a"], "2");
    assert_eq!(patched.metadata.labels.unwrap()["l"], "v");

    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/a", "value": "3"},
        {"op": "test", "path": "/data/a", "value": "nope"}
    ]))
    .unwrap();
    let err = cms
        .patch("j", &PatchParams::default(), &Patch::Json::<()>(failing))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".to_string()));
    assert_eq!(
        cms.get("j").await.unwrap().data.unwrap()["a"],
        "2",
        "a failed JSON patch changes nothing"
    );
}

fn deployment_with_containers() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": "app:1"},
                {"name": "sidecar", "image": "side:1"}
            ]}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_patch_merges_containers_by_name() {
    let (_sim, client) = start().await;
    let deps: Api<Deployment> = Api::namespaced(client, "default");
    deps.create(&PostParams::default(), &deployment_with_containers())
        .await
        .unwrap();
    let patched = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}}})),
        )
        .await
        .unwrap();
    let containers = patched.spec.unwrap().template.spec.unwrap().containers;
    let images: Vec<(String, Option<String>)> =
        containers.into_iter().map(|c| (c.name, c.image)).collect();
    assert_eq!(
        images,
        vec![
            ("app".to_string(), Some("app:1".to_string())),
            ("sidecar".to_string(), Some("side:2".to_string()))
        ]
    );
    assert_eq!(patched.metadata.generation, Some(2));
}

#[tokio::test]
async fn strategic_patch_on_custom_resource_is_unsupported_media_type() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let err = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (415, "UnsupportedMediaType".to_string()));
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert!(
        status.message.contains("application/merge-patch+json"),
        "{}",
        status.message
    );
    let merged = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.spec.size, 2);
}

#[tokio::test]
async fn server_side_apply_create_update_conflict_force() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "1", "y": "1"}});
    let created = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&applied))
        .await
        .unwrap();
    assert!(
        created.metadata.uid.is_some(),
        "apply creates a missing object"
    );
    let mf = created.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    assert_eq!(mf[0].fields_type.as_deref(), Some("FieldsV1"));

    // Alice omits y: it is removed.
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "1"}});
    let updated = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(updated.data.clone().unwrap().get("y"), None);

    // Bob changes x, owned by Alice: conflict.
    let bob = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"x": "2"}});
    let err = cms
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&bob))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (409, "Conflict".to_string()));
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.x"
    );
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.x");

    // With force Bob takes x over.
    let forced = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&bob),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["x"], "2");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(
        managers,
        vec!["bob".to_string()],
        "alice owned only x and lost it"
    );
}

#[tokio::test]
async fn apply_without_field_manager_is_invalid() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}});
    let err = cms
        .patch("ssa", &PatchParams::default(), &Patch::Apply(&applied))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".to_string()));
}

#[tokio::test]
async fn status_subresource_semantics() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    let mut w = widget("s", 1);
    w.status = Some(WidgetStatus {
        phase: "Ignored".into(),
    });
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(
        created.status, None,
        "create drops status when the subresource is enabled"
    );

    let with_status = widgets
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(
        with_status.status.as_ref().map(|s| s.phase.as_str()),
        Some("Ready")
    );
    assert_eq!(with_status.spec.size, 1, "a /status write ignores spec");
    assert_eq!(
        with_status.metadata.generation,
        Some(1),
        "a /status write keeps generation"
    );

    let main = widgets
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Overwritten"}, "spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(main.spec.size, 2);
    assert_eq!(
        main.status.as_ref().map(|s| s.phase.as_str()),
        Some("Ready"),
        "main-resource writes keep status"
    );
    assert_eq!(main.metadata.generation, Some(2));

    let got = widgets.get_status("s").await.unwrap();
    assert_eq!(got.status.map(|s| s.phase), Some("Ready".to_string()));
}

#[tokio::test]
async fn without_status_subresource_status_is_an_ordinary_field() {
    let (_sim, client) = start().await;
    install_crd(&client, gadget_crd()).await;
    let gvk = GroupVersionKind::gvk("simtest.example.com", "v1", "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let g = DynamicObject::new("g", &ar)
        .within("default")
        .data(json!({"spec": {"a": 1}, "status": {"phase": "New"}}));
    let created = gadgets.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(
        created.data["status"]["phase"], "New",
        "status kept on create"
    );
    let patched = gadgets
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Done"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Done");
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "status edits bump generation without the subresource"
    );
    let err = gadgets.get_status("g").await.unwrap_err();
    assert_eq!(
        api_error(&err).0,
        404,
        "no /status endpoint without the subresource"
    );
}
