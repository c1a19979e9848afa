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
use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
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
    #[serde(serialize_with = "go_name")]
    name: OsString,
    #[serde(rename = "type")]
    kind: &'static str,
    /// Left out when no bit is set, as kopia leaves it out (`omitempty`), like `size` and
    /// `mtime` (directories and empty files have no size; a time at the Unix epoch is zero).
    #[serde(skip_serializing_if = "no_mode")]
    mode: String,
    #[serde(skip_serializing_if = "is_zero")]
    size: u64,
    #[serde(skip_serializing_if = "at_epoch")]
    mtime: Timestamp,
    #[serde(skip_serializing_if = "is_zero")]
    uid: u32,
    #[serde(skip_serializing_if = "is_zero")]
    gid: u32,
    obj: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    summ: Option<Summary>,
}

fn no_mode(mode: &str) -> bool {
    mode.trim_start_matches('0').is_empty()
}

fn at_epoch(time: &Timestamp) -> bool {
    *time == Timestamp::UNIX_EPOCH
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
        Ok((self.object(None, &parts).await?, offset))
    }

    /// The object ID of the contents `parts` (start, length, ID) in order, stored with
    /// `prefix`: the content itself when there is one, else `I` and the object of their
    /// indirect list, written as kopia writes it: cut by the splitter like any object, with
    /// the data's prefix, or `x` for file data's lists. A list of a few pieces is one content
    /// (`Ix…`, `Ik…`); a longer one is cut, and its pieces listed in turn (`IIx…`).
    async fn object(
        &mut self,
        prefix: Option<char>,
        parts: &[(u64, u64, ContentId)],
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
        let mut bytes =
            serde_json::to_vec(&list).map_err(|e| KopiaError::malformed("an indirect list", e))?;
        bytes.push(b'\n');
        let mut out = ObjectOut::new(self, Some(prefix.unwrap_or('x')));
        out.push(self, &bytes).await?;
        Ok(format!("I{}", Box::pin(out.finish(self)).await?))
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
        name: OsString,
        parent: Option<String>,
    ) -> Result<(EntryOut, Tally), KopiaError> {
        let meta = std::fs::symlink_metadata(path).map_err(KopiaError::reading(path))?;
        let previous = self.previous(parent.as_deref()).await;
        let mut children: Vec<(bool, OsString, std::path::PathBuf)> = Vec::new();
        for child in std::fs::read_dir(path).map_err(KopiaError::reading(path))? {
            let child = child.map_err(KopiaError::reading(path))?;
            let child_name = child.file_name();
            let is_dir = child
                .file_type()
                .map_err(KopiaError::reading(path))?
                .is_dir();
            children.push((!is_dir, child_name, child.path()));
        }
        // Directories first, then by name (its bytes), as kopia lists them.
        children.sort();
        // As kopia's summary: the latest time of the entries and of what the subdirectories
        // hold, the directory's own only when it is empty.
        let mut tally = Tally {
            dirs: 1,
            ..Tally::default()
        };
        let mut listing = Listing::new(self);
        for (_, child_name, child_path) in children {
            // The parent's listing holds the name as kopia reads it back.
            let key = go_lossy(&child_name);
            let child_meta =
                std::fs::symlink_metadata(&child_path).map_err(KopiaError::reading(&child_path))?;
            let kind = child_meta.file_type();
            let mtime = mtime_of(&child_meta);
            let entry = if kind.is_dir() {
                let parent = previous
                    .get(&key)
                    .filter(|p| p.kind == "d")
                    .map(|p| p.obj.clone());
                let (entry, sub) = Box::pin(self.dir(&child_path, child_name, parent)).await?;
                tally.add(&sub);
                tally.max_time = tally.max_time.max(Some(mtime));
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
                    let (obj, size) = match self.unchanged(previous.get(&key), &child_meta) {
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
                    size,
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
        if tally.max_time.is_none() {
            tally.max_time = Some(mtime_of(&meta));
        }
        let obj = listing.finish(self, Summary::from(tally)).await?;
        let entry = EntryOut {
            name,
            kind: "d",
            mode: go_mode(meta.mode()),
            size: 0,
            mtime: mtime_of(&meta),
            uid: meta.uid(),
            gid: meta.gid(),
            obj,
            summ: Some(Summary::from(tally)),
        };
        Ok((entry, tally))
    }
}

/// An object written as kopia's object writer writes one: its bytes cut by the repository's
/// splitter, each piece a content with `prefix`, several pieces named by an indirect list.
struct ObjectOut {
    prefix: Option<char>,
    chunker: Chunker,
    parts: Vec<(u64, u64, ContentId)>,
    stored: u64,
}

impl ObjectOut {
    fn new(writer: &Writer<'_>, prefix: Option<char>) -> Self {
        Self {
            prefix,
            chunker: Chunker::new(writer.splitter),
            parts: Vec::new(),
            stored: 0,
        }
    }

    async fn push(&mut self, writer: &mut Writer<'_>, bytes: &[u8]) -> Result<(), KopiaError> {
        for piece in self.chunker.push(bytes, false) {
            self.store(writer, &piece).await?;
        }
        Ok(())
    }

    async fn store(&mut self, writer: &mut Writer<'_>, piece: &[u8]) -> Result<(), KopiaError> {
        let id = writer.content(self.prefix, piece).await?;
        let length = piece.len() as u64;
        self.parts.push((self.stored, length, id));
        self.stored += length;
        Ok(())
    }

    /// Stores what is left (an empty object is one empty content, as kopia's); returns the
    /// object ID.
    async fn finish(mut self, writer: &mut Writer<'_>) -> Result<String, KopiaError> {
        for piece in self.chunker.push(&[], true) {
            self.store(writer, &piece).await?;
        }
        if self.parts.is_empty() {
            self.store(writer, &[]).await?;
        }
        writer.object(self.prefix, &self.parts).await
    }
}

/// Bytes of listing text gathered before they go to the splitter.
const LISTING_BATCH: usize = 64 << 10;

/// A directory listing (`kopia:directory` JSON, as Go's encoder writes it), stored as it is
/// written: no directory is too large, and none is held whole in memory.
struct Listing {
    buffer: Vec<u8>,
    out: ObjectOut,
    empty: bool,
}

impl Listing {
    fn new(writer: &Writer<'_>) -> Self {
        Self {
            buffer: br#"{"stream":"kopia:directory","entries":"#.to_vec(),
            out: ObjectOut::new(writer, Some('k')),
            empty: true,
        }
    }

    async fn push(&mut self, writer: &mut Writer<'_>, entry: &EntryOut) -> Result<(), KopiaError> {
        let first = std::mem::take(&mut self.empty);
        self.buffer.push(if first { b'[' } else { b',' });
        go_json(&mut self.buffer, entry)
            .map_err(|e| KopiaError::malformed(format!("the entry {}", entry.name.display()), e))?;
        if self.buffer.len() >= LISTING_BATCH {
            self.out.push(writer, &self.buffer).await?;
            self.buffer.clear();
        }
        Ok(())
    }

    /// Ends the listing with its summary; returns its object ID.
    async fn finish(
        mut self,
        writer: &mut Writer<'_>,
        summary: Summary,
    ) -> Result<String, KopiaError> {
        // Go writes a listing without entries as `null`, as kopia's empty directories are.
        let entries_end: &[u8] = if self.empty { b"null" } else { b"]" };
        self.buffer.extend_from_slice(entries_end);
        self.buffer.extend_from_slice(br#","summary":"#);
        go_json(&mut self.buffer, &summary)
            .map_err(|e| KopiaError::malformed("a directory summary", e))?;
        self.buffer.extend_from_slice(b"}\n");
        self.out.push(writer, &self.buffer).await?;
        self.out.finish(writer).await
    }
}

/// A name as Go's `encoding/json` reads it back: each byte that is not part of valid UTF-8
/// becomes U+FFFD (Go takes such bytes one at a time; Rust's lossy decoding can take several
/// as one).
pub(crate) fn go_lossy(name: &OsStr) -> String {
    let mut out = String::new();
    go_utf8(name.as_bytes(), |run| {
        out.push_str(run.unwrap_or("\u{fffd}"))
    });
    out
}

/// Walks `bytes` as Go's encoder does: runs of valid UTF-8, and each other byte alone (`None`).
fn go_utf8(mut bytes: &[u8], mut run: impl FnMut(Option<&str>)) {
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(text) => return run(Some(text)),
            Err(e) => {
                let (text, rest) = bytes.split_at(e.valid_up_to());
                if !text.is_empty() {
                    run(Some(std::str::from_utf8(text).unwrap_or_default()));
                }
                run(None);
                bytes = &rest[1..];
            }
        }
    }
}

/// Serializes a file name as kopia writes it: a name of valid UTF-8 as any string, each byte
/// that is not as Go's escape `\ufffd` (a real U+FFFD in a name stays as it is).
fn go_name<S: serde::Serializer>(name: &OsString, serializer: S) -> Result<S::Ok, S::Error> {
    if let Some(text) = name.to_str() {
        return serializer.serialize_str(text);
    }
    let mut json = Vec::from(*b"\"");
    let mut failed = None;
    go_utf8(name.as_bytes(), |run| match run {
        Some(text) => {
            let mut quoted = Vec::new();
            match go_json(&mut quoted, &text) {
                Ok(()) => json.extend_from_slice(&quoted[1..quoted.len() - 1]),
                Err(e) => failed = Some(e),
            }
        }
        None => json.extend_from_slice(br"\ufffd"),
    });
    json.push(b'"');
    if let Some(e) = failed {
        return Err(serde::ser::Error::custom(e));
    }
    let json = String::from_utf8(json).map_err(serde::ser::Error::custom)?;
    serde_json::value::RawValue::from_string(json)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// Appends `value` as Go's `encoding/json` writes it (as kopia's listings are written): `<`,
/// `>`, `&`, U+2028 and U+2029 in strings escaped as `\u003c`, `\u003e`, `\u0026`, `\u2028`,
/// `\u2029`, so that a listing here is the same content as kopia's.
fn go_json<T: Serialize>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        GoFormatter,
    ))
}

struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(['<', '>', '&', '\u{2028}', '\u{2029}']) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_escaped_as_go_escapes_them() {
        let mut out = Vec::new();
        super::go_json(&mut out, &"a&b <c>\u{2028}\u{2029}é\n\"").unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            r#""a\u0026b \u003cc\u003e\u2028\u2029é\n\"""#
        );
    }

    #[test]
    fn names_not_utf8_are_written_and_read_back_as_go_does() {
        use std::os::unix::ffi::OsStringExt as _;
        // An invalid byte, a real U+FFFD, a cut three-byte sequence (two bytes: two
        // replacements in Go, one in Rust's lossy decoding), a `<` to escape.
        let name = std::ffi::OsString::from_vec(b"<a\xff\xef\xbf\xbdb\xe2\x82".to_vec());
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, super::GoFormatter);
        super::go_name(&name, &mut serializer).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "\"\\u003ca\\ufffd\u{fffd}b\\ufffd\\ufffd\""
        );
        assert_eq!(
            super::go_lossy(&name),
            "<a\u{fffd}\u{fffd}b\u{fffd}\u{fffd}"
        );
        let read: String = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(read, super::go_lossy(&name));
    }
}
