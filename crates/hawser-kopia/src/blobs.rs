//! A repository's blobs in a storage location: the objects under one directory of the
//! location, named by their blob IDs (the flat layout kopia's object-store backends and Velero
//! use: `<prefix>/kopia/<namespace>/<blob ID>`). Every provider of `hawser-store` serves it.

use bytes::Bytes;
use hawser_store::Location;

use crate::KopiaError;

/// A blob as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobMeta {
    /// Its ID.
    pub id: String,
    /// Its size in bytes.
    pub size: u64,
    /// When the store wrote it.
    pub modified: jiff::Timestamp,
}

/// The blobs of one repository.
#[derive(Clone)]
pub struct Blobs {
    location: Location,
    dir: String,
}

impl Blobs {
    /// The repository in directory `dir` of `location` (e.g. `kopia/shop` for Velero's
    /// repository of namespace `shop`).
    #[must_use]
    pub fn new(location: Location, dir: &str) -> Self {
        Self {
            location,
            dir: dir.trim_matches('/').to_owned(),
        }
    }

    fn key(&self, id: &str) -> String {
        if self.dir.is_empty() {
            id.to_owned()
        } else {
            format!("{}/{id}", self.dir)
        }
    }

    fn error(id: &str) -> impl FnOnce(hawser_store::StoreError) -> KopiaError + '_ {
        move |source| KopiaError::Storage {
            blob: id.to_owned(),
            source: Box::new(source),
        }
    }

    /// Every blob ID of the repository, sorted.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn list(&self) -> Result<Vec<String>, KopiaError> {
        Ok(self.list_meta().await?.into_iter().map(|b| b.id).collect())
    }

    /// Every blob of the repository with its size and time, sorted by ID.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn list_meta(&self) -> Result<Vec<BlobMeta>, KopiaError> {
        let objects = self
            .location
            .list_objects_meta(&self.dir)
            .await
            .map_err(Self::error(&self.dir))?;
        let strip = if self.dir.is_empty() {
            0
        } else {
            self.dir.len() + 1
        };
        Ok(objects
            .into_iter()
            .filter_map(|o| {
                let id = o.key.get(strip..)?;
                // Blob IDs have no `/`: anything deeper is not the repository's.
                (!id.contains('/')).then(|| BlobMeta {
                    id: id.to_owned(),
                    size: o.size,
                    modified: o.modified,
                })
            })
            .collect())
    }

    /// Deletes a blob; a missing one is no error.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn delete(&self, id: &str) -> Result<(), KopiaError> {
        self.location
            .delete(&self.key(id))
            .await
            .map_err(Self::error(id))
    }

    /// A whole blob.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn get(&self, id: &str) -> Result<Bytes, KopiaError> {
        self.location
            .get(&self.key(id))
            .await
            .map_err(Self::error(id))
    }

    /// Whether a blob exists.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn exists(&self, id: &str) -> Result<bool, KopiaError> {
        self.location
            .exists(&self.key(id))
            .await
            .map_err(Self::error(id))
    }

    /// Stores a whole blob.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn put(&self, id: &str, data: Bytes) -> Result<(), KopiaError> {
        self.location
            .put(&self.key(id), data)
            .await
            .map_err(Self::error(id))
    }

    /// `length` bytes of a blob from `offset`.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub async fn get_range(&self, id: &str, offset: u64, length: u64) -> Result<Bytes, KopiaError> {
        self.location
            .get_range(&self.key(id), offset..offset + length)
            .await
            .map_err(Self::error(id))
    }
}
