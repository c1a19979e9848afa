//! The few raw API requests a restore makes (create, get, merge patch, status replace), and the
//! URL paths they go to. Path segments come from an untrusted archive, so they are
//! percent-encoded.

use http::Method;
use http::header::CONTENT_TYPE;
use kube::Client;
use serde_json::Value;

/// Content type of a JSON merge patch.
pub(crate) const MERGE_PATCH: &str = "application/merge-patch+json";
const JSON: &str = "application/json";

/// Percent-encodes one path segment (everything but RFC 3986 unreserved characters).
fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where the objects of one type live: `/api/v1` or `/apis/<group>/<version>`, the plural,
/// and whether it is namespaced.
#[derive(Clone, Debug)]
pub(crate) struct Collection {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Collection {
    /// `apiVersion` of the objects at this version.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection URL (in `namespace` for namespaced types).
    pub(crate) fn path(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", segment(&self.version))
        } else {
            format!("/apis/{}/{}", segment(&self.group), segment(&self.version))
        };
        match namespace {
            Some(ns) => format!("{base}/namespaces/{}/{}", segment(ns), self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// The URL of one object.
    pub(crate) fn item_path(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{}", self.path(namespace), segment(name))
    }
}

/// The path of a Namespace object.
pub(crate) fn namespace_path(name: &str) -> String {
    format!("/api/v1/namespaces/{}", segment(name))
}

/// The path of a CustomResourceDefinition.
pub(crate) fn crd_path(name: &str) -> String {
    format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}",
        segment(name)
    )
}

async fn call(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
    content_type: &str,
) -> Result<Value, kube::Error> {
    let bytes = match body {
        Some(b) => serde_json::to_vec(b).map_err(kube::Error::SerdeError)?,
        None => Vec::new(),
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(CONTENT_TYPE, content_type)
        .body(bytes)
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(request).await
}

pub(crate) async fn get(client: &Client, path: &str) -> Result<Value, kube::Error> {
    call(client, Method::GET, path, None, JSON).await
}

pub(crate) async fn create(client: &Client, path: &str, obj: &Value) -> Result<Value, kube::Error> {
    call(client, Method::POST, path, Some(obj), JSON).await
}

pub(crate) async fn merge_patch(
    client: &Client,
    path: &str,
    patch: &Value,
) -> Result<Value, kube::Error> {
    call(client, Method::PATCH, path, Some(patch), MERGE_PATCH).await
}

pub(crate) async fn replace(
    client: &Client,
    path: &str,
    obj: &Value,
) -> Result<Value, kube::Error> {
    call(client, Method::PUT, path, Some(obj), JSON).await
}

/// HTTP status of an API error, when the server answered.
pub(crate) fn code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether a create failed because the object exists.
pub(crate) fn already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// A short text for an error: the API server's message for API errors.
pub(crate) fn text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
        other => hawser_core::errors::chain_text(other),
    }
}
