//! Storage failures on purpose, for tests (cargo feature `testing`).
//!
//! A [`StoreFaults`] table is installed on a [`Location`](crate::Location) with
//! [`Location::with_faults`](crate::Location::with_faults); from then on every upload the
//! location starts (a multipart upload of a large artifact, or the single request of a small
//! object such as `velero-backup.json`) is checked against the table's [`StoreFault`]s. A
//! matching fault lets the first bytes or parts of the upload through to the real store and fails
//! the request that would cross its limit, and every later request of that upload, with a
//! connection reset, as a storage endpoint that went away mid-upload does. Nothing else changes:
//! reads, listings, deletes and the abort of a failed upload reach the real store, so a test sees
//! exactly what the code under test left behind.
//!
//! Works the same for every provider (the fault sits between the location and its
//! `object_store` client).
//!
//! ```
//! # use hawser_store::faults::{StoreFault, StoreFaults};
//! let faults = StoreFaults::default();
//! // The archive upload fails once 1 MiB has been sent; the commit marker cannot be written.
//! faults.add(StoreFault::on(".tar.gz").after_bytes(1 << 20));
//! faults.add(StoreFault::on("velero-backup.json"));
//! # let _ = faults;
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// When a matching upload fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// The request that would take the upload past this many bytes fails.
    Bytes(u64),
    /// The first this-many parts are stored; the next fails. A single-request upload is one
    /// part.
    Parts(u32),
}

/// One injected failure: which uploads it catches and how far they get.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct StoreFault {
    key_suffix: String,
    limit: Limit,
    times: Option<u32>,
    skip: u32,
}

impl StoreFault {
    /// Uploads of objects whose full path (prefix included) ends with `key_suffix` fail at
    /// their first request, until a limit below says otherwise. `""` catches every upload.
    pub fn on(key_suffix: impl Into<String>) -> Self {
        Self {
            key_suffix: key_suffix.into(),
            limit: Limit::Parts(0),
            times: None,
            skip: 0,
        }
    }

    /// Lets `bytes` bytes of each caught upload through; the part (or single request) that
    /// would cross that mark fails, and so does everything after it.
    pub fn after_bytes(mut self, bytes: u64) -> Self {
        self.limit = Limit::Bytes(bytes);
        self
    }

    /// Lets `parts` parts of each caught upload through; the next part fails, and so does
    /// everything after it. A small object written in a single request counts as one part.
    pub fn after_parts(mut self, parts: u32) -> Self {
        self.limit = Limit::Parts(parts);
        self
    }

    /// Lets the next `uploads` matching uploads through untouched before catching any.
    pub fn after_uploads(mut self, uploads: u32) -> Self {
        self.skip = uploads;
        self
    }

    /// Catches only the next `uploads` matching uploads; later ones succeed.
    pub fn times(mut self, uploads: u32) -> Self {
        self.times = Some(uploads);
        self
    }

    fn matches(&self, path: &Path) -> bool {
        self.times != Some(0) && path.as_ref().ends_with(&self.key_suffix)
    }
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    faults: Vec<(u64, StoreFault)>,
    /// Requests failed on purpose so far.
    injected: u64,
    /// Bytes of caught uploads that were let through to the real store.
    delivered: u64,
    /// Uploads that a fault caught.
    caught: Vec<String>,
}

/// The faults in force on one or more locations; cheap to clone (clones share the table).
#[derive(Clone, Debug, Default)]
pub struct StoreFaults {
    table: Arc<Mutex<Table>>,
}

impl StoreFaults {
    fn with<T>(&self, f: impl FnOnce(&mut Table) -> T) -> T {
        // Only plain counters and lists live behind the lock; a panic elsewhere leaves them usable.
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut table)
    }

    /// Puts `fault` in force; returns its id for [`remove`](Self::remove).
    pub fn add(&self, fault: StoreFault) -> u64 {
        self.with(|t| {
            t.next_id += 1;
            let id = t.next_id;
            t.faults.push((id, fault));
            id
        })
    }

    /// Takes the fault `id` out of force (uploads it already caught keep failing). True when it
    /// was there.
    pub fn remove(&self, id: u64) -> bool {
        self.with(|t| {
            let before = t.faults.len();
            t.faults.retain(|(i, _)| *i != id);
            t.faults.len() != before
        })
    }

    /// Takes every fault out of force.
    pub fn clear(&self) {
        self.with(|t| t.faults.clear());
    }

    /// How many requests have been failed on purpose.
    #[must_use]
    pub fn injected(&self) -> u64 {
        self.with(|t| t.injected)
    }

    /// Bytes of caught uploads that reached the real store before (or instead of) the failure.
    #[must_use]
    pub fn delivered(&self) -> u64 {
        self.with(|t| t.delivered)
    }

    /// Full paths of the uploads a fault caught, in order (an upload the fault let finish,
    /// because it stayed under the limit, is listed too).
    #[must_use]
    pub fn caught(&self) -> Vec<String> {
        self.with(|t| t.caught.clone())
    }

    /// The limit for a new upload of `path`, consuming one use of the fault that catches it.
    fn arm(&self, path: &Path) -> Option<Limit> {
        self.with(|t| {
            let (_, fault) = t.faults.iter_mut().find(|(_, f)| f.matches(path))?;
            if fault.skip > 0 {
                fault.skip -= 1;
                return None;
            }
            if let Some(n) = fault.times.as_mut() {
                *n -= 1;
            }
            let limit = fault.limit;
            t.caught.push(path.to_string());
            Some(limit)
        })
    }

    fn count_injection(&self) {
        self.with(|t| t.injected += 1);
    }

    fn count_delivery(&self, bytes: u64) {
        self.with(|t| t.delivered += bytes);
    }
}

/// The failure a caught request ends with: what a client sees when the endpoint resets the
/// connection.
fn injected_error(path: &str, what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "StoreFaults",
        source: Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            format!("connection reset (injected storage fault: {what} of {path})"),
        )),
    }
}

/// An object store that fails uploads as its [`StoreFaults`] say and passes everything else
/// through.
#[derive(Debug)]
pub(crate) struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: StoreFaults,
}

impl FaultyStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, faults: StoreFaults) -> Self {
        Self { inner, faults }
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let len = payload.content_length() as u64;
        let fails = match self.faults.arm(location) {
            None => return self.inner.put_opts(location, payload, opts).await,
            Some(Limit::Bytes(n)) => len > n,
            Some(Limit::Parts(n)) => n == 0,
        };
        if fails {
            self.faults.count_injection();
            return Err(injected_error(
                location.as_ref(),
                "the single-request upload",
            ));
        }
        self.faults.count_delivery(len);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let limit = self.faults.arm(location);
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(match limit {
            None => upload,
            Some(limit) => Box::new(FaultyUpload {
                inner: upload,
                path: location.to_string(),
                limit,
                bytes: 0,
                parts: 0,
                broken: false,
                faults: self.faults.clone(),
            }),
        })
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload that a fault caught.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    path: String,
    limit: Limit,
    /// Bytes and parts handed to the real upload.
    bytes: u64,
    parts: u32,
    /// A request failed: the connection is gone, later parts and the completion fail too.
    broken: bool,
    faults: StoreFaults,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let len = data.content_length() as u64;
        let crosses = match self.limit {
            Limit::Bytes(n) => self.bytes + len > n,
            Limit::Parts(n) => self.parts >= n,
        };
        if self.broken || crosses {
            self.broken = true;
            self.faults.count_injection();
            let error = injected_error(&self.path, &format!("part {}", self.parts + 1));
            return Box::pin(async move { Err(error) });
        }
        self.bytes += len;
        self.parts += 1;
        self.faults.count_delivery(len);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if self.broken {
            self.faults.count_injection();
            return Err(injected_error(&self.path, "the completion"));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}
