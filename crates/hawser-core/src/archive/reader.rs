//! Streaming reader for untrusted archives.
//!
//! Every entry is checked before its contents are used: the path must stay inside the archive
//! root (no absolute path, no `..`), only regular files are accepted (links, devices and fifos
//! are rejected; directory entries and global PAX headers are skipped), an entry may not exceed
//! [`ReaderOptions::max_entry_bytes`], and item contents must be one JSON object. Such problems
//! are per-entry errors: the iterator reports them and goes on. A stream that is not gzip, a
//! broken tar structure, or more than [`ReaderOptions::max_total_bytes`] of decompressed data
//! (a gzip bomb), or more than [`ReaderOptions::max_items`] items is fatal: the iterator
//! reports it once and ends.
//!
//! Tar extension headers (GNU long names and long links, PAX records) are read here rather than
//! by the `tar` crate, which reads them whole into memory whatever their size: an extension
//! header larger than [`ReaderOptions::max_extension_bytes`] is skipped unread (streamed past,
//! as entry data is) and the entry it describes is rejected. Entries are framed by their header
//! size; a PAX `size` record that disagrees with it would frame the stream differently from
//! other readers, so it is fatal.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flate2::read::GzDecoder;

use super::{ItemPath, PathError, RESOURCES_DIR, VERSION_PATH, VersionDir};

/// Limits and choices of the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Largest accepted entry (bytes of contents); default 3 MiB, the API server's limit on a
    /// request body, so no larger object could be created anyway.
    pub max_entry_bytes: u64,
    /// Largest accepted extension header (a GNU long name or a PAX header); default 64 KiB.
    pub max_extension_bytes: u64,
    /// Most items read from one archive; default 2,000,000.
    pub max_items: u64,
    /// Largest accepted decompressed stream (tar headers included).
    pub max_total_bytes: u64,
    /// Also yield the `<version>-preferredversion` and other-version copies (skipped unread
    /// otherwise).
    pub include_versioned_copies: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            max_entry_bytes: 3 << 20,
            max_extension_bytes: 64 << 10,
            max_items: 2_000_000,
            max_total_bytes: 16 << 30,
            include_versioned_copies: false,
        }
    }
}

/// One item read from the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveItem {
    /// The entry path as found (minus a leading `./`).
    pub path: String,
    /// The parsed path.
    pub location: ItemPath,
    /// The object.
    pub object: serde_json::Value,
    /// The entry's contents: the JSON text `object` was parsed from.
    pub bytes: Vec<u8>,
}

/// What is wrong with one entry.
#[derive(Debug, thiserror::Error)]
pub enum EntryErrorKind {
    /// Absolute path or a `..` component.
    #[error("path escapes the archive root")]
    PathEscapes,
    /// The path is not valid UTF-8.
    #[error("path is not valid UTF-8")]
    NonUtf8Path,
    /// A symbolic or hard link.
    #[error("links are not allowed")]
    Link,
    /// A character or block device or a fifo.
    #[error("device and fifo entries are not allowed")]
    Special,
    /// Another entry type (sparse files, vendor extensions).
    #[error("unsupported entry type {0}")]
    UnsupportedType(u8),
    /// Larger than the entry limit.
    #[error("entry of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Declared size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Under `resources/` but not an item path, or outside the known layout.
    #[error("unexpected entry")]
    UnexpectedPath(#[source] Option<PathError>),
    /// Contents are not JSON.
    #[error("item is not valid JSON")]
    InvalidJson(#[source] serde_json::Error),
    /// Contents are JSON but not an object.
    #[error("item is not a JSON object")]
    NotAnObject,
    /// `metadata/version` is not a version string.
    #[error("metadata/version does not hold a format version")]
    BadVersion,
    /// The GNU long name or PAX header describing the entry is larger than allowed; it was
    /// skipped unread, so the entry's real path is unknown.
    #[error("its extension header of {size} bytes exceeds the limit of {limit} bytes")]
    ExtensionTooLarge {
        /// Declared size of the extension header.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

/// A rejected entry; reading goes on with the next one.
#[derive(Debug, thiserror::Error)]
#[error("archive entry {path:?} rejected")]
pub struct EntryError {
    /// The entry path, lossily decoded.
    pub path: String,
    /// What is wrong.
    #[source]
    pub kind: EntryErrorKind,
}

impl EntryError {
    /// Stable short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self.kind {
            EntryErrorKind::PathEscapes => "ArchivePathEscape",
            EntryErrorKind::NonUtf8Path => "ArchiveBadPath",
            EntryErrorKind::Link => "ArchiveLink",
            EntryErrorKind::Special => "ArchiveSpecialFile",
            EntryErrorKind::UnsupportedType(_) => "ArchiveUnsupportedEntry",
            EntryErrorKind::TooLarge { .. } => "ArchiveEntryTooLarge",
            EntryErrorKind::UnexpectedPath(_) => "ArchiveUnexpectedEntry",
            EntryErrorKind::InvalidJson(_) | EntryErrorKind::NotAnObject => "ArchiveInvalidItem",
            EntryErrorKind::BadVersion => "ArchiveBadVersion",
            EntryErrorKind::ExtensionTooLarge { .. } => "ArchiveExtensionTooLarge",
        }
    }
}

/// The archive as a whole cannot be read further.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Not gzip, truncated, or a broken tar structure.
    #[error("reading the archive stream")]
    Corrupt(#[source] io::Error),
    /// More decompressed data than allowed.
    #[error("archive decompresses to more than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// More items than allowed.
    #[error("archive holds more than {limit} items")]
    TooManyItems {
        /// The limit.
        limit: u64,
    },
}

impl ArchiveError {
    /// Stable short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Corrupt(_) => "ArchiveCorrupt",
            Self::TooLarge { .. } => "ArchiveTooLarge",
            Self::TooManyItems { .. } => "ArchiveTooManyItems",
        }
    }
}

/// One result of the item iterator.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// One entry was rejected; the next call goes on.
    #[error(transparent)]
    Entry(#[from] EntryError),
    /// The archive is unreadable; the iterator ends after this.
    #[error(transparent)]
    Fatal(#[from] ArchiveError),
}

impl ReadError {
    /// Whether reading stopped.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Fatal(_))
    }

    /// Stable short category.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Entry(e) => e.category(),
            Self::Fatal(e) => e.category(),
        }
    }
}

/// Counts decompressed bytes and fails once the limit is passed.
struct Limited<R> {
    inner: R,
    left: u64,
    exceeded: Arc<AtomicBool>,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // Probe one byte: an exactly-at-limit stream is fine, one byte more is not.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => {
                    self.exceeded.store(true, Ordering::Relaxed);
                    Err(io::Error::other("decompressed size limit exceeded"))
                }
            };
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Reads a backup archive from `R`.
pub struct ArchiveReader<R: Read> {
    archive: tar::Archive<Limited<GzDecoder<R>>>,
    options: ReaderOptions,
    exceeded: Arc<AtomicBool>,
}

impl<R: Read> ArchiveReader<R> {
    /// A reader of the gzip-compressed tar stream `inner`.
    pub fn new(inner: R, options: ReaderOptions) -> Self {
        let exceeded = Arc::new(AtomicBool::new(false));
        let limited = Limited {
            inner: GzDecoder::new(inner),
            left: options.max_total_bytes,
            exceeded: exceeded.clone(),
        };
        Self {
            archive: tar::Archive::new(limited),
            options,
            exceeded,
        }
    }

    /// Iterates over the items, in archive order.
    pub fn items(&mut self) -> Result<Items<'_, R>, ArchiveError> {
        // Raw: extension headers come to `Items`, which bounds them before reading.
        let entries = self
            .archive
            .entries()
            .map_err(ArchiveError::Corrupt)?
            .raw(true);
        Ok(Items {
            entries,
            options: self.options,
            exceeded: self.exceeded.clone(),
            done: false,
            format_version: None,
            pending: Extensions::default(),
            items: 0,
        })
    }
}

/// Iterator over the items of an archive; see the module docs for what is an error.
pub struct Items<'a, R: Read> {
    entries: tar::Entries<'a, Limited<GzDecoder<R>>>,
    options: ReaderOptions,
    exceeded: Arc<AtomicBool>,
    done: bool,
    format_version: Option<String>,
    pending: Extensions,
    items: u64,
}

/// The extension headers read since the last entry; they describe the next one.
#[derive(Default)]
struct Extensions {
    long_name: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
    /// An extension header that was too large to read: (declared size, limit).
    refused: Option<(u64, u64)>,
    any: bool,
}

impl Extensions {
    /// Takes in one extension header entry (`L`, `K` or `x`): within the limit it is read,
    /// otherwise it is left unread and the entry it describes will be rejected.
    fn take_in<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        limit: u64,
    ) -> Result<(), io::Error> {
        self.any = true;
        let kind = entry.header().entry_type();
        let size = entry.header().entry_size()?;
        if kind.is_gnu_longlink() {
            // Link targets are never used: links are rejected.
            return Ok(());
        }
        if size > limit {
            self.refused = Some((size, limit));
            return Ok(());
        }
        let slot = if kind.is_gnu_longname() {
            &mut self.long_name
        } else {
            &mut self.pax
        };
        if slot.is_some() {
            return Err(io::Error::other(
                "two extension headers of one kind describe the same entry",
            ));
        }
        let mut data = Vec::new();
        (&mut entry).take(limit).read_to_end(&mut data)?;
        if (data.len() as u64) < size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "archive ends inside an extension header",
            ));
        }
        *slot = Some(data);
        Ok(())
    }

    /// The path these extensions give the entry (a GNU long name first, then a PAX `path`
    /// record, as the `tar` crate reads them), and a PAX `size` that disagrees with
    /// `header_size` as an error.
    fn path(&self, header_size: u64) -> Result<Option<Vec<u8>>, io::Error> {
        let mut pax_path = None;
        if let Some(pax) = &self.pax {
            for record in tar::PaxExtensions::new(pax) {
                let record = record?;
                match record.key_bytes() {
                    b"path" => pax_path = Some(record.value_bytes().to_vec()),
                    b"size" => {
                        let size = std::str::from_utf8(record.value_bytes())
                            .ok()
                            .and_then(|v| v.parse::<u64>().ok());
                        if size != Some(header_size) {
                            return Err(io::Error::other(
                                "a PAX size record disagrees with the entry's header",
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
        let long_name = self.long_name.as_ref().map(|n| {
            let end = n.iter().position(|b| *b == 0).unwrap_or(n.len());
            n[..end].to_vec()
        });
        Ok(long_name.or(pax_path))
    }
}

impl<R: Read> Items<'_, R> {
    /// The contents of `metadata/version` (trimmed) once that entry has been read.
    pub fn format_version(&self) -> Option<&str> {
        self.format_version.as_deref()
    }

    fn fatal(&mut self, e: io::Error) -> ReadError {
        self.done = true;
        if self.exceeded.load(Ordering::Relaxed) {
            ReadError::Fatal(ArchiveError::TooLarge {
                limit: self.options.max_total_bytes,
            })
        } else {
            ReadError::Fatal(ArchiveError::Corrupt(e))
        }
    }
}

enum Step {
    Skip,
    Item(ArchiveItem),
}

impl<R: Read> Iterator for Items<'_, R> {
    type Item = Result<ArchiveItem, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let entry = match self.entries.next() {
                None if self.pending.any => {
                    let e = io::Error::other("extension headers at the end describe no entry");
                    return Some(Err(self.fatal(e)));
                }
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => return Some(Err(self.fatal(e))),
                Some(Ok(entry)) => entry,
            };
            let header = entry.header();
            let kind = header.entry_type();
            let recognized = header.as_gnu().is_some() || header.as_ustar().is_some();
            if recognized
                && (kind.is_gnu_longname()
                    || kind.is_gnu_longlink()
                    || kind.is_pax_local_extensions())
            {
                if let Err(e) = self
                    .pending
                    .take_in(entry, self.options.max_extension_bytes)
                {
                    return Some(Err(self.fatal(e)));
                }
                continue;
            }
            let extensions = std::mem::take(&mut self.pending);
            match check_entry(entry, &extensions, &self.options, &mut self.format_version) {
                Ok(Step::Skip) => {}
                Ok(Step::Item(item)) => {
                    self.items += 1;
                    if self.items > self.options.max_items {
                        self.done = true;
                        return Some(Err(ReadError::Fatal(ArchiveError::TooManyItems {
                            limit: self.options.max_items,
                        })));
                    }
                    return Some(Ok(item));
                }
                Err(Failure::Entry(e)) => return Some(Err(ReadError::Entry(e))),
                Err(Failure::Io(e)) => return Some(Err(self.fatal(e))),
            }
        }
        None
    }
}

enum Failure {
    Entry(EntryError),
    Io(io::Error),
}

fn check_entry<R: Read>(
    mut entry: tar::Entry<'_, R>,
    extensions: &Extensions,
    options: &ReaderOptions,
    format_version: &mut Option<String>,
) -> Result<Step, Failure> {
    let header_size = entry.header().entry_size().map_err(Failure::Io)?;
    let raw = match extensions.path(header_size).map_err(Failure::Io)? {
        Some(path) => path,
        None => entry.path_bytes().into_owned(),
    };
    let lossy = String::from_utf8_lossy(&raw).into_owned();
    let reject = |kind| {
        Failure::Entry(EntryError {
            path: lossy.clone(),
            kind,
        })
    };
    if let Some((size, limit)) = extensions.refused {
        return Err(reject(EntryErrorKind::ExtensionTooLarge { size, limit }));
    }
    let path = std::str::from_utf8(&raw).map_err(|_| reject(EntryErrorKind::NonUtf8Path))?;
    if path.starts_with('/') || path.split(['/', '\\']).any(|c| c == "..") {
        return Err(reject(EntryErrorKind::PathEscapes));
    }
    let path = path.trim_start_matches("./");
    use tar::EntryType as T;
    match entry.header().entry_type() {
        T::Regular | T::Continuous => {}
        T::Directory | T::XGlobalHeader => return Ok(Step::Skip),
        T::Symlink | T::Link => return Err(reject(EntryErrorKind::Link)),
        T::Char | T::Block | T::Fifo => return Err(reject(EntryErrorKind::Special)),
        other => return Err(reject(EntryErrorKind::UnsupportedType(other.as_byte()))),
    }
    let size = entry.header().size().map_err(Failure::Io)?;
    if size > options.max_entry_bytes {
        return Err(reject(EntryErrorKind::TooLarge {
            size,
            limit: options.max_entry_bytes,
        }));
    }
    if path == VERSION_PATH {
        let data = read_all(&mut entry, size, options.max_entry_bytes)?;
        let text = std::str::from_utf8(&data).map(str::trim).unwrap_or("");
        let valid = !text.is_empty()
            && text.len() <= 32
            && text.chars().all(|c| c.is_ascii_digit() || c == '.');
        if !valid {
            return Err(reject(EntryErrorKind::BadVersion));
        }
        *format_version = Some(text.to_string());
        return Ok(Step::Skip);
    }
    let in_resources = path
        .strip_prefix(RESOURCES_DIR)
        .is_some_and(|rest| rest.starts_with('/'));
    if !in_resources {
        return Err(reject(EntryErrorKind::UnexpectedPath(None)));
    }
    let location =
        ItemPath::parse(path).map_err(|e| reject(EntryErrorKind::UnexpectedPath(Some(e))))?;
    if location.version_dir != VersionDir::Unversioned && !options.include_versioned_copies {
        return Ok(Step::Skip);
    }
    let data = read_all(&mut entry, size, options.max_entry_bytes)?;
    let object: serde_json::Value =
        serde_json::from_slice(&data).map_err(|e| reject(EntryErrorKind::InvalidJson(e)))?;
    if !object.is_object() {
        return Err(reject(EntryErrorKind::NotAnObject));
    }
    Ok(Step::Item(ArchiveItem {
        path: path.to_string(),
        location,
        object,
        bytes: data,
    }))
}

/// Reads an entry whose declared size is within `limit`; a short read means the stream ended
/// inside the entry, which is fatal.
fn read_all<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    size: u64,
    limit: u64,
) -> Result<Vec<u8>, Failure> {
    let mut data = Vec::new();
    entry
        .take(limit)
        .read_to_end(&mut data)
        .map_err(Failure::Io)?;
    if (data.len() as u64) < size {
        return Err(Failure::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "archive ends inside an entry",
        )));
    }
    Ok(data)
}
