//! Streaming upload of large artifacts with bounded memory.
//!
//! [`ArtifactWriter`] fills one part of [`LocationOptions::part_size`](crate::LocationOptions)
//! bytes at a time and keeps at most `max_in_flight_parts` parts uploading; `write` waits while
//! that many are in flight. An artifact smaller than one part is stored with a single request;
//! a larger one with a multipart upload that becomes visible only when [`ArtifactWriter::finish`]
//! completes it. An unfinished writer aborts its upload, so a failed or abandoned artifact never
//! appears as an object.

use object_store::buffered::BufWriter;
use object_store::path::Path;
use tokio::io::AsyncWriteExt;

use crate::error::{FailureKind, StoreError};
use crate::location::Location;

/// An upload in progress. Obtain one with [`Location::writer`].
#[derive(Debug)]
pub struct ArtifactWriter {
    inner: Option<BufWriter>,
    key: String,
    written: u64,
}

impl ArtifactWriter {
    pub(crate) fn new(location: &Location, key: &str, path: Path) -> Self {
        let options = location.options();
        let inner = BufWriter::with_capacity(location.store().clone(), path, options.part_size)
            .with_max_concurrency(options.max_in_flight_parts.max(1))
            .with_tags(location.tags().clone());
        Self {
            inner: Some(inner),
            key: key.to_owned(),
            written: 0,
        }
    }

    /// The key being written.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Bytes accepted so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends bytes; waits while the in-flight part limit is reached.
    ///
    /// # Errors
    /// [`StoreError::Storage`] when a part upload failed; the upload is then aborted.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let Some(inner) = self.inner.as_mut() else {
            return Err(StoreError::Abandoned {
                key: self.key.clone(),
            });
        };
        match inner.write_all(bytes).await {
            Ok(()) => {
                self.written += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                let error = io_to_store("upload", &self.key, e);
                self.abort_inner().await;
                Err(error)
            }
        }
    }

    /// Completes the upload; only now does the object exist. Returns the artifact's size.
    ///
    /// # Errors
    /// [`StoreError::Storage`] when the last part or the completion failed (the object then does
    /// not exist).
    pub async fn finish(mut self) -> Result<u64, StoreError> {
        let Some(inner) = self.inner.as_mut() else {
            return Err(StoreError::Abandoned {
                key: self.key.clone(),
            });
        };
        match inner.shutdown().await {
            Ok(()) => {
                self.inner = None;
                Ok(self.written)
            }
            Err(e) => {
                // A failed shutdown has consumed the writer (object_store's writer panics if
                // asked to abort now), but object_store aborted the multipart upload itself before
                // returning the error: the parts already sent are removed with it
                // (`tests/upload_faults.rs` checks that no upload is left open). Only when that
                // abort fails too are they left to the store's own cleanup.
                self.inner = None;
                let error = io_to_store("upload", &self.key, e);
                tracing::warn!(key = %self.key, "completing an upload failed; the upload was aborted");
                Err(error)
            }
        }
    }

    /// Abandons the upload and removes the parts already sent.
    pub async fn abort(mut self) {
        self.abort_inner().await;
    }

    async fn abort_inner(&mut self) {
        if let Some(mut inner) = self.inner.take()
            && let Err(e) = inner.abort().await
        {
            tracing::warn!(key = %self.key, error = %crate::error::chain_text(&e), "aborting an upload failed; the store may keep its parts until its own cleanup");
        }
    }
}

impl Drop for ArtifactWriter {
    fn drop(&mut self) {
        // Dropped without `finish`: the artifact is incomplete, abort the upload in the background.
        if let Some(mut inner) = self.inner.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let key = std::mem::take(&mut self.key);
            handle.spawn(async move {
                if let Err(e) = inner.abort().await {
                    tracing::warn!(%key, error = %crate::error::chain_text(&e), "aborting a dropped upload failed");
                }
            });
        }
    }
}

/// Turns the `io::Error` of `BufWriter` back into the store error it carries.
fn io_to_store(operation: &'static str, key: &str, error: std::io::Error) -> StoreError {
    let source = match error.into_inner() {
        Some(inner) => match inner.downcast::<object_store::Error>() {
            Ok(store_error) => *store_error,
            Err(other) => object_store::Error::Generic {
                store: "upload",
                source: other,
            },
        },
        None => object_store::Error::Generic {
            store: "upload",
            source: Box::new(std::io::Error::other("I/O error without detail")),
        },
    };
    StoreError::Storage {
        operation,
        key: key.to_owned(),
        kind: FailureKind::of(&source),
        source,
    }
}
