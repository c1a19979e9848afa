//! Object metadata helpers: timestamps, names, validation of names, labels and annotations.

use rand::Rng;
use serde_json::{Map, Value};

use crate::catalog::NameRule;
use crate::status::Cause;

/// Now as a `metav1.Time` (RFC 3339, UTC, whole seconds).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Now with milliseconds (request log).
pub fn now_millis() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata` as a mutable map, created if absent or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("made an object above")
    };
    let m = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    match m {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

/// `generateName` suffix alphabet of the real server.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub fn generate_name(prefix: &str) -> String {
    let mut p: String = prefix.chars().take(58).collect();
    let mut rng = rand::rng();
    for _ in 0..5 {
        let i = rng.random_range(0..ALPHABET.len());
        p.push(char::from(ALPHABET[i]));
    }
    p
}

fn is_dns_label(s: &str, max: usize, first_alpha: bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && (b[0].is_ascii_lowercase() || (!first_alpha && b[0].is_ascii_digit()))
        && b[b.len() - 1] != b'-'
}

/// Kubernetes' RFC 1123 subdomain check: the whole name is capped at 253 characters; its
/// dot-separated parts are not capped at 63 as DNS labels would be.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(|l| is_dns_label(l, 253, false))
}

/// Validates `metadata.name` per kind; returns the cause message on failure.
pub fn validate_name(rule: NameRule, name: &str) -> Option<String> {
    let q = format!("Invalid value: {}: ", Value::String(name.to_string()));
    match rule {
        NameRule::Subdomain if !is_dns_subdomain(name) => Some(format!(
            "{q}a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )),
        NameRule::Label if !is_dns_label(name, 63, false) => Some(format!(
            "{q}a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )),
        NameRule::Label1035 if !is_dns_label(name, 63, true) => Some(format!(
            "{q}a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )),
        NameRule::PathSegment if name == "." || name == ".." => {
            Some(format!("{q}may not be '{name}'"))
        }
        NameRule::PathSegment if name.contains('/') || name.contains('%') => {
            Some(format!("{q}may not contain '/' or '%'"))
        }
        _ => None,
    }
}

fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return false;
    }
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Validates labels, annotations and finalizer names; returns causes for a 422.
pub fn validate_meta(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(m) = meta(obj) else {
        return causes;
    };
    let key_msg = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
    for which in ["labels", "annotations"] {
        match m.get(which) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (k, v) in map {
                    if !is_qualified_name(k) {
                        causes.push(Cause {
                            reason: "FieldValueInvalid",
                            message: format!(
                                "Invalid value: {}: {key_msg}",
                                Value::String(k.clone())
                            ),
                            field: format!("metadata.{which}"),
                        });
                    }
                    match v {
                        Value::String(s) if which == "labels" && !is_label_value(s) => {
                            causes.push(Cause {
                                reason: "FieldValueInvalid",
                                message: format!("Invalid value: {}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')", v),
                                field: "metadata.labels".to_string(),
                            });
                        }
                        Value::String(_) => {}
                        _ => causes.push(Cause {
                            reason: "FieldValueInvalid",
                            message: format!("Invalid value: {v}: must be a string"),
                            field: format!("metadata.{which}.{k}"),
                        }),
                    }
                }
            }
            Some(other) => causes.push(Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {other}: must be an object"),
                field: format!("metadata.{which}"),
            }),
        }
    }
    if let Some(Value::Array(fs)) = m.get("finalizers") {
        for f in fs {
            match f.as_str() {
                Some(s) if is_qualified_name(s) => {}
                _ => causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {f}: name part must consist of alphanumeric characters, '-', '_' or '.'"),
                    field: "metadata.finalizers".to_string(),
                }),
            }
        }
    }
    causes
}

/// The parts of an object field ownership is tracked for: everything but `apiVersion`/`kind`,
/// with `metadata` reduced to labels, annotations, ownerReferences and finalizers.
/// `status_only` keeps just `status` (writes to the status subresource).
pub fn tracked(v: &Value, status_only: bool, with_status: bool) -> Value {
    let mut top = Map::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            match k.as_str() {
                "apiVersion" | "kind" => {}
                "status" if status_only || with_status => {
                    top.insert(k.clone(), x.clone());
                }
                "status" => {}
                _ if status_only => {}
                "metadata" => {
                    let mut mm = Map::new();
                    if let Value::Object(md) = x {
                        for key in ["labels", "annotations", "ownerReferences", "finalizers"] {
                            if let Some(val) = md.get(key) {
                                mm.insert(key.to_string(), val.clone());
                            }
                        }
                    }
                    if !mm.is_empty() {
                        top.insert(k.clone(), Value::Object(mm));
                    }
                }
                _ => {
                    top.insert(k.clone(), x.clone());
                }
            }
        }
    }
    Value::Object(top)
}

/// The `fieldsV1` tree of every field of `v` (maps per key; lists and scalars are leaves).
pub fn fields_tree(v: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            let inner = match x {
                Value::Object(_) => fields_tree(x),
                _ => Value::Object(Map::new()),
            };
            out.insert(format!("f:{k}"), inner);
        }
    }
    Value::Object(out)
}

/// The `fieldsV1` tree of the fields that differ between `old` and `new` (present in `new`).
pub fn diff_tree(old: &Value, new: &Value) -> Value {
    let mut out = Map::new();
    if let (Value::Object(a), Value::Object(b)) = (old, new) {
        for (k, nv) in b {
            match a.get(k) {
                Some(ov) if ov == nv => {}
                Some(ov @ Value::Object(_)) if nv.is_object() => {
                    let d = diff_tree(ov, nv);
                    if d.as_object().is_some_and(|m| !m.is_empty()) {
                        out.insert(format!("f:{k}"), d);
                    }
                }
                _ => {
                    let inner = match nv {
                        Value::Object(_) => fields_tree(nv),
                        _ => Value::Object(Map::new()),
                    };
                    out.insert(format!("f:{k}"), inner);
                }
            }
        }
    }
    Value::Object(out)
}

fn is_empty_tree(v: &Value) -> bool {
    v.as_object().is_none_or(Map::is_empty)
}

/// Removes from `tree` the fields listed in `taken`.
pub fn subtract_tree(tree: &mut Value, taken: &Value) {
    let (Some(t), Some(d)) = (tree.as_object_mut(), taken.as_object()) else {
        return;
    };
    for (k, dv) in d {
        let Some(tv) = t.get_mut(k) else { continue };
        if is_empty_tree(dv) {
            t.remove(k);
        } else if !is_empty_tree(tv) {
            subtract_tree(tv, dv);
            if is_empty_tree(tv) {
                t.remove(k);
            }
        }
    }
}

/// Adds the fields of `add` to `tree`.
pub fn union_tree(tree: &mut Value, add: &Value) {
    let (Some(t), Some(a)) = (tree.as_object_mut(), add.as_object()) else {
        return;
    };
    for (k, av) in a {
        match t.get_mut(k) {
            Some(tv) if !is_empty_tree(tv) || is_empty_tree(av) => union_tree(tv, av),
            Some(tv) => *tv = av.clone(),
            None => {
                t.insert(k.clone(), av.clone());
            }
        }
    }
}

/// Drops fields of `tree` that `obj` (a tracked projection) no longer has.
pub fn retain_existing(tree: &mut Value, obj: &Value) {
    let Some(t) = tree.as_object_mut() else {
        return;
    };
    t.retain(|k, sub| {
        if k == "." || !k.starts_with("f:") {
            return true;
        }
        let Some(child) = obj.get(&k[2..]) else {
            return false;
        };
        if child.is_object() && !is_empty_tree(sub) {
            retain_existing(sub, child);
            !is_empty_tree(sub)
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name(NameRule::Subdomain, "a.b-c").is_none());
        assert!(validate_name(NameRule::Subdomain, "A").is_some());
        assert!(validate_name(NameRule::Label, "a.b").is_some());
        assert!(validate_name(NameRule::Label1035, "1a").is_some());
        assert!(validate_name(NameRule::PathSegment, "system:x").is_none());
        let g = generate_name("web-");
        assert_eq!(g.len(), 9);
        assert!(g.starts_with("web-"));
    }

    #[test]
    fn labels_validated() {
        let ok = serde_json::json!({"metadata": {"labels": {"app.kubernetes.io/name": "x"}}});
        assert!(validate_meta(&ok).is_empty());
        let bad = serde_json::json!({"metadata": {"labels": {"-x": "y"}}});
        assert_eq!(validate_meta(&bad).len(), 1);
    }
}
