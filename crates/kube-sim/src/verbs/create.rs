//! CREATE: validation, server-set metadata, kind defaults; a new CRD goes on to `establish`.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::catalog::Served;
use crate::establish;
use crate::meta;
use crate::shared::{CRDS, NAMESPACES, Shared};
use crate::status::{ApiError, Cause};
use crate::store::{State, Writer};
use crate::verbs::request::{WriteOpts, check_type};
use crate::verbs::update::set_managed;

fn namespace_check(st: &State, ns: &str, res: &Served, name: &str) -> Result<(), ApiError> {
    match st.get(NAMESPACES, "", ns) {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(n) if meta::is_deleting(n) => Err(ApiError::new(
            403,
            "Forbidden",
            format!("unable to create new content in namespace {ns} because it is being terminated"),
        )
        .with_details(json!({
            "name": name,
            "group": res.info.group,
            "kind": res.info.plural,
            "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}],
        }))),
        Some(_) => Ok(()),
    }
}

/// Creates an object (the POST path, also used for seeding and server-side apply creates).
pub fn create(
    shared: &Shared,
    served: &Served,
    url_ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
) -> Result<Arc<Value>, ApiError> {
    check_type(served, &mut obj)?;
    {
        let m = meta::meta_mut(&mut obj);
        let body_ns = m
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match url_ns {
            Some(ns) => {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                m.insert("namespace".into(), Value::String(ns.to_string()));
            }
            None => {
                m.remove("namespace");
            }
        }
        match m.get("resourceVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() || s == "0" => {}
            Some(_) => {
                return Err(ApiError::new(
                    500,
                    "",
                    "resourceVersion should not be set on objects to be created",
                ));
            }
        }
    }
    let mut st = shared.store.write();
    create_locked(shared, &mut st, served, obj, opts)
}

/// The create path under the store lock.
pub fn create_locked(
    shared: &Shared,
    st: &mut Writer<'_>,
    served: &Served,
    mut obj: Value,
    opts: &WriteOpts,
) -> Result<Arc<Value>, ApiError> {
    let ns = meta::namespace(&obj).to_string();
    let given = meta::name(&obj).to_string();
    let generate = meta::meta_str(&obj, "generateName").to_string();
    if given.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            &served.info,
            "",
            vec![Cause {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        ));
    }
    let check_name = if given.is_empty() {
        format!("{generate}a")
    } else {
        given.clone()
    };
    let mut causes = Vec::new();
    if let Some(msg) = meta::validate_name(served.name_rule, &check_name) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: msg,
            field: if given.is_empty() {
                "metadata.generateName".into()
            } else {
                "metadata.name".into()
            },
        });
    }
    causes.extend(meta::validate_meta(&obj));
    if !causes.is_empty() {
        return Err(ApiError::invalid(&served.info, &given, causes));
    }
    if served.info.namespaced {
        namespace_check(st, &ns, served, &given)?;
    }
    kind_defaults_on_create(served, &mut obj)?;

    let name = if given.is_empty() {
        let mut found = None;
        for _ in 0..8 {
            let candidate = meta::generate_name(&generate);
            if st.get(&served.storage, &ns, &candidate).is_none() {
                found = Some(candidate);
                break;
            }
        }
        match found {
            Some(n) => n,
            None => {
                let mut e = ApiError::already_exists(&served.info, &generate, false);
                if let Some(d) = e.details.as_mut() {
                    d["retryAfterSeconds"] = json!(1);
                }
                return Err(e);
            }
        }
    } else {
        given
    };
    if let Some(existing) = st.get(&served.storage, &ns, &name) {
        return Err(ApiError::already_exists(
            &served.info,
            &name,
            meta::is_deleting(existing),
        ));
    }
    let now = meta::now_rfc3339();
    {
        let m = meta::meta_mut(&mut obj);
        m.insert("name".into(), Value::String(name.clone()));
        m.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        m.insert("creationTimestamp".into(), Value::String(now.clone()));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("resourceVersion");
        m.remove("selfLink");
        if served.info.uses_generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    if !obj
        .pointer("/metadata/managedFields")
        .is_some_and(|v| v.is_array())
    {
        set_managed(
            &mut obj,
            None,
            &opts.manager,
            "Update",
            &served.info.api_version(),
            None,
            &now,
        );
    }
    if opts.dry_run {
        return Ok(Arc::new(obj));
    }
    let stored = st.put(&served.storage, &ns, &name, obj);
    if served.storage == CRDS {
        establish::on_create(shared, st, &name);
    }
    Ok(stored)
}

fn kind_defaults_on_create(served: &Served, obj: &mut Value) -> Result<(), ApiError> {
    let drop_status =
        served.info.status_subresource && !matches!(served.storage.as_str(), NAMESPACES | CRDS);
    if drop_status && let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    match served.storage.as_str() {
        NAMESPACES => {
            let name = meta::name(obj).to_string();
            let labels = meta::meta_mut(obj)
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        "/pods" => {
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
        "/secrets" => {
            if let Some(m) = obj.as_object_mut() {
                if let Some(Value::Object(sd)) = m.remove("stringData") {
                    let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
                    if let Some(d) = data.as_object_mut() {
                        for (k, v) in sd {
                            let s = v.as_str().unwrap_or("").to_string();
                            d.insert(
                                k,
                                Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                            );
                        }
                    }
                }
                m.entry("type").or_insert_with(|| json!("Opaque"));
            }
        }
        CRDS => crd_defaults(obj)?,
        _ => {}
    }
    Ok(())
}

fn crd_defaults(obj: &mut Value) -> Result<(), ApiError> {
    let group = obj
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plural = obj
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = meta::name(obj).to_string();
    let info = crate::catalog::builtins()
        .into_iter()
        .find(|s| s.storage == CRDS)
        .map(|s| s.info);
    let Some(info) = info else {
        return Err(ApiError::internal("CRD kind missing from the catalogue"));
    };
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.group".into(),
        });
    }
    if plural.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.plural".into(),
        });
    }
    if kind.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.kind".into(),
        });
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
            ),
            field: "metadata.name".into(),
        });
    }
    let versions = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage: Vec<String> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    if versions.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value: must have exactly one version marked as storage version"
                .into(),
            field: "spec.versions".into(),
        });
    } else if storage.len() != 1 {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                Value::from(versions.len())
            ),
            field: "spec.versions".into(),
        });
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&info, &name, causes));
    }
    let spec = obj.get_mut("spec").and_then(Value::as_object_mut);
    if let Some(spec) = spec {
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            names
                .entry("singular")
                .or_insert_with(|| Value::String(kind.to_lowercase()));
            names
                .entry("listKind")
                .or_insert_with(|| Value::String(format!("{kind}List")));
        }
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    obj["status"] = json!({
        "acceptedNames": {"kind": "", "plural": ""},
        "conditions": [],
        "storedVersions": storage,
    });
    Ok(())
}
