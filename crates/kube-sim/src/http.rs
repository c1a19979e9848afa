//! HTTP plumbing: body type, response builders, query parsing, content negotiation, and the
//! accept loops (the API loop closes its listener while a `refuse` fault is active; every
//! connection can be closed unanswered from its handler through [`CloseConnection`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{Notify, watch};

use crate::faults::{Faults, ListenerState};
use crate::status::ApiError;

/// Error type of streamed bodies (a cut watch ends its body with one).
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BodyError>;
pub type Resp = Response<Body>;

/// The error a watch body ends with when a `cut-watches` fault aborts it.
#[derive(Debug, thiserror::Error)]
#[error("watch cut by an injected fault")]
pub struct WatchCut;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn build(code: u16, content_type: &str, body: Body) -> Resp {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

pub fn json_bytes(code: u16, bytes: Vec<u8>) -> Resp {
    build(code, "application/json", full(bytes))
}

pub fn json(code: u16, v: &serde_json::Value) -> Resp {
    json_bytes(code, serde_json::to_vec(v).unwrap_or_default())
}

pub fn text(code: u16, body: &str) -> Resp {
    build(code, "text/plain; charset=utf-8", full(body.to_string()))
}

pub fn with_content_type(code: u16, content_type: &str, body: Vec<u8>) -> Resp {
    build(code, content_type, full(body))
}

/// The response for an API error: a Status (or plain text), with `Retry-After` when set.
pub fn error(e: &ApiError) -> Resp {
    let mut r = if e.plain {
        text(e.code, &e.message)
    } else {
        json(e.code, &e.to_status())
    };
    if let Some(s) = e.retry_after()
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Query parameters; the first occurrence of a key wins, as in the real server.
#[derive(Debug, Default, Clone)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        let mut map = HashMap::new();
        if let Some(q) = q {
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                map.entry(k.into_owned()).or_insert_with(|| v.into_owned());
            }
        }
        Query(map)
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }
    /// Non-empty value.
    pub fn value(&self, k: &str) -> Option<&str> {
        self.get(k).filter(|v| !v.is_empty())
    }
    /// A boolean flag: present and not `false`/`0`.
    pub fn flag(&self, k: &str) -> bool {
        self.get(k).is_some_and(|v| v != "false" && v != "0")
    }
}

/// The representation a client asked for in `Accept`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    Table,
    PartialMetadata,
    AggregatedDiscovery,
}

/// Picks the first acceptable media type in the Accept header; `Err` = 406.
pub fn negotiate(accept: Option<&str>, discovery: bool) -> Result<Output, ApiError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Output::Json);
    };
    for part in accept.split(',') {
        let mut pieces = part.split(';').map(str::trim);
        let mime = pieces.next().unwrap_or("").to_ascii_lowercase();
        let mut params: HashMap<String, String> = HashMap::new();
        for p in pieces {
            if let Some((k, v)) = p.split_once('=') {
                params.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        match mime.as_str() {
            "application/json" | "application/*" | "*/*" | "application/yaml" => {}
            _ => continue,
        }
        let as_ = params.get("as").map(String::as_str);
        let g = params.get("g").map(String::as_str);
        let v = params.get("v").map(String::as_str);
        match as_ {
            None if mime == "application/yaml" => return Ok(Output::Yaml),
            None => return Ok(Output::Json),
            Some("Table") if g == Some("meta.k8s.io") && matches!(v, Some("v1" | "v1beta1")) => {
                return Ok(Output::Table);
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if g == Some("meta.k8s.io") && matches!(v, Some("v1" | "v1beta1")) =>
            {
                return Ok(Output::PartialMetadata);
            }
            Some("APIGroupDiscoveryList")
                if discovery && g == Some("apidiscovery.k8s.io") && matches!(v, Some("v2")) =>
            {
                return Ok(Output::AggregatedDiscovery);
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable())
}

/// Binds with SO_REUSEADDR so a refused port can be re-bound at once.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    reserve(addr)?.listen(1024)
}

/// A socket bound to `addr` that does not listen: connections to the port are refused, and
/// neither a server picking a free port nor an outgoing connection gets the port meanwhile
/// (other servers on the machine start while an outage lasts).
fn reserve(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Closes the connection a request arrived on without answering it (the client sees the
/// connection end). Every request carries one in its extensions.
#[derive(Debug, Clone)]
pub struct CloseConnection(Arc<Notify>);

impl CloseConnection {
    /// Drops the connection; the handler's future is dropped with it, so call this last.
    pub fn close(&self) {
        self.0.notify_one();
    }
}

/// Serves one connection until it ends, `kill` fires or a handler closes it.
fn spawn_conn<S, F>(stream: tokio::net::TcpStream, mut kill: watch::Receiver<u64>, service: S)
where
    S: Fn(http::Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Resp> + Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let service = Arc::new(service);
    let close = Arc::new(Notify::new());
    let handle = CloseConnection(close.clone());
    tokio::spawn(async move {
        let svc = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
            let service = service.clone();
            req.extensions_mut().insert(handle.clone());
            async move { Ok::<_, Infallible>(service(req).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), svc)
            // `pods/exec` upgrades its connection to a WebSocket.
            .with_upgrades();
        tokio::select! {
            res = conn => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            }
            _ = kill.changed() => {}
            () = close.notified() => {
                tracing::debug!("connection closed without an answer");
            }
        }
    });
}

/// The port of the API accept loop: listening, or kept bound without listening while refusing.
enum Port {
    Listening(TcpListener),
    Reserved(TcpSocket),
    /// Reserving failed (logged); serving again binds afresh.
    Released,
}

/// The API accept loop: stops listening and drops every connection while refusing, keeping
/// the address bound, then listens on it again.
pub async fn api_loop<S, F>(
    first: TcpListener,
    addr: SocketAddr,
    faults: Faults,
    mut shutdown: watch::Receiver<bool>,
    service: S,
) where
    S: Fn(http::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Resp> + Send + 'static,
{
    let mut state = faults.listener_state();
    // Connections watch this; bumping it drops them all.
    let (kill_tx, _) = watch::channel(0u64);
    let mut port = Port::Listening(first);
    loop {
        if *shutdown.borrow() {
            kill_tx.send_modify(|n| *n += 1);
            return;
        }
        let (st, _) = *state.borrow_and_update();
        match (st, port) {
            (ListenerState::Refusing, Port::Listening(l)) => {
                drop(l);
                port = match reserve(addr) {
                    Ok(socket) => Port::Reserved(socket),
                    Err(e) => {
                        tracing::warn!(error = %e, %addr, "keeping the refused API port bound failed");
                        Port::Released
                    }
                };
                kill_tx.send_modify(|n| *n += 1);
                continue;
            }
            (ListenerState::Serving, Port::Reserved(socket)) => {
                port = match socket.listen(1024) {
                    Ok(l) => Port::Listening(l),
                    Err(e) => {
                        tracing::warn!(error = %e, %addr, "listening on the API port again failed; binding afresh");
                        Port::Released
                    }
                };
                continue;
            }
            (ListenerState::Serving, Port::Released) => match bind(addr) {
                Ok(l) => {
                    port = Port::Listening(l);
                    continue;
                }
                Err(e) => {
                    port = Port::Released;
                    tracing::warn!(error = %e, %addr, "re-binding the API listener failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
                        _ = shutdown.changed() => {}
                    }
                    continue;
                }
            },
            (_, p) => port = p,
        }
        match &port {
            Port::Listening(l) => {
                tokio::select! {
                    acc = l.accept() => match acc {
                        Ok((stream, _)) => spawn_conn(stream, kill_tx.subscribe(), service.clone()),
                        Err(e) => tracing::debug!(error = %e, "accept failed"),
                    },
                    _ = state.changed() => {}
                    _ = shutdown.changed() => {}
                }
            }
            Port::Reserved(_) | Port::Released => {
                tokio::select! {
                    _ = state.changed() => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

/// A plain accept loop (admin listener).
pub async fn simple_loop<S, F>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    service: S,
) where
    S: Fn(http::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Resp> + Send + 'static,
{
    let (kill_tx, _) = watch::channel(0u64);
    loop {
        if *shutdown.borrow() {
            kill_tx.send_modify(|n| *n += 1);
            return;
        }
        tokio::select! {
            acc = listener.accept() => match acc {
                Ok((stream, _)) => spawn_conn(stream, kill_tx.subscribe(), service.clone()),
                Err(e) => tracing::debug!(error = %e, "accept failed"),
            },
            _ = shutdown.changed() => {}
        }
    }
}

/// Reads a request body up to `limit` bytes; `Err` = 413 or a read failure (400).
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(ApiError::too_large(format!(
                    "Request entity too large: limit is {limit}"
                )))
            } else {
                Err(ApiError::bad_request(format!(
                    "unable to read request body: {e}"
                )))
            }
        }
    }
}
