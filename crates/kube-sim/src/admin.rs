//! The admin HTTP API: faults and the request log. It runs on its own listener so it keeps
//! answering while the API port refuses connections. In proxy mode the faults that act on the
//! local store (`delay-established`, `POST /compact`) are refused with 400.

use std::sync::Arc;

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::json;

use crate::faults::FaultSpec;
use crate::http::{self as h, Query, Resp};
use crate::shared::Shared;

pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_string();
    let query = Query::parse(req.uri().query());
    match (method, path.as_str()) {
        (Method::GET, "/healthz") => h::text(200, "ok"),
        (Method::GET, "/faults") => h::json(200, &json!(shared.faults.list())),
        (Method::POST, "/faults") => {
            let body = match h::read_body(req.into_body(), 1024 * 1024).await {
                Ok(b) => b,
                Err(e) => return h::json(e.code, &json!({"error": e.message})),
            };
            match serde_json::from_slice::<FaultSpec>(&body) {
                Ok(FaultSpec::DelayEstablished(_)) if shared.upstream.is_some() => h::json(
                    400,
                    &json!({"error": "delay-established does not apply in proxy mode: CRDs are established by the upstream API server"}),
                ),
                Ok(spec) => {
                    let id = shared.faults.add(spec);
                    h::json(201, &json!({"id": id}))
                }
                Err(e) => h::json(400, &json!({"error": format!("invalid fault: {e}")})),
            }
        }
        (Method::DELETE, "/faults") => {
            shared.faults.clear();
            h::json(200, &json!({"cleared": true}))
        }
        (Method::DELETE, p) if p.starts_with("/faults/") => {
            let id = p.trim_start_matches("/faults/").parse::<u64>().unwrap_or(0);
            if shared.faults.remove(id) {
                h::json(200, &json!({"removed": id}))
            } else {
                h::json(404, &json!({"error": format!("no fault with id {id}")}))
            }
        }
        (Method::GET, "/requests") => {
            let since = query
                .value("since")
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            h::json(200, &json!(shared.log.since(since)))
        }
        (Method::DELETE, "/requests") => {
            shared.log.clear();
            h::json(200, &json!({"cleared": true}))
        }
        (Method::POST, "/compact") if shared.upstream.is_some() => h::json(
            400,
            &json!({"error": "compact does not apply in proxy mode: watch history is the upstream API server's"}),
        ),
        (Method::POST, "/compact") => {
            shared.store.write().compact();
            h::json(200, &json!({"compacted": true}))
        }
        _ => h::text(404, "404 page not found\n"),
    }
}
