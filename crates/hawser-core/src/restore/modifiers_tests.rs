use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{ResourceModifiers, patch_value};

fn rules(yaml: &str) -> Result<ResourceModifiers, String> {
    let data = BTreeMap::from([("rules.yaml".to_owned(), yaml.to_owned())]);
    ResourceModifiers::from_config_map("shop", "modifiers", &data)
}

fn deployment(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "app", "image": "registry.old/app:1"},
            {"name": "sidecar", "image": "registry.old/side:1"}
        ]}}}
    })
}

fn replicas(obj: &Value) -> &Value {
    &obj["spec"]["replicas"]
}

#[test]
fn a_json_patch_applies_to_the_items_its_conditions_select() {
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions:
    groupResource: deployments.apps
    resourceNameRegex: "^web-.*$"
    namespaces: [shop, "team-*"]
    labelSelector: {matchLabels: {app: web}}
    matches:
    - {path: /spec/replicas, value: "3"}
  patches:
  - {operation: replace, path: /spec/replicas, value: "1"}
  - {operation: add, path: /metadata/annotations, value: '{"moved": "yes"}'}
"#,
    )
    .unwrap();
    let mut selected = deployment("team-a", "web-1");
    assert!(m.apply(&mut selected, "deployments.apps").is_empty());
    assert_eq!(replicas(&selected), 1);
    assert_eq!(selected["metadata"]["annotations"]["moved"], "yes");

    // Each condition alone keeps an item out.
    let mut other_name = deployment("shop", "api-1");
    let mut other_namespace = deployment("other", "web-1");
    let mut other_type = deployment("shop", "web-1");
    let mut other_labels = deployment("shop", "web-1");
    other_labels["metadata"]["labels"]["app"] = json!("db");
    let mut other_value = deployment("shop", "web-1");
    other_value["spec"]["replicas"] = json!(2);
    for (obj, gr) in [
        (&mut other_name, "deployments.apps"),
        (&mut other_namespace, "deployments.apps"),
        (&mut other_type, "statefulsets.apps"),
        (&mut other_labels, "deployments.apps"),
        (&mut other_value, "deployments.apps"),
    ] {
        let before = obj.clone();
        assert!(m.apply(obj, gr).is_empty());
        assert_eq!(*obj, before);
    }
}

#[test]
fn group_resource_globs_stop_at_dots_unless_doubled() {
    let patched = |pattern: &str, gr: &str| {
        let m = rules(&format!(
            "version: v1\nresourceModifierRules:\n- conditions:\n    groupResource: \"{pattern}\"\n  mergePatches:\n  - patchData: '{{\"metadata\": {{\"labels\": {{\"hit\": \"yes\"}}}}}}'\n"
        ))
        .unwrap();
        let mut obj = deployment("shop", "web");
        assert!(m.apply(&mut obj, gr).is_empty());
        obj["metadata"]["labels"]["hit"] == "yes"
    };
    assert!(patched("*.apps", "deployments.apps"));
    assert!(patched("deployments.*", "deployments.apps"));
    assert!(!patched("*", "deployments.apps"));
    assert!(patched("*", "pods"));
    assert!(patched("**", "deployments.apps"));
    assert!(patched("{pods,deployments}.apps", "deployments.apps"));
    assert!(!patched("*.apps", "ingresses.networking.k8s.io"));
}

#[test]
fn cluster_scoped_items_ignore_the_namespace_condition() {
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumes, namespaces: [shop]}
  patches: [{operation: replace, path: /spec/storageClassName, value: fast}]
"#,
    )
    .unwrap();
    let mut pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"}, "spec": {"storageClassName": "slow"}});
    assert!(m.apply(&mut pv, "persistentvolumes").is_empty());
    assert_eq!(pv["spec"]["storageClassName"], "fast");
}

#[test]
fn every_rule_matches_the_item_as_it_was_archived() {
    // The first rule relabels; the second still selects by the old label.
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  mergePatches:
  - patchData: |
      metadata:
        labels:
          app: shop
- conditions:
    groupResource: deployments.apps
    labelSelector: {matchLabels: {app: web}}
  patches: [{operation: replace, path: /spec/replicas, value: "0"}]
"#,
    )
    .unwrap();
    let mut obj = deployment("shop", "web");
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(obj["metadata"]["labels"]["app"], "shop");
    assert_eq!(replicas(&obj), 0);
}

#[test]
fn a_failed_test_operation_leaves_the_item_without_an_error_and_other_failures_are_errors() {
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: replace, path: /spec/replicas, value: "5"}
  - {operation: test, path: /spec/replicas, value: "4"}
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: replace, path: /spec/replicas, value: "6"}
  - {operation: remove, path: /spec/missing}
"#,
    )
    .unwrap();
    let mut obj = deployment("shop", "web");
    let errors = m.apply(&mut obj, "deployments.apps");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("error in applying patch error in applying JSON Patch"),
        "{errors:?}"
    );
    // Each rule is all or nothing.
    assert_eq!(replicas(&obj), 3);
}

#[test]
fn a_missing_match_path_is_no_match() {
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions:
    groupResource: deployments.apps
    matches: [{path: /spec/paused, value: "true"}]
  patches: [{operation: replace, path: /spec/replicas, value: "0"}]
"#,
    )
    .unwrap();
    let mut obj = deployment("shop", "web");
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(replicas(&obj), 3);
    obj["spec"]["paused"] = json!(true);
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(replicas(&obj), 0);
}

#[test]
fn merge_patches_apply_in_order_and_null_deletes() {
    let m = rules(
        r#"
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  mergePatches:
  - patchData: '{"metadata": {"labels": {"app": null, "tier": "front"}}}'
  - patchData: |
      spec:
        replicas: 2
"#,
    )
    .unwrap();
    let mut obj = deployment("shop", "web");
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(obj["metadata"]["labels"], json!({"tier": "front"}));
    assert_eq!(replicas(&obj), 2);
}

#[test]
fn strategic_patches_merge_containers_by_name_and_refuse_custom_kinds() {
    let rule = |group_resource: &str| {
        rules(&format!(
            "version: v1\nresourceModifierRules:\n- conditions: {{groupResource: \"{group_resource}\"}}\n  strategicPatches:\n  - patchData: '{{\"spec\": {{\"template\": {{\"spec\": {{\"containers\": [{{\"name\": \"app\", \"image\": \"registry.new/app:1\"}}]}}}}}}}}'\n"
        ))
        .unwrap()
    };
    let mut obj = deployment("shop", "web");
    // `*` does not match `deployments.apps`: nothing happens.
    assert!(rule("*").apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.old/app:1"
    );
    let m = rule("**");
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    let containers = obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 2, "{containers:?}");
    assert_eq!(containers[0]["image"], "registry.new/app:1");
    assert_eq!(containers[1]["image"], "registry.old/side:1");

    let mut custom = json!({"apiVersion": "shop.example.com/v1", "kind": "Cart",
        "metadata": {"name": "c", "namespace": "shop"}, "spec": {}});
    let before = custom.clone();
    let errors = m.apply(&mut custom, "carts.shop.example.com");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("Cart of shop.example.com/v1 is not a built-in"),
        "{errors:?}"
    );
    assert_eq!(custom, before);
}

#[test]
fn json_patch_values_are_read_as_velero_reads_them() {
    for (text, want) in [
        ("", json!("")),
        ("\"3\"", json!("3")),
        ("3", json!(3)),
        ("1.5", json!(1.5)),
        ("null", Value::Null),
        ("true", json!(true)),
        ("{\"a\": [1]}", json!({"a": [1]})),
        ("[1, 2]", json!([1, 2])),
        ("fast", json!("fast")),
        ("\"", json!("\"")),
    ] {
        assert_eq!(patch_value(text).unwrap(), want, "{text:?}");
    }
    assert!(patch_value("{not json").is_err());
    // A YAML number or boolean is the text of a Go string field, then read as JSON.
    let m = rules(
        "version: v1\nresourceModifierRules:\n- conditions: {groupResource: deployments.apps}\n  patches: [{operation: replace, path: /spec/replicas, value: 7}]\n",
    )
    .unwrap();
    let mut obj = deployment("shop", "web");
    assert!(m.apply(&mut obj, "deployments.apps").is_empty());
    assert_eq!(replicas(&obj), 7);
}

#[test]
fn a_config_map_that_is_not_the_format_is_named_with_the_problem() {
    let two = BTreeMap::from([
        ("a".to_owned(), "version: v1".to_owned()),
        ("b".to_owned(), "version: v1".to_owned()),
    ]);
    for data in [BTreeMap::new(), two] {
        let e = ResourceModifiers::from_config_map("shop", "modifiers", &data).unwrap_err();
        assert_eq!(
            e,
            "Error in parsing resource modifiers provided in configmap shop/modifiers: illegal resource modifiers shop/modifiers configmap"
        );
    }
    let rule = |body: &str| format!("version: v1\nresourceModifierRules:\n- {body}\n");
    let merge = "mergePatches: [{patchData: '{}'}]";
    for (yaml, expected) in [
        (
            "version: v1\nrules: []\n".to_owned(),
            "failed to decode yaml data into resource modifiers",
        ),
        (
            ": : :".to_owned(),
            "failed to decode yaml data into resource modifiers",
        ),
        (
            "version: v2\nresourceModifierRules: []\n".to_owned(),
            "unsupported resource modifier version v2",
        ),
        (
            "version: v1\n".to_owned(),
            "resource modifier rules cannot be empty",
        ),
        (
            rule(&format!("conditions: {{}}\n  {merge}")),
            "groupResource cannot be empty",
        ),
        (
            rule("conditions: {groupResource: pods}"),
            "no patch data found",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: pods}}\n  {merge}\n  patches: [{{operation: remove, path: /a}}]"
            )),
            "only one of patches, mergePatches, strategicPatches can be specified",
        ),
        (
            rule("conditions: {groupResource: pods}\n  patches: [{operation: put, path: /a}]"),
            "unsupported operation put",
        ),
        (
            rule("conditions: {groupResource: pods}\n  patches: [{operation: remove}]"),
            "path cannot be empty",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: pods, resourceNameRegex: '('}}\n  {merge}"
            )),
            "resourceNameRegex",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: '[z-a]'}}\n  {merge}"
            )),
            "groupResource",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: pods, labelSelector: {{matchExpressions: [{{key: a, operator: Near}}]}}}}\n  {merge}"
            )),
            "labelSelector",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: pods, matches: [{{value: x}}]}}\n  {merge}"
            )),
            "path is required for match rule",
        ),
        (
            rule(&format!(
                "conditions: {{groupResource: pods, matches: [{{path: spec, value: x}}]}}\n  {merge}"
            )),
            "is not a JSON pointer",
        ),
        (
            rule("conditions: {groupResource: pods}\n  mergePatches: [{patchData: '{a: [}'}]"),
            "error in converting YAML to JSON",
        ),
        (
            rule(
                "conditions: {groupResource: pods}\n  patches: [{operation: add, path: /a, value: [1]}]",
            ),
            "expected a string, found a list",
        ),
    ] {
        let e = rules(&yaml).map(|_| ()).unwrap_err();
        assert!(e.contains(expected), "{yaml}\n→ {e}\nwanted {expected}");
        assert!(e.contains("configmap shop/modifiers"), "{e}");
    }
}
