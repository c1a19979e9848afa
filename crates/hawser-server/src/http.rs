//! The server's HTTP endpoints on `--metrics-address`: `/metrics` (Prometheus text format),
//! `/livez` (the process answers) and `/readyz` (the server leads, every controller's watch is up
//! and the server is not shutting down; see [`Readiness`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::readiness::Readiness;

const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the endpoints answer from.
#[derive(Clone)]
pub(crate) struct Endpoints {
    pub(crate) registry: Arc<Registry>,
    pub(crate) readiness: Readiness,
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
        async move { answer(&endpoints, &req) }
    })
    .await;
}

/// Accepts HTTP/1 connections on `listener` until `shutdown`, each served on a task of its
/// own, every request answered by `answer`. `what` names the listener in the logs.
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
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a {what} connection failed");
                    continue;
                }
            },
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let answered = answer(req);
                async move { Ok::<_, Infallible>(answered.await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                tracing::debug!(error = %e, "{what} connection ended with an error");
            }
        });
    }
}

fn answer(endpoints: &Endpoints, req: &Request<Incoming>) -> Response<Full<Bytes>> {
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
            "not found: the endpoints are /metrics, /livez and /readyz\n".to_owned(),
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
