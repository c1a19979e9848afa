//! Writing a snapshot of a directory tree into a repository, in kopia's format so that kopia
//! (and Velero) read it, and take it as the parent of their next snapshot of the same source.
//!
//! Files are cut into contents as the repository's splitter cuts them ([`crate::chunker`]);
//! a file's piece is hashed on a blocking thread while the next one is read and cut (a file
//! of one piece is not handed over). A content already in the repository (same keyed hash)
//! is not written again, so a second snapshot uploads only what changed. File data goes uncompressed into `p` packs (Velero's policy);
//! directory listings (`k`), indirect lists (`x`) and the manifest (`m`) go zstd-fastest into
//! `q` packs. A pack is the 32-byte preamble, its encrypted contents, padding to 4 KiB, its own
//! encrypted index and the postamble that finds it; a full pack is stored in the background
//! (two at a time) while the next one fills. Order of writes: every pack, then one index
//! blob of the epoch being written (`xn<E>_<hash>-<session>-c1`) naming all of the snapshot's
//! new contents, the manifest among them. The snapshot exists once that index blob is stored:
//! [`Repository::write_snapshot`] returns its ID only then. A failure before leaves no
//! snapshot: the packs stored whole are indexed on the way out, so the next write does not
//! upload their contents again (and maintenance collects them if no snapshot comes to use
//! them); a pack cut mid-upload is named by no index.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use tokio::task::JoinHandle;

use crate::KopiaError;
use crate::chunker::Splitter;
use crate::content::ContentId;
use crate::crypto::ContentHash;
use crate::index::{Entry, build};
use crate::merged::Index;
use crate::repo::Repository;
use crate::session::Lease;
use crate::snapshot::{Snapshot, Stats};

/// Where a snapshot comes from, as kopia labels it (Velero: host and user `default`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceInfo {
    /// Host name.
    pub host: String,
    /// User name.
    pub user: String,
    /// The path (Velero's: `snapshot-pod-volume/kopia/<ns>/<pod>/<volume>`).
    pub path: String,
}

/// The labels kopia gives a snapshot manifest itself; tags may not use them.
const RESERVED_LABELS: &[&str] = &["type", "hostname", "username", "path"];

/// kopia's zstd-fastest compressor ID.
const ZSTD_FASTEST: u32 = 0x1101;

/// A pack being filled.
struct Pack {
    id: Arc<str>,
    data: Vec<u8>,
    entries: Vec<Entry>,
}

/// One write: a snapshot, a snapshot's deletion or maintenance's rewrite of contents.
pub(crate) struct Writer<'r> {
    pub(crate) repo: &'r Repository,
    /// The session this write holds the repository under ([`crate::session`]); the caller
    /// took it and lets it go.
    lease: &'r mut Lease,
    data: Option<Pack>,
    metadata: Option<Pack>,
    /// Contents of the packs being filled or stored.
    pending: HashSet<ContentId>,
    /// Every entry of the packs stored so far (not named by an index blob yet).
    stored: Index,
    /// Packs being stored while the next ones are filled.
    uploads: Uploads,
    now: Timestamp,
    /// How files are cut: the repository's splitter.
    pub(crate) splitter: Splitter,
}

/// Packs stored at once while the writer goes on filling the next one.
const UPLOADS: usize = 2;

/// Packs being stored, oldest first, with their entries. A write dropped before its end stops
/// them, as a process that stops does.
#[derive(Default)]
struct Uploads(VecDeque<(Upload, Vec<Entry>)>);

/// One pack being stored.
type Upload = JoinHandle<Result<(), KopiaError>>;

impl Drop for Uploads {
    fn drop(&mut self) {
        for (upload, _) in &self.0 {
            upload.abort();
        }
    }
}

/// Go's unsigned varint (LEB128).
fn uvarint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(u8::try_from(n & 0x7f).unwrap_or(0) | 0x80);
        n >>= 7;
    }
    out.push(u8::try_from(n).unwrap_or(0));
}

/// A file's piece being hashed away from the writer's task: its ID, and the piece.
pub(crate) type HashedAside = JoinHandle<(ContentId, Vec<u8>)>;

/// The ID of content `plain` stored with `prefix`: the prefix byte (none for file data), then
/// the repository's keyed hash.
fn content_id(hasher: &ContentHash, prefix: Option<char>, plain: &[u8]) -> ContentId {
    let prefix = prefix.map_or(0, |p| u8::try_from(p).unwrap_or(0));
    ContentId::of(prefix, &hasher.hash(plain))
}

/// A length in an index entry.
fn length(n: usize) -> Result<u32, KopiaError> {
    u32::try_from(n).map_err(|_| KopiaError::Unsupported {
        what: "content size",
        value: n.to_string(),
    })
}

/// A new pack of session `session`: `p` for file data, `q` for the rest, with room for
/// `reserve` bytes (file data's packs reserve what they can hold, so that filling one never
/// moves what it holds; pages are only used as it fills).
fn new_pack(prefix: char, session: &str, reserve: usize) -> Pack {
    let mut random = [0u8; 16];
    rand::fill(&mut random);
    let mut data = Vec::with_capacity(reserve.max(32));
    data.resize(32, 0);
    rand::fill(&mut data[..]);
    Pack {
        id: Arc::from(format!("{prefix}{}-{session}", hex::encode(random))),
        data,
        entries: Vec::new(),
    }
}

impl Writer<'_> {
    /// Stores `plain` as a content with `prefix` (none for file data); returns its ID.
    pub(crate) async fn content(
        &mut self,
        prefix: Option<char>,
        plain: &[u8],
    ) -> Result<ContentId, KopiaError> {
        let id = content_id(&self.repo.hasher, prefix, plain);
        self.store(id, prefix, plain).await
    }

    /// Hashes file data `plain` on a blocking thread, so that the file's next piece is read
    /// and cut meanwhile; [`Self::store_hashed`] stores it.
    pub(crate) fn hash_aside(&self, plain: Vec<u8>) -> HashedAside {
        let hasher = self.repo.hasher.clone();
        tokio::task::spawn_blocking(move || (content_id(&hasher, None, &plain), plain))
    }

    /// Stores file data hashed by [`Self::hash_aside`]; returns its ID.
    pub(crate) async fn store_hashed(
        &mut self,
        aside: HashedAside,
    ) -> Result<ContentId, KopiaError> {
        let (id, plain) = match aside.await {
            Ok(hashed) => hashed,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => return Err(KopiaError::malformed("hashing a file's piece", e)),
        };
        self.store(id, None, &plain).await
    }

    /// Stores `plain` as content `id` (with `prefix`) unless the repository has it.
    async fn store(
        &mut self,
        id: ContentId,
        prefix: Option<char>,
        plain: &[u8],
    ) -> Result<ContentId, KopiaError> {
        // Kept fresh while only known contents are found too (a time check until it is due).
        self.lease.keep(self.repo).await?;
        let known = self.repo.index.get(&id).is_some_and(|e| !e.deleted);
        if known || self.pending.contains(&id) || self.stored.get(&id).is_some() {
            return Ok(id);
        }
        // File data is stored as it is (no copy); metadata compressed when that is smaller.
        let (payload, compression) = match prefix {
            Some(_) => {
                let mut compressed = ZSTD_FASTEST.to_be_bytes().to_vec();
                let body = zstd::bulk::compress(plain, 1)
                    .map_err(|e| KopiaError::malformed(format!("content {id}"), e))?;
                compressed.extend(body);
                if compressed.len() < plain.len() {
                    (std::borrow::Cow::Owned(compressed), ZSTD_FASTEST)
                } else {
                    (std::borrow::Cow::Borrowed(plain), 0)
                }
            }
            None => (std::borrow::Cow::Borrowed(plain), 0),
        };
        let sealed = self.repo.cipher.encrypt(id.iv(), &payload)?;
        let entry = Entry {
            id: id.clone(),
            pack: Arc::from(""),
            offset: 0,
            packed_length: 0,
            original_length: length(plain.len())?,
            timestamp: self.now.as_second(),
            deleted: false,
            compression,
            format_version: self.repo.config().version,
            key_id: 0,
        };
        self.place(entry, &sealed).await?;
        Ok(id)
    }

    /// Copies content `entry`, whose stored bytes are `sealed`, into the pack being filled
    /// (maintenance's rewrite of a short pack's contents, as kopia's): the new entry is newer
    /// than the one it replaces, and as deleted.
    pub(crate) async fn rewrite(&mut self, entry: &Entry, sealed: &[u8]) -> Result<(), KopiaError> {
        self.lease.keep(self.repo).await?;
        let copy = Entry {
            timestamp: self.now.as_second().max(entry.timestamp + 1),
            ..entry.clone()
        };
        self.place(copy, sealed).await
    }

    /// Appends `sealed` to the pack being filled for `entry`'s kind (file data or the rest),
    /// recording where; a pack now full is sent.
    async fn place(&mut self, mut entry: Entry, sealed: &[u8]) -> Result<(), KopiaError> {
        let metadata = entry.id.prefix().is_some();
        let session = &self.lease.info.id;
        let slot = if metadata {
            &mut self.metadata
        } else {
            &mut self.data
        };
        // Full at the pack size, it holds at most that and the last piece beyond it: twice
        // the size (measured: a room just that large, freed, was not given back to the
        // system as promptly, and the peak grew by a fifth).
        let reserve = if metadata {
            0
        } else {
            usize::try_from(self.repo.config().pack_size() * 2)
                .unwrap_or(0)
                .max(self.splitter.largest() * 2)
        };
        let pack = slot
            .get_or_insert_with(|| new_pack(if metadata { 'q' } else { 'p' }, session, reserve));
        entry.pack = pack.id.clone();
        entry.offset = length(pack.data.len())?;
        entry.packed_length = length(sealed.len())?;
        pack.data.extend_from_slice(sealed);
        self.pending.insert(entry.id.clone());
        pack.entries.push(entry);
        let full = pack.data.len() as u64 >= self.repo.config().pack_size();
        if full {
            let pack = if metadata {
                self.metadata.take()
            } else {
                self.data.take()
            };
            self.send(pack).await?;
        }
        Ok(())
    }

    /// Finishes and stores a pack: padding, its encrypted index, the postamble.
    async fn send(&mut self, pack: Option<Pack>) -> Result<(), KopiaError> {
        let Some(mut pack) = pack else {
            return Ok(());
        };
        let pad = 4096 - pack.data.len() % 4096;
        let mut padding = vec![0u8; pad];
        rand::fill(&mut padding[..]);
        pack.data.extend(padding);
        let mut local = build(&pack.entries)?;
        let mut suffix = [0u8; 32];
        rand::fill(&mut suffix);
        local.extend(suffix);
        let iv = self.repo.hasher.hash(&local);
        let sealed = self.repo.cipher.encrypt(&iv, &local)?;
        let mut postamble = Vec::new();
        uvarint(&mut postamble, 1);
        uvarint(&mut postamble, iv.len() as u64);
        postamble.extend(iv);
        uvarint(&mut postamble, pack.data.len() as u64);
        uvarint(&mut postamble, sealed.len() as u64);
        postamble.extend(crc32fast::hash(&postamble).to_be_bytes());
        let postamble_len = u8::try_from(postamble.len()).unwrap_or(u8::MAX);
        pack.data.extend(sealed);
        pack.data.extend(postamble);
        pack.data.push(postamble_len);
        // Stored in the background, so that hashing and encryption go on meanwhile.
        let (blobs, id, data) = (self.repo.blobs.clone(), pack.id, Bytes::from(pack.data));
        let upload = tokio::spawn(async move { blobs.put(&id, data).await });
        self.uploads.0.push_back((upload, pack.entries));
        while self.uploads.0.len() > UPLOADS {
            self.settle().await?;
        }
        Ok(())
    }

    /// Waits for the oldest pack being stored; its entries are stored from then on.
    async fn settle(&mut self) -> Result<(), KopiaError> {
        let Some((upload, entries)) = self.uploads.0.pop_front() else {
            return Ok(());
        };
        upload
            .await
            .map_err(|e| KopiaError::malformed("a pack's upload", e))??;
        for entry in entries {
            self.pending.remove(&entry.id);
            self.stored.merge(entry);
        }
        Ok(())
    }
}

impl<'r> Writer<'r> {
    /// Starts a write under `lease`.
    pub(crate) fn new(repo: &'r Repository, lease: &'r mut Lease) -> Self {
        let name = &repo.config().splitter;
        let splitter = if name.is_empty() {
            Splitter::DEFAULT
        } else {
            Splitter::named(name).unwrap_or_else(|| {
                tracing::warn!(
                    splitter = %name,
                    "this splitter is not built here: files are cut as DYNAMIC-4M-BUZHASH (readable by kopia; only deduplication with kopia's copies of the same large files is lost)"
                );
                Splitter::DEFAULT
            })
        };
        Self {
            splitter,
            repo,
            now: Timestamp::now(),
            lease,
            data: None,
            metadata: None,
            pending: HashSet::new(),
            stored: Index::default(),
            uploads: Uploads::default(),
        }
    }

    /// Ends a write that failed with `error`: the contents of the packs stored whole are
    /// indexed (as kopia's checkpoints do), the manifest excepted, so the next write finds them
    /// and does not upload them again (and maintenance collects them if none does).
    pub(crate) async fn abandon(mut self, error: KopiaError) -> KopiaError {
        while !self.uploads.0.is_empty() {
            // A pack whose upload failed too is simply not indexed.
            let _ = self.settle().await;
        }
        // Never the manifest: a failed write publishes no snapshot.
        self.stored.retain(|e| e.id.prefix() != Some('m'));
        if !self.stored.is_empty()
            && let Err(e) = self
                .repo
                .put_index_blob(self.stored.values(), &self.lease.info.id)
                .await
        {
            tracing::warn!(error = %e, "the packs of a failed write stay unindexed");
        }
        error
    }

    /// Stores manifest `entries` (kopia's `{"entries":[…]}`, gzip'd) as an `m` content.
    async fn manifest(&mut self, entries: serde_json::Value) -> Result<(), KopiaError> {
        let json = serde_json::to_vec(&serde_json::json!({ "entries": entries }))
            .map_err(|e| KopiaError::malformed("a manifest", e))?;
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let gzipped = gzip
            .write_all(&json)
            .and_then(|()| gzip.finish())
            .map_err(|e| KopiaError::malformed("a manifest", e))?;
        self.content(Some('m'), &gzipped).await?;
        Ok(())
    }

    /// Stores the packs being filled, then the index blob naming every content written: the
    /// write is there from then on. Returns the new entries.
    pub(crate) async fn commit(mut self) -> Result<Index, KopiaError> {
        let (data, metadata) = (self.data.take(), self.metadata.take());
        let stored = async {
            self.send(data).await?;
            self.send(metadata).await?;
            while !self.uploads.0.is_empty() {
                self.settle().await?;
            }
            self.repo
                .put_index_blob(self.stored.values(), &self.lease.info.id)
                .await
        }
        .await;
        if let Err(e) = stored {
            return Err(self.abandon(e).await);
        }
        Ok(self.stored)
    }
}

impl Repository {
    /// Writes a snapshot of directory `dir` as `source` with `tags` (extra manifest labels);
    /// returns it once it is stored (see the module docs).
    ///
    /// # Errors
    /// [`KopiaError::Source`] when the tree cannot be read, [`KopiaError::Storage`] when the
    /// store refuses a write, [`KopiaError::Unsupported`] for a content the format cannot hold,
    /// a tag named as one of kopia's own labels, or a repository with index version 1.
    pub async fn write_snapshot(
        &mut self,
        dir: &Path,
        source: &SourceInfo,
        tags: &BTreeMap<String, String>,
    ) -> Result<Snapshot, KopiaError> {
        if self.config().index_version != 2 {
            return Err(KopiaError::Unsupported {
                what: "writing into an index version",
                value: self.config().index_version.to_string(),
            });
        }
        if let Some(reserved) = RESERVED_LABELS.iter().find(|l| tags.contains_key(**l)) {
            return Err(KopiaError::Unsupported {
                what: "tag (kopia's own label)",
                value: (*reserved).to_owned(),
            });
        }
        let mut lease = Lease::acquire(self).await?;
        let written = self.write_under(&mut lease, dir, source, tags).await;
        lease.release(self).await;
        written
    }

    async fn write_under(
        &mut self,
        lease: &mut Lease,
        dir: &Path,
        source: &SourceInfo,
        tags: &BTreeMap<String, String>,
    ) -> Result<Snapshot, KopiaError> {
        // The source's latest snapshot: its unchanged files are not read again.
        let parent = match self.snapshots().await {
            Ok(all) => all
                .into_iter()
                .filter(|s| {
                    (&s.host, &s.user, &s.path) == (&source.host, &source.user, &source.path)
                        && s.root.kind == "d"
                })
                .max_by_key(|s| s.start_time)
                .map(|s| s.root.obj),
            Err(error) => {
                tracing::warn!(%error, "no parent snapshot: every file is read");
                None
            }
        };
        let mut writer = Writer::new(self, lease);
        let start = writer.now;
        let root_name = dir.file_name().unwrap_or_default().to_owned();
        let (root, tally) = match writer.dir(dir, root_name, parent).await {
            Ok(walked) => walked,
            Err(e) => return Err(writer.abandon(e).await),
        };
        let end = Timestamp::now();
        let mut labels: BTreeMap<String, String> = tags.clone();
        labels.insert("type".to_owned(), "snapshot".to_owned());
        labels.insert("hostname".to_owned(), source.host.clone());
        labels.insert("username".to_owned(), source.user.clone());
        labels.insert("path".to_owned(), source.path.clone());
        let mut manifest_id = [0u8; 16];
        rand::fill(&mut manifest_id);
        let manifest_id = hex::encode(manifest_id);
        let stats = Stats {
            file_count: tally.files,
            cached_files: tally.cached,
            non_cached_files: tally.files - tally.cached,
        };
        let mut data = serde_json::json!({
            "id": "",
            "source": {"host": source.host, "userName": source.user, "path": source.path},
            "description": "",
            "startTime": start,
            "endTime": end,
            "stats": {
                "totalSize": tally.size, "excludedTotalSize": 0, "fileCount": stats.file_count,
                "cachedFiles": stats.cached_files, "nonCachedFiles": stats.non_cached_files,
                "dirCount": tally.dirs,
                "excludedFileCount": 0, "excludedDirCount": 0, "ignoredErrorCount": 0,
                "errorCount": 0
            },
            "rootEntry": root,
        });
        if !tags.is_empty() {
            data["tags"] = serde_json::json!(tags);
        }
        let manifest = serde_json::json!([{
            "id": manifest_id, "labels": labels, "modified": end, "data": data,
        }]);
        if let Err(e) = writer.manifest(manifest).await {
            return Err(writer.abandon(e).await);
        }
        let stored = writer.commit().await?;
        self.index.absorb(stored);
        let root = serde_json::to_value(&root)
            .and_then(serde_json::from_value)
            .map_err(|e| KopiaError::malformed("the root entry", e))?;
        Ok(Snapshot {
            id: manifest_id,
            host: source.host.clone(),
            user: source.user.clone(),
            path: source.path.clone(),
            start_time: Some(start),
            end_time: Some(end),
            tags: tags.clone(),
            root,
            stats,
        })
    }

    /// Deletes snapshot `id`: a newer manifest entry marks it deleted, as kopia's does. Its
    /// contents stay until maintenance collects what no snapshot uses.
    ///
    /// # Errors
    /// [`KopiaError::MissingSnapshot`], and the errors of writing.
    pub async fn delete_snapshot(&mut self, id: &str) -> Result<(), KopiaError> {
        let snapshot = self
            .snapshots()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| KopiaError::MissingSnapshot(id.to_owned()))?;
        let labels = serde_json::json!({
            "type": "snapshot",
            "hostname": snapshot.host,
            "username": snapshot.user,
            "path": snapshot.path,
        });
        self.write_manifest(serde_json::json!([{
            "id": id, "labels": labels, "modified": Timestamp::now(), "deleted": true,
        }]))
        .await
    }

    /// Writes manifest `entries` (kopia's `[{"id", "labels", "modified", …}]`) alone, under a
    /// session of its own.
    pub(crate) async fn write_manifest(
        &mut self,
        entries: serde_json::Value,
    ) -> Result<(), KopiaError> {
        let mut lease = Lease::acquire(self).await?;
        let mut writer = Writer::new(self, &mut lease);
        let stored = match writer.manifest(entries).await {
            Ok(()) => writer.commit().await,
            Err(e) => Err(writer.abandon(e).await),
        };
        lease.release(self).await;
        self.index.absorb(stored?);
        Ok(())
    }
}
