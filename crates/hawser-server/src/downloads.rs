//! The download listener: the files of `filesystem` storage locations, served to whoever holds
//! a signed URL (velero-compat §1.6; `docs/storage.md`).
//!
//! A DownloadRequest for an S3, GCS or Azure location gets the store's own pre-signed URL; a
//! local directory has nothing that could check one, so the server serves those files itself on
//! `--download-address` (loopback by default) and signs their URLs with a key it draws at start
//! ([`FileUrls`]). A request is answered:
//! - `403` when the URL is not signed by this process, was changed, or has expired (checked in
//!   constant time before anything is read);
//! - `400` for a key that tries to leave the location (`..`, empty segments);
//! - `404` when the location is gone, is no longer a `filesystem` one, or the file is missing;
//! - `200` with the file streamed, chunk by chunk.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures::TryStreamExt;
use hawser_store::{FileUrls, Provider, UrlRefused};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::locations::{LocationError, Locations};

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// What the listener answers from.
#[derive(Clone)]
pub(crate) struct FileServer {
    pub(crate) urls: Arc<FileUrls>,
    pub(crate) locations: Locations,
}

/// Answers on `listener` until `shutdown`.
pub(crate) async fn serve(listener: TcpListener, server: FileServer, shutdown: CancellationToken) {
    crate::http::accept(listener, "download", shutdown, move |req| {
        let server = server.clone();
        async move { answer(&server, &req).await }
    })
    .await;
}

async fn answer(server: &FileServer, req: &Request<Incoming>) -> Response<Body> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    let target = req
        .uri()
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let file = match server.urls.verify(target, now) {
        Ok(file) => file,
        Err(refused) => {
            tracing::info!(reason = refused.category(), "download refused");
            let code = match refused {
                UrlRefused::UnsafeKey => StatusCode::BAD_REQUEST,
                UrlRefused::Malformed => StatusCode::NOT_FOUND,
                UrlRefused::BadSignature | UrlRefused::Expired => StatusCode::FORBIDDEN,
            };
            return text(code, &format!("{refused}\n"));
        }
    };
    let location = match server.locations.open_named(&file.location).await {
        Ok(location) if location.provider() == Provider::Filesystem => location,
        Ok(_) | Err(LocationError::NotFound { .. }) => {
            return text(StatusCode::NOT_FOUND, "file not found\n");
        }
        Err(e) => {
            tracing::warn!(location = %file.location, error = %e.full_message(), "a download's location cannot be opened");
            return text(
                StatusCode::BAD_GATEWAY,
                "the storage location cannot be opened\n",
            );
        }
    };
    match location.get_stream(&file.key).await {
        Ok(stream) => {
            let frames = stream
                .map_ok(Frame::data)
                .map_err(|e| std::io::Error::other(e.full_message()));
            let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/octet-stream"),
            );
            response
        }
        Err(e) if e.is_not_found() => text(StatusCode::NOT_FOUND, "file not found\n"),
        Err(e) => {
            tracing::warn!(key = %file.key, error = %e.full_message(), "reading a download failed");
            text(StatusCode::BAD_GATEWAY, "the file cannot be read\n")
        }
    }
}

fn text(code: StatusCode, body: &str) -> Response<Body> {
    let full = Full::new(Bytes::from(body.to_owned())).map_err(|never: Infallible| match never {});
    let mut r = Response::new(BodyExt::boxed_unsync(full));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    r
}
