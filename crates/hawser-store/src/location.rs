//! [`Location`]: one BackupStorageLocation opened as an object store, with keys relative to its
//! prefix.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use hawser_core::layout::Layout;
use object_store::path::Path;
use object_store::signer::{Method, Signer};
use object_store::{ObjectStore, ObjectStoreExt, PutOptions, PutPayload, TagSet};

use crate::error::{ConfigError, StoreError};
use crate::policy::LocationPolicy;
use crate::provider;
use crate::signed::FileUrls;
use crate::spec::Provider;
use crate::spec::{AccessMode, LocationOptions, LocationSpec};
use crate::stream::ArtifactWriter;

#[path = "location_records.rs"]
mod records;

/// A storage location ready for I/O. Cheap to clone (the client is shared).
///
/// Every key is relative to `spec.objectStorage.prefix`: `backups/b1/velero-backup.json` is
/// stored at `<prefix>/backups/b1/velero-backup.json` in the bucket. The keys of
/// `hawser_core::layout::Layout::new(None)` are exactly such relative keys.
#[derive(Clone, Debug)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    root: Path,
    provider: Provider,
    bucket: String,
    read_only: bool,
    options: LocationOptions,
    /// What signs download URLs (aws, gcp, azure).
    signer: Option<Arc<dyn Signer>>,
    /// Who serves this location's files, and the name they know it by (`filesystem`).
    served_by: Option<(Arc<FileUrls>, String)>,
    /// Tags of every object written (`aws`'s `tagging`); empty otherwise.
    tags: TagSet,
    /// The key backup archives are sealed with ([`crate::crypt`]), when the location names one.
    archive_key: Option<crate::crypt::ArchiveKey>,
}

/// Keys are relative to the prefix: they are the keys of a layout without root.
static LAYOUT: std::sync::LazyLock<Layout> = std::sync::LazyLock::new(|| Layout::new(None));

/// What [`Location::head`] reports about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Size in bytes.
    pub size: u64,
    /// The store's entity tag, when it has one (S3: `"<md5>-<parts>"` for multipart uploads).
    pub e_tag: Option<String>,
}

/// What [`Location::list_objects_meta`] reports about each object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedObject {
    /// Its key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// When the store last wrote it.
    pub modified: jiff::Timestamp,
}

/// A stream of an object's bytes.
pub type ByteStream = BoxStream<'static, Result<Bytes, StoreError>>;

impl Location {
    /// Opens the location described by `spec` with default [`LocationOptions`].
    ///
    /// No request is sent; use [`validate`](crate::validate) to check that the location answers.
    ///
    /// # Errors
    /// [`ConfigError`] naming the BSL field that is missing or invalid.
    pub fn new(spec: &LocationSpec) -> Result<Self, ConfigError> {
        Self::with_options(spec, LocationOptions::default())
    }

    /// Opens the location described by `spec` with the given I/O options.
    ///
    /// # Errors
    /// [`ConfigError`] naming the BSL field that is missing or invalid.
    pub fn with_options(
        spec: &LocationSpec,
        options: LocationOptions,
    ) -> Result<Self, ConfigError> {
        Self::with_policy(spec, options, &LocationPolicy::default())
    }

    /// Opens the location described by `spec` within what `policy` allows: a `filesystem` root
    /// among its directories, ambient credentials only when it allows them.
    ///
    /// # Errors
    /// [`ConfigError`] naming the BSL field that is missing or invalid, or what the policy
    /// refuses.
    pub fn with_policy(
        spec: &LocationSpec,
        options: LocationOptions,
        policy: &LocationPolicy,
    ) -> Result<Self, ConfigError> {
        let provider = Provider::parse(&spec.provider)?;
        let root = parse_prefix(spec.prefix.as_deref())?;
        let clients = provider::build(provider, spec, &options, policy)?;
        Ok(Self {
            store: clients.store,
            root,
            provider,
            bucket: spec.bucket.clone(),
            read_only: spec.access_mode == AccessMode::ReadOnly,
            options,
            signer: clients.signer,
            served_by: None,
            tags: clients.tags,
            archive_key: None,
        })
    }

    /// This location with backup archives sealed with `key` ([`Location::archive_writer`]),
    /// and encrypted archives opened with it.
    #[must_use]
    pub fn with_archive_key(mut self, key: crate::crypt::ArchiveKey) -> Self {
        self.archive_key = Some(key);
        self
    }

    /// The archive key, when the location has one.
    #[must_use]
    pub fn archive_key(&self) -> Option<&crate::crypt::ArchiveKey> {
        self.archive_key.as_ref()
    }

    /// This location with its files served through `files` under the name `name` (the
    /// BackupStorageLocation's): what [`download_url`](Self::download_url) of a `filesystem`
    /// location needs. Other providers sign with their own credentials and ignore it.
    #[must_use]
    pub fn served_by(mut self, files: Arc<FileUrls>, name: &str) -> Self {
        self.served_by = Some((files, name.to_owned()));
        self
    }

    /// A URL that lets its holder GET `key` without credentials until `expires_in` has passed:
    /// the store's pre-signed URL (aws, gcp, azure), or for `filesystem` a URL of hawser
    /// server's download listener signed by [`FileUrls`].
    ///
    /// # Errors
    /// [`StoreError::NotSignable`] for a `filesystem` location not [`served_by`](Self::served_by)
    /// anything; [`StoreError::InvalidKey`]; [`StoreError::Storage`] when the store cannot sign
    /// (e.g. GCS without a service-account key).
    pub async fn download_url(
        &self,
        key: &str,
        expires_in: Duration,
    ) -> Result<String, StoreError> {
        let path = self.path(key)?;
        if let Some(signer) = &self.signer {
            let url = signer
                .signed_url(Method::GET, &path, expires_in)
                .await
                .map_err(|e| StoreError::storage("sign", key, e))?;
            return Ok(url.to_string());
        }
        let Some((files, name)) = &self.served_by else {
            return Err(StoreError::NotSignable {
                provider: self.provider.name(),
            });
        };
        let expires = SystemTime::now()
            .checked_add(expires_in)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(u64::MAX, |d| d.as_secs());
        Ok(files.sign(name, key.trim_matches('/'), expires))
    }

    /// The provider.
    #[must_use]
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The bucket (or container, or directory under `config.root`).
    #[must_use]
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The prefix inside the bucket, without leading or trailing slashes (empty for none).
    #[must_use]
    pub fn prefix(&self) -> &str {
        self.root.as_ref()
    }

    /// True for `accessMode: ReadOnly`.
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The I/O options in force.
    #[must_use]
    pub fn options(&self) -> &LocationOptions {
        &self.options
    }

    /// This location with `faults` injected into its uploads (see [`crate::faults`]). Clones of
    /// the returned location share the faults; the original location is unaffected.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn with_faults(mut self, faults: &crate::faults::StoreFaults) -> Self {
        self.store = Arc::new(crate::faults::FaultyStore::new(self.store, faults.clone()));
        self
    }

    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The tags every object written gets.
    pub(crate) fn tags(&self) -> &TagSet {
        &self.tags
    }

    /// The full object path of a key.
    pub(crate) fn path(&self, key: &str) -> Result<Path, StoreError> {
        let key = key.trim_matches('/');
        let full = if self.root.as_ref().is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.root)
        };
        Path::parse(full).map_err(|e| StoreError::InvalidKey {
            key: key.to_owned(),
            reason: e.to_string(),
        })
    }

    /// The key of a full path (the inverse of [`path`](Self::path)).
    fn key_of(&self, path: &Path) -> String {
        match path.prefix_match(&self.root) {
            Some(parts) => parts
                .map(|p| p.as_ref().to_owned())
                .collect::<Vec<_>>()
                .join("/"),
            None => path.to_string(),
        }
    }

    pub(crate) fn check_writable(
        &self,
        operation: &'static str,
        key: &str,
    ) -> Result<(), StoreError> {
        if self.read_only {
            Err(StoreError::ReadOnly {
                operation,
                key: key.to_owned(),
            })
        } else {
            Ok(())
        }
    }

    /// Stores a small object in one request (atomic: readers see all of it or nothing).
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.check_writable("write", key)?;
        let path = self.path(key)?;
        let options = PutOptions {
            tags: self.tags.clone(),
            ..PutOptions::default()
        };
        self.store
            .put_opts(&path, PutPayload::from_bytes(bytes), options)
            .await
            .map_err(|e| StoreError::storage("put", key, e))?;
        Ok(())
    }

    /// Reads a small object whole.
    ///
    /// # Errors
    /// [`StoreError::Storage`] (see [`StoreError::is_not_found`]) or [`StoreError::InvalidKey`].
    pub async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        let path = self.path(key)?;
        let result = self
            .store
            .get(&path)
            .await
            .map_err(|e| StoreError::storage("get", key, e))?;
        result
            .bytes()
            .await
            .map_err(|e| StoreError::storage("get", key, e))
    }

    /// Reads `range` (byte offsets) of an object: one ranged GET.
    ///
    /// # Errors
    /// [`StoreError::Storage`] (see [`StoreError::is_not_found`]; a range past the end is one
    /// too) or [`StoreError::InvalidKey`].
    pub async fn get_range(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, StoreError> {
        let path = self.path(key)?;
        self.store
            .get_range(&path, range)
            .await
            .map_err(|e| StoreError::storage("get", key, e))
    }

    /// Opens an object as a stream of chunks (memory: one chunk at a time).
    ///
    /// # Errors
    /// [`StoreError::Storage`] when the object cannot be opened; later failures arrive in the
    /// stream.
    pub async fn get_stream(&self, key: &str) -> Result<ByteStream, StoreError> {
        let path = self.path(key)?;
        let result = self
            .store
            .get(&path)
            .await
            .map_err(|e| StoreError::storage("get", key, e))?;
        let key = key.to_owned();
        Ok(result
            .into_stream()
            .map_err(move |e| StoreError::storage("get", key.clone(), e))
            .boxed())
    }

    /// True when the object exists.
    ///
    /// # Errors
    /// [`StoreError::Storage`] for any failure other than "not found".
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        let path = self.path(key)?;
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(StoreError::storage("head", key, e)),
        }
    }

    /// Size and entity tag of an object.
    ///
    /// # Errors
    /// [`StoreError::Storage`] (see [`StoreError::is_not_found`]), [`StoreError::InvalidKey`].
    pub async fn head(&self, key: &str) -> Result<ObjectInfo, StoreError> {
        let path = self.path(key)?;
        let meta = self
            .store
            .head(&path)
            .await
            .map_err(|e| StoreError::storage("head", key, e))?;
        Ok(ObjectInfo {
            size: meta.size,
            e_tag: meta.e_tag,
        })
    }

    /// Names of the sub-directories (common prefixes with delimiter `/`) of `dir`, sorted.
    /// `dir = ""` lists the top level of the location.
    ///
    /// # Errors
    /// [`StoreError::Storage`].
    pub async fn list_dirs(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let listing = if dir.trim_matches('/').is_empty() && self.root.as_ref().is_empty() {
            self.store.list_with_delimiter(None).await
        } else {
            let path = if dir.trim_matches('/').is_empty() {
                self.root.clone()
            } else {
                self.path(dir)?
            };
            self.store.list_with_delimiter(Some(&path)).await
        }
        .map_err(|e| StoreError::storage("list", dir, e))?;
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Names of the backups in the location (directories under `backups/`). A directory without
    /// `velero-backup.json` is listed too, as Velero does; see [`backup_exists`](Self::backup_exists).
    ///
    /// # Errors
    /// [`StoreError::Storage`].
    pub async fn list_backups(&self) -> Result<Vec<String>, StoreError> {
        self.list_dirs(&LAYOUT.backups_dir()).await
    }

    /// Names of the restores in the location (directories under `restores/`).
    ///
    /// # Errors
    /// [`StoreError::Storage`].
    pub async fn list_restores(&self) -> Result<Vec<String>, StoreError> {
        self.list_dirs(&LAYOUT.restores_dir()).await
    }

    /// Keys of every object under `dir`, recursively, sorted.
    ///
    /// # Errors
    /// [`StoreError::Storage`].
    pub async fn list_objects(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let objects = self.list_objects_meta(dir).await?;
        Ok(objects.into_iter().map(|o| o.key).collect())
    }

    /// Every object under `dir`, recursively, with its size and time, sorted by key.
    ///
    /// # Errors
    /// [`StoreError::Storage`].
    pub async fn list_objects_meta(&self, dir: &str) -> Result<Vec<ListedObject>, StoreError> {
        let path = self.path(dir)?;
        let mut objects: Vec<ListedObject> = self
            .store
            .list(Some(&path))
            .map_ok(|meta| ListedObject {
                key: self.key_of(&meta.location),
                size: meta.size,
                modified: jiff::Timestamp::new(
                    meta.last_modified.timestamp(),
                    i32::try_from(meta.last_modified.timestamp_subsec_nanos()).unwrap_or(0),
                )
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            })
            .try_collect()
            .await
            .map_err(|e| StoreError::storage("list", dir, e))?;
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    /// Deletes one object; deleting a missing object succeeds.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::Storage`].
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.check_writable("delete", key)?;
        let path = self.path(key)?;
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StoreError::storage("delete", key, e)),
        }
    }

    /// Deletes every object under `dir` (e.g. `backups/b1`) and returns how many were deleted.
    /// An empty `dir` is refused: it would empty the whole location.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn delete_prefix(&self, dir: &str) -> Result<usize, StoreError> {
        self.check_writable("delete", dir)?;
        if dir.trim_matches('/').is_empty() {
            return Err(StoreError::InvalidKey {
                key: dir.to_owned(),
                reason: "deleting the whole location is refused; name a directory".to_owned(),
            });
        }
        let path = self.path(dir)?;
        let locations = self
            .store
            .list(Some(&path))
            .map_ok(|meta| meta.location)
            .boxed();
        let deleted: Vec<Path> = self
            .store
            .delete_stream(locations)
            .try_collect()
            .await
            .map_err(|e| StoreError::storage("delete", dir, e))?;
        Ok(deleted.len())
    }

    /// Starts a streaming upload of a (large) artifact; see [`ArtifactWriter`].
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`].
    pub fn writer(&self, key: &str) -> Result<ArtifactWriter, StoreError> {
        self.check_writable("write", key)?;
        let path = self.path(key)?;
        Ok(ArtifactWriter::new(self, key, path))
    }
}

fn parse_prefix(prefix: Option<&str>) -> Result<Path, ConfigError> {
    let trimmed = prefix.unwrap_or("").trim_matches('/');
    Path::parse(trimmed).map_err(|e| ConfigError::Invalid {
        field: "spec.objectStorage.prefix".to_owned(),
        reason: e.to_string(),
    })
}
