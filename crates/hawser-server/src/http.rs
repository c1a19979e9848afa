//! The server's HTTP endpoints on `--metrics-address`: `/metrics` (Prometheus text format),
//! `/livez` (the process answers), `/readyz` (the server leads, every controller's watch is up
//! and the server is not shutting down; see [`Readiness`]) and, with `--status-page`, `/status`
//! ([`crate::status_page`]).

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::readiness::Readiness;

const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the endpoints answer from.
#[derive(Clone)]
pub(crate) struct Endpoints {
    pub(crate) registry: Arc<Registry>,
    pub(crate) readiness: Readiness,
    /// `/status`, with `--status-page`.
    pub(crate) status_page: Option<crate::status_page::StatusPage>,
}

/// Binds `addr`; the listener is returned so that a bad address fails start-up at once.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Answers on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) {
    accept(listener, "metrics", shutdown, move |req| {
        let endpoints = endpoints.clone();
        async move { answer(&endpoints, &req).await }
    })
    .await;
}

/// Most connections one listener holds at once.
const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send a request's headers once connected.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause after a failed accept (the pause doubles from 10 ms).
const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);
/// At most one log line per this interval about failed accepts or dropped connections.
const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Accepts HTTP/1 connections on `listener` until `shutdown`, each served on a task of its
/// own, one request per connection, every request answered by `answer`. `what` names the
/// listener in the logs.
///
/// A listener that anyone on the network can reach must not be held open by idle sockets: a
/// client has [`HEADER_READ_TIMEOUT`] to send its request's headers, connections are not kept
/// alive after the answer, and at most [`MAX_CONNECTIONS`] are held; past that a new connection
/// closes the one that has waited longest without sending a request (so a probe of `/livez`
/// still gets in while idle sockets pile up), or is itself closed when every one is busy
/// answering. A failed accept (out of file descriptors) pauses the loop, 10 ms doubling to
/// [`MAX_ACCEPT_PAUSE`], and is logged at most once per [`LOG_INTERVAL`] with a count.
pub(crate) async fn accept<A, F, B>(
    listener: TcpListener,
    what: &'static str,
    shutdown: CancellationToken,
    answer: A,
) where
    A: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connections = Connections::default();
    let mut failures = RateLimitedLog::new(what, "accepting connections failed; pausing");
    let mut evictions = RateLimitedLog::new(
        what,
        "too many connections; the longest-waiting idle ones were closed",
    );
    let mut pause = Duration::ZERO;
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    pause = Duration::ZERO;
                    stream
                }
                Err(e) => {
                    failures.note(&e.to_string());
                    pause = (pause * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_PAUSE);
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(pause) => {}
                    }
                    continue;
                }
            },
        };
        let Some(slot) = connections.admit() else {
            evictions.note("every connection is busy answering; a new one was closed");
            continue;
        };
        if slot.evicted {
            evictions.note("an idle connection was closed for a new one");
        }
        let answer = answer.clone();
        let task = tokio::spawn(async move {
            let slot = slot;
            let svc = hyper::service::service_fn(move |req| {
                slot.started();
                let answered = answer(req);
                async move { Ok::<_, Infallible>(answered.await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                tracing::debug!(error = %e, "{what} connection ended with an error");
            }
        });
        connections.track(task.abort_handle());
    }
}

/// The connections of one listener: how many there are, and the ones still waiting for their
/// request, oldest first.
#[derive(Clone, Default)]
struct Connections {
    inner: Arc<Mutex<ConnectionsState>>,
}

#[derive(Default)]
struct ConnectionsState {
    /// Connections admitted and not closed, the evicted ones not counted.
    open: usize,
    next: u64,
    /// Connections without a request yet: id and the task to abort (set once spawned).
    waiting: VecDeque<(u64, Option<AbortHandle>)>,
    /// Connections closed to make room, whose place was given up then.
    evicted: HashSet<u64>,
}

/// One admitted connection; releases its place when dropped.
struct Slot {
    connections: Connections,
    id: u64,
    /// Whether admitting it closed an idle connection.
    evicted: bool,
}

impl Connections {
    fn with<T>(&self, f: impl FnOnce(&mut ConnectionsState) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A place for a new connection: a free one, or the one of the longest-waiting idle
    /// connection, which is closed; `None` when every connection is busy answering.
    fn admit(&self) -> Option<Slot> {
        let (id, evicted) = self.with(|s| {
            let mut evicted = false;
            if s.open >= MAX_CONNECTIONS {
                let (oldest, task) = s.waiting.pop_front()?;
                if let Some(task) = task {
                    task.abort();
                }
                s.evicted.insert(oldest);
                s.open -= 1;
                evicted = true;
            }
            s.open += 1;
            s.next += 1;
            s.waiting.push_back((s.next, None));
            Some((s.next, evicted))
        })?;
        Some(Slot {
            connections: self.clone(),
            id,
            evicted,
        })
    }

    /// Remembers the task of the newest connection, to close it if it stays idle.
    fn track(&self, task: AbortHandle) {
        self.with(|s| {
            if let Some(last) = s.waiting.back_mut()
                && last.1.is_none()
            {
                last.1 = Some(task);
            }
        });
    }
}

impl Slot {
    /// The connection's request arrived: it is no longer idle.
    fn started(&self) {
        self.connections
            .with(|s| s.waiting.retain(|(id, _)| *id != self.id));
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let id = self.id;
        self.connections.with(|s| {
            s.waiting.retain(|(waiting, _)| *waiting != id);
            // An evicted connection's place was given up when it was evicted.
            if !s.evicted.remove(&id) {
                s.open = s.open.saturating_sub(1);
            }
        });
    }
}

/// A warning logged at most once per [`LOG_INTERVAL`], with how many times it happened.
struct RateLimitedLog {
    what: &'static str,
    message: &'static str,
    count: u64,
    last: Option<tokio::time::Instant>,
}

impl RateLimitedLog {
    fn new(what: &'static str, message: &'static str) -> Self {
        Self {
            what,
            message,
            count: 0,
            last: None,
        }
    }

    fn note(&mut self, detail: &str) {
        self.count += 1;
        let now = tokio::time::Instant::now();
        if self
            .last
            .is_none_or(|last| now.duration_since(last) >= LOG_INTERVAL)
        {
            tracing::warn!(
                listener = self.what,
                times = self.count,
                last = detail,
                "{}",
                self.message
            );
            self.count = 0;
            self.last = Some(now);
        }
    }
}

async fn answer(endpoints: &Endpoints, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() == "/status"
        && let Some(page) = &endpoints.status_page
    {
        let html = page.render(&endpoints.readiness).await;
        return respond(StatusCode::OK, "text/html; charset=utf-8", html);
    }
    match req.uri().path() {
        "/metrics" => {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, &endpoints.registry) {
                Ok(()) => respond(StatusCode::OK, METRICS_CONTENT_TYPE, body),
                Err(e) => respond(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("encoding the metrics failed: {e}\n"),
                ),
            }
        }
        "/livez" => respond(StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" => match endpoints.readiness.check() {
            Ok(()) => respond(StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Err(why) => respond(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        _ => respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            if endpoints.status_page.is_some() {
                "not found: the endpoints are /metrics, /livez, /readyz and /status\n"
            } else {
                "not found: the endpoints are /metrics, /livez and /readyz (and /status with --status-page)\n"
            }
            .to_owned(),
        ),
    }
}

fn respond(code: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}

/// Where `addr` is reachable from this host (an unspecified address becomes loopback).
pub(crate) fn local_url(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        match addr {
            SocketAddr::V4(_) => std::net::IpAddr::from([127, 0, 0, 1]),
            SocketAddr::V6(_) => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        addr.ip()
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// `GET path` on `addr`: the status code.
    async fn get(addr: SocketAddr, path: &str) -> Option<u16> {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        answer.split_whitespace().nth(1)?.parse().ok()
    }

    #[tokio::test]
    async fn idle_sockets_cannot_hold_the_endpoints_and_are_closed() {
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let endpoints = Endpoints {
            registry: Arc::new(Registry::default()),
            readiness: Readiness::default(),
            status_page: None,
        };
        tokio::spawn(serve(listener, endpoints, stop.clone()));

        // Without --status-page there is no /status.
        assert_eq!(get(addr, "/status").await, Some(404));
        // Three times the cap of sockets that connect and never send a request.
        let mut idle = Vec::new();
        for _ in 0..3 * MAX_CONNECTIONS {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        // A probe still gets its answer, at once, again and again.
        for _ in 0..5 {
            let answered = tokio::time::timeout(Duration::from_secs(2), get(addr, "/livez")).await;
            assert_eq!(answered.ok().flatten(), Some(200));
        }
        // The server closed all but the newest ones: a read of a closed socket ends at once.
        let mut closed = 0;
        for socket in &mut idle {
            let mut byte = [0u8; 1];
            if let Ok(Ok(0)) =
                tokio::time::timeout(Duration::from_millis(20), socket.read(&mut byte)).await
            {
                closed += 1;
            }
        }
        assert!(
            closed >= 3 * MAX_CONNECTIONS - MAX_CONNECTIONS,
            "only {closed} of {} idle sockets were closed",
            3 * MAX_CONNECTIONS
        );
        // Answered connections are not kept alive: one request, then the server closes.
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut answer))
            .await
            .expect("the connection is closed after the answer")
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_failure_is_logged_once_per_interval_with_its_count() {
        let mut log = RateLimitedLog::new("metrics", "accepting connections failed; pausing");
        log.note("too many open files");
        assert_eq!(log.count, 0, "the first one is logged");
        for _ in 0..1000 {
            log.note("too many open files");
        }
        assert_eq!(log.count, 1000, "the next ones wait for the interval");
        tokio::time::advance(LOG_INTERVAL).await;
        log.note("too many open files");
        assert_eq!(log.count, 0);
    }
}
