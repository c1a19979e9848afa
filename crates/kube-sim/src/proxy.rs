//! Proxy mode: every API request goes on to a real API server (the [`Upstream`]) and its answer
//! comes back, while kube-sim's faults and request log apply in front of it as they do to its
//! own store. A leaf: it imports only the HTTP plumbing and the faults' signals.
//!
//! Requests are described from their path alone (verb, group, resource, namespace, name,
//! subresource), without kube-sim's catalogue, so faults match the real server's resources too.
//! Watch answers are streamed, and `cut-watches` / `stall-watches` act on them.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderName, Method, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::faults::Faults;
use crate::http::{self as h, BodyError, Query, Resp};
use crate::status::ApiError;

/// Where proxy mode sends requests, and with which credentials.
#[derive(Clone)]
pub struct Upstream {
    /// `https://HOST:PORT` (no trailing slash).
    pub server: String,
    /// A bearer token sent with every request.
    pub token: Option<String>,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: Option<Vec<u8>>,
    /// Accept any server certificate (`insecure-skip-tls-verify`).
    pub insecure: bool,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("server", &self.server)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("insecure", &self.insecure)
            .finish_non_exhaustive()
    }
}

/// Why a kubeconfig cannot serve as an upstream.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}")]
    Parse {
        path: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("{path}: {what}")]
    Invalid { path: String, what: String },
}

impl Upstream {
    /// The current context's cluster and user of a kubeconfig file: `server`,
    /// `certificate-authority-data` or `certificate-authority`, `insecure-skip-tls-verify`, and
    /// the user's `token` or `tokenFile`. Client certificates are not supported.
    pub fn from_kubeconfig(path: impl AsRef<Path>) -> Result<Upstream, UpstreamError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| UpstreamError::Read {
            path: shown.clone(),
            source,
        })?;
        let config: Value = serde_yaml::from_str(&text).map_err(|source| UpstreamError::Parse {
            path: shown.clone(),
            source,
        })?;
        let invalid = |what: &str| UpstreamError::Invalid {
            path: shown.clone(),
            what: what.to_owned(),
        };
        let named = |list: &str, name: &str| {
            config[list]
                .as_array()
                .and_then(|items| items.iter().find(|i| i["name"] == name))
                .cloned()
        };
        let context_name = config["current-context"]
            .as_str()
            .ok_or_else(|| invalid("no current-context"))?;
        let context = named("contexts", context_name)
            .ok_or_else(|| invalid("the current context is not listed"))?;
        let cluster = named(
            "clusters",
            context["context"]["cluster"].as_str().unwrap_or(""),
        )
        .ok_or_else(|| invalid("the context's cluster is not listed"))?;
        let cluster = &cluster["cluster"];
        let user = context["context"]["user"]
            .as_str()
            .and_then(|u| named("users", u))
            .map(|u| u["user"].clone())
            .unwrap_or(Value::Null);
        let server = cluster["server"]
            .as_str()
            .ok_or_else(|| invalid("the cluster has no server"))?
            .trim_end_matches('/')
            .to_owned();
        let ca_pem = match (
            cluster["certificate-authority-data"].as_str(),
            cluster["certificate-authority"].as_str(),
        ) {
            (Some(data), _) => Some(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data)
                    .map_err(|_| invalid("certificate-authority-data is not base64"))?,
            ),
            (None, Some(file)) => {
                Some(std::fs::read(file).map_err(|source| UpstreamError::Read {
                    path: file.to_owned(),
                    source,
                })?)
            }
            (None, None) => None,
        };
        let token = match (user["token"].as_str(), user["tokenFile"].as_str()) {
            (Some(t), _) => Some(t.to_owned()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .map_err(|source| UpstreamError::Read {
                        path: file.to_owned(),
                        source,
                    })?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        Ok(Upstream {
            server,
            token,
            ca_pem,
            insecure: cluster["insecure-skip-tls-verify"].as_bool() == Some(true),
        })
    }
}

/// What a request is, read from its method and path as the real server's request-info does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Described {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// Subresources of a namespace that are not namespaced collections.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

pub fn describe(method: &Method, path: &str, query: &Query) -> Described {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, mut rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", g, _, rest @ ..] if !rest.is_empty() => (*g, rest),
        _ => {
            return Described {
                verb: method_verb(method, true, false),
                ..Described::default()
            };
        }
    };
    let mut namespace = "";
    if rest[0] == "namespaces"
        && rest.len() > 2
        && !(rest.len() == 3 && NAMESPACE_SUBRESOURCES.contains(&rest[2]))
    {
        namespace = rest[1];
        rest = &rest[2..];
    }
    let at = |i: usize| rest.get(i).copied().unwrap_or_default().to_owned();
    let name = at(1);
    Described {
        verb: method_verb(method, !name.is_empty(), query.flag("watch")),
        group: group.to_owned(),
        resource: at(0),
        subresource: at(2),
        namespace: namespace.to_owned(),
        name,
    }
}

fn method_verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "get",
    }
}

/// The forwarding client.
#[derive(Debug)]
pub struct Proxy {
    upstream: Upstream,
    client: reqwest::Client,
}

/// Headers that belong to one connection and are not forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
    "authorization",
];

fn forwarded(name: &HeaderName) -> bool {
    !HOP_BY_HOP.contains(&name.as_str())
}

impl Proxy {
    pub fn new(upstream: Upstream) -> Result<Proxy, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .danger_accept_invalid_certs(upstream.insecure)
            // The client's own timeouts decide; a watch may stay open for half an hour.
            .pool_idle_timeout(Duration::from_secs(30));
        if let Some(pem) = &upstream.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Proxy {
            client: builder.build()?,
            upstream,
        })
    }

    /// Sends the request on and answers with the upstream's answer; a watch's body follows
    /// the faults' cut and stall signals.
    pub async fn forward(&self, faults: &Faults, req: Request<Incoming>, limit: usize) -> Resp {
        let (parts, body) = req.into_parts();
        let body = match h::read_body(body, limit).await {
            Ok(b) => b,
            Err(e) => return h::error(&e),
        };
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |p| p.as_str());
        let watch = Query::parse(parts.uri.query()).flag("watch");
        let mut request = self
            .client
            .request(parts.method, format!("{}{path}", self.upstream.server))
            .body(body);
        for (name, value) in parts.headers.iter().filter(|(n, _)| forwarded(n)) {
            request = request.header(name, value);
        }
        if let Some(token) = &self.upstream.token {
            request = request.bearer_auth(token);
        }
        let answer = match request.send().await {
            Ok(a) => a,
            Err(e) => {
                return h::error(&ApiError::new(
                    503,
                    "ServiceUnavailable",
                    format!("the upstream API server did not answer: {e}"),
                ));
            }
        };
        let status = answer.status();
        let headers = answer.headers().clone();
        let stream = answer.bytes_stream();
        let mut resp = Response::new(if watch {
            watch_body(faults, stream)
        } else {
            BodyExt::boxed(StreamBody::new(stream.map(|chunk| {
                chunk.map(Frame::data).map_err(|e| Box::new(e) as BodyError)
            })))
        });
        *resp.status_mut() = status;
        for (name, value) in headers.iter().filter(|(n, _)| forwarded(n)) {
            resp.headers_mut().append(name, value.clone());
        }
        resp
    }
}

/// The error a cut watch's body ends with.
#[derive(Debug, thiserror::Error)]
#[error("watch cut by an injected fault")]
struct WatchCut;

/// A watch's body: the upstream's bytes until the stream ends, the client leaves, or watches are
/// cut (the body then ends with an error, as a dropped connection does); nothing passes while
/// watches are stalled.
fn watch_body(
    faults: &Faults,
    mut upstream: impl futures::Stream<Item = reqwest::Result<Bytes>> + Send + Unpin + 'static,
) -> h::Body {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, BodyError>>(64);
    let mut cut = faults.cut_signal();
    cut.borrow_and_update();
    let mut stall = faults.stall_signal();
    tokio::spawn(async move {
        loop {
            while *stall.borrow_and_update() {
                tokio::select! {
                    _ = stall.changed() => {}
                    _ = cut.changed() => {
                        let _ = tx.send(Err(Box::new(WatchCut))).await;
                        return;
                    }
                    () = tx.closed() => return,
                }
            }
            tokio::select! {
                chunk = upstream.next() => match chunk {
                    Some(Ok(bytes)) => {
                        if tx.send(Ok(Frame::data(bytes))).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(Box::new(e))).await;
                        return;
                    }
                    None => return,
                },
                _ = cut.changed() => {
                    let _ = tx.send(Err(Box::new(WatchCut))).await;
                    return;
                }
                _ = stall.changed() => {}
                () = tx.closed() => return,
            }
        }
    });
    BodyExt::boxed(StreamBody::new(futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|item| (item, rx)) },
    )))
}
