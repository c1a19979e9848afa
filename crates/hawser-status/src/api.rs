//! Raw requests to the API server for status writes.
//!
//! Requests are built with `kube::core::Request` and sent with the engines' one raw sender
//! ([`hawser_engine::cluster::request::send`]), not through `kube::Api`: `kube::Error::Api`
//! keeps only the parsed Status body, so the `Retry-After` header (which the API server sends
//! for 429 and some 5xx, sometimes without `details.retryAfterSeconds`, e.g. the plain-text
//! priority-and-fairness 429) would be lost. The header is read first and the Status body's
//! `details.retryAfterSeconds` is the fallback.
//!
//! Every request runs under a timeout (the per-attempt timeout chosen by the deadline policy).

use hawser_core::clock::Clock;
use std::time::Duration;

use hawser_engine::cluster::request::{Failure, send};
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ObjectList, Request, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::AttemptError;
use super::kind::Kind;
use crate::tolerant::{Tolerant, split};

/// The API operations the status engine needs, over a client without hidden retries.
#[derive(Clone)]
pub(crate) struct StatusApi {
    client: kube::Client,
    field_manager: String,
    /// For `Retry-After` given as an HTTP date.
    clock: Clock,
}

impl StatusApi {
    pub(crate) fn new(
        client: kube::Client,
        field_manager: impl Into<String>,
        clock: Clock,
    ) -> Self {
        Self {
            client,
            field_manager: field_manager.into(),
            clock,
        }
    }

    fn request(kind: Kind, namespace: Option<&str>) -> Request {
        let ar: ApiResource = kind.api_resource();
        Request::new(DynamicObject::url_path(&ar, namespace))
    }

    /// GET one object.
    pub(crate) async fn get(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Value, AttemptError> {
        let req = Self::request(kind, Some(namespace))
            .get(name, &kube::api::GetParams::default())
            .map_err(AttemptError::Build)?;
        self.send(req, timeout).await
    }

    /// JSON merge patch of the main resource, or of `/status` when `status_subresource`.
    pub(crate) async fn merge_patch(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        status_subresource: bool,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, AttemptError> {
        let pp = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(body);
        let r = Self::request(kind, Some(namespace));
        let req = if status_subresource {
            r.patch_subresource("status", name, &pp, &patch)
        } else {
            r.patch(name, &pp, &patch)
        }
        .map_err(AttemptError::Build)?;
        self.send(req, timeout).await
    }

    /// LIST every object of `kind` (in `namespace`, or all namespaces), following `continue`.
    pub(crate) async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        timeout: Duration,
    ) -> Result<Vec<Value>, AttemptError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(t) = token.take() {
                lp = lp.continue_token(&t);
            }
            let req = Self::request(kind, namespace)
                .list(&lp)
                .map_err(AttemptError::Build)?;
            // Each item read on its own: one that cannot be parsed fails nothing else.
            let page: ObjectList<Tolerant> = self.send(req, timeout).await?;
            let (read, unreadable) = split(page.items);
            items.extend(read);
            for u in unreadable {
                tracing::warn!(%kind, object = %u.id(), error = %u.error, "an object cannot be read; recovery leaves it out");
            }
            match page.metadata.continue_ {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(items),
            }
        }
    }

    /// Whether discovery of the kind's group/version lists `<plural>/status`.
    pub(crate) async fn has_status_subresource(
        &self,
        kind: Kind,
        timeout: Duration,
    ) -> Result<bool, AttemptError> {
        let ar = kind.api_resource();
        let path = format!("/apis/{}", ar.api_version);
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| AttemptError::Build(kube::core::request::Error::BuildRequest(e)))?;
        let doc: Value = self.send(req, timeout).await?;
        let wanted = format!("{}/status", ar.plural);
        let listed = doc
            .get("resources")
            .and_then(Value::as_array)
            .is_some_and(|rs| {
                rs.iter()
                    .any(|r| r.get("name").and_then(Value::as_str) == Some(wanted.as_str()))
            });
        Ok(listed)
    }

    async fn send<T: DeserializeOwned>(
        &self,
        req: http::Request<Vec<u8>>,
        timeout: Duration,
    ) -> Result<T, AttemptError> {
        match tokio::time::timeout(timeout, self.send_inner(req)).await {
            Ok(r) => r,
            Err(_elapsed) => Err(AttemptError::TimedOut(timeout)),
        }
    }

    async fn send_inner<T: DeserializeOwned>(
        &self,
        req: http::Request<Vec<u8>>,
    ) -> Result<T, AttemptError> {
        match send(&self.client, req, self.clock.now()).await {
            Ok(body) => serde_json::from_slice(&body).map_err(AttemptError::Decode),
            Err(Failure {
                error: kube::Error::Api(status),
                retry_after,
            }) => Err(AttemptError::Api {
                code: status.code,
                reason: status.reason,
                message: status.message,
                retry_after,
            }),
            Err(Failure { error, .. }) => Err(AttemptError::Transport(error)),
        }
    }
}
