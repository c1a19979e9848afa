//! Opening a repository and reading its contents.
//!
//! Opening reads `kopia.repository`, derives the password's key, decrypts the repository's
//! config (hash, cipher, keys, format version, index version, epoch parameters), refuses what
//! this reader does not implement by name, then lists the blobs, reads the live index blobs
//! ([`crate::epoch`]) and merges their entries: per content the newest entry wins, and a
//! deleted one older than the deletion watermark is gone. Reading a content is one ranged GET
//! of its pack, then authenticated decryption and, when the index says so, decompression.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::{StreamExt as _, TryStreamExt as _};
use serde::Deserialize;

use crate::blobs::Blobs;
use crate::content::{ContentId, decompress};
use crate::crypto::{ContentCipher, blob_iv, open_format, password_key};
use crate::index::{Entry, parse, parse_each};
use crate::merged::Index;
use crate::{KopiaError, epoch};

/// The name of the format blob.
pub const FORMAT_BLOB: &str = "kopia.repository";
/// Index blobs read at once while opening.
const INDEX_READS: usize = 8;

/// `kopia.repository`: plain JSON around the encrypted config.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FormatBlob {
    #[serde(rename = "uniqueID")]
    unique_id: String,
    #[serde(default)]
    key_algo: String,
    #[serde(default)]
    encryption: String,
    #[serde(default)]
    encrypted_block_format: String,
}

/// The decrypted config's `format` object (the fields a reader uses).
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryConfig {
    /// The content hash (`BLAKE2B-256-128` by default).
    pub hash: String,
    /// The content cipher (`AES256-GCM-HMAC-SHA256` by default).
    pub encryption: String,
    /// Error correction, if any (Velero never turns it on).
    #[serde(default)]
    pub ecc: String,
    /// The format version: 1, 2 or 3.
    pub version: u8,
    /// The index version: 1 or 2 (snapshots are written into version 2 only).
    #[serde(default)]
    pub index_version: u8,
    /// The splitter of new objects (`DYNAMIC-4M-BUZHASH` by default).
    #[serde(default)]
    pub splitter: String,
    /// The largest pack.
    #[serde(default)]
    pub max_pack_size: u64,
    #[serde(rename = "masterKey")]
    master_key: String,
    /// The hashing key of content IDs.
    #[serde(default)]
    secret: String,
    #[serde(default)]
    pub(crate) epoch_parameters: EpochParameters,
}

impl RepositoryConfig {
    /// The size at which a pack being written is sent: the repository's maximum pack size,
    /// within 1 to 64 MiB (a config from the bucket does not decide how much is held).
    pub(crate) fn pack_size(&self) -> u64 {
        self.max_pack_size.clamp(1 << 20, 64 << 20)
    }
}

/// The epoch manager's parameters (kopia's `epoch.Parameters`; durations in nanoseconds),
/// kopia's defaults where a field is absent.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct EpochParameters {
    pub enabled: bool,
    /// The least time between the first and the last index blob of an epoch before it ends.
    pub min_epoch_duration: i64,
    /// Index blobs in the write epoch that end it (with the duration).
    pub epoch_advance_on_count_threshold: usize,
    /// Bytes of index blobs in the write epoch that end it (with the duration).
    pub epoch_advance_on_total_size_bytes_threshold: u64,
    /// How long a compaction must be stored before the blobs it replaces are deleted.
    pub cleanup_safety_margin: i64,
    /// Settled epochs past the last range checkpoint that make full maintenance write one.
    pub full_checkpoint_frequency: u64,
}

impl Default for EpochParameters {
    fn default() -> Self {
        const HOUR_NS: i64 = 3_600_000_000_000;
        Self {
            enabled: false,
            min_epoch_duration: 24 * HOUR_NS,
            epoch_advance_on_count_threshold: 20,
            epoch_advance_on_total_size_bytes_threshold: 10 << 20,
            cleanup_safety_margin: 4 * HOUR_NS,
            full_checkpoint_frequency: 7,
        }
    }
}

#[derive(Deserialize)]
struct Config {
    format: RepositoryConfig,
}

/// An open repository: its config and the merged index of its contents.
pub struct Repository {
    pub(crate) blobs: Blobs,
    config: RepositoryConfig,
    pub(crate) cipher: ContentCipher,
    pub(crate) hasher: crate::crypto::ContentHash,
    pub(crate) index: Index,
    /// The epoch new index blobs are written in.
    pub(crate) write_epoch: u64,
}

impl Repository {
    /// Opens the repository in `blobs` with `password`.
    ///
    /// # Errors
    /// [`KopiaError::WrongPassword`]; [`KopiaError::Unsupported`] for a format, cipher, hash,
    /// error correction or index version this reader does not implement;
    /// [`KopiaError::Storage`], [`KopiaError::Malformed`], [`KopiaError::Authentication`].
    pub async fn open(blobs: Blobs, password: &str) -> Result<Self, KopiaError> {
        let raw = blobs.get(FORMAT_BLOB).await?;
        let config = open_config(&raw, password)?;
        let master_key = base64_field(&config.master_key, "masterKey")?;
        let cipher = ContentCipher::new(&config.encryption, &master_key)?;
        let hasher = crate::crypto::ContentHash::new(
            &config.hash,
            &base64_field(&config.secret, "secret")?,
        )?;
        let mut repo = Self {
            blobs,
            config,
            cipher,
            hasher,
            index: Index::default(),
            write_epoch: 0,
        };
        repo.load_index().await?;
        Ok(repo)
    }

    /// Lists the blobs and reads the live index blobs ([`epoch::select`]) into the index.
    pub(crate) async fn load_index(&mut self) -> Result<(), KopiaError> {
        let ids = self.blobs.list().await?;
        let set = epoch::select(&ids)?;
        let mut index = self.merge_index_blobs(&set.blobs).await?;
        // Deleted before the watermark: gone, as kopia reads it.
        index.retain(|e| !(e.deleted && e.timestamp <= set.watermark));
        tracing::debug!(
            contents = index.len(),
            index_blobs = set.blobs.len(),
            "kopia repository index read"
        );
        self.index = index;
        self.write_epoch = set.write_epoch;
        Ok(())
    }

    /// The entries of index blobs `ids`, merged: per content the one that wins.
    pub(crate) async fn merge_index_blobs(&self, ids: &[String]) -> Result<Index, KopiaError> {
        let mut entries = Vec::new();
        // Owned items: a stream of closures over borrowed ones is not `Send`.
        let mut reads = futures::stream::iter(ids.to_vec())
            .map(|id| async move { Ok::<_, KopiaError>((self.read_named_blob(&id).await?, id)) })
            .buffer_unordered(INDEX_READS);
        while let Some((plain, id)) = reads.try_next().await? {
            parse_each(&plain, &format!("index blob {id}"), |entry| {
                entries.push(entry)
            })?;
        }
        Ok(Index::from_entries(entries))
    }

    /// The repository's config.
    #[must_use]
    pub fn config(&self) -> &RepositoryConfig {
        &self.config
    }

    /// The index entry of `id`, if the repository holds it.
    #[must_use]
    pub fn entry(&self, id: &ContentId) -> Option<&Entry> {
        self.index.get(id)
    }

    /// The live (not deleted) contents whose ID has `prefix`.
    pub fn contents_with_prefix(&self, prefix: char) -> impl Iterator<Item = &Entry> {
        self.index
            .values()
            .filter(move |e| !e.deleted && e.id.prefix() == Some(prefix))
    }

    /// The plaintext of content `id`.
    ///
    /// # Errors
    /// [`KopiaError::MissingContent`], [`KopiaError::Storage`], [`KopiaError::Authentication`],
    /// [`KopiaError::Malformed`], [`KopiaError::Unsupported`] (an unknown compressor).
    pub async fn read_content(&self, id: &ContentId) -> Result<Vec<u8>, KopiaError> {
        let entry = self
            .index
            .get(id)
            .ok_or_else(|| KopiaError::MissingContent(id.to_string()))?;
        let sealed = self.read_sealed(entry).await?;
        let what = format!("content {id}");
        let plain = self.cipher.decrypt(id.iv(), &sealed, &what)?;
        let plain = if entry.compression == 0 {
            plain
        } else {
            decompress(
                &plain,
                entry.compression,
                u64::from(entry.original_length),
                &what,
            )?
        };
        // Listings, lists and manifests name other contents: checked against their own ID, no
        // content can name itself, so a walk of them always ends.
        if id.prefix().is_some() && self.hasher.hash(&plain)[..] != *id.hash() {
            return Err(KopiaError::Authentication { what });
        }
        if plain.len() != entry.original_length as usize {
            return Err(KopiaError::malformed(
                what,
                format!(
                    "{} bytes, the index says {}",
                    plain.len(),
                    entry.original_length
                ),
            ));
        }
        Ok(plain)
    }

    /// The contents pack `id` (of `size` bytes) holds, from the pack's own index: the
    /// postamble at its end (version 1, the index's IV, offset and length, a CRC) finds the
    /// encrypted index, which is read like an index blob.
    ///
    /// # Errors
    /// [`KopiaError::Storage`], [`KopiaError::Authentication`]; [`KopiaError::Malformed`] for
    /// a pack whose postamble or index does not parse.
    pub(crate) async fn pack_contents(
        &self,
        id: &str,
        size: u64,
    ) -> Result<Vec<ContentId>, KopiaError> {
        let what = || format!("pack {id}");
        let bad = |why: &str| KopiaError::malformed(what(), why.to_owned());
        let tail_len = size.min(256);
        let tail = self.blobs.get_range(id, size - tail_len, tail_len).await?;
        let (&length, rest) = tail.split_last().ok_or_else(|| bad("empty"))?;
        let postamble = rest
            .len()
            .checked_sub(usize::from(length))
            .and_then(|at| rest.get(at..))
            .ok_or_else(|| bad("postamble longer than the pack"))?;
        let (body, crc) = postamble
            .split_last_chunk::<4>()
            .ok_or_else(|| bad("postamble too short"))?;
        if crc32fast::hash(body).to_be_bytes() != *crc {
            return Err(bad("postamble checksum"));
        }
        let field = |at: &mut &[u8]| take_uvarint(at).ok_or_else(|| bad("postamble field"));
        let mut fields = body;
        if field(&mut fields)? != 1 {
            return Err(bad("postamble version"));
        }
        let iv_len = usize::try_from(field(&mut fields)?).map_err(|_| bad("IV length"))?;
        let (iv, mut fields) = fields.split_at_checked(iv_len).ok_or_else(|| bad("IV"))?;
        let (offset, len) = (field(&mut fields)?, field(&mut fields)?);
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(bad("index past the end"));
        }
        let sealed = self.blobs.get_range(id, offset, len).await?;
        let local = self
            .cipher
            .decrypt(iv, &sealed, &format!("the index of pack {id}"))?;
        let entries = parse(&local, &what())?;
        Ok(entries.into_iter().map(|e| e.id).collect())
    }

    /// The stored (encrypted) bytes of content `entry`, not yet checked.
    ///
    /// # Errors
    /// [`KopiaError::Storage`]; [`KopiaError::Malformed`] for a pack shorter than the index
    /// says.
    pub(crate) async fn read_sealed(&self, entry: &Entry) -> Result<bytes::Bytes, KopiaError> {
        let sealed = self
            .blobs
            .get_range(
                &entry.pack,
                u64::from(entry.offset),
                u64::from(entry.packed_length),
            )
            .await?;
        // A store may answer a range past the end with what there is.
        if sealed.len() != entry.packed_length as usize {
            return Err(KopiaError::malformed(
                format!("pack {}", entry.pack),
                format!(
                    "{} bytes at offset {} where the index has content {} of {}",
                    sealed.len(),
                    entry.offset,
                    entry.id,
                    entry.packed_length
                ),
            ));
        }
        Ok(sealed)
    }
}

impl Repository {
    /// Stores `plain` encrypted as blob `<prefix><hash>-<suffix>` (how kopia names index blobs
    /// and session markers: the IV is the hash in the name); returns the blob's ID.
    ///
    /// # Errors
    /// [`KopiaError::Storage`].
    pub(crate) async fn put_named_blob(
        &self,
        prefix: &str,
        suffix: &str,
        plain: &[u8],
    ) -> Result<String, KopiaError> {
        let hash = hex::encode(self.hasher.hash(plain));
        let blob = format!("{prefix}{hash}-{suffix}");
        let sealed = self.cipher.encrypt(&blob_iv(&blob)?, plain)?;
        self.blobs.put(&blob, bytes::Bytes::from(sealed)).await?;
        Ok(blob)
    }

    /// Stores the index blob of `entries` in the write epoch, for session `session`
    /// (`xn<E>_<hash>-<session>-c1`): from then on they are the repository's.
    ///
    /// # Errors
    /// [`KopiaError::Storage`]; [`KopiaError::Unsupported`] for an entry the format cannot hold.
    pub(crate) async fn put_index_blob(
        &self,
        entries: impl IntoIterator<Item = &Entry>,
        session: &str,
    ) -> Result<(), KopiaError> {
        let index = crate::index::build(entries)?;
        let prefix = format!("xn{}_", self.write_epoch);
        self.put_named_blob(&prefix, &format!("{session}-c1"), &index)
            .await?;
        Ok(())
    }

    /// The plaintext of a blob stored by [`Self::put_named_blob`] (or kopia).
    ///
    /// # Errors
    /// [`KopiaError::Storage`], [`KopiaError::Authentication`], [`KopiaError::Malformed`].
    pub(crate) async fn read_named_blob(&self, blob: &str) -> Result<Vec<u8>, KopiaError> {
        let sealed = self.blobs.get(blob).await?;
        let what = if blob.starts_with('x') {
            "index blob"
        } else {
            "blob"
        };
        self.cipher
            .decrypt(&blob_iv(blob)?, &sealed, &format!("{what} {blob}"))
    }
}

fn base64_field(text: &str, field: &str) -> Result<Vec<u8>, KopiaError> {
    STANDARD
        .decode(text)
        .map_err(|e| KopiaError::malformed(format!("repository field {field}"), e))
}

/// The repository config in the format blob `raw`, opened with `password`.
fn open_config(raw: &[u8], password: &str) -> Result<RepositoryConfig, KopiaError> {
    let blob: FormatBlob =
        serde_json::from_slice(raw).map_err(|e| KopiaError::malformed(FORMAT_BLOB, e))?;
    if blob.encryption != "AES256_GCM" {
        return Err(KopiaError::Unsupported {
            what: "format blob encryption",
            value: blob.encryption,
        });
    }
    let unique_id = base64_field(&blob.unique_id, "uniqueID")?;
    let sealed = base64_field(&blob.encrypted_block_format, "encryptedBlockFormat")?;
    let key = password_key(password, &unique_id, &blob.key_algo)?;
    let plain = open_format(&key, &unique_id, &sealed)?;
    let config: Config = serde_json::from_slice(&plain)
        .map_err(|e| KopiaError::malformed("the repository config", e))?;
    let config = config.format;
    let refuse = |what: &'static str, value: String| Err(KopiaError::Unsupported { what, value });
    if !matches!(config.version, 2 | 3) {
        return refuse("repository format version", config.version.to_string());
    }
    if !config.ecc.is_empty() {
        return refuse("error correction (ecc)", config.ecc);
    }
    if !config.epoch_parameters.enabled {
        return refuse("index layout", "epochs disabled".to_owned());
    }
    if !matches!(config.index_version, 1 | 2) {
        return refuse("index version", config.index_version.to_string());
    }
    Ok(config)
}

/// Go's unsigned varint at the start of `data`, which moves past it.
fn take_uvarint(data: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, byte) in data.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *data = &data[i + 1..];
            return Some(value);
        }
    }
    None
}
