//! The raw API requests the engines make (get, create, merge patch, replace, paged LIST), and
//! how their errors are read.
//!
//! Every request is retried in hawser's one retry loop ([`hawser_core::retry`]) for up to a
//! budget ([`RETRY_BUDGET`] unless the engine's options say otherwise) with capped exponential
//! backoff (10 ms doubling to 5 s, with jitter),
//! stretched to the wait a `Retry-After` header (seconds or an HTTP date) or the Status body's
//! `retryAfterSeconds` asks for:
//! - reads (a GET, a page of a LIST) while the API server is unreachable or answers 429 or 5xx:
//!   one overloaded answer does not cost a backup a type or a restore a check;
//! - writes (create, replace, merge patch) only after 429, which the API server answers before
//!   it processes a request (priority and fairness shedding load), so sending it again cannot
//!   apply it twice. Other failed writes are the engines' to judge per item.
//!
//! Requests are sent with [`Client::send`] rather than `Client::request`, because `kube::Error`
//! keeps no response headers.

use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hawser_core::backoff::{Backoff, DeadlinePolicy};
use hawser_core::retry::{self, Verdict};
use http::Method;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http_body_util::BodyExt;
use kube::Client;
use kube::core::Status;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::path::page_url;

/// How long a request is retried (see the module docs), unless the engine's options say
/// otherwise (the server passes `--resource-timeout`).
pub const RETRY_BUDGET: Duration = Duration::from_secs(120);

/// A request that did not succeed, with the wait the server asked for.
#[derive(Debug)]
pub struct Failure {
    /// `kube::Error::Api` with the answer's Status (one built from the code and text when the
    /// body is not a Status), or the error that kept an answer from arriving.
    pub error: kube::Error,
    /// What `Retry-After` (header first, then the Status' `details.retryAfterSeconds`) asked for.
    pub retry_after: Option<Duration>,
}

impl Failure {
    /// Whether the API server refused the request before processing it (429).
    #[must_use]
    pub fn is_shed(&self) -> bool {
        matches!(&self.error, kube::Error::Api(status) if status.code == 429)
    }

    /// Whether trying again may help (see [`is_transient`]).
    #[must_use]
    pub fn is_transient(&self) -> bool {
        is_transient(&self.error)
    }
}

/// Whether trying a request again may help: no answer, 429, or a 5xx (not 501, which never
/// changes).
#[must_use]
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 429 || (status.code >= 500 && status.code != 501)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Sends `request` once; the body of a successful answer, or the error with its `Retry-After`
/// (an HTTP date is measured from `now`).
///
/// # Errors
/// [`Failure`] for a transport error or an answer that is not a success.
pub async fn send(
    client: &Client,
    request: http::Request<Vec<u8>>,
    now: jiff::Timestamp,
) -> Result<Bytes, Failure> {
    let plain = |error| Failure {
        error,
        retry_after: None,
    };
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(plain)?;
    let code = response.status();
    let header_wait = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| hawser_core::retry_after::parse_retry_after(v, now));
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(plain)?
        .to_bytes();
    if code.is_success() {
        return Ok(body);
    }
    let status = serde_json::from_slice::<Status>(&body).unwrap_or_else(|_| {
        Status::failure(String::from_utf8_lossy(&body).trim(), "").with_code(code.as_u16())
    });
    let error = kube::Error::Api(status.boxed());
    Err(Failure {
        retry_after: header_wait.or_else(|| retry_after_of(&error)),
        error,
    })
}

/// The wait an API error's Status asks for (`details.retryAfterSeconds`), when it asks for one.
/// A `kube::Error` keeps no headers: where the `Retry-After` header can be read, [`send`] reads
/// it first.
#[must_use]
pub fn retry_after_of(error: &kube::Error) -> Option<Duration> {
    let kube::Error::Api(status) = error else {
        return None;
    };
    status
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(u64::from(s)))
}

/// `request` sent until it succeeds, fails in a way `retry` does not accept, or `budget` is
/// spent (see the module docs), its answer decoded as `T`. A zero budget sends it once.
async fn exchange<T: DeserializeOwned>(
    client: &Client,
    request: http::Request<Vec<u8>>,
    budget: Duration,
    retry: fn(&Failure) -> bool,
) -> Result<T, kube::Error> {
    let policy = DeadlinePolicy {
        backoff: Backoff::default(),
        timeout: budget,
        request_timeout: budget,
        min_request_timeout: Duration::ZERO,
    };
    let classify = |failure: &Failure| {
        if retry(failure) {
            tracing::debug!(method = %request.method(), uri = %request.uri(), error = %failure.error, "request failed; it is tried again while the budget allows");
            Verdict::Again(failure.retry_after)
        } else {
            Verdict::Stop
        }
    };
    let body = retry::until_deadline(
        &policy,
        jitter_rng(),
        Instant::now(),
        // The engines' work is aborted as a whole when the server stops or steps down.
        std::future::pending(),
        classify,
        |_, _| send(client, request.clone(), jiff::Timestamp::now()),
    )
    .await
    .into_result()
    .map_err(|failure| failure.error)?;
    serde_json::from_slice(&body).map_err(kube::Error::SerdeError)
}

/// Whether a failed request of any kind may be tried again, and when (see [`is_transient`]
/// and [`retry_after_of`]): the one classification of API errors outside the status engine.
#[must_use]
pub fn verdict(error: &kube::Error) -> Verdict {
    if is_transient(error) {
        Verdict::Again(retry_after_of(error))
    } else {
        Verdict::Stop
    }
}

/// The jitter of the retry loops outside the status engine: one generator for the process,
/// seeded once and locked only to draw a wait after a failure, so that a request that succeeds
/// costs nothing here.
#[must_use]
pub fn jitter_rng() -> &'static Mutex<StdRng> {
    static RNG: LazyLock<Mutex<StdRng>> =
        LazyLock::new(|| Mutex::new(StdRng::from_rng(&mut rand::rng())));
    &RNG
}

/// Content type of a JSON merge patch.
pub(crate) const MERGE_PATCH: &str = "application/merge-patch+json";
const JSON: &str = "application/json";

/// A write of `body` to `path`, retried after 429 for up to `budget` (see the module docs).
async fn write<T: DeserializeOwned>(
    client: &Client,
    method: Method,
    path: &str,
    body: &Value,
    content_type: &str,
    budget: Duration,
) -> Result<T, kube::Error> {
    let bytes = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(CONTENT_TYPE, content_type)
        .body(bytes)
        .map_err(kube::Error::HttpError)?;
    exchange(client, request, budget, Failure::is_shed).await
}

/// GET `path`, retried as a read for up to `budget` (see the module docs).
pub(crate) async fn get(
    client: &Client,
    path: &str,
    budget: Duration,
) -> Result<Value, kube::Error> {
    let request = http::Request::get(path)
        .header(CONTENT_TYPE, JSON)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    exchange(client, request, budget, Failure::is_transient).await
}

/// [`get`], with `None` when the object is not there (404).
pub(crate) async fn get_opt(
    client: &Client,
    path: &str,
    budget: Duration,
) -> Result<Option<Value>, kube::Error> {
    match get(client, path, budget).await {
        Ok(object) => Ok(Some(object)),
        Err(e) if code(&e) == Some(404) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The `data` of ConfigMap `namespace/name` (values that are not strings left out; empty when
/// it has none), `None` when it does not exist; read as [`get`] reads.
///
/// # Errors
/// The API server did not answer within `budget`, or refused the read.
pub async fn config_map_data(
    client: &Client,
    namespace: &str,
    name: &str,
    budget: Duration,
) -> Result<Option<std::collections::BTreeMap<String, String>>, kube::Error> {
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        super::path::encode(namespace),
        super::path::encode(name)
    );
    Ok(get_opt(client, &path, budget).await?.map(|config| {
        config
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect()
    }))
}

/// POST `obj` to the collection `path`, retried after 429 for up to `budget`; the created
/// object as `T` (`serde::de::IgnoredAny` when it is not wanted: checked as JSON, not kept).
pub(crate) async fn create<T: DeserializeOwned>(
    client: &Client,
    path: &str,
    obj: &Value,
    budget: Duration,
) -> Result<T, kube::Error> {
    write(client, Method::POST, path, obj, JSON, budget).await
}

/// A JSON merge patch of `path`, retried after 429 for up to `budget`.
pub(crate) async fn merge_patch(
    client: &Client,
    path: &str,
    patch: &Value,
    budget: Duration,
) -> Result<Value, kube::Error> {
    write(client, Method::PATCH, path, patch, MERGE_PATCH, budget).await
}

/// PUT `obj` at `path`, retried after 429 for up to `budget`.
pub(crate) async fn replace(
    client: &Client,
    path: &str,
    obj: &Value,
    budget: Duration,
) -> Result<Value, kube::Error> {
    write(client, Method::PUT, path, obj, JSON, budget).await
}

/// DELETE `path`, retried like a read for up to `budget` (deleting twice is answered 404, which
/// callers take as done).
pub(crate) async fn delete(
    client: &Client,
    path: &str,
    budget: Duration,
) -> Result<(), kube::Error> {
    let request = http::Request::delete(path)
        .header(CONTENT_TYPE, JSON)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    exchange::<Value>(client, request, budget, Failure::is_transient)
        .await
        .map(drop)
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

/// One page of a LIST, its items as `T` (`Box<RawValue>`: their JSON text as sent).
#[derive(Debug, Deserialize)]
pub(crate) struct ListPage<T = Value> {
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default = "Vec::new")]
    pub items: Vec<T>,
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

/// One page of a LIST at `url` (built with [`page_url`]), retried as a read for up to `budget`.
pub(crate) async fn get_page<T: DeserializeOwned>(
    client: &Client,
    url: &str,
    budget: Duration,
) -> Result<ListPage<T>, kube::Error> {
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    exchange(client, request, budget, Failure::is_transient).await
}

/// Every object of a LIST, page by page (for small collections such as namespaces).
pub(crate) async fn list_all(
    client: &Client,
    path: &str,
    page_size: u32,
    budget: Duration,
) -> Result<Vec<Value>, kube::Error> {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let url = page_url(path, page_size, "", token.as_deref());
        let page = get_page::<Value>(client, &url, budget).await?;
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
