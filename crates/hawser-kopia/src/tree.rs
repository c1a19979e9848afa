//! The tree being snapshotted: files cut into contents by content-defined chunking
//! ([`crate::chunker`]), indirect lists for files of several contents, directory listings
//! (directories first, then by name, as kopia lists them), and the summaries kopia keeps per
//! directory.
//!
//! A file that the parent snapshot (the source's latest) holds with the same size,
//! modification time (to the nanosecond), permissions and owner is not read again: its entry
//! takes the parent's object, as kopia's cached files do, once the object's first content is
//! in the index. The manifest counts those as `cachedFiles`.

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use jiff::Timestamp;
use serde::Serialize;

use crate::KopiaError;
use crate::chunker::Chunker;
use crate::content::ContentId;
use crate::object::{IndirectEntry, IndirectList, ObjectId, is_zero};
use crate::snapshot::DirEntry;
use crate::writer::{HashedAside, Writer};

/// What a snapshot counted, for its manifest.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    pub size: u64,
    pub files: u64,
    symlinks: u64,
    pub dirs: u64,
    /// Files taken from the parent snapshot without being read.
    pub cached: u64,
    max_time: Option<Timestamp>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.size += other.size;
        self.files += other.files;
        self.symlinks += other.symlinks;
        self.dirs += other.dirs;
        self.cached += other.cached;
        self.max_time = self.max_time.max(other.max_time);
    }
}

#[derive(Serialize)]
struct Summary {
    size: u64,
    files: u64,
    symlinks: u64,
    dirs: u64,
    #[serde(rename = "maxTime", skip_serializing_if = "Option::is_none")]
    max_time: Option<Timestamp>,
    #[serde(rename = "numFailed")]
    num_failed: u64,
}

impl From<Tally> for Summary {
    fn from(t: Tally) -> Self {
        Self {
            size: t.size,
            files: t.files,
            symlinks: t.symlinks,
            dirs: t.dirs,
            max_time: t.max_time,
            num_failed: 0,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct EntryOut {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    mtime: Timestamp,
    #[serde(skip_serializing_if = "is_zero")]
    uid: u32,
    #[serde(skip_serializing_if = "is_zero")]
    gid: u32,
    obj: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    summ: Option<Summary>,
}

/// Go's file mode text of Unix permission bits (setuid, setgid and sticky are Go's bits).
fn go_mode(unix: u32) -> String {
    let mut mode = unix & 0o777;
    for (unix_bit, go_bit) in [(0o4000, 1 << 23), (0o2000, 1 << 22), (0o1000, 1 << 20)] {
        if unix & unix_bit != 0 {
            mode |= go_bit;
        }
    }
    format!("0{mode:o}")
}

fn mtime_of(meta: &std::fs::Metadata) -> Timestamp {
    Timestamp::new(meta.mtime(), i32::try_from(meta.mtime_nsec()).unwrap_or(0))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

impl Writer<'_> {
    /// Stores a file's data; returns its object ID and size.
    pub(crate) async fn file(&mut self, path: &Path) -> Result<(String, u64), KopiaError> {
        let mut file = std::fs::File::open(path).map_err(KopiaError::reading(path))?;
        let mut chunker = Chunker::new(self.splitter);
        let mut parts: Vec<(u64, u64, ContentId)> = Vec::new();
        let mut offset = 0u64;
        let mut buffer = vec![0u8; 1 << 20];
        // The previous piece (its start and length), hashed aside while this one is cut.
        let mut aside: Option<(u64, u64, HashedAside)> = None;
        loop {
            let n = file.read(&mut buffer).map_err(KopiaError::reading(path))?;
            let mut chunks = chunker.push(&buffer[..n], n == 0).into_iter().peekable();
            while let Some(chunk) = chunks.next() {
                let length = chunk.len() as u64;
                if n == 0 && aside.is_none() && chunks.peek().is_none() {
                    // A file of one piece: no handoff to another thread.
                    let id = self.content(None, &chunk).await?;
                    parts.push((offset, length, id));
                } else if let Some((start, previous, hashing)) =
                    aside.replace((offset, length, self.hash_aside(chunk)))
                {
                    parts.push((start, previous, self.store_hashed(hashing).await?));
                }
                offset += length;
            }
            if n == 0 {
                break;
            }
        }
        if let Some((start, length, hashing)) = aside {
            parts.push((start, length, self.store_hashed(hashing).await?));
        }
        if parts.is_empty() {
            let id = self.content(None, &[]).await?;
            return Ok((id.to_string(), 0));
        }
        Ok((self.object(&parts, 'x').await?, offset))
    }

    /// The object ID of the contents `parts` (start, length, ID) in order: the content itself
    /// when there is one, else an indirect list of them stored with `list_prefix` (`x` for
    /// files; a directory's is `k`, as kopia writes them).
    async fn object(
        &mut self,
        parts: &[(u64, u64, ContentId)],
        list_prefix: char,
    ) -> Result<String, KopiaError> {
        if let [(_, _, id)] = parts {
            return Ok(id.to_string());
        }
        let list = IndirectList {
            stream: "kopia:indirect".to_owned(),
            entries: parts
                .iter()
                .map(|(start, length, id)| IndirectEntry {
                    start: *start,
                    length: *length,
                    object: id.to_string(),
                })
                .collect(),
        };
        let mut list =
            serde_json::to_vec(&list).map_err(|e| KopiaError::malformed("an indirect list", e))?;
        list.push(b'\n');
        let id = self.content(Some(list_prefix), &list).await?;
        Ok(format!("I{id}"))
    }

    /// The parent snapshot's entries of directory object `obj`, by name; none when it cannot
    /// be read (the files are then read again).
    async fn previous(&self, obj: Option<&str>) -> HashMap<String, DirEntry> {
        let Some(obj) = obj else {
            return HashMap::new();
        };
        match self.repo.directory(obj).await {
            Ok(entries) => entries.into_iter().map(|e| (e.name.clone(), e)).collect(),
            Err(error) => {
                tracing::warn!(%error, directory = obj, "the parent's listing is not read; its files are read again");
                HashMap::new()
            }
        }
    }

    /// The parent's object of a file that did not change (see the module docs).
    fn unchanged(&self, previous: Option<&DirEntry>, meta: &std::fs::Metadata) -> Option<String> {
        let prev = previous?;
        let same = prev.kind == "f"
            && prev.size == meta.len()
            && prev.mtime == mtime_of(meta)
            && prev.unix_mode() == meta.mode() & 0o7777
            && (prev.uid, prev.gid) == (meta.uid(), meta.gid());
        let id = ObjectId::parse(&prev.obj).ok().filter(|_| same)?;
        let held = self.repo.entry(id.content()).is_some_and(|e| !e.deleted);
        held.then(|| prev.obj.clone())
    }

    /// Stores a directory tree; returns its entry (named `name`) and what it holds. `parent`
    /// is the parent snapshot's object of the same directory, if it has one.
    pub(crate) async fn dir(
        &mut self,
        path: &Path,
        name: String,
        parent: Option<String>,
    ) -> Result<(EntryOut, Tally), KopiaError> {
        let meta = std::fs::symlink_metadata(path).map_err(KopiaError::reading(path))?;
        let previous = self.previous(parent.as_deref()).await;
        let mut children: Vec<(bool, String, std::path::PathBuf)> = Vec::new();
        for child in std::fs::read_dir(path).map_err(KopiaError::reading(path))? {
            let child = child.map_err(KopiaError::reading(path))?;
            let child_name = child.file_name().to_string_lossy().into_owned();
            let is_dir = child
                .file_type()
                .map_err(KopiaError::reading(path))?
                .is_dir();
            children.push((!is_dir, child_name, child.path()));
        }
        // Directories first, then by name, as kopia lists them.
        children.sort();
        let mut tally = Tally {
            dirs: 1,
            max_time: Some(mtime_of(&meta)),
            ..Tally::default()
        };
        let mut listing = Listing::default();
        for (_, child_name, child_path) in children {
            let child_meta =
                std::fs::symlink_metadata(&child_path).map_err(KopiaError::reading(&child_path))?;
            let kind = child_meta.file_type();
            let mtime = mtime_of(&child_meta);
            let entry = if kind.is_dir() {
                let parent = previous
                    .get(&child_name)
                    .filter(|p| p.kind == "d")
                    .map(|p| p.obj.clone());
                let (entry, sub) = Box::pin(self.dir(&child_path, child_name, parent)).await?;
                tally.add(&sub);
                entry
            } else if kind.is_symlink() || kind.is_file() {
                let (obj, size, kind_name) = if kind.is_symlink() {
                    let target = std::fs::read_link(&child_path)
                        .map_err(KopiaError::reading(&child_path))?;
                    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec();
                    let id = self.content(None, &bytes).await?;
                    tally.symlinks += 1;
                    (id.to_string(), bytes.len() as u64, "s")
                } else {
                    let (obj, size) = match self.unchanged(previous.get(&child_name), &child_meta) {
                        Some(obj) => {
                            tally.cached += 1;
                            (obj, child_meta.len())
                        }
                        None => self.file(&child_path).await?,
                    };
                    tally.files += 1;
                    tally.size += size;
                    (obj, size, "f")
                };
                tally.max_time = tally.max_time.max(Some(mtime));
                EntryOut {
                    name: child_name,
                    kind: kind_name,
                    mode: go_mode(child_meta.mode()),
                    size: Some(size),
                    mtime,
                    uid: child_meta.uid(),
                    gid: child_meta.gid(),
                    obj,
                    summ: None,
                }
            } else {
                // Sockets, pipes and devices: kopia stores none either.
                continue;
            };
            listing.push(self, &entry).await?;
        }
        let obj = listing.finish(self, Summary::from(tally)).await?;
        let entry = EntryOut {
            name,
            kind: "d",
            mode: go_mode(meta.mode()),
            size: None,
            mtime: mtime_of(&meta),
            uid: meta.uid(),
            gid: meta.gid(),
            obj,
            summ: Some(Summary::from(tally)),
        };
        Ok((entry, tally))
    }
}

/// Bytes of a directory listing per content: a larger listing is cut into several, named by
/// an indirect list, so no directory is too large and none is held whole in memory.
const LISTING_PART: usize = 1 << 20;

/// A directory listing (`kopia:directory` JSON), stored as it is written.
struct Listing {
    buffer: Vec<u8>,
    parts: Vec<(u64, u64, ContentId)>,
    stored: u64,
    empty: bool,
}

impl Default for Listing {
    fn default() -> Self {
        Self {
            buffer: br#"{"stream":"kopia:directory","entries":["#.to_vec(),
            parts: Vec::new(),
            stored: 0,
            empty: true,
        }
    }
}

impl Listing {
    async fn push(&mut self, writer: &mut Writer<'_>, entry: &EntryOut) -> Result<(), KopiaError> {
        if !std::mem::take(&mut self.empty) {
            self.buffer.push(b',');
        }
        serde_json::to_writer(&mut self.buffer, entry)
            .map_err(|e| KopiaError::malformed(format!("the entry {}", entry.name), e))?;
        if self.buffer.len() >= LISTING_PART {
            self.store(writer).await?;
        }
        Ok(())
    }

    async fn store(&mut self, writer: &mut Writer<'_>) -> Result<(), KopiaError> {
        let id = writer.content(Some('k'), &self.buffer).await?;
        let length = self.buffer.len() as u64;
        self.parts.push((self.stored, length, id));
        self.stored += length;
        self.buffer.clear();
        Ok(())
    }

    /// Ends the listing with its summary; returns its object ID.
    async fn finish(
        mut self,
        writer: &mut Writer<'_>,
        summary: Summary,
    ) -> Result<String, KopiaError> {
        self.buffer.extend_from_slice(br#"],"summary":"#);
        serde_json::to_writer(&mut self.buffer, &summary)
            .map_err(|e| KopiaError::malformed("a directory summary", e))?;
        self.buffer.push(b'}');
        self.store(writer).await?;
        writer.object(&self.parts, 'k').await
    }
}
