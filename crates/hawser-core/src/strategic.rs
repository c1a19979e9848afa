//! Strategic merge patch for built-in kinds, approximated without the Go type information. The
//! API server of the test cluster applies PATCH requests with it, and a restore applies a
//! resource modifier's `strategicPatches` with it.
//!
//! The real server reads each field's patch strategy from the compiled-in Go types. Here one
//! table ([`LIST_STRATEGIES`]) names the lists of the built-in kinds that do not simply replace:
//! lists of objects merged per element by a merge key (containers by `name`, container ports by
//! `containerPort`, volume mounts by `mountPath`, conditions by `type`, …) and primitive lists merged
//! as sets (`metadata.finalizers`). Entries match on the trailing field names of the path, so
//! `spec.template.spec.containers` and `spec.containers` both hit `containers`. Every other list is
//! replaced wholesale and maps merge as in a JSON merge patch (`null` deletes).
//!
//! Directives: `$patch: replace|delete|merge` on maps and list elements (`{"$patch":"replace"}` as
//! a list element replaces the whole list), `$retainKeys`, `$deleteFromPrimitiveList/<field>`.
//! `$setElementOrder/<field>` is accepted and ignored: merged lists keep the stored order and new
//! elements are appended. Fields absent from the table that the real server merges (rare ones in
//! less common kinds) are replaced instead.

use serde_json::{Map, Value};

/// Why a strategic merge patch could not be applied: the patch is malformed (the API server
/// answers 400 `BadRequest` with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// How a list field is patched when it is not replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Objects merged per element, matched by this key.
    MergeKey(&'static str),
    /// Primitive values merged as a set (stored order kept, new values appended).
    PrimitiveSet,
}

/// Trailing field-name path → strategy; the longest matching suffix wins (entries are ordered so
/// that the first match is the longest).
const LIST_STRATEGIES: &[(&[&str], ListStrategy)] = &[
    (
        &["containers", "ports"],
        ListStrategy::MergeKey("containerPort"),
    ),
    (
        &["initContainers", "ports"],
        ListStrategy::MergeKey("containerPort"),
    ),
    (
        &["ephemeralContainers", "ports"],
        ListStrategy::MergeKey("containerPort"),
    ),
    (&["metadata", "finalizers"], ListStrategy::PrimitiveSet),
    (
        &["metadata", "ownerReferences"],
        ListStrategy::MergeKey("uid"),
    ),
    // Service ports.
    (&["spec", "ports"], ListStrategy::MergeKey("port")),
    (&["containers"], ListStrategy::MergeKey("name")),
    (&["initContainers"], ListStrategy::MergeKey("name")),
    (&["ephemeralContainers"], ListStrategy::MergeKey("name")),
    (&["volumes"], ListStrategy::MergeKey("name")),
    (&["env"], ListStrategy::MergeKey("name")),
    (&["volumeMounts"], ListStrategy::MergeKey("mountPath")),
    (&["volumeDevices"], ListStrategy::MergeKey("devicePath")),
    (&["imagePullSecrets"], ListStrategy::MergeKey("name")),
    (&["hostAliases"], ListStrategy::MergeKey("ip")),
    (
        &["topologySpreadConstraints"],
        ListStrategy::MergeKey("topologyKey"),
    ),
    (&["schedulingGates"], ListStrategy::MergeKey("name")),
    (&["resourceClaims"], ListStrategy::MergeKey("name")),
    (&["conditions"], ListStrategy::MergeKey("type")),
    (&["addresses"], ListStrategy::MergeKey("type")),
    (&["podIPs"], ListStrategy::MergeKey("ip")),
    (&["hostIPs"], ListStrategy::MergeKey("ip")),
    // ServiceAccount secrets.
    (&["secrets"], ListStrategy::MergeKey("name")),
];

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

fn strategy_for(path: &[String]) -> Option<ListStrategy> {
    LIST_STRATEGIES.iter().find_map(|(suffix, s)| {
        let n = suffix.len();
        (path.len() >= n
            && path[path.len() - n..]
                .iter()
                .zip(suffix.iter())
                .all(|(a, b)| a == b))
        .then_some(*s)
    })
}

/// What the parent does with a map after patching it.
enum Outcome {
    Keep,
    Delete,
}

/// Applies a strategic merge patch in place.
///
/// # Errors
/// [`PatchError`] for a non-object patch, an unknown `$patch` value, a malformed
/// directive or a merge-keyed list element lacking its key. On error `target` is unchanged.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError(
            "json: cannot unmarshal non-object into Go value of type map[string]interface {}"
                .into(),
        ));
    };
    let mut work = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut path = Vec::new();
    match merge_map(&mut work, patch, &mut path)? {
        Outcome::Keep => *target = Value::Object(work),
        Outcome::Delete => *target = Value::Object(Map::new()),
    }
    Ok(())
}

fn bad(msg: impl Into<String>) -> PatchError {
    PatchError(msg.into())
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Outcome, PatchError> {
    match patch.get(DIRECTIVE) {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "delete" => return Ok(Outcome::Delete),
        Some(Value::String(d)) if d == "replace" => {
            let mut fresh = Map::new();
            let mut without: Map<String, Value> = patch.clone();
            without.remove(DIRECTIVE);
            merge_map(&mut fresh, &without, path)?;
            *target = fresh;
            return Ok(Outcome::Keep);
        }
        Some(other) => return Err(bad(format!("unknown patch type: {other}"))),
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = retain else {
            return Err(bad("$retainKeys must be a list of strings"));
        };
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        if keep.len() != keys.len() {
            return Err(bad("$retainKeys must be a list of strings"));
        }
        for k in patch.keys().filter(|k| !k.starts_with('$')) {
            if !keep.contains(&k.as_str()) {
                return Err(bad(format!(
                    "the patch has key {k} which is not in $retainKeys"
                )));
            }
        }
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(remove) = v else {
                return Err(bad(format!("{k} must be a list")));
            };
            if let Some(Value::Array(list)) = target.get_mut(field) {
                list.retain(|x| !remove.contains(x));
            }
        }
    }
    for (k, v) in patch {
        if k == DIRECTIVE
            || k == RETAIN_KEYS
            || k.starts_with(SET_ELEMENT_ORDER)
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
        {
            continue;
        }
        path.push(k.clone());
        let res = merge_field(target, k, v, path);
        path.pop();
        res?;
    }
    Ok(Outcome::Keep)
}

fn merge_field(
    target: &mut Map<String, Value>,
    k: &str,
    v: &Value,
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    match v {
        Value::Null => {
            target.remove(k);
        }
        Value::Object(pm) => {
            let mut cur = match target.remove(k) {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if let Outcome::Keep = merge_map(&mut cur, pm, path)? {
                target.insert(k.to_string(), Value::Object(cur));
            }
        }
        Value::Array(items) => {
            let strategy = strategy_for(path);
            let merged = match (strategy, target.remove(k)) {
                (Some(ListStrategy::MergeKey(key)), Some(Value::Array(cur))) => {
                    merge_keyed_list(cur, items, key, path)?
                }
                (Some(ListStrategy::MergeKey(key)), _) => {
                    merge_keyed_list(Vec::new(), items, key, path)?
                }
                (Some(ListStrategy::PrimitiveSet), Some(Value::Array(cur))) => {
                    merge_primitive_list(cur, items)
                }
                (Some(ListStrategy::PrimitiveSet), _) => merge_primitive_list(Vec::new(), items),
                (None, _) => items.clone(),
            };
            target.insert(k.to_string(), Value::Array(merged));
        }
        scalar => {
            target.insert(k.to_string(), scalar.clone());
        }
    }
    Ok(())
}

fn directive_of(v: &Value) -> Option<&str> {
    v.get(DIRECTIVE).and_then(Value::as_str)
}

fn merge_keyed_list(
    mut cur: Vec<Value>,
    items: &[Value],
    key: &str,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    let replace = items
        .iter()
        .any(|i| directive_of(i) == Some("replace") && i.as_object().is_some_and(|m| m.len() == 1));
    if replace {
        cur.clear();
    }
    for item in items {
        let Value::Object(pm) = item else {
            return Err(bad(format!(
                "expected a map in the list merged by key {key}, got {item}"
            )));
        };
        if replace && pm.len() == 1 && directive_of(item) == Some("replace") {
            continue;
        }
        let Some(kv) = pm.get(key) else {
            return Err(bad(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let found = cur.iter().position(|c| c.get(key) == Some(kv));
        if directive_of(item) == Some("delete") {
            cur.retain(|c| c.get(key) != Some(kv));
            continue;
        }
        match found {
            Some(i) => {
                let mut m = match std::mem::take(&mut cur[i]) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                match merge_map(&mut m, pm, path)? {
                    Outcome::Keep => cur[i] = Value::Object(m),
                    Outcome::Delete => {
                        cur.remove(i);
                    }
                }
            }
            None => {
                let mut m = Map::new();
                if let Outcome::Keep = merge_map(&mut m, pm, path)? {
                    cur.push(Value::Object(m));
                }
            }
        }
    }
    Ok(cur)
}

fn merge_primitive_list(mut cur: Vec<Value>, items: &[Value]) -> Vec<Value> {
    for i in items {
        if !cur.contains(i) {
            cur.push(i.clone());
        }
    }
    cur
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a"]},
            "spec": {"replicas": 1, "template": {"spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "name": "http"}],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                    {"name": "sidecar", "image": "side:1"}
                ],
                "volumes": [{"name": "v1", "emptyDir": {}}],
                "tolerations": [{"key": "k1"}]
            }}}
        })
    }

    fn containers(obj: &Value) -> &Vec<Value> {
        obj.pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .unwrap()
    }

    #[test]
    fn containers_merge_by_name() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}, {"name": "new", "image": "n:1"}]}}}}),
        )
        .unwrap();
        let c = containers(&d);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0]["image"], "app:2");
        assert_eq!(
            c[0]["ports"][0]["containerPort"], 80,
            "untouched fields of a merged element stay"
        );
        assert_eq!(c[1]["name"], "sidecar");
        assert_eq!(c[2], json!({"name": "new", "image": "n:1"}));
    }

    #[test]
    fn nested_lists_merge_by_their_keys() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "app",
                "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                "ports": [{"containerPort": 443}]}]}}}}),
        )
        .unwrap();
        let app = &containers(&d)[0];
        assert_eq!(
            app["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
        );
        assert_eq!(
            app["ports"],
            json!([{"containerPort": 80, "name": "http"}, {"containerPort": 443}])
        );
    }

    #[test]
    fn lists_without_strategy_replace() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"spec": {"template": {"spec": {"tolerations": [{"key": "k2"}]}}}}),
        )
        .unwrap();
        assert_eq!(
            d.pointer("/spec/template/spec/tolerations"),
            Some(&json!([{"key": "k2"}]))
        );
    }

    #[test]
    fn delete_directive_removes_element_and_map() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"metadata": {"labels": {"$patch": "delete"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}),
        )
        .unwrap();
        assert_eq!(containers(&d).len(), 1);
        assert_eq!(containers(&d)[0]["name"], "app");
        assert!(d.pointer("/metadata/labels").is_none());
    }

    #[test]
    fn replace_directive_on_list_and_map() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"metadata": {"labels": {"$patch": "replace", "tier": "x"}},
                    "spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o:1"}]}}}}),
        )
        .unwrap();
        assert_eq!(
            containers(&d),
            &vec![json!({"name": "only", "image": "o:1"})]
        );
        assert_eq!(d["metadata"]["labels"], json!({"tier": "x"}));
    }

    #[test]
    fn null_deletes_and_maps_merge() {
        let mut cm = json!({"data": {"a": "1", "b": "2"}, "metadata": {"labels": {"x": "1"}}});
        strategic_merge_patch(
            &mut cm,
            &json!({"data": {"a": null, "c": "3"}, "metadata": {"labels": {"y": "2"}}}),
        )
        .unwrap();
        assert_eq!(
            cm,
            json!({"data": {"b": "2", "c": "3"}, "metadata": {"labels": {"x": "1", "y": "2"}}})
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let mut d = deployment();
        strategic_merge_patch(&mut d, &json!({"metadata": {"finalizers": ["b", "a"]}})).unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!(["a", "b"]));
        strategic_merge_patch(
            &mut d,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        )
        .unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn retain_keys_clears_other_keys() {
        let mut d = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        strategic_merge_patch(
            &mut d,
            &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        )
        .unwrap();
        assert_eq!(d, json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn set_element_order_is_accepted_and_dropped() {
        let mut d = deployment();
        strategic_merge_patch(
            &mut d,
            &json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                "containers": [{"name": "app", "image": "app:3"}]}}}}),
        )
        .unwrap();
        assert_eq!(containers(&d)[0]["image"], "app:3");
        assert!(
            d.pointer("/spec/template/spec/$setElementOrder~1containers")
                .is_none()
        );
    }

    #[test]
    fn errors_leave_target_unchanged() {
        let mut d = deployment();
        let before = d.clone();
        let cases = [
            json!({"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}}),
            json!({"metadata": {"$patch": "explode"}}),
            json!({"spec": {"template": {"spec": {"containers": ["x"]}}}}),
            json!([1]),
        ];
        for p in cases {
            assert!(
                matches!(strategic_merge_patch(&mut d, &p), Err(PatchError(_))),
                "{p}"
            );
            assert_eq!(d, before);
        }
    }

    #[test]
    fn service_ports_merge_by_port_and_conditions_by_type() {
        let mut svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]},
                             "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        strategic_merge_patch(
            &mut svc,
            &json!({"spec": {"ports": [{"port": 443}]}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .unwrap();
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443}])
        );
        assert_eq!(
            svc["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
    }
}
