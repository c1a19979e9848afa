//! The records of Velero's layout in a [`Location`]: a backup's commit marker and a restore's
//! status record, read and written by name, and a backup's or restore's directory deleted.

use bytes::Bytes;
use object_store::{PutMode, PutOptions, PutPayload};

use super::{LAYOUT, Location};
use crate::error::StoreError;

impl Location {
    /// Writes `backups/<name>/velero-backup.json` in one atomic request: the commit marker of a
    /// backup. Call it last, after every other artifact of the backup is stored.
    ///
    /// The first commit (`replace` false) is create-only where the provider can say so
    /// (`filesystem`, Azure, GCS): a record of this name stored meanwhile, by another server
    /// or another cluster sharing the bucket, is not written over, and the write fails with
    /// [`FailureKind::AlreadyExists`](crate::FailureKind::AlreadyExists). Where the provider
    /// cannot (S3 through `object_store` without a server-side mode chosen), it is a plain
    /// write, as Velero's. `replace` rewrites the record of a backup this server committed
    /// (its final phase after finalizing).
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`] (a name with `/`), [`StoreError::Storage`].
    pub async fn commit_backup(
        &self,
        name: &str,
        json: Bytes,
        replace: bool,
    ) -> Result<(), StoreError> {
        check_name(name)?;
        let key = LAYOUT.backup_metadata(name);
        if replace {
            return self.put(&key, json).await;
        }
        self.check_writable("write", &key)?;
        let path = self.path(&key)?;
        let options = PutOptions {
            mode: PutMode::Create,
            tags: self.tags.clone(),
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from_bytes(json.clone()), options)
            .await
        {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotImplemented { .. }) => self.put(&key, json).await,
            Err(e) => Err(StoreError::storage("put", key, e)),
        }
    }

    /// True when the backup's `velero-backup.json` exists (the backup was committed).
    ///
    /// # Errors
    /// [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn backup_exists(&self, name: &str) -> Result<bool, StoreError> {
        check_name(name)?;
        self.exists(&LAYOUT.backup_metadata(name)).await
    }

    /// The backup's `velero-backup.json`, or `None` when it was never committed.
    ///
    /// # Errors
    /// [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn backup_metadata(&self, name: &str) -> Result<Option<Bytes>, StoreError> {
        check_name(name)?;
        self.get_if_stored(&LAYOUT.backup_metadata(name)).await
    }

    /// Stores a restore's status record (`restores/<name>/restore-<name>-status.json`), written
    /// after its other artifacts.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn commit_restore(&self, name: &str, json: Bytes) -> Result<(), StoreError> {
        check_name(name)?;
        self.put(&LAYOUT.restore_record(name), json).await
    }

    /// A restore's status record, or `None` when it was never written.
    ///
    /// # Errors
    /// [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn restore_record(&self, name: &str) -> Result<Option<Bytes>, StoreError> {
        check_name(name)?;
        self.get_if_stored(&LAYOUT.restore_record(name)).await
    }

    /// Deletes everything under `backups/<name>/`.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn delete_backup(&self, name: &str) -> Result<usize, StoreError> {
        check_name(name)?;
        self.delete_prefix(&LAYOUT.backup_dir(name)).await
    }

    /// Deletes everything under `restores/<name>/`.
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`], [`StoreError::InvalidKey`], [`StoreError::Storage`].
    pub async fn delete_restore(&self, name: &str) -> Result<usize, StoreError> {
        check_name(name)?;
        self.delete_prefix(&LAYOUT.restore_dir(name)).await
    }

    async fn get_if_stored(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        match self.get(key).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn check_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(StoreError::InvalidKey {
            key: name.to_owned(),
            reason: "a backup or restore name must be non-empty and contain no `/`".to_owned(),
        });
    }
    Ok(())
}
