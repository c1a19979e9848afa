//! Server-side apply (`application/apply-patch+yaml`) with field ownership in `managedFields`.
//!
//! What is modelled:
//! - Each manager's applied fields are recorded as one `Apply` entry in `metadata.managedFields`
//!   (`fieldsType: FieldsV1`, `f:<name>` nodes, leaves `{}`). Server-owned metadata (`name`,
//!   `namespace`, `uid`, `resourceVersion`, `generation`, `creationTimestamp`, …) and `apiVersion`
//!   / `kind` are never owned, as in the real server.
//! - Applying sets every field of the applied configuration (maps merge per key, `null` in the
//!   configuration removes the field). Fields the manager applied before and now omits are
//!   removed, unless another manager owns them (or something beneath them).
//! - A field owned by another manager whose current value differs from the applied one is a
//!   conflict (409, message and causes as the real server words them); with `force` the applier
//!   takes it over and the other manager loses it. Equal values are shared.
//! - Entries left owning nothing are dropped.
//!
//! Approximations (documented, deliberate):
//! - Lists are atomic: a list is one field owned as a whole (the real server merges lists marked
//!   `x-kubernetes-list-type: map|set` per element). Ownership read from existing entries written
//!   elsewhere with per-element keys (`k:`, `v:`, `i:`) is treated as owning the whole list.
//! - Non-apply writes (create, update, merge/JSON/strategic patches) do not record `Update`
//!   managers, so fields written that way are owned by nobody: an apply changes them without a
//!   conflict (the real server would report a conflict with that `Update` manager) and a later
//!   apply that omits them removes them. Existing `Update` entries are respected like any other.
//! - Maps emptied by removing omitted fields are removed too.
//! - `metadata.resourceVersion` preconditions, the status subresource's reset fields and
//!   `dryRun` are the caller's; this function neither checks nor copies the applied
//!   `resourceVersion`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::PatchError;

/// A field path as a list of field names (map keys); lists are leaves.
type FieldPath = Vec<String>;
type FieldSet = BTreeSet<FieldPath>;

/// Metadata fields the server owns; never part of a manager's set and not copied from the body.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// Applies `applied` as `manager` and returns the whole new object with its `managedFields`.
///
/// `current` is `None` when the object does not exist (apply creates it). `now` is the RFC 3339
/// time recorded in the manager's entry.
///
/// # Errors
/// - [`PatchError::BadRequest`]: body not an object, `apiVersion` differing from `api_version`,
///   `kind` differing from the stored kind, or `metadata.managedFields` present.
/// - [`PatchError::Invalid`]: empty `manager`.
/// - [`PatchError::Conflict`]: fields owned by other managers with other values, without `force`.
pub fn server_side_apply(
    current: Option<&Value>,
    applied: &Value,
    api_version: &str,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    validate(current, applied, api_version, manager)?;
    let new_set = {
        let mut s = FieldSet::new();
        collect_fields(applied, &mut Vec::new(), &mut s);
        s
    };
    let my_entry = |set: &FieldSet| {
        json!({
            "manager": manager,
            "operation": "Apply",
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(set),
        })
    };

    let Some(current) = current else {
        let mut obj = strip_nulls(applied);
        let entries = if new_set.is_empty() {
            vec![]
        } else {
            vec![my_entry(&new_set)]
        };
        set_managed_fields(&mut obj, entries);
        return Ok(obj);
    };

    let mut entries: Vec<Entry> = current
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Entry::parse).collect())
        .unwrap_or_default();
    let mine = entries.iter().position(|e| e.is_apply_by(manager));
    let previous: FieldSet = mine
        .and_then(|i| entries[i].set.clone())
        .unwrap_or_default();

    // Conflicts: another manager owns the path and the value would change.
    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    for p in &new_set {
        let changes = get_path(current, p) != get_path(applied, p);
        if !changes {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if Some(i) != mine && e.set.as_ref().is_some_and(|s| s.contains(p)) {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(&entries, &conflicts));
        }
        for (i, p) in &conflicts {
            if let Some(s) = entries[*i].set.as_mut() {
                s.remove(p);
                entries[*i].changed = true;
            }
        }
    }

    let mut obj = current.clone();
    merge_applied(&mut obj, applied, &mut Vec::new());
    for p in previous.difference(&new_set) {
        let owned_elsewhere = entries.iter().enumerate().any(|(i, e)| {
            Some(i) != mine
                && e.set
                    .as_ref()
                    .is_some_and(|s| s.iter().any(|q| q.starts_with(p)))
        });
        if !owned_elsewhere {
            remove_path(&mut obj, p);
        }
    }

    let mut out: Vec<Value> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == mine {
            if !new_set.is_empty() {
                out.push(my_entry(&new_set));
            }
            continue;
        }
        match (&e.set, e.changed) {
            (Some(s), true) if s.is_empty() => {}
            (Some(s), true) => {
                let mut raw = e.raw.clone();
                if let Value::Object(m) = &mut raw {
                    m.insert("fieldsV1".into(), fields_v1(s));
                }
                out.push(raw);
            }
            _ => out.push(e.raw.clone()),
        }
    }
    if mine.is_none() && !new_set.is_empty() {
        out.push(my_entry(&new_set));
    }
    set_managed_fields(&mut obj, out);
    Ok(obj)
}

fn validate(
    current: Option<&Value>,
    applied: &Value,
    api_version: &str,
    manager: &str,
) -> Result<(), PatchError> {
    if manager.is_empty() {
        return Err(PatchError::Invalid(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
                .into(),
        ));
    }
    if !applied.is_object() {
        return Err(PatchError::BadRequest(
            "error decoding YAML: the apply patch must be an object".into(),
        ));
    }
    let body_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_version != api_version {
        return Err(PatchError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {body_version}, expected: {api_version}"
        )));
    }
    if let Some(cur_kind) = current.and_then(|c| c.get("kind")).and_then(Value::as_str) {
        let kind = applied.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != cur_kind {
            return Err(PatchError::BadRequest(format!(
                "invalid object type: /{api_version}, Kind={kind}"
            )));
        }
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(PatchError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    Ok(())
}

/// One `managedFields` entry: its JSON as stored plus the parsed field set (None if unreadable).
struct Entry {
    raw: Value,
    set: Option<FieldSet>,
    changed: bool,
}

impl Entry {
    fn parse(raw: &Value) -> Entry {
        let set = raw.get("fieldsV1").map(|f| {
            let mut s = FieldSet::new();
            parse_fields_v1(f, &mut Vec::new(), &mut s);
            s
        });
        Entry {
            raw: raw.clone(),
            set,
            changed: false,
        }
    }

    fn str_field(&self, k: &str) -> &str {
        self.raw.get(k).and_then(Value::as_str).unwrap_or("")
    }

    fn is_apply_by(&self, manager: &str) -> bool {
        self.str_field("manager") == manager
            && self.str_field("operation") == "Apply"
            && self.str_field("subresource").is_empty()
    }

    /// How conflict messages name a manager, as the real server does: `"m"`, plus its
    /// subresource, and for `Update` entries `using v1 at TIME`.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.str_field("manager"));
        let sub = self.str_field("subresource");
        if !sub.is_empty() {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        // An `Apply` manager is named alone; an `Update` manager with its API version and time.
        if self.str_field("operation") == "Update" {
            s.push_str(&format!(" using {}", self.str_field("apiVersion")));
            let time = self.str_field("time");
            if !time.is_empty() {
                s.push_str(&format!(" at {time}"));
            }
        }
        s
    }
}

fn path_string(p: &FieldPath) -> String {
    p.iter().map(|s| format!(".{s}")).collect()
}

fn conflict_error(entries: &[Entry], conflicts: &[(usize, FieldPath)]) -> PatchError {
    let causes: Vec<(String, String)> = conflicts
        .iter()
        .map(|(i, p)| {
            (
                path_string(p),
                format!("conflict with {}", entries[*i].describe()),
            )
        })
        .collect();
    let message = if let [(i, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            entries[*i].describe(),
            path_string(p)
        )
    } else {
        let mut managers: Vec<String> = conflicts
            .iter()
            .map(|(i, _)| entries[*i].describe())
            .collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in &managers {
            lines.push(format!("conflicts with {m}:"));
            for (i, p) in conflicts {
                if entries[*i].describe() == *m {
                    lines.push(format!("- {}", path_string(p)));
                }
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    PatchError::Conflict { message, causes }
}

fn is_unowned(path: &[String], key: &str) -> bool {
    match path {
        [] => key == "apiVersion" || key == "kind",
        [m] if m == "metadata" => SERVER_METADATA.contains(&key),
        _ => false,
    }
}

/// Leaves of the applied configuration: scalars, lists and empty maps; `null` is not a field.
fn collect_fields(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() || path.is_empty() => {
            for (k, child) in m {
                if is_unowned(path, k) || child.is_null() {
                    continue;
                }
                path.push(k.clone());
                collect_fields(child, path, out);
                path.pop();
            }
        }
        Value::Null => {}
        _ => {
            out.insert(path.clone());
        }
    }
}

fn fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut node = &mut root;
        for seg in p {
            let entry = node
                .entry(format!("f:{seg}"))
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(next) = entry else {
                // every node this function inserts is an object
                break;
            };
            node = next;
        }
    }
    Value::Object(root)
}

fn parse_fields_v1(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    let Value::Object(m) = v else {
        return;
    };
    let field_children: Vec<(&String, &Value)> =
        m.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    let element_children = m.keys().any(|k| !k.starts_with("f:") && k != ".");
    if !path.is_empty() && (element_children || m.contains_key(".") || field_children.is_empty()) {
        out.insert(path.clone());
    }
    if element_children {
        return;
    }
    for (k, child) in field_children {
        path.push(k[2..].to_string());
        parse_fields_v1(child, path, out);
        path.pop();
    }
}

fn get_path<'a>(v: &'a Value, p: &FieldPath) -> Option<&'a Value> {
    p.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, c)| !c.is_null())
                .map(|(k, c)| (k.clone(), strip_nulls(c)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_applied(target: &mut Value, applied: &Value, path: &mut FieldPath) {
    let (Value::Object(t), Value::Object(a)) = (&mut *target, applied) else {
        *target = strip_nulls(applied);
        return;
    };
    for (k, v) in a {
        if path.len() == 1 && path[0] == "metadata" && SERVER_METADATA.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(cur @ Value::Object(_)), Value::Object(_)) => {
                path.push(k.clone());
                merge_applied(cur, v, path);
                path.pop();
            }
            _ => {
                t.insert(k.clone(), strip_nulls(v));
            }
        }
    }
}

/// Removes the field at `p`, then any maps left empty by that removal.
fn remove_path(obj: &mut Value, p: &FieldPath) {
    fn go(v: &mut Value, p: &[String]) -> bool {
        let Value::Object(m) = v else {
            return false;
        };
        match p {
            [] => false,
            [last] => m.remove(last).is_some(),
            [first, rest @ ..] => {
                let Some(child) = m.get_mut(first) else {
                    return false;
                };
                let removed = go(child, rest);
                if removed && child.as_object().is_some_and(Map::is_empty) && first != "metadata" {
                    m.remove(first);
                }
                removed
            }
        }
    }
    go(obj, p);
}

fn set_managed_fields(obj: &mut Value, entries: Vec<Value>) {
    let Value::Object(root) = obj else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = meta {
        if entries.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
#[path = "apply_tests.rs"]
mod tests;
