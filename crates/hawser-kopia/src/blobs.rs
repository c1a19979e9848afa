//! A repository's blobs in a storage location: the objects under one directory of the
//! location, named by their blob IDs (the flat layout kopia's object-store backends and Velero
//! use: `<prefix>/kopia/<namespace>/<blob ID>`). Every provider of `hawser-store` serves it.

use bytes::Bytes;
use hawser_store::Location;

use crate::KopiaError;

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
        let keys = self
            .location
            .list_objects(&self.dir)
            .await
            .map_err(Self::error(&self.dir))?;
        let strip = if self.dir.is_empty() {
            0
        } else {
            self.dir.len() + 1
        };
        Ok(keys
            .into_iter()
            .filter_map(|key| key.get(strip..).map(str::to_owned))
            // Blob IDs have no `/`: anything deeper is not the repository's.
            .filter(|id| !id.contains('/'))
            .collect())
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
