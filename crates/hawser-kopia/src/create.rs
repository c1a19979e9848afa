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

/// The choices of a new repository; the default is kopia's and Velero's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRepository {
    /// The content hash, one of [`crate::HASHES`] (`BLAKE3-256-128` hashes faster than the
    /// default; kopia and Velero read both).
    pub hash: String,
    /// How files, listings and lists are cut (kopia's `--object-splitter`): `DYNAMIC-<size>-BUZHASH`
    /// or `FIXED-<size>`, sizes 128K to 8M.
    pub splitter: String,
}

impl Default for NewRepository {
    fn default() -> Self {
        Self {
            hash: crate::crypto::HASHES[0].to_owned(),
            splitter: "DYNAMIC-4M-BUZHASH".to_owned(),
        }
    }
}

/// Who runs maintenance in a repository Velero made: Velero's user and domain. kopia's and
/// Velero's maintenance run only as this owner (unless forced); without the parameters the
/// owner is nobody and Velero's maintenance job fails ("must be run by designated user").
pub(crate) const VELERO_MAINTENANCE_OWNER: &str = "default@default";

/// The maintenance manifest Velero writes into a repository it creates: kopia's default
/// parameters (quick every hour, full every day, logs kept up to 1 GiB, 10,000 or 30 days)
/// owned by [`VELERO_MAINTENANCE_OWNER`].
fn maintenance_params() -> serde_json::Value {
    const HOUR_NS: u64 = 3_600_000_000_000;
    let mut id = [0u8; 16];
    rand::fill(&mut id);
    serde_json::json!([{
        "id": hex::encode(id),
        "labels": {"type": "maintenance"},
        "modified": jiff::Timestamp::now(),
        "data": {
            "owner": VELERO_MAINTENANCE_OWNER,
            "quick": {"enabled": true, "interval": HOUR_NS},
            "full": {"enabled": true, "interval": 24 * HOUR_NS},
            "logRetention": {"maxTotalSize": 1_u64 << 30, "maxCount": 10_000, "maxAge": 720 * HOUR_NS},
            "extendObjectLocks": false,
            "listParallelism": 0
        }
    }])
}

impl NewRepository {
    /// Whether this hash and splitter can be written here.
    ///
    /// # Errors
    /// [`KopiaError::Unsupported`] naming the `content hash` or the `splitter`.
    pub fn check(&self) -> Result<(), KopiaError> {
        if !crate::crypto::HASHES.contains(&self.hash.as_str()) {
            return Err(KopiaError::Unsupported {
                what: "content hash",
                value: self.hash.clone(),
            });
        }
        if crate::chunker::Splitter::named(&self.splitter).is_none() {
            return Err(KopiaError::Unsupported {
                what: "splitter",
                value: self.splitter.clone(),
            });
        }
        Ok(())
    }
}

impl Repository {
    /// Creates a repository in `blobs`, protected by `password`, with kopia's and Velero's
    /// defaults, and opens it.
    ///
    /// # Errors
    /// [`KopiaError::AlreadyExists`] when `kopia.repository` is there already (nothing is
    /// written); [`KopiaError::Storage`].
    pub async fn create(blobs: Blobs, password: &str) -> Result<Self, KopiaError> {
        Self::create_with(blobs, password, &NewRepository::default()).await
    }

    /// [`Repository::create`] with the hash and splitter of `new`.
    ///
    /// # Errors
    /// Those of [`Repository::create`]; [`KopiaError::Unsupported`] for another hash or
    /// splitter (nothing is written).
    pub async fn create_with(
        blobs: Blobs,
        password: &str,
        new: &NewRepository,
    ) -> Result<Self, KopiaError> {
        new.check()?;
        let NewRepository { hash, splitter } = new;
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
            "splitter": splitter
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
        let mut repo = Self::open(blobs, password).await?;
        // As Velero initialises a repository: maintenance's parameters, then its marker.
        repo.write_manifest(maintenance_params()).await?;
        let marker = serde_json::json!({"uniqueID": STANDARD.encode(unique_id)});
        repo.blobs
            .put(VELERO_MARKER_BLOB, Bytes::from(marker.to_string()))
            .await?;
        Ok(repo)
    }
}
