//! Object-by-object comparison of an original and its restored copy (pure).
//!
//! What a restore is expected to keep: every top-level field other than `metadata` and `status`
//! (`data`, `spec`, `rules`, `roleRef`, `subjects`, ...), the name, the labels other than
//! the restore's own (Velero's `velero.io/backup-name` and `velero.io/restore-name`, hawser's
//! `hawser.io/restore-uid`), and the annotations. What it is
//! expected to change (docs/restore.md, cleaning): the namespace (mapped), role binding subject
//! namespaces (mapped), a non-headless Service's `clusterIP`/`clusterIPs` (assigned anew), and
//! the server metadata. The restore labels must name the backup and the restore.

use hawser_core::restore::{BACKUP_NAME_LABEL, RESTORE_NAME_LABEL, RESTORE_UID_LABEL};
use serde_json::{Map, Value};

/// The namespace mapping the copy was restored with.
#[derive(Debug, Clone, Copy)]
pub struct Mapping<'a> {
    /// Namespace of the original.
    pub source: &'a str,
    /// Namespace of the copy.
    pub target: &'a str,
}

/// Compares `original` with `copy`: the JSON paths whose values differ (empty: they match),
/// then whether the restore labels name `backup` and `restore`.
pub fn differences(
    original: &Value,
    copy: &Value,
    mapping: Mapping<'_>,
    backup: &str,
    restore: &str,
) -> Vec<String> {
    let mut found = Vec::new();
    diff(
        "",
        &comparable(original, Some(mapping)),
        &comparable(copy, None),
        &mut found,
    );
    if copy.pointer("/metadata/namespace").and_then(Value::as_str) != Some(mapping.target) {
        found.push("metadata.namespace".to_owned());
    }
    for (label, want) in [(BACKUP_NAME_LABEL, backup), (RESTORE_NAME_LABEL, restore)] {
        let got = copy
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(label))
            .and_then(Value::as_str);
        if got != Some(want) {
            found.push(format!("metadata.labels.{label}"));
        }
    }
    found
}

/// The parts of an object a restore keeps. With `mapping`, the original's namespaced
/// references are rewritten to the target namespace first.
fn comparable(object: &Value, mapping: Option<Mapping<'_>>) -> Value {
    let mut out = Map::new();
    if let Value::Object(fields) = object {
        for (key, value) in fields {
            if key != "metadata" && key != "status" {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    let mut metadata = Map::new();
    for key in ["name", "annotations"] {
        if let Some(value) = object.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(Value::Object(labels)) = object.pointer("/metadata/labels") {
        let kept: Map<String, Value> = labels
            .iter()
            .filter(|(k, _)| {
                ![BACKUP_NAME_LABEL, RESTORE_NAME_LABEL, RESTORE_UID_LABEL].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            metadata.insert("labels".to_owned(), Value::Object(kept));
        }
    }
    out.insert("metadata".to_owned(), Value::Object(metadata));
    let mut out = Value::Object(out);

    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "Service" {
        let headless = object.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
        if !headless && let Some(Value::Object(spec)) = out.get_mut("spec") {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    }
    if let (Some(mapping), "RoleBinding" | "ClusterRoleBinding") = (mapping, kind)
        && let Some(Value::Array(subjects)) = out.get_mut("subjects")
    {
        for subject in subjects {
            if subject.get("namespace").and_then(Value::as_str) == Some(mapping.source) {
                subject["namespace"] = Value::String(mapping.target.to_owned());
            }
        }
    }
    out
}

/// Collects the paths (`spec.ports[0].port`) where `a` and `b` differ.
fn diff(path: &str, a: &Value, b: &Value, found: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff(&join(key), x, y, found),
                    _ => found.push(join(key)),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, found);
            }
        }
        _ if a == b => {}
        _ => found.push(if path.is_empty() {
            "(object)".to_owned()
        } else {
            path.to_owned()
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MAP: Mapping<'static> = Mapping {
        source: "shop",
        target: "shop-copy",
    };

    fn restored(mut original: Value) -> Value {
        original["metadata"]["namespace"] = json!("shop-copy");
        original["metadata"]["uid"] = json!("another-uid");
        original["metadata"]["resourceVersion"] = json!("99");
        let labels = original["metadata"]
            .as_object_mut()
            .map(|m| m.entry("labels").or_insert_with(|| json!({})).clone());
        let mut labels = labels.unwrap_or_else(|| json!({}));
        labels[BACKUP_NAME_LABEL] = json!("b1");
        labels[RESTORE_NAME_LABEL] = json!("r1");
        original["metadata"]["labels"] = labels;
        original
    }

    fn config_map() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "shop", "uid": "u1", "labels": {"app": "shop"}},
            "data": {"a": "1"}
        })
    }

    #[test]
    fn a_faithful_copy_matches_despite_new_metadata_and_restore_labels() {
        let original = config_map();
        assert!(differences(&original, &restored(original.clone()), MAP, "b1", "r1").is_empty());
    }

    #[test]
    fn changed_data_a_lost_label_and_a_wrong_namespace_are_reported_by_path() {
        let original = config_map();
        let mut copy = restored(original.clone());
        copy["data"]["a"] = json!("2");
        copy["metadata"]["labels"]
            .as_object_mut()
            .map(|l| l.remove("app"));
        copy["metadata"]["namespace"] = json!("shop");
        assert_eq!(
            differences(&original, &copy, MAP, "b1", "r1"),
            ["data.a", "metadata.labels", "metadata.namespace"]
        );
    }

    #[test]
    fn missing_or_wrong_restore_labels_are_reported() {
        let original = config_map();
        let copy = restored(original.clone());
        assert_eq!(
            differences(&original, &copy, MAP, "b1", "other"),
            ["metadata.labels.velero.io/restore-name"]
        );
        assert_eq!(
            differences(&original, &original, MAP, "b1", "r1"),
            [
                "metadata.namespace",
                "metadata.labels.velero.io/backup-name",
                "metadata.labels.velero.io/restore-name"
            ]
        );
    }

    #[test]
    fn a_service_may_get_a_new_cluster_ip_unless_headless() {
        let service = |ip: &str| {
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "s", "namespace": "shop"},
                   "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 80}]}})
        };
        let original = service("10.0.0.1");
        let mut copy = restored(service("10.0.0.2"));
        assert!(differences(&original, &copy, MAP, "b1", "r1").is_empty());
        copy["spec"]["ports"][0]["port"] = json!(81);
        assert_eq!(
            differences(&original, &copy, MAP, "b1", "r1"),
            ["spec.ports[0].port"]
        );
        let headless = service("None");
        let mut copy = restored(headless.clone());
        copy["spec"]["clusterIP"] = json!("10.0.0.3");
        copy["spec"]["clusterIPs"] = json!(["10.0.0.3"]);
        assert_eq!(
            differences(&headless, &copy, MAP, "b1", "r1"),
            ["spec.clusterIP", "spec.clusterIPs"]
        );
    }

    #[test]
    fn role_binding_subjects_must_follow_the_namespace_mapping() {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb", "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "shop"}]
        });
        let mut copy = restored(binding.clone());
        assert_eq!(
            differences(&binding, &copy, MAP, "b1", "r1"),
            ["subjects[0].namespace"]
        );
        copy["subjects"][0]["namespace"] = json!("shop-copy");
        assert!(differences(&binding, &copy, MAP, "b1", "r1").is_empty());
    }
}
