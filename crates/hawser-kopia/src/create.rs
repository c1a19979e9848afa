//! Creating a repository with kopia's defaults, which are Velero's: format 3, index v2 with the
//! epoch manager's default parameters, `BLAKE2B-256-128`, `AES256-GCM-HMAC-SHA256`, 20 MiB
//! packs, the password's key by `scrypt-65536-8-1`. Three random 32-byte values are drawn: the
//! repository's unique ID (the salt of the password's key), the master key of the contents'
//! encryption and the secret of their hash. The format blob `kopia.repository` is written last
//! but one, then Velero's `udmrepo.Repository` (the unique ID again), by which Velero's
//! repository controller tells a repository it initialised from one that is not.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;

use crate::KopiaError;
use crate::blobs::Blobs;
use crate::crypto::{hkdf_sha256, password_key};
use crate::repo::{FORMAT_BLOB, Repository};

/// Velero's marker of a repository it initialised.
pub const VELERO_MARKER_BLOB: &str = "udmrepo.Repository";
/// The password key derivation of new repositories.
const KEY_ALGO: &str = "scrypt-65536-8-1";

fn random32() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    bytes
}

/// A new random repository password (32 random bytes, base64): what a repository gets when
/// no password is given, instead of Velero's well-known default.
#[must_use]
pub fn random_password() -> String {
    STANDARD.encode(random32())
}

impl Repository {
    /// Creates a repository in `blobs`, protected by `password`, and opens it.
    ///
    /// # Errors
    /// [`KopiaError::AlreadyExists`] when `kopia.repository` is there already (nothing is
    /// written); [`KopiaError::Storage`].
    pub async fn create(blobs: Blobs, password: &str) -> Result<Self, KopiaError> {
        Self::create_with_hash(blobs, password, crate::crypto::HASHES[0]).await
    }

    /// [`Repository::create`] with content hash `hash` (one of [`crate::HASHES`]:
    /// `BLAKE3-256-128` hashes faster than the default; kopia and Velero read both).
    ///
    /// # Errors
    /// Those of [`Repository::create`]; [`KopiaError::Unsupported`] for another hash.
    pub async fn create_with_hash(
        blobs: Blobs,
        password: &str,
        hash: &str,
    ) -> Result<Self, KopiaError> {
        if !crate::crypto::HASHES.contains(&hash) {
            return Err(KopiaError::Unsupported {
                what: "content hash",
                value: hash.to_owned(),
            });
        }
        if blobs.exists(FORMAT_BLOB).await? {
            return Err(KopiaError::AlreadyExists);
        }
        let unique_id = random32();
        let config = serde_json::json!({"format": {
            "hash": hash,
            "encryption": "AES256-GCM-HMAC-SHA256",
            "secret": STANDARD.encode(random32()),
            "masterKey": STANDARD.encode(random32()),
            "version": 3,
            "maxPackSize": 20 << 20,
            "indexVersion": 2,
            "epochParameters": {
                "Enabled": true,
                "EpochRefreshFrequency": 1_200_000_000_000_u64,
                "FullCheckpointFrequency": 7,
                "CleanupSafetyMargin": 14_400_000_000_000_u64,
                "MinEpochDuration": 86_400_000_000_000_u64,
                "EpochAdvanceOnCountThreshold": 20,
                "EpochAdvanceOnTotalSizeBytesThreshold": 10 << 20,
                "DeleteParallelism": 4
            },
            "enablePasswordChange": true,
            "splitter": "DYNAMIC-4M-BUZHASH"
        }});
        let plain = serde_json::to_vec(&config)
            .map_err(|e| KopiaError::malformed("the repository config", e))?;
        let key = password_key(password, &unique_id, KEY_ALGO)?;
        let sealed = crate::crypto::seal(
            &hkdf_sha256(&key, &unique_id, b"AES"),
            &hkdf_sha256(&key, &unique_id, b"CHECKSUM"),
            &plain,
        )?;
        let format = serde_json::json!({
            "tool": "https://github.com/kopia/kopia",
            "buildVersion": concat!("hawser-", env!("CARGO_PKG_VERSION")),
            "buildInfo": "hawser",
            "uniqueID": STANDARD.encode(unique_id),
            "keyAlgo": KEY_ALGO,
            "encryption": "AES256_GCM",
            "encryptedBlockFormat": STANDARD.encode(sealed),
        });
        let mut text = serde_json::to_string_pretty(&format)
            .map_err(|e| KopiaError::malformed(FORMAT_BLOB, e))?;
        text.push('\n');
        blobs.put(FORMAT_BLOB, Bytes::from(text)).await?;
        let marker = serde_json::json!({"uniqueID": STANDARD.encode(unique_id)});
        blobs
            .put(VELERO_MARKER_BLOB, Bytes::from(marker.to_string()))
            .await?;
        Self::open(blobs, password).await
    }
}
