//! Resource requests: content negotiation, reading the body, and dispatch to the verb modules
//! under `verbs/` (`get`, `list`, `create`, `update`, `patch`, `delete`/`deletecollection`,
//! `watch`). Reached from the router (`server`) for every
//! [`Route::Resource`](crate::shared::Route::Resource).

use std::sync::Arc;

use http::{Request, header};
use hyper::body::Incoming;

use crate::http::{self as h, Output, Query, Resp};
use crate::render;
use crate::shared::{ResourceRequest, Shared};
use crate::status::ApiError;
use crate::verbs::delete::{self, DeleteOptions, Deleted};
use crate::verbs::request::{WriteOpts, decode};
use crate::verbs::{create, get, list, patch, update, watch};

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
        "get" => get::get(shared, r, out),
        "list" => list::list(shared, r, query, out).await,
        "create" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let created = create::create(shared, &r.served, r.namespace.as_deref(), obj, &opts)?;
            Ok(render::one(out, &r.served, &created, 201))
        }
        "update" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let (code, obj) = update::update(shared, r, obj, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "patch" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let (code, obj) = patch::patch(shared, r, &content_type, &body, query, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "delete" => {
            let dopts = DeleteOptions::parse(&body, query)?;
            let name = r.name.as_deref().unwrap_or("");
            let mut st = shared.store.write();
            match delete::delete(
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
        "deletecollection" => delete::delete_collection(shared, r, &body, query, out),
        _ => Err(ApiError::method_not_allowed(r.verb, &r.served.info)),
    }
}
