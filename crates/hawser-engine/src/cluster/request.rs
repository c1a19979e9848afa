//! The raw API requests the engines make (get, create, merge patch, replace, paged LIST), and
//! how their errors are read.

use http::Method;
use http::header::CONTENT_TYPE;
use kube::Client;
use serde::Deserialize;
use serde_json::Value;

use super::path::page_url;

/// Content type of a JSON merge patch.
pub(crate) const MERGE_PATCH: &str = "application/merge-patch+json";
const JSON: &str = "application/json";

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

/// One page of a LIST.
#[derive(Debug, Deserialize)]
pub(crate) struct ListPage {
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<Value>,
}

/// The list metadata the engines read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListMeta {
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
    #[serde(default)]
    pub remaining_item_count: Option<i64>,
}

/// One page of a LIST at `url` (built with [`page_url`]).
pub(crate) async fn get_page(client: &Client, url: &str) -> Result<ListPage, kube::Error> {
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request::<ListPage>(request).await
}

/// Every object of a LIST, page by page (for small collections such as namespaces).
pub(crate) async fn list_all(
    client: &Client,
    path: &str,
    page_size: u32,
) -> Result<Vec<Value>, kube::Error> {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = get_page(client, &page_url(path, page_size, "", token.as_deref())).await?;
        items.extend(page.items);
        match page.metadata.continue_token.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok(items),
        }
    }
}

/// The continue token a 410 `Expired` answer offers for going on with a LIST.
pub(crate) fn fresh_token(error: &kube::Error) -> Option<String> {
    match error {
        kube::Error::Api(status) if status.code == 410 => status
            .metadata
            .as_ref()
            .and_then(|m| m.continue_.clone())
            .filter(|t| !t.is_empty()),
        _ => None,
    }
}
