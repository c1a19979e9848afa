//! The filesystem provider's store: durable uploads, private files, and no symbolic link below
//! the bucket directory ever followed.
//!
//! **Durability.**
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
//! **Links.** Whoever can write the directory tree is not trusted more than whoever can write a
//! bucket: a symbolic link below the bucket directory (`backups/b1` pointing at `/etc`, or a
//! file pointing anywhere) would let the download listener serve any file and garbage
//! collection delete any directory's files. `LocalFileSystem` follows links, so every request is
//! checked first: a read, write, copy or delete of an object whose path below the bucket
//! directory passes through a link (the object itself included) fails with an error naming the
//! link, and a listing leaves such objects out. The checks are `lstat` calls, made inline.
//!
//! Written here because `object_store` offers no fsync option, follows links, and no other
//! crate wraps it so.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use futures::StreamExt as _;
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

/// The first symbolic link on the way from `root` to `file` (`file` itself included), if any.
/// A component that does not exist ends the walk: nothing below it can be a link yet.
fn link_below(root: &std::path::Path, file: &std::path::Path) -> Option<PathBuf> {
    let relative = file.strip_prefix(root).ok()?;
    let mut path = root.to_path_buf();
    for part in relative.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => return Some(path),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// `Ok` when the path of `location` below `root` passes through no symbolic link.
fn no_link(
    store: &LocalFileSystem,
    root: &std::path::Path,
    location: &Path,
) -> object_store::Result<()> {
    let file = store.path_to_filesystem(location)?;
    match link_below(root, &file) {
        None => Ok(()),
        Some(link) => Err(object_store::Error::Generic {
            store: "filesystem",
            source: format!(
                "`{}` is a symbolic link below the bucket directory; links are not followed",
                link.display()
            )
            .into(),
        }),
    }
}

/// Whether a listed object's path passes through no symbolic link (logged when it does).
fn listable(store: &LocalFileSystem, root: &std::path::Path, location: &Path) -> bool {
    match no_link(store, root, location) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(object = %location, error = %e, "object left out of a listing");
            false
        }
    }
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
        no_link(&self.inner, &self.root, location)?;
        let result = self.inner.put_opts(location, payload, opts).await?;
        sync(&self.inner, self.root.clone(), location, &self.synced).await?;
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        no_link(&self.inner, &self.root, location)?;
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
        no_link(&self.inner, &self.root, location)?;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let (store, root) = (self.inner.clone(), self.root.clone());
        let checked = locations
            .map(move |location| {
                let location = location?;
                no_link(&store, &root, &location).map(|()| location)
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (store, root) = (self.inner.clone(), self.root.clone());
        self.inner
            .list(prefix)
            .filter(move |meta| {
                let keep = meta
                    .as_ref()
                    .map_or(true, |meta| listable(&store, &root, &meta.location));
                std::future::ready(keep)
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        listed
            .objects
            .retain(|meta| listable(&self.inner, &self.root, &meta.location));
        listed
            .common_prefixes
            .retain(|dir| listable(&self.inner, &self.root, dir));
        Ok(listed)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        no_link(&self.inner, &self.root, from)?;
        no_link(&self.inner, &self.root, to)?;
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

    /// A bucket directory (canonical) and a directory beside it, under `dir`.
    fn bucket_and_outside(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let root = dir.join("bucket");
        std::fs::create_dir(&root).unwrap();
        let outside = dir.join("outside");
        std::fs::create_dir(&outside).unwrap();
        (root.canonicalize().unwrap(), outside)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Whatever the path and wherever a link sits on it (a directory or the object itself,
        /// pointing inside or outside the bucket), `link_below` names exactly the first link
        /// on the way, and a path beside it passes.
        #[test]
        fn the_first_link_on_any_path_is_found(
            parts in proptest::collection::vec("[a-c]{1,2}", 1..5),
            at in 0usize..6,
            inside in proptest::bool::ANY,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (root, outside) = bucket_and_outside(dir.path());
            let target = if inside { root.clone() } else { outside.clone() };
            let file = parts.iter().fold(root.clone(), |p, part| p.join(part));
            let link = (at < parts.len()).then(|| {
                let at_link = parts[..=at].iter().fold(root.clone(), |p, part| p.join(part));
                std::fs::create_dir_all(at_link.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(&target, &at_link).unwrap();
                at_link
            });
            if link.is_none() {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, b"x").unwrap();
            }
            proptest::prop_assert_eq!(link_below(&root, &file), link.clone());
            // A sibling path that does not pass the link is free of it.
            let beside = root.join("zz").join("object");
            proptest::prop_assert_eq!(link_below(&root, &beside), None);
            // Nothing outside the bucket was touched.
            proptest::prop_assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        }
    }

    #[tokio::test]
    async fn no_symbolic_link_below_the_bucket_is_followed() {
        use futures::TryStreamExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = bucket_and_outside(dir.path());
        std::fs::write(outside.join("secret"), b"not the bucket's").unwrap();
        let store = Synced::new(
            LocalFileSystem::new_with_prefix(&root).unwrap(),
            root.clone(),
        );
        store
            .put(
                &Path::from("backups/ok/velero-backup.json"),
                PutPayload::from_static(b"{}"),
            )
            .await
            .unwrap();
        // A directory link and a file link, at two depths.
        std::os::unix::fs::symlink(&outside, root.join("backups/evil")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("backups/ok/leak")).unwrap();

        for linked in ["backups/evil/secret", "backups/ok/leak"] {
            let path = Path::from(linked);
            let read = store.get(&path).await.unwrap_err().to_string();
            assert!(read.contains("symbolic link"), "{linked}: {read}");
            assert!(store.delete(&path).await.is_err(), "{linked} deleted");
            assert!(
                store
                    .put(&path, PutPayload::from_static(b"x"))
                    .await
                    .is_err(),
                "{linked} written"
            );
        }
        assert!(
            store
                .put(
                    &Path::from("backups/evil/new"),
                    PutPayload::from_static(b"x")
                )
                .await
                .is_err()
        );
        let listed: Vec<String> = store
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed, ["backups/ok/velero-backup.json"]);
        let shallow = store
            .list_with_delimiter(Some(&Path::from("backups")))
            .await
            .unwrap();
        let prefixes: Vec<String> = shallow
            .common_prefixes
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(prefixes, ["backups/ok"]);
        let deep = store
            .list_with_delimiter(Some(&Path::from("backups/ok")))
            .await
            .unwrap();
        let objects: Vec<String> = deep
            .objects
            .iter()
            .map(|m| m.location.to_string())
            .collect();
        assert_eq!(objects, ["backups/ok/velero-backup.json"]);
        // What the links point at is untouched; the bucket's own object is readable.
        assert_eq!(
            std::fs::read(outside.join("secret")).unwrap(),
            b"not the bucket's"
        );
        let ok = store
            .get(&Path::from("backups/ok/velero-backup.json"))
            .await
            .unwrap();
        assert_eq!(&ok.bytes().await.unwrap()[..], b"{}");
    }
}
