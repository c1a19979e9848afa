//! The router: maps API paths to a [`Route`], and runs the per-request pipeline (faults,
//! dispatch, logging; `hang` and `drop-response` faults end the connection unanswered). Resource
//! requests go on to `api`, which hands them to the verb modules; discovery and OpenAPI paths go
//! to `discovery`. The state it routes against lives in `shared`. In proxy mode only the dispatch
//! step changes: `proxy` classifies the path and forwards the request upstream.

use std::sync::Arc;

use http::{HeaderValue, Method, Request, header};
use hyper::body::Incoming;

use crate::catalog::EXEC;
use crate::faults::{Interrupt, RequestKey, Shape, StatusFault, default_reason};
use crate::http::{self as h, Query, Resp};
use crate::proxy::UpstreamClient;
use crate::reqlog::{RequestAttrs, RequestRecord};
use crate::shared::{Catalog, ResourceRequest, Route, Shared};
use crate::status::ApiError;
use crate::{api, discovery, exec, meta, proxy};

/// Subresources of a namespace that are not namespaced collections.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

pub fn route(catalog: &Catalog, method: &Method, path: &str, query: &Query) -> Route {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let segs: Vec<&str> = match segs.split_last() {
        Some((last, rest)) if last.is_empty() && !rest.is_empty() => rest.to_vec(),
        _ => segs,
    };
    let is_get = method == Method::GET;
    // Discovery paths of a group appear once one of its CRDs is established.
    let listed = || catalog.discoverable();
    match segs.as_slice() {
        ["api"] if is_get => Route::CoreVersions,
        ["apis"] if is_get => Route::GroupList,
        ["apis", g] if is_get && listed().groups().iter().any(|(x, _)| x == g) => {
            Route::Group((*g).to_string())
        }
        ["api", "v1"] if is_get => Route::ResourceList(String::new(), "v1".into()),
        ["apis", g, v] if is_get && listed().serves_gv(g, v) => {
            Route::ResourceList((*g).to_string(), (*v).to_string())
        }
        ["version"] if is_get => Route::Version,
        [h @ ("healthz" | "livez" | "readyz"), ..] if is_get => Route::Health((*h).to_string()),
        ["openapi", "v3"] if is_get => Route::OpenApiIndex,
        ["openapi", "v3", rest @ ..] if is_get && !rest.is_empty() => {
            Route::OpenApiDoc(rest.join("/"))
        }
        ["api", "v1", rest @ ..] if !rest.is_empty() => {
            resource_route(catalog, "", "v1", rest, method, query)
        }
        ["apis", g, v, rest @ ..] if !rest.is_empty() && catalog.serves_gv(g, v) => {
            resource_route(catalog, g, v, rest, method, query)
        }
        _ => Route::NotFound,
    }
}

fn resource_route(
    catalog: &Catalog,
    group: &str,
    version: &str,
    rest: &[&str],
    method: &Method,
    query: &Query,
) -> Route {
    let mut namespace = None;
    let mut rest = rest;
    if rest[0] == "namespaces"
        && rest.len() > 2
        && !(rest.len() == 3 && NAMESPACE_SUBRESOURCES.contains(&rest[2]))
    {
        namespace = Some(rest[1].to_string());
        rest = &rest[2..];
    }
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some((*n).to_string()), None),
        [p, n, s] => (*p, Some((*n).to_string()), Some((*s).to_string())),
        _ => return Route::NotFound,
    };
    let Some(served) = catalog.find(group, version, plural) else {
        return Route::NotFound;
    };
    if served.info.namespaced != namespace.is_some() {
        // Cluster-scoped kinds have no namespaced paths; namespaced items need a namespace.
        if !served.info.namespaced || name.is_some() {
            return Route::NotFound;
        }
    }
    if let Some(s) = &sub {
        let ok = (s == "status" && served.info.status_subresource)
            || served.extra_subresources.contains(&s.as_str());
        if !ok || name.as_deref().is_some_and(str::is_empty) {
            return Route::NotFound;
        }
    }
    if name.as_deref() == Some("") {
        return Route::NotFound;
    }
    if sub.as_deref() == Some(EXEC) {
        // A WebSocket exec is a GET and a SPDY one a POST; RBAC asks for `create` for both.
        return match method.as_str() {
            "GET" | "POST" => Route::Resource(ResourceRequest {
                served,
                verb: "create",
                namespace,
                name,
                subresource: sub,
            }),
            _ => Route::MethodNotAllowed,
        };
    }
    let all_namespaces = served.info.namespaced && namespace.is_none();
    let verb: &'static str = match (method.as_str(), name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if query.flag("watch") => "watch",
        ("GET", false) => "list",
        ("POST", false) if !all_namespaces => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) if !all_namespaces => "deletecollection",
        ("POST" | "DELETE", false) => return Route::NotFound,
        _ => return Route::MethodNotAllowed,
    };
    if sub.is_some() && !matches!(verb, "get" | "update" | "patch") {
        return Route::MethodNotAllowed;
    }
    if sub.as_deref() == Some("finalize") && verb != "update" {
        return Route::MethodNotAllowed;
    }
    let verb_listed = served.info.verbs.iter().any(|v| v == verb);
    if sub.is_none() && !verb_listed {
        return Route::VerbNotAllowed(served, verb);
    }
    Route::Resource(ResourceRequest {
        served,
        verb,
        namespace,
        name,
        subresource: sub,
    })
}

/// What serves a request the faults let through.
enum Target<'a> {
    /// kube-sim's own store, through the route.
    Local(Route),
    /// The upstream API server (proxy mode).
    Upstream(&'a UpstreamClient),
}

/// The attributes faults match and the log records, for a routed request.
fn route_attrs(route: &Route, method: &Method) -> RequestAttrs {
    match route {
        Route::Resource(r) => RequestAttrs {
            verb: r.verb,
            group: r.served.info.group.clone(),
            resource: r.served.info.plural.clone(),
            subresource: r.subresource.clone().unwrap_or_default(),
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
        },
        _ => RequestAttrs::non_resource(method),
    }
}

/// The full pipeline for one API request: classify, decide faults, delay, then serve (locally or
/// upstream), answer with a fault, or leave unanswered; log.
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let query = Query::parse(uri.query());
    let (target, attrs) = match &shared.upstream {
        Some(up) => (
            Target::Upstream(up),
            proxy::classify(&method, uri.path(), &query),
        ),
        None => {
            let route = route(&shared.catalog(), &method, uri.path(), &query);
            let attrs = route_attrs(&route, &method);
            (Target::Local(route), attrs)
        }
    };
    let decision = shared.faults.decide(&RequestKey {
        verb: attrs.verb,
        resource: &attrs.resource,
        name: &attrs.name,
        subresource: &attrs.subresource,
        namespace: &attrs.namespace,
    });
    let watch = attrs.verb == "watch";
    let record = attrs.into_record(
        &method,
        uri.path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string()),
    );
    if let Some(d) = decision.delay {
        tokio::time::sleep(d).await;
    }
    let close = req.extensions().get::<h::CloseConnection>().cloned();
    let resp = match (decision.error, decision.interrupt) {
        (Some(f), _) => fault_response(&f),
        (None, None) => serve(&shared, target, req, query, watch).await,
        (None, Some(Interrupt::Hang(hold))) => {
            // Read the body, so that hyper notices when the client gives up and drops this.
            let _ = h::read_body(req.into_body(), shared.config.max_body_bytes).await;
            log(&shared, record, 0);
            hold.wait().await;
            return close_unanswered(close).await;
        }
        (None, Some(Interrupt::DropResponse(hold))) => {
            // Upstream, the answer's head means the request was applied there.
            drop(serve(&shared, target, req, query, watch).await);
            log(&shared, record, 0);
            if let Some(hold) = hold {
                hold.wait().await;
            }
            return close_unanswered(close).await;
        }
    };
    log(&shared, record, resp.status().as_u16());
    resp
}

/// The step faults wrap: the local store, or the upstream in proxy mode.
async fn serve(
    shared: &Arc<Shared>,
    target: Target<'_>,
    req: Request<Incoming>,
    query: Query,
    watch: bool,
) -> Resp {
    match target {
        Target::Local(route) => dispatch(shared, route, req, query).await,
        Target::Upstream(up) => up.forward(req, watch, &shared.faults).await,
    }
}

/// Logs a request with the code it was answered with (0 = not answered).
fn log(shared: &Shared, mut record: RequestRecord, code: u16) {
    record.time = meta::now_millis();
    record.code = code;
    shared.log.push(record);
}

/// Closes the request's connection without an answer; the connection task drops this future, so
/// it never resolves.
async fn close_unanswered(close: Option<h::CloseConnection>) -> Resp {
    match close {
        Some(c) => {
            c.close();
            std::future::pending().await
        }
        // Every accepted connection puts its handle into its requests; answer as a timed-out
        // server would if one ever came without.
        None => fault_response(&StatusFault::new(504)),
    }
}

/// The answer of an injected status fault.
pub fn fault_response(f: &StatusFault) -> Resp {
    let (reason, default_msg) = default_reason(f.code);
    let message = f.message.clone().unwrap_or_else(|| default_msg.to_string());
    let mut resp = match f.shape {
        Shape::Plain => h::text(f.code, &format!("{message}\n")),
        Shape::Status => {
            let mut e = ApiError::new(f.code, f.reason.as_deref().unwrap_or(reason), message);
            if let Some(s) = f.retry_after_seconds {
                e = e.with_details(serde_json::json!({"retryAfterSeconds": s}));
            }
            h::error(&e)
        }
    };
    if let Some(s) = f.retry_after_seconds
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    if f.shape == Shape::Plain && f.code == 429 {
        resp.headers_mut().insert(
            "X-Kubernetes-PF-FlowSchema-UID",
            HeaderValue::from_static("00000000-0000-0000-0000-000000000001"),
        );
        resp.headers_mut().insert(
            "X-Kubernetes-PF-PriorityLevel-UID",
            HeaderValue::from_static("00000000-0000-0000-0000-000000000002"),
        );
    }
    resp
}

async fn dispatch(
    shared: &Arc<Shared>,
    route: Route,
    req: Request<Incoming>,
    query: Query,
) -> Resp {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match route {
        Route::Resource(r) if r.subresource.as_deref() == Some(EXEC) => {
            exec::serve(shared, &r, req)
        }
        Route::Resource(r) => api::serve(shared, r, req, query).await,
        Route::NotFound => h::error(&ApiError::page_not_found()),
        Route::MethodNotAllowed => h::text(405, "405: Method Not Allowed"),
        Route::VerbNotAllowed(served, verb) => {
            let e = if served.is_custom() && verb == "create" {
                ApiError::new(
                    405,
                    "MethodNotAllowed",
                    "create not allowed while custom resource definition is terminating",
                )
            } else {
                ApiError::method_not_allowed(verb, &served.info)
            };
            h::error(&e)
        }
        Route::Version => h::json(200, &discovery::version()),
        Route::Health(which) => health(&which, &query),
        Route::CoreVersions | Route::GroupList | Route::Group(_) | Route::ResourceList(..) => {
            discovery::serve(shared, &route, accept.as_deref(), req.headers())
        }
        Route::OpenApiIndex | Route::OpenApiDoc(_) => discovery::openapi(shared, &route, &query),
    }
}

fn health(which: &str, query: &Query) -> Resp {
    if query.get("verbose").is_some() {
        let checks = [
            "ping",
            "log",
            "etcd",
            "poststarthook/start-apiextensions-controllers",
        ];
        let mut body = String::new();
        for c in checks {
            if query.get("exclude") == Some(c) {
                body.push_str(&format!("[+]{c} excluded: ok\n"));
            } else {
                body.push_str(&format!("[+]{c} ok\n"));
            }
        }
        body.push_str(&format!("{which} check passed\n"));
        return h::text(200, &body);
    }
    h::text(200, "ok")
}
