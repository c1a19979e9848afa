//! A raw HTTP client for the server-level tests (no Kubernetes client in between).
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube_sim::SimConfig;

#[path = "../real_kube/mod.rs"]
pub mod real_kube;
pub use real_kube::Sim;
use serde_json::Value;

pub struct Raw {
    pub base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// kube-sim, or with `HAWSER_TEST_KUBE=real` a real API server of the test's own behind it
/// (see [`real_kube`]), and a raw client of it.
pub async fn start() -> (Sim, Raw) {
    start_with(SimConfig::default()).await
}

pub async fn start_with(config: SimConfig) -> (Sim, Raw) {
    let sim = Sim::start(config).await;
    let raw = Raw::new(&sim.api_url());
    (sim, raw)
}

impl Raw {
    /// Waits (up to 10 s) until GET `path` answers 200, and returns that answer: kube-sim
    /// serves what it accepted at once, a real server a moment later (a new CRD's resources).
    pub async fn until_ok(&self, path: &str) -> Answer {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self.get(path).await;
            if answer.status == StatusCode::OK {
                return answer;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "GET {path}: {} {}",
                answer.status,
                answer.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (up to 10 s) until the CRD `name` is `Established`, and returns that condition.
    pub async fn until_established(&self, name: &str) -> Value {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let crd = self.get(&path).await.json();
            let established = crd["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Established" && c["status"] == "True");
            if let Some(condition) = established {
                return condition.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} is not established: {crd}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn new(base: &str) -> Raw {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Raw {
            base: base.to_string(),
            client,
        }
    }

    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Answer, hyper_util::client::legacy::Error> {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b.body(Full::new(body.into())).expect("request builds");
        let resp = self.client.request(req).await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .expect("body reads")
            .to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        self.try_send(method, path, headers, body)
            .await
            .expect("request succeeds")
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn get_accept(&self, path: &str, accept: &str) -> Answer {
        self.send(Method::GET, path, &[("accept", accept)], Bytes::new())
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::PUT,
            path,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Answer {
        self.send(
            Method::PATCH,
            path,
            &[("content-type", content_type)],
            body.to_string(),
        )
        .await
    }

    pub async fn delete(&self, path: &str, body: &str) -> Answer {
        self.send(
            Method::DELETE,
            path,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    /// Opens a watch and collects event lines until the stream ends or `max` lines arrived
    /// (or `within` elapsed).
    pub async fn watch_lines(
        &self,
        path: &str,
        max: usize,
        within: Duration,
    ) -> (StatusCode, Vec<Value>) {
        let req = Request::builder()
            .uri(format!("{}{}", self.base, path))
            .body(Full::new(Bytes::new()))
            .expect("request builds");
        let resp = self
            .client
            .request(req)
            .await
            .expect("watch request succeeds");
        let status = resp.status();
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        while lines.len() < max {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(f))) => f,
                _ => break,
            };
            if let Some(d) = frame.data_ref() {
                buf.extend_from_slice(d);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    lines.push(
                        serde_json::from_slice(&line).expect("each watch line is one JSON object"),
                    );
                }
            }
        }
        (status, lines)
    }
}

/// A ConfigMap body.
pub fn cm(name: &str, labels: Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

pub fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("has resourceVersion")
        .parse()
        .expect("numeric RV")
}
