//! Resource requests: content negotiation, body decoding and dispatch to the verb modules
//! (`list`, `create`, `delete`, `write` for update/patch, `watch`); GET lives here.

use std::sync::Arc;

use http::{Request, header};
use hyper::body::Incoming;
use serde_json::Value;

use crate::catalog::Served;
use crate::http::{self as h, Output, Query, Resp};
use crate::render;
use crate::server::{ResourceRequest, Shared};
use crate::status::{ApiError, Cause};
use crate::{watch, write};

pub use crate::create::{create, create_locked};
pub use crate::delete::{DeleteOptions, Deleted, after_remove, delete};
pub use crate::list::{Filter, wait_for_rv};

pub const NAMESPACES: &str = "/namespaces";
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub manager: String,
}

impl WriteOpts {
    pub fn from_request(query: &Query, user_agent: Option<&str>) -> Result<WriteOpts, ApiError> {
        let dry_run = match query.value("dryRun") {
            None => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::invalid_kind(
                    "CreateOptions.meta.k8s.io",
                    "meta.k8s.io",
                    "CreateOptions",
                    "",
                    vec![Cause {
                        reason: "FieldValueNotSupported",
                        message: format!(
                            "Unsupported value: \"{other}\": supported values: \"All\""
                        ),
                        field: "dryRun".into(),
                    }],
                ));
            }
        };
        let manager = match query.value("fieldManager") {
            Some(m) => m.to_string(),
            None => user_agent
                .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".to_string()),
        };
        Ok(WriteOpts { dry_run, manager })
    }
}

/// Entry point for a resource request.
pub async fn serve(
    shared: &Arc<Shared>,
    r: ResourceRequest,
    req: Request<Incoming>,
    query: Query,
) -> Resp {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let out = match h::negotiate(accept.as_deref(), false) {
        Ok(o) => o,
        Err(e) => return h::error(&e),
    };
    if r.verb == "watch" {
        return watch::serve(shared.clone(), r, query, out).await;
    }
    match serve_inner(shared, &r, req, &query, &out).await {
        Ok(resp) => resp,
        Err(e) => h::error(&e),
    }
}

async fn serve_inner(
    shared: &Arc<Shared>,
    r: &ResourceRequest,
    req: Request<Incoming>,
    query: &Query,
    out: &Output,
) -> Result<Resp, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match r.verb {
        "get" | "list" => bytes::Bytes::new(),
        _ => h::read_body(req.into_body(), shared.config.max_body_bytes).await?,
    };
    match r.verb {
        "get" => get(shared, r, out),
        "list" => crate::list::list(shared, r, query, out).await,
        "create" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let created = create(shared, &r.served, r.namespace.as_deref(), obj, &opts)?;
            Ok(render::one(out, &r.served, &created, 201))
        }
        "update" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let (code, obj) = write::update(shared, r, obj, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "patch" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let (code, obj) = write::patch(shared, r, &content_type, &body, query, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "delete" => {
            let dopts = DeleteOptions::parse(&body, query)?;
            let name = r.name.as_deref().unwrap_or("");
            let mut st = shared.store.write();
            match delete(
                shared,
                &mut st,
                &r.served,
                r.namespace.as_deref().unwrap_or(""),
                name,
                &dopts,
            )? {
                Deleted::Object(o) => Ok(render::one(out, &r.served, &o, 200)),
                Deleted::Status(s) => Ok(h::json(200, &s)),
            }
        }
        "deletecollection" => crate::delete::delete_collection(shared, r, &body, query, out),
        _ => Err(ApiError::method_not_allowed(r.verb, &r.served.info)),
    }
}

/// Decodes a create/update body (JSON or YAML).
pub fn decode(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let v: Value = match mime.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?,
        "application/vnd.kubernetes.protobuf" => match crate::protobuf::decode(body) {
            Ok(v) => v,
            Err(e @ crate::protobuf::ProtoError::Malformed) => {
                return Err(ApiError::bad_request(e.to_string()));
            }
            Err(_) => return Err(ApiError::unsupported_media_type(content_type)),
        },
        _ => return Err(ApiError::unsupported_media_type(content_type)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(v)
}

fn get(shared: &Shared, r: &ResourceRequest, out: &Output) -> Result<Resp, ApiError> {
    let name = r.name.as_deref().unwrap_or("");
    let st = shared.store.read();
    let obj = st
        .get(
            &r.served.storage,
            r.namespace.as_deref().unwrap_or(""),
            name,
        )
        .cloned()
        .ok_or_else(|| ApiError::not_found(&r.served.info, name))?;
    drop(st);
    Ok(render::one(out, &r.served, &obj, 200))
}

/// Checks body `apiVersion`/`kind` against the endpoint and fills them in.
pub fn check_type(served: &Served, obj: &mut Value) -> Result<(), ApiError> {
    let want_av = served.info.api_version();
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    };
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(av) if !av.is_empty() && av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != served.info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                served.info.kind
            )));
        }
        None | Some("") if served.is_custom() => {
            return Err(ApiError::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                Value::Object(m.clone())
            )));
        }
        _ => {}
    }
    m.insert("apiVersion".into(), Value::String(want_av));
    m.insert("kind".into(), Value::String(served.info.kind.clone()));
    Ok(())
}
