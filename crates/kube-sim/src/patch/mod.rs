//! The four PATCH flavours the API server accepts, applied to stored objects as JSON values.
//!
//! - [`merge_patch`]: JSON merge patch (RFC 7386) — objects merge, `null` deletes, arrays replace.
//! - [`json_patch`]: JSON patch (RFC 6902) with the semantics of the JSON-patch engine the real
//!   server uses (evanphx/json-patch v4): a `test` of `null` on a missing location succeeds, the
//!   whole patch is atomic, a failing operation is a 422.
//! - [`strategic_merge_patch`]: an approximation of strategic merge patch for built-in kinds,
//!   driven by one table of list merge keys (`hawser_core::strategic`, which restores share).
//! - [`server_side_apply`]: server-side apply with field ownership recorded in
//!   `metadata.managedFields` (see the `apply` module for what is and is not modelled).
//!
//! Validation that needs the request (content type, `fieldManager` presence, `force` on non-apply
//! patches, custom resources refusing strategic merge) is the caller's; these functions only see
//! the stored object and the patch body.

mod apply;

pub use apply::server_side_apply;

use serde_json::Value;

/// Why a patch could not be applied, mapped by the server onto a Status code and reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 400 `BadRequest`: the patch body is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 422 `Invalid`: the patch is well formed but cannot be applied to this object.
    #[error("{0}")]
    Invalid(String),
    /// 413 `RequestEntityTooLarge`.
    #[error("{0}")]
    TooLarge(String),
    /// 415 `UnsupportedMediaType`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 409 `Conflict` from server-side apply; `causes` are `(field, message)` pairs, reported as
    /// `FieldManagerConflict` causes.
    #[error("{message}")]
    Conflict {
        message: String,
        causes: Vec<(String, String)>,
    },
}

/// The most operations one JSON patch may carry.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The fixed 422 message the server gives for any JSON patch operation that fails.
pub const JSON_PATCH_FAILED: &str =
    "the server rejected our request due to an error in our request";

/// Applies a strategic merge patch in place (see `hawser_core::strategic`).
///
/// # Errors
/// [`PatchError::BadRequest`] for a malformed patch; on error `target` is unchanged.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    hawser_core::strategic::strategic_merge_patch(target, patch)
        .map_err(|e| PatchError::BadRequest(e.0))
}

/// Applies a JSON merge patch (RFC 7386) in place.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a JSON patch (RFC 6902) atomically: on error `target` is unchanged.
///
/// Operations other than `test` are executed by the `json-patch` crate, whose semantics equal the
/// server's for them. `test` is evaluated here because the server's engine differs from RFC 6902:
/// a `null` expected value matches a missing member (kube-rs's finalizer helper depends on it),
/// while the parent must still exist and an array index must be in range; negative array indices
/// count from the end. Negative indices in the other operations are not supported.
///
/// # Errors
/// [`PatchError::BadRequest`] if the body is not an array of objects, [`PatchError::TooLarge`]
/// past [`MAX_JSON_PATCH_OPERATIONS`], [`PatchError::Invalid`] if an operation fails.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = decode_json_patch(patch)?;
    let mut work = target.clone();
    for op in ops {
        apply_json_patch_op(&mut work, op)
            .map_err(|()| PatchError::Invalid(JSON_PATCH_FAILED.into()))?;
    }
    *target = work;
    Ok(())
}

fn decode_json_patch(patch: &Value) -> Result<&Vec<Value>, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            json_type_name(patch)
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_type_name(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    Ok(ops)
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One operation; the error carries no detail because the server answers every failure alike.
fn apply_json_patch_op(doc: &mut Value, op: &Value) -> Result<(), ()> {
    if op.get("op").and_then(Value::as_str) == Some("test") {
        let path = op.get("path").and_then(Value::as_str).ok_or(())?;
        let expected = op.get("value").unwrap_or(&Value::Null);
        return json_patch_test(doc, path, expected);
    }
    let parsed: json_patch::PatchOperation = serde_json::from_value(op.clone()).map_err(|_| ())?;
    json_patch::patch_unsafe(doc, std::slice::from_ref(&parsed)).map_err(|_| ())
}

fn decode_pointer_token(t: &str) -> String {
    t.replace("~1", "/").replace("~0", "~")
}

/// Resolves an array index token as the server's engine does (decimal, negative from the end).
fn array_index(len: usize, token: &str) -> Option<usize> {
    let idx: i64 = token.parse().ok()?;
    let len_i = i64::try_from(len).ok()?;
    let idx = if idx < 0 { idx + len_i } else { idx };
    if (0..len_i).contains(&idx) {
        usize::try_from(idx).ok()
    } else {
        None
    }
}

fn json_patch_test(doc: &Value, path: &str, expected: &Value) -> Result<(), ()> {
    if path.is_empty() {
        return if doc == expected { Ok(()) } else { Err(()) };
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(());
    };
    let tokens: Vec<String> = rest.split('/').map(decode_pointer_token).collect();
    let (last, parents) = tokens.split_last().ok_or(())?;
    let mut parent = doc;
    for t in parents {
        parent = match parent {
            Value::Object(m) => m.get(t).ok_or(())?,
            Value::Array(a) => a.get(array_index(a.len(), t).ok_or(())?).ok_or(())?,
            _ => return Err(()),
        };
        if parent.is_null() {
            return Err(());
        }
    }
    let actual = match parent {
        Value::Object(m) => m.get(last).unwrap_or(&Value::Null),
        Value::Array(a) => a.get(array_index(a.len(), last).ok_or(())?).ok_or(())?,
        _ => return Err(()),
    };
    if actual == expected { Ok(()) } else { Err(()) }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_merges_deletes_and_replaces_arrays() {
        let mut obj = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "data": {"k": "v"}, "list": [1, 2]});
        merge_patch(
            &mut obj,
            &json!({"metadata": {"labels": {"x": null, "z": "3"}}, "data": null, "list": [3], "new": {"a": 1}}),
        );
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "labels": {"y": "2", "z": "3"}}, "list": [3], "new": {"a": 1}})
        );
    }

    #[test]
    fn merge_patch_null_on_missing_key_is_a_no_op() {
        let mut obj = json!({"a": 1});
        merge_patch(&mut obj, &json!({"b": null}));
        assert_eq!(obj, json!({"a": 1}));
    }

    #[test]
    fn kube_rs_finalizer_add_on_object_without_finalizers() {
        let mut obj = json!({"metadata": {"name": "a"}});
        json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}
            ]),
        )
        .unwrap();
        assert_eq!(obj, json!({"metadata": {"name": "a", "finalizers": ["x"]}}));
    }

    #[test]
    fn kube_rs_finalizer_add_fails_when_finalizers_appeared() {
        let mut obj = json!({"metadata": {"name": "a", "finalizers": ["other"]}});
        let before = obj.clone();
        let err = json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}
            ]),
        )
        .unwrap_err();
        assert_eq!(err, PatchError::Invalid(JSON_PATCH_FAILED.into()));
        assert_eq!(obj, before);
    }

    #[test]
    fn kube_rs_finalizer_append_and_remove() {
        let mut obj = json!({"metadata": {"finalizers": ["a"]}});
        json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "x"}
            ]),
        )
        .unwrap();
        assert_eq!(obj, json!({"metadata": {"finalizers": ["a", "x"]}}));
        json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": "x"},
                {"op": "remove", "path": "/metadata/finalizers/1"}
            ]),
        )
        .unwrap();
        assert_eq!(obj, json!({"metadata": {"finalizers": ["a"]}}));
    }

    #[test]
    fn kube_rs_finalizer_remove_first() {
        let mut obj = json!({"metadata": {"finalizers": ["x"]}});
        json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "x"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        )
        .unwrap();
        assert_eq!(obj, json!({"metadata": {"finalizers": []}}));
        // Removing again: the test of index 0 now fails (out of range).
        let err = json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "x"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        );
        assert!(matches!(err, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn json_patch_operation_table() {
        let base = json!({"a": {"b": 1, "c": [1, 2, 3]}, "n": null, "s": "x"});
        // (patch, Some(result) or None for a 422)
        let cases: Vec<(Value, Option<Value>)> = vec![
            (
                json!([{"op": "add", "path": "/a/d", "value": 4}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3], "d": 4}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "add", "path": "/a/b", "value": 9}]),
                Some(json!({"a": {"b": 9, "c": [1, 2, 3]}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "add", "path": "/a/c/-", "value": 4}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3, 4]}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "add", "path": "/a/c/0", "value": 0}]),
                Some(json!({"a": {"b": 1, "c": [0, 1, 2, 3]}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "add", "path": "/a/c/3", "value": 4}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3, 4]}, "n": null, "s": "x"})),
            ),
            (json!([{"op": "add", "path": "/a/c/5", "value": 4}]), None),
            (
                json!([{"op": "add", "path": "/missing/x", "value": 1}]),
                None,
            ),
            (
                json!([{"op": "remove", "path": "/a/b"}]),
                Some(json!({"a": {"c": [1, 2, 3]}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "remove", "path": "/a/c/1"}]),
                Some(json!({"a": {"b": 1, "c": [1, 3]}, "n": null, "s": "x"})),
            ),
            (json!([{"op": "remove", "path": "/a/zz"}]), None),
            (json!([{"op": "remove", "path": "/a/c/7"}]), None),
            (
                json!([{"op": "replace", "path": "/s", "value": "y"}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3]}, "n": null, "s": "y"})),
            ),
            (
                json!([{"op": "replace", "path": "/zz", "value": "y"}]),
                None,
            ),
            (
                json!([{"op": "move", "from": "/s", "path": "/t"}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3]}, "n": null, "t": "x"})),
            ),
            (json!([{"op": "move", "from": "/zz", "path": "/t"}]), None),
            (
                json!([{"op": "copy", "from": "/a/b", "path": "/a/e"}]),
                Some(json!({"a": {"b": 1, "c": [1, 2, 3], "e": 1}, "n": null, "s": "x"})),
            ),
            (
                json!([{"op": "test", "path": "/a/b", "value": 1}]),
                Some(base.clone()),
            ),
            (json!([{"op": "test", "path": "/a/b", "value": 2}]), None),
            (
                json!([{"op": "test", "path": "/a/c", "value": [1, 2, 3]}]),
                Some(base.clone()),
            ),
            (
                json!([{"op": "test", "path": "/a/c/-1", "value": 3}]),
                Some(base.clone()),
            ),
            (
                json!([{"op": "test", "path": "/a/zz", "value": null}]),
                Some(base.clone()),
            ),
            (
                json!([{"op": "test", "path": "/n", "value": null}]),
                Some(base.clone()),
            ),
            (json!([{"op": "test", "path": "/n", "value": 1}]), None),
            (
                json!([{"op": "test", "path": "/zz/yy", "value": null}]),
                None,
            ),
            (
                json!([{"op": "test", "path": "/a/c/9", "value": null}]),
                None,
            ),
            (
                json!([{"op": "test", "path": "", "value": base.clone()}]),
                Some(base.clone()),
            ),
            (json!([{"op": "frobnicate", "path": "/a"}]), None),
            (json!([{"op": "add", "value": 1}]), None),
            (json!([]), Some(base.clone())),
        ];
        for (patch, want) in cases {
            let mut obj = base.clone();
            let got = json_patch(&mut obj, &patch);
            match want {
                Some(w) => {
                    assert!(got.is_ok(), "{patch}: {got:?}");
                    assert_eq!(obj, w, "{patch}");
                }
                None => {
                    assert_eq!(
                        got,
                        Err(PatchError::Invalid(JSON_PATCH_FAILED.into())),
                        "{patch}"
                    );
                    assert_eq!(obj, base, "{patch} must leave the object unchanged");
                }
            }
        }
    }

    #[test]
    fn json_patch_is_atomic() {
        let mut obj = json!({"a": 1});
        let err = json_patch(
            &mut obj,
            &json!([{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zz"}]),
        );
        assert!(err.is_err());
        assert_eq!(obj, json!({"a": 1}));
    }

    #[test]
    fn json_patch_body_errors() {
        let mut obj = json!({});
        assert!(matches!(
            json_patch(&mut obj, &json!({"op": "add"})),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            json_patch(&mut obj, &json!(["add"])),
            Err(PatchError::BadRequest(_))
        ));
        let many: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/x", "value": null}))
            .collect();
        assert!(matches!(
            json_patch(&mut obj, &Value::Array(many)),
            Err(PatchError::TooLarge(_))
        ));
        let ok: Vec<Value> = (0..MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/x", "value": null}))
            .collect();
        assert!(json_patch(&mut obj, &Value::Array(ok)).is_ok());
    }

    #[test]
    fn json_patch_pointer_escapes() {
        let mut obj = json!({"metadata": {"annotations": {"example.com/a~b": "1"}}});
        json_patch(
            &mut obj,
            &json!([
                {"op": "test", "path": "/metadata/annotations/example.com~1a~0b", "value": "1"},
                {"op": "replace", "path": "/metadata/annotations/example.com~1a~0b", "value": "2"}
            ]),
        )
        .unwrap();
        assert_eq!(
            obj,
            json!({"metadata": {"annotations": {"example.com/a~b": "2"}}})
        );
    }
}
