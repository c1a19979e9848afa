use hawser_core::archive::ItemPath;
use serde_json::json;

use super::identity_conflict;

fn at(path: &str) -> ItemPath {
    ItemPath::parse(path).unwrap()
}

#[test]
fn an_object_that_agrees_with_its_path_or_leaves_a_field_out_is_accepted() {
    let cm = at("resources/configmaps/namespaces/web/a.json");
    let ns = at("resources/namespaces/cluster/web.json");
    let cases = [
        (
            &cm,
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "web"}}),
        ),
        (&cm, json!({"metadata": {}})),
        (&cm, json!({})),
        (
            &ns,
            json!({"kind": "Namespace", "metadata": {"name": "web", "namespace": ""}}),
        ),
    ];
    for (path, object) in cases {
        let kind = if path.group_resource == "namespaces" {
            "Namespace"
        } else {
            "ConfigMap"
        };
        assert_eq!(
            identity_conflict(path, &object, Some(kind)),
            None,
            "{object}"
        );
    }
    // The kind is not checked against a type the cluster does not serve.
    assert_eq!(
        identity_conflict(&cm, &json!({"kind": "Secret"}), None),
        None
    );
}

#[test]
fn each_disagreement_says_what_the_object_claims_and_what_the_path_says() {
    let cm = at("resources/configmaps/namespaces/web/a.json");
    let cases = [
        (
            json!({"metadata": {"name": "b"}}),
            "has metadata.name \"b\" but its path names it \"a\"",
        ),
        (
            json!({"metadata": {"name": "a", "namespace": "kube-system"}}),
            "has metadata.namespace \"kube-system\" but its path puts it in namespace \"web\"",
        ),
        (
            json!({"kind": "Secret", "metadata": {"name": "a"}}),
            "has kind \"Secret\" but its path holds configmaps (kind \"ConfigMap\")",
        ),
    ];
    for (object, expected) in cases {
        assert_eq!(
            identity_conflict(&cm, &object, Some("ConfigMap")).as_deref(),
            Some(expected)
        );
    }
    assert_eq!(
        identity_conflict(
            &at("resources/clusterroles.rbac.authorization.k8s.io/cluster/admin.json"),
            &json!({"metadata": {"name": "admin", "namespace": "web"}}),
            Some("ClusterRole"),
        )
        .as_deref(),
        Some("has metadata.namespace \"web\" but its path says it is cluster-scoped")
    );
}
