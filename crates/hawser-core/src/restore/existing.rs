//! What a restore does when the object it creates already exists (velero-compat §7.6).
//!
//! The live object is stripped the way an archived one is (the metadata of
//! [`super::clean::REMOVED_METADATA`], `status`, and here also `managedFields`, which the API
//! server rewrites on every write and which would otherwise make every comparison differ),
//! given the desired object's backup and restore labels, and compared with the desired object:
//!
//! * equal → skipped; with policy `update` the restore labels are patched onto the live object;
//! * different ServiceAccount → its `secrets`, `imagePullSecrets`, labels and annotations are
//!   merged into the live one (live values win for keys present in both) and patched;
//! * different, policy `update` → a JSON merge patch (RFC 7386) from the live object to the
//!   desired one, restore labels included (Velero's patch leaves them out); if it fails, a
//!   warning and a labels-only patch;
//! * different, policy `none` or unset → Velero's warning and nothing changes.

use serde_json::{Map, Value};

use super::clean::{BACKUP_NAME_LABEL, RESTORE_NAME_LABEL, RESTORE_UID_LABEL, strip_metadata};

/// `spec.existingResourcePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExistingPolicy {
    /// `none` or unset: existing objects are left alone.
    #[default]
    None,
    /// `update`: existing objects are patched to the backed-up version.
    Update,
}

impl ExistingPolicy {
    /// Reads the spec field; anything but `update` is `None` (validation rejects other values
    /// before a restore runs).
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("update") => Self::Update,
            _ => Self::None,
        }
    }
}

/// What to do with an object that already exists.
#[derive(Debug, Clone, PartialEq)]
pub enum Existing {
    /// Same as the backed-up version: nothing to create (the item counts as `skipped`).
    /// `label_patch` is the merge patch that puts the restore labels on the live object
    /// (policy `update` only).
    Unchanged {
        /// Restore labels to patch onto the live object, if any.
        label_patch: Option<Value>,
    },
    /// Patch the live object with `patch` (a JSON merge patch; the item counts as `updated`).
    /// When that fails: a warning, and `fallback` (a labels-only patch) when given.
    Patch {
        /// The merge patch from the live object to the desired one.
        patch: Value,
        /// The labels-only patch to try when `patch` fails.
        fallback: Option<Value>,
    },
    /// Different and left alone: this warning is recorded (the item counts as `failed`, as
    /// Velero lists it).
    Differs {
        /// Velero's warning text.
        warning: String,
    },
}

/// Velero's warning for an existing object that differs from the backup and is not updated.
pub fn differs_warning(kind: &str, name: &str) -> String {
    format!(
        "could not restore, {kind} {name:?} already exists. Warning: the in-cluster version is different than the backed-up version"
    )
}

/// The live object as it is compared: metadata stripped like an archived object, no `status`,
/// no `managedFields`, and the backup and restore labels of `desired`.
pub fn comparable_live(mut live: Value, desired: &Value) -> Value {
    strip_metadata(&mut live);
    if let Some(obj) = live.as_object_mut() {
        obj.remove("status");
    }
    if let Some(meta) = live.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        let wanted = restore_labels(desired);
        if !wanted.is_empty() {
            if !meta.get("labels").is_some_and(Value::is_object) {
                meta.insert("labels".into(), Value::Object(Map::new()));
            }
            if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                labels.extend(wanted);
            }
        }
    }
    live
}

/// `desired` as it is compared: without `status` and `managedFields`.
fn comparable_desired(desired: &Value) -> Value {
    let mut d = desired.clone();
    if let Some(obj) = d.as_object_mut() {
        obj.remove("status");
    }
    if let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    d
}

fn restore_labels(obj: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for key in [BACKUP_NAME_LABEL, RESTORE_NAME_LABEL, RESTORE_UID_LABEL] {
        if let Some(v) = obj.pointer("/metadata/labels").and_then(|l| l.get(key)) {
            out.insert(key.to_string(), v.clone());
        }
    }
    out
}

/// The merge patch that sets the restore labels of `desired`.
pub fn labels_patch(desired: &Value) -> Value {
    let mut labels = Map::new();
    labels.extend(restore_labels(desired));
    let mut meta = Map::new();
    meta.insert("labels".into(), Value::Object(labels));
    let mut patch = Map::new();
    patch.insert("metadata".into(), Value::Object(meta));
    Value::Object(patch)
}

/// Whether `live` was created by the very restore that wants `desired`: both carry the same
/// restore name and restore uid labels (an earlier attempt of this restore, interrupted and
/// run again, created it). Such an object counts as restored, not as one that already exists.
pub fn made_by_restore(desired: &Value, live: &Value) -> bool {
    let label = |obj: &Value, key: &str| {
        obj.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    [RESTORE_NAME_LABEL, RESTORE_UID_LABEL].iter().all(|key| {
        let wanted = label(desired, key);
        wanted.is_some() && wanted == label(live, key)
    })
}

/// The decision for `desired` (cleaned, of type `group_resource` and kind `kind`) against the
/// `live` object as read from the cluster. `None` means the patch would be empty: for a
/// ServiceAccount whose merge changes nothing, there is nothing to do either.
pub fn decide(
    group_resource: &str,
    desired: &Value,
    live: Value,
    policy: ExistingPolicy,
) -> Existing {
    let want = comparable_desired(desired);
    // Compared with the restore labels added (a live object never has them), patched without,
    // so that an updated object carries them.
    let unlabelled = comparable_live(live, &Value::Null);
    let live = comparable_live(unlabelled.clone(), desired);
    let update = policy == ExistingPolicy::Update;
    let fallback = update.then(|| labels_patch(desired));
    if live == want {
        return Existing::Unchanged {
            label_patch: fallback,
        };
    }
    if group_resource == "serviceaccounts" {
        let merged = merge_service_accounts(&live, &want);
        return match merge_patch(&live, &merged) {
            Some(patch) => Existing::Patch { patch, fallback },
            None => Existing::Unchanged {
                label_patch: fallback,
            },
        };
    }
    if update && let Some(patch) = merge_patch(&unlabelled, &want) {
        return Existing::Patch { patch, fallback };
    }
    let kind = desired.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = desired
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Existing::Differs {
        warning: differs_warning(kind, name),
    }
}

/// The live ServiceAccount with the backed-up `secrets` and `imagePullSecrets` entries it lacks
/// (by name) appended, and the backed-up labels and annotations it lacks added.
pub fn merge_service_accounts(live: &Value, backed_up: &Value) -> Value {
    let mut merged = live.clone();
    for key in ["secrets", "imagePullSecrets"] {
        let mut list: Vec<Value> = live
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let backed: &[Value] = backed_up
            .get(key)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        for entry in backed {
            let name = entry.get("name");
            if !list.iter().any(|e| e.get("name") == name) {
                list.push(entry.clone());
            }
        }
        if let Some(obj) = merged.as_object_mut()
            && !list.is_empty()
        {
            obj.insert(key.to_string(), Value::Array(list));
        }
    }
    for key in ["labels", "annotations"] {
        let Some(backed) = backed_up
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        if !meta.get(key).is_some_and(Value::is_object) {
            meta.insert(key.to_string(), Value::Object(Map::new()));
        }
        if let Some(map) = meta.get_mut(key).and_then(Value::as_object_mut) {
            for (k, v) in backed {
                map.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    merged
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`, or `None` when they are equal.
/// Object members missing from `to` become `null`; arrays and scalars are replaced whole.
pub fn merge_patch(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = Map::new();
            for (k, old) in a {
                match b.get(k) {
                    None => {
                        patch.insert(k.clone(), Value::Null);
                    }
                    Some(new) => {
                        if let Some(p) = merge_patch(old, new) {
                            patch.insert(k.clone(), p);
                        }
                    }
                }
            }
            for (k, new) in b {
                if !a.contains_key(k) {
                    patch.insert(k.clone(), new.clone());
                }
            }
            Some(Value::Object(patch))
        }
        // A merge patch cannot set a member to null; a replaced object is written whole.
        _ => Some(to.clone()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use serde_json::json;

    fn desired() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "shop",
                "labels": {"app": "a", BACKUP_NAME_LABEL: "b1", RESTORE_NAME_LABEL: "r1"}},
            "data": {"k": "v"}
        })
    }

    fn live(data: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "shop", "uid": "u-1",
                "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}], "labels": {"app": "a"}},
            "data": data
        })
    }

    #[test]
    fn only_an_object_with_this_restores_name_and_uid_is_its_own() {
        let labelled = |name: &str, uid: Option<&str>| {
            let mut labels = json!({"app": "a", BACKUP_NAME_LABEL: "b1", RESTORE_NAME_LABEL: name});
            if let Some(uid) = uid {
                labels[RESTORE_UID_LABEL] = json!(uid);
            }
            json!({"metadata": {"name": "cm", "labels": labels}, "data": {"changed": "by the server"}})
        };
        let desired = labelled("r1", Some("uid-1"));
        assert!(made_by_restore(&desired, &labelled("r1", Some("uid-1"))));
        for (live, why) in [
            (
                labelled("r1", Some("uid-0")),
                "an earlier restore of the same name",
            ),
            (labelled("r2", Some("uid-1")), "another restore's name"),
            (labelled("r1", None), "no uid"),
            (json!({"metadata": {"name": "cm"}}), "no labels"),
        ] {
            assert!(!made_by_restore(&desired, &live), "{why}");
        }
        // A restore that labels nothing with a uid owns nothing.
        assert!(!made_by_restore(
            &labelled("r1", None),
            &labelled("r1", None)
        ));
    }

    #[test]
    fn equal_apart_from_server_fields_is_unchanged() {
        for (policy, patch) in [
            (ExistingPolicy::None, None),
            (ExistingPolicy::Update, Some(labels_patch(&desired()))),
        ] {
            let d = decide("configmaps", &desired(), live(json!({"k": "v"})), policy);
            assert_eq!(d, Existing::Unchanged { label_patch: patch });
        }
    }

    #[test]
    fn different_with_policy_none_is_velero_warning() {
        let d = decide(
            "configmaps",
            &desired(),
            live(json!({"k": "changed"})),
            ExistingPolicy::None,
        );
        assert_eq!(
            d,
            Existing::Differs {
                warning: "could not restore, ConfigMap \"cm\" already exists. Warning: the in-cluster version is different than the backed-up version".into()
            }
        );
    }

    #[test]
    fn different_with_policy_update_patches_only_the_difference() {
        let d = decide(
            "configmaps",
            &desired(),
            live(json!({"k": "changed", "extra": "x"})),
            ExistingPolicy::Update,
        );
        let Existing::Patch { patch, fallback } = d else {
            panic!("expected a patch, got {d:?}");
        };
        assert_eq!(
            patch,
            json!({"data": {"k": "v", "extra": null},
                "metadata": {"labels": {BACKUP_NAME_LABEL: "b1", RESTORE_NAME_LABEL: "r1"}}})
        );
        assert_eq!(fallback, Some(labels_patch(&desired())));
        let mut patched = comparable_live(live(json!({"k": "changed", "extra": "x"})), &desired());
        json_merge(&mut patched, &patch);
        assert_eq!(patched, desired());
    }

    /// RFC 7386 application, for checking that a computed patch does what it claims.
    fn json_merge(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(t), Some(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    #[test]
    fn merge_patch_round_trips_nested_changes() {
        let from = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}});
        let to = json!({"a": {"b": 2, "c": [1]}, "e": 3, "g": {"h": null}});
        let patch = merge_patch(&from, &to).unwrap();
        assert_eq!(
            patch,
            json!({"a": {"b": 2, "c": [1]}, "d": null, "e": 3, "g": {"h": null}})
        );
        assert_eq!(merge_patch(&to, &to), None);
    }

    #[test]
    fn service_account_merges_secrets_and_keeps_live_values() {
        let desired = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "shop",
                "labels": {"team": "backup", BACKUP_NAME_LABEL: "b1", RESTORE_NAME_LABEL: "r1"}},
            "secrets": [{"name": "pull"}, {"name": "shared"}],
            "imagePullSecrets": [{"name": "registry"}]
        });
        let live = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "shop", "uid": "x",
                "labels": {"team": "live"}},
            "secrets": [{"name": "shared"}, {"name": "live-only"}]
        });
        // Whatever the policy: Velero merges service accounts.
        let d = decide("serviceaccounts", &desired, live, ExistingPolicy::None);
        let Existing::Patch { patch, fallback } = d else {
            panic!("expected a patch, got {d:?}");
        };
        assert_eq!(fallback, None);
        assert_eq!(
            patch,
            json!({
                "secrets": [{"name": "shared"}, {"name": "live-only"}, {"name": "pull"}],
                "imagePullSecrets": [{"name": "registry"}]
            })
        );
    }

    #[test]
    fn service_account_with_nothing_to_merge_is_unchanged() {
        let desired = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "shop", "labels": {"x": "1"}},
            "secrets": [{"name": "a"}]
        });
        let live = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "shop", "labels": {"x": "2"}},
            "secrets": [{"name": "a"}, {"name": "b"}]
        });
        assert_eq!(
            decide("serviceaccounts", &desired, live, ExistingPolicy::Update),
            Existing::Unchanged {
                label_patch: Some(labels_patch(&desired))
            }
        );
    }

    #[test]
    fn policy_parses_like_the_spec() {
        assert_eq!(
            ExistingPolicy::parse(Some("update")),
            ExistingPolicy::Update
        );
        for v in [None, Some(""), Some("none")] {
            assert_eq!(ExistingPolicy::parse(v), ExistingPolicy::None);
        }
    }
}
