//! PATCH (all four patch types): content-type and option checks, decoding the patch, applying
//! it with the algorithms of [`crate::patch`], creating on a server-side apply to a missing
//! object, then the write path shared with update (`update`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::Served;
use crate::http::Query;
use crate::meta;
use crate::patch::{self, PatchError};
use crate::shared::{ResourceRequest, Shared};
use crate::status::{ApiError, Cause};
use crate::verbs::create::create_locked;
use crate::verbs::request::WriteOpts;
use crate::verbs::update::{commit, immutable, merge_for_write};

fn patch_error(e: PatchError, served: &Served, name: &str) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::new(422, "Invalid", m).with_details(
            json!({"name": name, "group": served.info.group, "kind": served.info.kind}),
        ),
        PatchError::TooLarge(m) => ApiError::too_large(m),
        PatchError::UnsupportedMediaType(m) => ApiError::new(415, "UnsupportedMediaType", m),
        PatchError::Conflict { message, causes } => {
            let causes: Vec<Value> = causes
                .into_iter()
                .map(|(field, message)| json!({"reason": "FieldManagerConflict", "message": message, "field": field}))
                .collect();
            ApiError::new(409, "Conflict", message).with_details(
                json!({"name": name, "group": served.info.group, "kind": served.info.plural, "causes": causes}),
            )
        }
    }
}

fn patch_options_invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_kind(
        "PatchOptions.meta.k8s.io",
        "meta.k8s.io",
        "PatchOptions",
        "",
        vec![Cause {
            reason: if message.starts_with("Required") {
                "FieldValueRequired"
            } else {
                "FieldValueForbidden"
            },
            message: message.to_string(),
            field: field.to_string(),
        }],
    )
}

/// PATCH (all four patch types).
pub fn patch(
    shared: &Shared,
    r: &ResourceRequest,
    content_type: &str,
    body: &[u8],
    query: &Query,
    opts: &WriteOpts,
) -> Result<(u16, Arc<Value>), ApiError> {
    let name = r.name.as_deref().unwrap_or("");
    let ns = r.namespace.as_deref().unwrap_or("");
    let served = &r.served;
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let custom = served.is_custom();
    let accepted = if custom {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
    };
    let unsupported = || {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    };
    let kind = match mime.as_str() {
        "application/json-patch+json" => "json",
        "application/merge-patch+json" => "merge",
        "application/strategic-merge-patch+json" if !custom => "strategic",
        "application/apply-patch+yaml" => "apply",
        _ => return Err(unsupported()),
    };
    let force = query.flag("force");
    if kind != "apply" && force {
        return Err(patch_options_invalid(
            "force",
            "Forbidden: may not be specified for non-apply patch",
        ));
    }
    if kind == "apply" && query.value("fieldManager").is_none() {
        return Err(patch_options_invalid(
            "fieldManager",
            "Required value: is required for apply patch",
        ));
    }
    let patch_value: Value = if kind == "apply" {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    if kind == "apply" {
        let want = served.info.api_version();
        let av = patch_value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if av != want {
            return Err(ApiError::bad_request(format!(
                "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {want}"
            )));
        }
        let k = patch_value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        if k != served.info.kind {
            return Err(ApiError::bad_request(format!(
                "invalid object type: {want}, Kind={k}"
            )));
        }
        if patch_value.pointer("/metadata/managedFields").is_some() {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
    } else if kind != "json" && !patch_value.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    let mut patch_value = patch_value;
    if kind == "apply"
        && served.info.status_subresource
        && r.subresource.is_none()
        && let Some(m) = patch_value.as_object_mut()
    {
        // Main-resource applies never touch status when the subresource exists.
        m.remove("status");
    }
    let now = meta::now_rfc3339();
    let mut st = shared.store.write();
    let current = st.get(&served.storage, ns, name).cloned();
    let Some(current) = current else {
        if kind != "apply" || r.subresource.is_some() {
            return Err(ApiError::not_found(&served.info, name));
        }
        let rv = meta::meta_str(&patch_value, "resourceVersion");
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut created = patch::server_side_apply(
            None,
            &patch_value,
            &served.info.api_version(),
            &opts.manager,
            force,
            &now,
        )
        .map_err(|e| patch_error(e, served, name))?;
        {
            let m = meta::meta_mut(&mut created);
            m.insert("name".into(), Value::String(name.to_string()));
            if served.info.namespaced {
                m.insert("namespace".into(), Value::String(ns.to_string()));
            } else {
                m.remove("namespace");
            }
        }
        let obj = create_locked(shared, &mut st, served, created, opts)?;
        return Ok((201, obj));
    };
    let mut target = (*current).clone();
    let mut keep_managed = false;
    match kind {
        "merge" => patch::merge_patch(&mut target, &patch_value),
        "json" => patch::json_patch(&mut target, &patch_value)
            .map_err(|e| patch_error(e, served, name))?,
        "strategic" => patch::strategic_merge_patch(&mut target, &patch_value)
            .map_err(|e| patch_error(e, served, name))?,
        _ => {
            let rv = meta::meta_str(&patch_value, "resourceVersion");
            if !rv.is_empty() && rv != meta::meta_str(&current, "resourceVersion") {
                return Err(ApiError::modified_conflict(&served.info, name));
            }
            target = patch::server_side_apply(
                Some(&current),
                &patch_value,
                &served.info.api_version(),
                &opts.manager,
                force,
                &now,
            )
            .map_err(|e| patch_error(e, served, name))?;
            keep_managed = true;
        }
    }
    let new_rv = meta::meta_str(&target, "resourceVersion");
    if !new_rv.is_empty() && new_rv != meta::meta_str(&current, "resourceVersion") {
        return Err(ApiError::modified_conflict(&served.info, name));
    }
    if meta::name(&target) != name {
        let v = Value::String(meta::name(&target).to_string());
        return Err(immutable(served, name, "metadata.name", &v));
    }
    let operation = if kind == "apply" { "Apply" } else { "Update" };
    let out = merge_for_write(
        served,
        &current,
        target,
        r.subresource.as_deref(),
        opts,
        operation,
        keep_managed,
    )?;
    let stored = commit(shared, &mut st, served, &current, out, opts.dry_run);
    Ok((200, stored))
}
