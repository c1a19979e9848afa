//! Durability of the filesystem provider.
//!
//! `object_store`'s `LocalFileSystem` writes each object to a temporary file and renames it into
//! place, but never calls fsync: after a power loss an object that was reported stored can be
//! missing or empty. [`Synced`] wraps it so that an upload (a single put, or the completion of a
//! multipart upload) answers only once the file's data and every directory from the file's up
//! to the bucket directory are on disk. A backup's archive is therefore durable before
//! `velero-backup.json` is written, and the record before it counts as committed.
//!
//! The same step makes what is stored private to the server's user: each file 0600 and each
//! directory between it and the bucket directory 0700 (`LocalFileSystem` creates them with the
//! process's umask). The bucket directory, created 0700, keeps others out in the meantime.
//!
//! Written here because `object_store` offers no fsync option and no other crate wraps it so.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// A `LocalFileSystem` whose uploads are on disk when they answer (see the module docs).
#[derive(Debug)]
pub(crate) struct Synced {
    inner: Arc<LocalFileSystem>,
    /// The bucket directory: the topmost directory synced.
    root: PathBuf,
    /// Files synced so far.
    synced: Arc<AtomicU64>,
}

impl Synced {
    pub(crate) fn new(inner: LocalFileSystem, root: PathBuf) -> Self {
        Self {
            inner: Arc::new(inner),
            root,
            synced: Arc::default(),
        }
    }

    #[cfg(test)]
    fn synced_files(&self) -> u64 {
        self.synced.load(Ordering::SeqCst)
    }
}

/// fsyncs the file of `location` and the directories from its parent up to `root`, after
/// restricting them to the server's user.
async fn sync(
    store: &LocalFileSystem,
    root: PathBuf,
    location: &Path,
    synced: &AtomicU64,
) -> object_store::Result<()> {
    let file = store.path_to_filesystem(location)?;
    let done = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        restrict(&file, 0o600)?;
        std::fs::File::open(&file)?.sync_all()?;
        let mut dir = file.parent();
        while let Some(d) = dir {
            if d != root {
                restrict(d, 0o700)?;
            }
            std::fs::File::open(d)?.sync_all()?;
            if d == root {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))
    .and_then(|r| r);
    done.map_err(|source| object_store::Error::Generic {
        store: "filesystem",
        source: Box::new(source),
    })?;
    synced.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Sets the permission bits of `path` to `mode` unless they already are.
#[cfg(unix)]
fn restrict(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::metadata(path)?.permissions();
    if current.mode() & 0o7777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn restrict(_path: &std::path::Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

impl fmt::Display for Synced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Synced({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Synced {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let result = self.inner.put_opts(location, payload, opts).await?;
        sync(&self.inner, self.root.clone(), location, &self.synced).await?;
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(SyncedUpload {
            upload,
            store: self.inner.clone(),
            root: self.root.clone(),
            location: location.clone(),
            synced: self.synced.clone(),
        }))
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
        self.inner.copy_opts(from, to, options).await?;
        sync(&self.inner, self.root.clone(), to, &self.synced).await
    }
}

/// A multipart upload whose completion answers once the file is on disk.
#[derive(Debug)]
struct SyncedUpload {
    upload: Box<dyn MultipartUpload>,
    store: Arc<LocalFileSystem>,
    root: PathBuf,
    location: Path,
    synced: Arc<AtomicU64>,
}

#[async_trait]
impl MultipartUpload for SyncedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.upload.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let result = self.upload.complete().await?;
        sync(&self.store, self.root.clone(), &self.location, &self.synced).await?;
        Ok(result)
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.upload.abort().await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use object_store::{ObjectStoreExt, WriteMultipart};

    use super::*;

    #[tokio::test]
    async fn every_upload_is_synced_before_it_answers() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let store = Synced::new(
            LocalFileSystem::new_with_prefix(&root).unwrap(),
            root.clone(),
        );

        let record = Path::from("backups/b1/velero-backup.json");
        store
            .put(&record, PutPayload::from_static(b"{}"))
            .await
            .unwrap();
        assert_eq!(store.synced_files(), 1);

        let archive = Path::from("backups/b1/b1.tar.gz");
        let upload = store.put_multipart(&archive).await.unwrap();
        let mut writer = WriteMultipart::new_with_chunk_size(upload, 5);
        writer.write(b"0123456789abcdef");
        assert_eq!(store.synced_files(), 1, "synced before completion");
        writer.finish().await.unwrap();
        assert_eq!(store.synced_files(), 2);

        let stored = store.get(&archive).await.unwrap().bytes().await.unwrap();
        assert_eq!(&stored[..], b"0123456789abcdef");
        let mode = |path: &std::path::Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777
        };
        for file in ["backups/b1/velero-backup.json", "backups/b1/b1.tar.gz"] {
            assert_eq!(mode(&root.join(file)), 0o600, "{file}");
        }
        for dir in ["backups", "backups/b1"] {
            assert_eq!(mode(&root.join(dir)), 0o700, "{dir}");
        }

        // An aborted upload is not synced (nothing is stored).
        let mut upload = store
            .put_multipart(&Path::from("backups/b2/b2.tar.gz"))
            .await
            .unwrap();
        upload.abort().await.unwrap();
        assert_eq!(store.synced_files(), 2);
    }
}
