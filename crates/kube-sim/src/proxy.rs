//! Proxy mode: the step of the request pipeline that hands a request to an upstream API server
//! instead of the local store. `server` still decides faults and logs the request; this module
//! classifies the path without the local catalogue (the upstream's CRDs are unknown here),
//! forwards method, path, query, end-to-end headers and the streamed body with the upstream's
//! credentials, and streams the answer back. Proxied watch bodies obey the `cut-watches` and
//! `stall-watches` faults.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::faults::Faults;
use crate::http::{self as h, Body, BodyError, Query, Resp, WatchCut};
use crate::reqlog::RequestAttrs;
use crate::status::ApiError;
use crate::upstream::{Upstream, UpstreamError};

type Sent = Pin<Box<dyn Future<Output = Result<Response<Incoming>, BoxedError>> + Send>>;
type BoxedError = Box<dyn std::error::Error + Send + Sync>;

/// A connected upstream: base URL, the `Authorization` value to present, and an HTTP client.
pub struct UpstreamClient {
    url: String,
    authorization: Option<HeaderValue>,
    send: Box<dyn Fn(Request<Body>) -> Sent + Send + Sync>,
}

impl fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl UpstreamClient {
    /// Prepares the TLS client (kube's rustls setup: CA data, client identity, skipping
    /// verification) and the credentials; nothing is sent yet.
    pub async fn new(up: &Upstream) -> Result<UpstreamClient, UpstreamError> {
        let url = up.url.trim_end_matches('/').to_string();
        url.parse::<Uri>().map_err(|source| UpstreamError::Url {
            url: up.url.clone(),
            source,
        })?;
        let tls = |source: BoxedError| UpstreamError::Tls {
            url: url.clone(),
            source,
        };
        let config = kube::Config::from_custom_kubeconfig(
            tls_kubeconfig(up).map_err(|e| tls(e.into()))?,
            &KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| tls(e.into()))?;
        let mut connector = HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        connector.set_nodelay(true);
        let https = config
            .rustls_https_connector_with_connector(connector)
            .map_err(|e| tls(e.into()))?;
        let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build(https);
        let authorization = match &up.token {
            Some(t) => {
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {t}")).map_err(UpstreamError::Token)?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        Ok(UpstreamClient {
            url,
            authorization,
            send: Box::new(move |req| {
                let fut = client.request(req);
                Box::pin(async move { fut.await.map_err(BoxedError::from) })
            }),
        })
    }

    /// The upstream's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends the request upstream and answers with the upstream's answer (head as soon as it
    /// arrives, body streamed). A watch's body can be cut or stalled by faults. When the upstream
    /// cannot be reached the answer is a 502 Status.
    pub async fn forward(&self, req: Request<Incoming>, watch: bool, faults: &Faults) -> Resp {
        let (parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |p| p.as_str());
        let uri = match format!("{}{path}", self.url).parse::<Uri>() {
            Ok(u) => u,
            Err(e) => return h::error(&ApiError::bad_request(format!("invalid path: {e}"))),
        };
        let mut out = Request::new(body.map_err(BodyError::from).boxed());
        *out.method_mut() = parts.method;
        *out.uri_mut() = uri;
        *out.headers_mut() = end_to_end(parts.headers, &[header::HOST, header::AUTHORIZATION]);
        if let Some(a) = &self.authorization {
            out.headers_mut().insert(header::AUTHORIZATION, a.clone());
        }
        let resp = match (self.send)(out).await {
            Ok(r) => r,
            Err(e) => {
                let cause = error_chain(e.as_ref());
                tracing::warn!(error = %cause, upstream = %self.url, "proxying failed");
                let message = format!(
                    "kube-sim could not get an answer from the upstream API server {}: {cause}",
                    self.url
                );
                return h::error(&ApiError::new(502, "InternalError", message));
            }
        };
        let (mut parts, body) = resp.into_parts();
        parts.headers = end_to_end(parts.headers, &[]);
        let body = if watch && parts.status.is_success() {
            watch_body(body, faults)
        } else {
            body.map_err(BodyError::from).boxed()
        };
        Response::from_parts(parts, body)
    }
}

/// A kubeconfig for kube's TLS setup: the server, how to check its certificate, and the client
/// identity (the token is added per request instead).
fn tls_kubeconfig(up: &Upstream) -> Result<Kubeconfig, kube::config::KubeconfigError> {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut cluster = json!({
        "server": up.url,
        "insecure-skip-tls-verify": up.insecure_skip_tls_verify,
    });
    if let Some(ca) = &up.ca_pem {
        cluster["certificate-authority-data"] = json!(b64(ca));
    }
    let mut user = json!({});
    if let Some(c) = &up.client_cert {
        user["client-certificate-data"] = json!(b64(&c.cert_pem));
        user["client-key-data"] = json!(b64(&c.key_pem));
    }
    let kc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "upstream", "cluster": cluster}],
        "users": [{"name": "upstream", "user": user}],
        "contexts": [{"name": "upstream", "context": {"cluster": "upstream", "user": "upstream"}}],
        "current-context": "upstream",
    });
    // JSON is YAML.
    Kubeconfig::from_yaml(&kc.to_string())
}

/// Headers that describe one connection rather than the message, never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// The headers minus hop-by-hop ones (also those the `Connection` header names) and `drop`.
fn end_to_end(mut headers: HeaderMap, drop: &[HeaderName]) -> HeaderMap {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in HOP_BY_HOP {
        headers.remove(*n);
    }
    for n in named.iter().chain(drop) {
        headers.remove(n);
    }
    headers
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Relays an upstream watch body: a `cut-watches` fault ends it with an error (the client sees
/// the body end mid-stream), a `stall-watches` fault stops reading upstream until it ends.
fn watch_body(upstream: Incoming, faults: &Faults) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, BodyError>>(64);
    let mut cut = faults.cut_signal();
    cut.borrow_and_update();
    let mut stall = faults.stall_signal();
    let relay = async move {
        let mut body = upstream;
        loop {
            if *stall.borrow_and_update() {
                tokio::select! {
                    res = stall.changed() => if res.is_err() { return },
                    _ = cut.changed() => {
                        let _ = tx.send(Err(Box::new(WatchCut))).await;
                        return;
                    }
                    () = tx.closed() => return,
                }
                continue;
            }
            tokio::select! {
                frame = body.frame() => match frame {
                    Some(Ok(f)) => {
                        if tx.send(Ok(f)).await.is_err() {
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
    };
    tokio::spawn(relay.instrument(tracing::debug_span!("proxied watch")));
    StreamBody::new(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
    .boxed()
}

/// Verb, resource, namespace, name and subresource of a request, from its path alone (proxy
/// mode has no catalogue: any group, version and plural is taken as a resource path).
pub fn classify(method: &Method, path: &str, query: &Query) -> RequestAttrs {
    let segs: Vec<&str> = path
        .trim_start_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", g, _, rest @ ..] if !rest.is_empty() => (*g, rest),
        _ => return RequestAttrs::non_resource(method),
    };
    // The deprecated `/watch/` prefix the real server still serves.
    let (legacy_watch, rest) = match rest {
        ["watch", more @ ..] if !more.is_empty() => (true, more),
        _ => (false, rest),
    };
    let (namespace, rest) = match rest {
        // `namespaces/<n>/status` and `/finalize` are subresources of the namespace itself.
        ["namespaces", _, "status" | "finalize"] => ("", rest),
        ["namespaces", ns, more @ ..] if !more.is_empty() => (*ns, more),
        _ => ("", rest),
    };
    let (resource, name, sub) = match rest {
        [p] => (*p, "", ""),
        [p, n] => (*p, *n, ""),
        [p, n, s, ..] => (*p, *n, *s),
        [] => return RequestAttrs::non_resource(method),
    };
    let has_name = !name.is_empty();
    let verb = match method.as_str() {
        "GET" if legacy_watch || (!has_name && query.flag("watch")) => "watch",
        "GET" | "HEAD" if has_name => "get",
        "GET" | "HEAD" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if has_name => "delete",
        "DELETE" => "deletecollection",
        _ => "get",
    };
    RequestAttrs {
        verb,
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: sub.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, path_and_query: &str) -> (String, String, String, String, String) {
        let (path, q) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let a = classify(&method, path, &Query::parse(Some(q)));
        (
            a.verb.to_string(),
            a.resource,
            a.namespace,
            a.name,
            a.subresource,
        )
    }

    fn t(v: &str, r: &str, ns: &str, n: &str, s: &str) -> (String, String, String, String, String) {
        (v.into(), r.into(), ns.into(), n.into(), s.into())
    }

    #[test]
    fn classifies_resource_paths_without_a_catalogue() {
        let cms = "/api/v1/namespaces/a/configmaps";
        assert_eq!(
            attrs(Method::GET, cms),
            t("list", "configmaps", "a", "", "")
        );
        assert_eq!(
            attrs(Method::GET, &format!("{cms}?watch=true")),
            t("watch", "configmaps", "a", "", "")
        );
        assert_eq!(
            attrs(Method::GET, &format!("{cms}?watch=false")),
            t("list", "configmaps", "a", "", "")
        );
        assert_eq!(
            attrs(Method::POST, cms),
            t("create", "configmaps", "a", "", "")
        );
        assert_eq!(
            attrs(Method::DELETE, cms),
            t("deletecollection", "configmaps", "a", "", "")
        );
        assert_eq!(
            attrs(
                Method::PATCH,
                "/apis/velero.io/v1/namespaces/v/backups/b1/status"
            ),
            t("patch", "backups", "v", "b1", "status")
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/namespaces/a"),
            t("get", "namespaces", "", "a", "")
        );
        assert_eq!(
            attrs(Method::PUT, "/api/v1/namespaces/a/finalize"),
            t("update", "namespaces", "", "a", "finalize")
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/pods"),
            t("list", "pods", "", "", "")
        );
        assert_eq!(
            attrs(Method::GET, "/api/v1/watch/namespaces/a/pods"),
            t("watch", "pods", "a", "", "")
        );
        assert_eq!(
            attrs(Method::DELETE, "/apis/apps/v1/namespaces/a/deployments/d/"),
            t("delete", "deployments", "a", "d", "")
        );
        let a = classify(&Method::GET, "/apis/apps/v1/deployments", &Query::default());
        assert_eq!(a.group, "apps");
    }

    #[test]
    fn other_paths_are_not_resources() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
        ] {
            let a = classify(&Method::GET, p, &Query::default());
            assert_eq!((a.verb, a.resource.as_str()), ("get", ""), "{p}");
        }
    }

    #[test]
    fn hop_by_hop_headers_are_not_forwarded() {
        let mut hm = HeaderMap::new();
        hm.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        hm.insert("x-private", HeaderValue::from_static("1"));
        hm.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        hm.insert(header::HOST, HeaderValue::from_static("127.0.0.1:1"));
        hm.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let out = end_to_end(hm, &[header::HOST]);
        assert_eq!(out.len(), 1);
        assert!(out.contains_key(header::ACCEPT));
    }
}
