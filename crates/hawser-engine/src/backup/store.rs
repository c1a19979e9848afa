//! Writing the backup's files to its storage location.

use bytes::Bytes;
use hawser_core::archive::gzjson::to_gz_json;
use hawser_store::Location;

use super::BackupError;

/// Stores `value` as gzipped JSON at `key`.
pub(crate) async fn put_gz<T: serde::Serialize + ?Sized>(
    location: &Location,
    key: &str,
    value: &T,
) -> Result<(), BackupError> {
    put_encoded(location, key, to_gz_json(value)).await
}

/// Stores `text` gzipped at `key`.
pub(crate) async fn put_gzip(
    location: &Location,
    key: &str,
    text: &[u8],
) -> Result<(), BackupError> {
    put_encoded(
        location,
        key,
        hawser_core::archive::gzjson::gzip_bytes(text),
    )
    .await
}

async fn put_encoded(
    location: &Location,
    key: &str,
    encoded: Result<Vec<u8>, hawser_core::archive::gzjson::GzJsonError>,
) -> Result<(), BackupError> {
    let bytes = encoded.map_err(|source| BackupError::Encode {
        key: key.to_owned(),
        source,
    })?;
    put_bytes(location, key, bytes).await
}

pub(crate) async fn put_bytes(
    location: &Location,
    key: &str,
    bytes: Vec<u8>,
) -> Result<(), BackupError> {
    location
        .put(key, Bytes::from(bytes))
        .await
        .map_err(|source| BackupError::storage(key.to_owned(), source))
}
