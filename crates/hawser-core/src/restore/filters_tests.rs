use serde_json::json;

use super::*;
use crate::selection::{ApiResource, Catalogue};

fn catalogue() -> Catalogue {
    let r = |group: &str, kind: &str, plural: &str, namespaced: bool| ApiResource {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: String::new(),
        short_names: vec![],
        namespaced,
        verbs: vec![],
    };
    Catalogue::new(vec![
        r("", "Pod", "pods", true),
        r("", "Node", "nodes", false),
        r("", "Event", "events", true),
        r("", "ConfigMap", "configmaps", true),
        r("", "Namespace", "namespaces", false),
        r("apps", "Deployment", "deployments", true),
    ])
}

fn filters(spec: serde_json::Value) -> RestoreFilters {
    serde_json::from_value(spec).unwrap()
}

fn selection(spec: serde_json::Value) -> RestoreSelection {
    RestoreSelection::new(&filters(spec), &catalogue()).unwrap()
}

fn item(labels: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"name": "x", "labels": labels}})
}

#[test]
fn spec_json_with_nulls_deserialises() {
    let f =
        filters(json!({"includedNamespaces": null, "namespaceMapping": null, "backupName": "b"}));
    assert!(f.included_namespaces.is_empty());
    assert!(f.namespace_mapping.is_empty());
}

#[test]
fn never_restored_kinds_are_excluded_by_default() {
    let s = selection(json!({}));
    for kind in NON_RESTORABLE {
        assert!(!s.type_included(kind), "{kind}");
    }
    assert!(s.type_included("pods"));
    assert_eq!(
        s.check_item("nodes", None, &item(json!({}))),
        Err(FilterSkip::TypeExcluded)
    );
}

#[test]
fn never_restored_kinds_included_explicitly_fail_validation() {
    let errs = RestoreSelection::new(
        &filters(json!({"includedResources": ["node", "pods"]})),
        &catalogue(),
    )
    .unwrap_err();
    assert_eq!(errs, ["node are non-restorable resources"]);
}

#[test]
fn type_filter_resolves_names() {
    let s = selection(json!({"includedResources": ["deploy.apps", "Pod"]}));
    // Only `deployments.apps` in the catalogue has no short name, so `deploy.apps` stays verbatim.
    assert!(s.type_included("pods"));
    assert!(!s.type_included("configmaps"));
    let s = selection(json!({"excludedResources": ["ConfigMap"]}));
    assert!(!s.type_included("configmaps"));
    assert!(s.type_included("deployments.apps"));
}

#[test]
fn bypass_types_ignore_every_filter() {
    let s = selection(
        json!({"includedResources": ["pods"], "includedNamespaces": ["a"],
        "labelSelector": {"matchLabels": {"app": "x"}}}),
    );
    // A DataUpload bypasses the filters too, and is then never restored (a control type).
    assert_eq!(
        s.check_item("datauploads.velero.io", Some("b"), &item(json!({}))),
        Err(FilterSkip::ControlType)
    );
}

#[test]
fn control_types_are_never_restored_and_are_told_apart_only_when_selected() {
    let all = selection(json!({}));
    for gr in CONTROL_TYPES {
        let namespace = (gr != "backupstoragelocations.velero.io").then_some("velero");
        let got = all.check_item(gr, namespace, &item(json!({})));
        // backuprepositories are also never restored in Velero: excluded as a type.
        assert!(
            matches!(got, Err(FilterSkip::ControlType | FilterSkip::TypeExcluded)),
            "{gr}: {got:?}"
        );
    }
    assert_eq!(
        all.check_item("schedules.velero.io", Some("velero"), &item(json!({}))),
        Err(FilterSkip::ControlType)
    );
    let elsewhere = selection(json!({"includedNamespaces": ["shop"]}));
    assert_eq!(
        elsewhere.check_item("schedules.velero.io", Some("velero"), &item(json!({}))),
        Err(FilterSkip::NamespaceExcluded)
    );
    assert_eq!(
        all.check_item("configmaps", Some("velero"), &item(json!({}))),
        Ok(())
    );
}

#[test]
fn cluster_scoped_bypass_types_still_follow_include_cluster_resources() {
    let vsc = "volumesnapshotcontents.snapshot.storage.k8s.io";
    let one_namespace = selection(json!({"includedNamespaces": ["a"]}));
    assert_eq!(
        one_namespace.check_item(vsc, None, &item(json!({}))),
        Err(FilterSkip::ClusterResourcesExcluded)
    );
    let excluded = selection(json!({"includeClusterResources": false}));
    assert_eq!(
        excluded.check_item(vsc, None, &item(json!({}))),
        Err(FilterSkip::ClusterResourcesExcluded)
    );
    let included = selection(
        json!({"includedNamespaces": ["a"], "includeClusterResources": true,
        "excludedResources": [vsc]}),
    );
    assert_eq!(included.check_item(vsc, None, &item(json!({}))), Ok(()));
    let everything = selection(json!({}));
    assert_eq!(everything.check_item(vsc, None, &item(json!({}))), Ok(()));
}

#[test]
fn namespace_filter_applies_to_the_source_namespace() {
    let s =
        selection(json!({"includedNamespaces": ["shop"], "namespaceMapping": {"shop": "shop2"}}));
    assert_eq!(s.check_item("pods", Some("shop"), &item(json!({}))), Ok(()));
    assert_eq!(
        s.check_item("pods", Some("shop2"), &item(json!({}))),
        Err(FilterSkip::NamespaceExcluded)
    );
    assert_eq!(s.target_namespace("shop"), "shop2");
    assert_eq!(s.target_namespace("other"), "other");
}

#[test]
fn namespace_objects_follow_the_namespace_filter() {
    let s = selection(json!({"includedNamespaces": ["shop"]}));
    let ns = |n: &str| json!({"metadata": {"name": n}});
    assert_eq!(s.check_item("namespaces", None, &ns("shop")), Ok(()));
    assert_eq!(
        s.check_item("namespaces", None, &ns("kube-system")),
        Err(FilterSkip::NamespaceExcluded)
    );
}

#[test]
fn include_cluster_resources_tri_state() {
    let cluster_item = item(json!({}));
    let auto_all = selection(json!({}));
    assert_eq!(
        auto_all.check_item("storageclasses.storage.k8s.io", None, &cluster_item),
        Ok(())
    );
    let auto_some = selection(json!({"includedNamespaces": ["shop"]}));
    assert_eq!(
        auto_some.check_item("storageclasses.storage.k8s.io", None, &cluster_item),
        Err(FilterSkip::ClusterResourcesExcluded)
    );
    let on = selection(json!({"includedNamespaces": ["shop"], "includeClusterResources": true}));
    assert_eq!(
        on.check_item("storageclasses.storage.k8s.io", None, &cluster_item),
        Ok(())
    );
    let off = selection(json!({"includeClusterResources": false}));
    assert_eq!(
        off.check_item("storageclasses.storage.k8s.io", None, &cluster_item),
        Err(FilterSkip::ClusterResourcesExcluded)
    );
    // Namespaced items are unaffected by the switch.
    assert_eq!(off.check_item("pods", Some("shop"), &cluster_item), Ok(()));
}

#[test]
fn label_selector_uses_archived_labels() {
    let s = selection(json!({"labelSelector": {"matchLabels": {"app": "web"}}}));
    assert_eq!(
        s.check_item("pods", Some("a"), &item(json!({"app": "web"}))),
        Ok(())
    );
    assert_eq!(
        s.check_item("pods", Some("a"), &item(json!({"app": "db"}))),
        Err(FilterSkip::LabelsDoNotMatch)
    );
}

#[test]
fn or_label_selectors_match_any() {
    let s = selection(json!({"orLabelSelectors": [
        {"matchLabels": {"app": "web"}},
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}
    ]}));
    assert!(s.labels_match(&item(json!({"app": "web"}))));
    assert!(s.labels_match(&item(json!({"tier": "db"}))));
    assert!(!s.labels_match(&item(json!({"app": "db"}))));
}

#[test]
fn status_restore_by_spec_and_annotation() {
    let none = selection(json!({}));
    let plain = json!({"metadata": {"name": "x"}});
    let forced_on = json!({"metadata": {"annotations": {RESTORE_STATUS_ANNOTATION: "true"}}});
    let forced_off = json!({"metadata": {"annotations": {RESTORE_STATUS_ANNOTATION: "false"}}});
    assert!(!none.restores_status("pods", &plain));
    assert!(none.restores_status("pods", &forced_on));
    let some = selection(json!({"restoreStatus": {"includedResources": ["pods"]}}));
    assert!(some.restores_status("pods", &plain));
    assert!(!some.restores_status("configmaps", &plain));
    assert!(!some.restores_status("pods", &forced_off));
}

#[test]
fn validation_messages() {
    let errs = |spec| crate::restore::validate(&filters(spec), &catalogue());
    assert!(errs(json!({})).is_empty());
    assert_eq!(
        errs(json!({"labelSelector": {}, "orLabelSelectors": [{}]})),
        [crate::restore::RESTORE_BOTH_SELECTORS_MESSAGE]
    );
    assert_eq!(
        errs(json!({"existingResourcePolicy": "replace"})),
        ["invalid existingResourcePolicy: replace"]
    );
    assert!(errs(json!({"existingResourcePolicy": "update"})).is_empty());
    let bad_mapping = errs(json!({"namespaceMapping": {"shop": "Shop_2"}}));
    assert_eq!(bad_mapping.len(), 1);
    assert!(
        bad_mapping[0]
            .starts_with("invalid namespaceMapping \"shop\": \"Shop_2\": target namespace")
    );
    let bad_selector = errs(json!({"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "Exists", "values": ["x"]}]}}));
    assert_eq!(bad_selector.len(), 1);
    assert!(bad_selector[0].starts_with("invalid labelSelector: "));
    assert_eq!(
        errs(json!({"includedNamespaces": ["shop"], "excludedNamespaces": ["*"]})),
        ["Invalid included/excluded namespace lists: excludes list cannot contain '*'"]
    );
    assert_eq!(
        errs(json!({"includedResources": ["pods"], "excludedResources": ["pods"]})),
        [
            "Invalid included/excluded resource lists: excludes list cannot contain an item in the includes list: pods"
        ]
    );
}

#[test]
fn uncompilable_patterns_fail_validation() {
    let errs = |spec| crate::restore::validate(&filters(spec), &catalogue());
    assert_eq!(
        errs(json!({"excludedResources": ["secrets", "[x"]})),
        [
            "Invalid included/excluded resource lists: excludedResources[1]: invalid glob pattern \"[x\": unclosed '['"
        ]
    );
    assert_eq!(
        errs(json!({"restoreStatus": {"includedResources": ["{a,b"]}})),
        [
            "Invalid included/excluded resource lists: restoreStatus.includedResources[0]: invalid glob pattern \"{a,b\": unclosed '{'"
        ]
    );
    let bomb = "{".repeat(100_000);
    let errs = errs(json!({"includedResources": [bomb]}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("includedResources[0]") && errs[0].contains("(100000 bytes)"));
    assert!(errs[0].len() < 300, "{}", errs[0]);
    // The selection refuses what validation refuses: no filter that matches nothing.
    let spec = filters(json!({"excludedResources": ["secrets", "[x"]}));
    assert!(RestoreSelection::new(&spec, &catalogue()).is_err());
}
