//! UPDATE (PUT) of existing objects, including the status subresource and namespace finalize,
//! and the write path it shares with PATCH (`patch`): merging the desired state into the
//! current object ([`merge_for_write`]), `managedFields` bookkeeping ([`set_managed`], also used
//! by create), and storing the result with the no-op rule and finalizer-driven removal
//! ([`commit`]).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::catalog::Served;
use crate::meta;
use crate::shared::{CRDS, NAMESPACES, ResourceRequest, Shared};
use crate::status::{ApiError, Cause};
use crate::store::Writer;
use crate::verbs::delete::after_remove;
use crate::verbs::request::{WriteOpts, check_type};
use crate::work::Work;

/// Records a non-apply write in `managedFields`: the manager gains the fields it changed
/// (all fields on create), other managers lose them, and fields that no longer exist are
/// dropped from every entry.
pub fn set_managed(
    obj: &mut Value,
    old: Option<&Value>,
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let status_only = subresource == Some("status");
    let proj_new = meta::tracked(obj, status_only, false);
    let changed = match old {
        Some(o) => meta::diff_tree(&meta::tracked(o, status_only, false), &proj_new),
        None => meta::fields_tree(&proj_new),
    };
    let everything = meta::tracked(obj, false, true);
    let m = meta::meta_mut(obj);
    let list = m
        .entry("managedFields")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(entries) = list else {
        return;
    };
    let mut mine = json!({});
    let mut kept = Vec::with_capacity(entries.len() + 1);
    for mut e in entries.drain(..) {
        let is_mine = e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some(operation)
            && e.get("subresource").and_then(Value::as_str) == subresource;
        let Some(fields) = e.get_mut("fieldsV1") else {
            continue;
        };
        if is_mine {
            mine = fields.take();
            continue;
        }
        meta::subtract_tree(fields, &changed);
        meta::retain_existing(fields, &everything);
        if fields.as_object().is_some_and(|f| !f.is_empty()) {
            kept.push(e);
        }
    }
    meta::union_tree(&mut mine, &changed);
    meta::retain_existing(&mut mine, &everything);
    if mine.as_object().is_some_and(|f| !f.is_empty()) {
        let mut entry = json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": mine,
        });
        if let Some(s) = subresource {
            entry["subresource"] = json!(s);
        }
        kept.push(entry);
    }
    if kept.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(kept));
    }
}

/// Whether two objects are equal apart from `resourceVersion` and `managedFields`.
fn same_ignoring_bookkeeping(a: &Value, b: &Value) -> bool {
    let (Some(ma), Some(mb)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let skip = |k: &str| k == "metadata";
    if ma.iter().filter(|(k, _)| !skip(k)).count() != mb.iter().filter(|(k, _)| !skip(k)).count() {
        return false;
    }
    if ma
        .iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| mb.get(k) != Some(v))
    {
        return false;
    }
    let empty = Map::new();
    let meta_a = ma
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let meta_b = mb
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mskip = |k: &str| k == "resourceVersion" || k == "managedFields";
    meta_a.iter().filter(|(k, _)| !mskip(k)).count()
        == meta_b.iter().filter(|(k, _)| !mskip(k)).count()
        && meta_a
            .iter()
            .filter(|(k, _)| !mskip(k))
            .all(|(k, v)| meta_b.get(k) == Some(v))
}

/// Whether anything outside `metadata` (and outside `status` when `ignore_status`) differs.
fn spec_changed(a: &Value, b: &Value, ignore_status: bool) -> bool {
    let empty = Map::new();
    let ma = a.as_object().unwrap_or(&empty);
    let mb = b.as_object().unwrap_or(&empty);
    let relevant = |k: &str| {
        !(matches!(k, "metadata" | "apiVersion" | "kind") || (ignore_status && k == "status"))
    };
    ma.iter()
        .filter(|(k, _)| relevant(k))
        .any(|(k, v)| mb.get(k) != Some(v))
        || mb
            .iter()
            .filter(|(k, _)| relevant(k))
            .any(|(k, _)| !ma.contains_key(k))
}

pub(super) fn immutable(served: &Served, name: &str, field: &str, value: &Value) -> ApiError {
    ApiError::invalid(
        &served.info,
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: field is immutable"),
            field: field.to_string(),
        }],
    )
}

/// Builds the object to store from the desired state and the current one; `None` = no-op.
#[allow(clippy::too_many_arguments)]
pub(super) fn merge_for_write(
    served: &Served,
    current: &Value,
    mut desired: Value,
    sub: Option<&str>,
    opts: &WriteOpts,
    operation: &str,
    keep_managed: bool,
) -> Result<Value, ApiError> {
    let name = meta::name(current).to_string();
    let now = meta::now_rfc3339();
    let mut out = match sub {
        Some("status") => {
            let mut out = current.clone();
            match desired.get("status") {
                Some(s) => out["status"] = s.clone(),
                None => {
                    if let Some(m) = out.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if keep_managed && let Some(mf) = desired.pointer("/metadata/managedFields") {
                meta::meta_mut(&mut out).insert("managedFields".into(), mf.clone());
            }
            out
        }
        Some("finalize") => {
            let mut out = current.clone();
            let fins = desired
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or_else(|| json!([]));
            out["spec"]["finalizers"] = fins;
            out
        }
        _ => {
            check_type(served, &mut desired)?;
            let cur_meta = meta::meta(current).cloned().unwrap_or_default();
            {
                let dm = meta::meta_mut(&mut desired);
                if let Some(uid) = dm.get("uid").and_then(Value::as_str)
                    && !uid.is_empty()
                    && cur_meta.get("uid").and_then(Value::as_str) != Some(uid)
                {
                    let v = Value::String(uid.to_string());
                    return Err(immutable(served, &name, "metadata.uid", &v));
                }
                for key in [
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    match cur_meta.get(key) {
                        Some(v) => {
                            dm.insert(key.into(), v.clone());
                        }
                        None => {
                            dm.remove(key);
                        }
                    }
                }
                if !keep_managed
                    && let Some(mf) = cur_meta.get("managedFields")
                    && !dm.get("managedFields").is_some_and(Value::is_array)
                {
                    dm.insert("managedFields".into(), mf.clone());
                }
            }
            if served.info.status_subresource && served.storage != NAMESPACES {
                match current.get("status") {
                    Some(s) => desired["status"] = s.clone(),
                    None => {
                        if let Some(m) = desired.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if served.storage == NAMESPACES {
                // Phase and spec.finalizers are server-owned for namespaces.
                if let Some(s) = current.get("status") {
                    desired["status"] = s.clone();
                }
                if let Some(s) = current.get("spec") {
                    desired["spec"] = s.clone();
                }
                let n = name.clone();
                let labels = meta::meta_mut(&mut desired)
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), Value::String(n));
                }
            }
            if served.storage == CRDS
                && let Some(s) = current.get("status")
            {
                desired["status"] = s.clone();
            }
            if meta::is_deleting(current) {
                let old = meta::finalizers(current);
                let new: Vec<String> = meta::finalizers(&desired)
                    .into_iter()
                    .filter(|f| !old.contains(f))
                    .collect();
                if !new.is_empty() {
                    return Err(ApiError::invalid(
                        &served.info,
                        &name,
                        vec![Cause {
                            reason: "FieldValueForbidden",
                            message: format!(
                                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                                new.iter()
                                    .map(|f| format!("\"{f}\""))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            field: "metadata.finalizers".into(),
                        }],
                    ));
                }
            }
            let causes = meta::validate_meta(&desired);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&served.info, &name, causes));
            }
            if served.info.uses_generation
                && spec_changed(current, &desired, served.info.status_subresource)
            {
                let g = current
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                meta::meta_mut(&mut desired).insert("generation".into(), json!(g + 1));
            }
            desired
        }
    };
    if !keep_managed && !same_ignoring_bookkeeping(current, &out) {
        set_managed(
            &mut out,
            Some(current),
            &opts.manager,
            operation,
            &served.info.api_version(),
            sub,
            &now,
        );
    }
    Ok(out)
}

/// Stores the merged object, honouring the no-op rule and finalizer-driven removal.
pub(super) fn commit(
    shared: &Shared,
    st: &mut Writer<'_>,
    served: &Served,
    current: &Arc<Value>,
    out: Value,
    dry_run: bool,
) -> Arc<Value> {
    if same_ignoring_bookkeeping(current, &out) {
        return current.clone();
    }
    let ns = meta::namespace(current).to_string();
    let name = meta::name(current).to_string();
    if dry_run {
        return Arc::new(out);
    }
    let remove = meta::is_deleting(&out)
        && meta::finalizers(&out).is_empty()
        && !(served.storage == NAMESPACES
            && out
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()));
    let stored = st.put(&served.storage, &ns, &name, out);
    if served.storage == CRDS {
        shared.rebuild_catalog(st);
    }
    if remove {
        st.remove(&served.storage, &ns, &name);
        if served.storage == CRDS {
            shared.rebuild_catalog(st);
        }
        after_remove(shared, served, &ns);
    } else if meta::is_deleting(&stored) {
        let work = if served.storage == NAMESPACES {
            Work::Namespace(name)
        } else {
            Work::Object(served.storage.clone(), ns, name)
        };
        shared.work.push(work);
    }
    stored
}

/// PUT.
pub fn update(
    shared: &Shared,
    r: &ResourceRequest,
    body: Value,
    opts: &WriteOpts,
) -> Result<(u16, Arc<Value>), ApiError> {
    let name = r.name.as_deref().unwrap_or("");
    let ns = r.namespace.as_deref().unwrap_or("");
    let body_name = meta::name(&body);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = meta::namespace(&body);
    if r.served.info.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if r.subresource.is_some() {
        let mut probe = body.clone();
        check_type(&r.served, &mut probe)?;
    }
    let mut st = shared.store.write();
    let current = st
        .get(&r.served.storage, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&r.served.info, name))?;
    let body_rv = meta::meta_str(&body, "resourceVersion");
    if !body_rv.is_empty() && body_rv != meta::meta_str(&current, "resourceVersion") {
        return Err(ApiError::modified_conflict(&r.served.info, name));
    }
    let out = merge_for_write(
        &r.served,
        &current,
        body,
        r.subresource.as_deref(),
        opts,
        "Update",
        false,
    )?;
    let stored = commit(shared, &mut st, &r.served, &current, out, opts.dry_run);
    Ok((200, stored))
}
