//! DELETE and deletecollection: preconditions, finalizers, propagation, answer shapes.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::Served;
use crate::http::{Output, Query, Resp};
use crate::meta;
use crate::render;
use crate::shared::{CRDS, NAMESPACES, ResourceRequest, Shared};
use crate::status::{self, ApiError, Cause};
use crate::store::{Key, Writer};
use crate::verbs::list::Filter;
use crate::work::Work;

/// Parsed `DeleteOptions` (body or query).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub orphan_dependents: Option<bool>,
}

impl DeleteOptions {
    pub fn parse(body: &[u8], query: &Query) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions::default();
        let trimmed = body.iter().any(|b| !b.is_ascii_whitespace());
        if trimmed {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            if let Some(kind) = v.get("kind").and_then(Value::as_str)
                && kind != "DeleteOptions"
            {
                return Err(ApiError::bad_request(format!(
                    "expected DeleteOptions, got {kind}"
                )));
            }
            o.dry_run = match v.get("dryRun") {
                None | Some(Value::Null) => false,
                Some(Value::Array(a)) if a.is_empty() => false,
                Some(Value::Array(a)) if a.iter().all(|x| x == "All") => true,
                Some(other) => return Err(bad_dry_run(other)),
            };
            o.propagation = v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
            o.precondition_uid = v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.precondition_rv = v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        } else {
            o.dry_run = match query.value("dryRun") {
                None => false,
                Some("All") => true,
                Some(other) => return Err(bad_dry_run(&json!(other))),
            };
            o.propagation = query.value("propagationPolicy").map(str::to_string);
            o.orphan_dependents = query.value("orphanDependents").map(|v| v == "true");
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
        {
            return Err(ApiError::invalid_kind(
                "DeleteOptions.meta.k8s.io",
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![Cause {
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                    ),
                    field: "propagationPolicy".into(),
                }],
            ));
        }
        Ok(o)
    }
}

fn bad_dry_run(v: &Value) -> ApiError {
    ApiError::invalid_kind(
        "DeleteOptions.meta.k8s.io",
        "meta.k8s.io",
        "DeleteOptions",
        "",
        vec![Cause {
            reason: "FieldValueNotSupported",
            message: format!("Unsupported value: {v}: supported values: \"All\""),
            field: "dryRun".into(),
        }],
    )
}

/// The result of a delete.
pub enum Deleted {
    Object(Arc<Value>),
    Status(Value),
}

/// Deletes one object per §2.7 (under the store lock).
pub fn delete(
    shared: &Shared,
    st: &mut Writer<'_>,
    served: &Served,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
) -> Result<Deleted, ApiError> {
    let current = st
        .get(&served.storage, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&served.info, name))?;
    let uid = meta::meta_str(&current, "uid").to_string();
    if let Some(p) = &o.precondition_uid
        && *p != uid
    {
        return Err(ApiError::conflict(
            &served.info,
            name,
            &format!("Precondition failed: UID in precondition: {p}, UID in object meta: {uid}"),
        ));
    }
    let cur_rv = meta::meta_str(&current, "resourceVersion").to_string();
    if let Some(p) = &o.precondition_rv
        && *p != cur_rv
    {
        return Err(ApiError::conflict(
            &served.info,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {p}, ResourceVersion in object meta: {cur_rv}"
            ),
        ));
    }
    let mut finalizers = meta::finalizers(&current);
    let mut added = false;
    let extra = match (o.propagation.as_deref(), o.orphan_dependents) {
        (Some("Foreground"), _) => Some("foregroundDeletion"),
        (Some("Orphan"), _) | (None, Some(true)) => Some("orphan"),
        _ => None,
    };
    if let Some(f) = extra
        && !finalizers.iter().any(|x| x == f)
    {
        finalizers.push(f.to_string());
        added = true;
    }
    let is_namespace = served.storage == NAMESPACES;
    let is_crd = served.storage == CRDS;
    if is_crd
        && !finalizers
            .iter()
            .any(|f| f == "customresourcecleanup.apiextensions.k8s.io")
    {
        finalizers.push("customresourcecleanup.apiextensions.k8s.io".into());
        added = true;
    }
    let graceful_pending = is_namespace || !finalizers.is_empty();
    if meta::is_deleting(&current) {
        if added && !o.dry_run {
            let mut obj = (*current).clone();
            meta::meta_mut(&mut obj).insert("finalizers".into(), json!(finalizers));
            let stored = st.put(&served.storage, ns, name, obj);
            shared.work.push(Work::Object(
                served.storage.clone(),
                ns.to_string(),
                name.to_string(),
            ));
            return Ok(Deleted::Object(stored));
        }
        return Ok(Deleted::Object(current));
    }
    if graceful_pending {
        let mut obj = (*current).clone();
        {
            let m = meta::meta_mut(&mut obj);
            m.insert(
                "deletionTimestamp".into(),
                Value::String(meta::now_rfc3339()),
            );
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if !finalizers.is_empty() {
                m.insert("finalizers".into(), json!(finalizers));
            }
            if let Some(g) = m.get("generation").and_then(Value::as_i64)
                && g > 0
            {
                m.insert("generation".into(), json!(g + 1));
            }
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        if is_crd {
            let cond = json!({"type": "Terminating", "status": "True", "lastTransitionTime": meta::now_rfc3339(), "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"});
            if let Some(cs) = obj
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                cs.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
                cs.push(cond);
            }
        }
        if o.dry_run {
            return Ok(Deleted::Object(Arc::new(obj)));
        }
        let stored = st.put(&served.storage, ns, name, obj);
        if is_crd {
            shared.rebuild_catalog(st);
        }
        let work = if is_namespace {
            Work::Namespace(name.to_string())
        } else if is_crd {
            Work::Crd(name.to_string())
        } else {
            Work::Object(served.storage.clone(), ns.to_string(), name.to_string())
        };
        shared.work.push(work);
        return Ok(Deleted::Object(stored));
    }
    let last = if o.dry_run {
        current.clone()
    } else {
        let last = st
            .remove(&served.storage, ns, name)
            .unwrap_or_else(|| current.clone());
        after_remove(shared, served, ns);
        last
    };
    if served.returns_deleted {
        Ok(Deleted::Object(last))
    } else {
        Ok(Deleted::Status(status::delete_success(
            &served.info,
            name,
            &uid,
        )))
    }
}

/// Wakes controllers waiting for a namespace or CRD to drain.
pub fn after_remove(shared: &Shared, served: &Served, ns: &str) {
    if !ns.is_empty() {
        shared.work.push(Work::Namespace(ns.to_string()));
    }
    if let Some(crd) = &served.crd {
        shared.work.push(Work::Crd(crd.clone()));
    }
    shared.work.wake();
}

pub fn delete_collection(
    shared: &Shared,
    r: &ResourceRequest,
    body: &[u8],
    query: &Query,
    out: &Output,
) -> Result<Resp, ApiError> {
    let filter = Filter::from_query(&r.served, query)?;
    let dopts = DeleteOptions::parse(body, query)?;
    let ns = r.namespace.clone().unwrap_or_default();
    let mut st = shared.store.write();
    let keys: Vec<(Key, Arc<Value>)> = st
        .range(&r.served.storage, r.namespace.as_deref(), None)
        .filter(|(_, v)| filter.matches(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut items = Vec::with_capacity(keys.len());
    for (k, v) in keys {
        match delete(shared, &mut st, &r.served, &k.0, &k.1, &dopts) {
            Ok(_) | Err(ApiError { code: 404, .. }) => items.push(v),
            Err(e) => return Err(e),
        }
    }
    let rv = st.rv();
    drop(st);
    let _ = ns;
    shared.work.wake();
    Ok(render::list(
        out,
        &r.served,
        &items,
        render::list_meta(rv, None, None),
        None,
    ))
}
