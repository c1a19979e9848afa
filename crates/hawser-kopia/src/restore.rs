//! Restoring a snapshot into a directory: files with their content, modes, modification times
//! (nanoseconds) and, when running as root, owners; directories; symbolic links, dangling ones
//! too. Runs of zeros in a file become holes (kopia stores no holes, so a sparse file comes back
//! sparse). A file's pieces are fetched [`RestoreOptions::parallel_reads`] at a time, each one
//! ranged GET, and written at their offsets, so one large file restores at the store's
//! bandwidth rather than one round trip at a time; the small files of a directory (up to
//! [`SMALL_FILE`]) are restored [`RestoreOptions::parallel_files`] at a time, so many small files
//! do not wait for each other's round trip either, one piece at a time each. A symbolic link's
//! target longer than [`LINK_MAX`] is refused before it is read.
//!
//! Names come from the bucket and are not trusted: an entry named `""`, `.`, `..` or with a `/`
//! or NUL is refused, files are created new (an existing file or link at a name is an error,
//! never followed), so nothing is written outside the target.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use futures::{StreamExt as _, TryStreamExt as _};

use crate::KopiaError;
use crate::object::ObjectId;
use crate::repo::Repository;
use crate::snapshot::{DirEntry, Snapshot};

/// Holes are made of zero blocks of this size.
const BLOCK: usize = 4096;

/// Files up to this size are restored several at a time.
pub const SMALL_FILE: u64 = 1 << 20;

/// The longest symbolic-link target restored (Linux's `PATH_MAX`).
pub const LINK_MAX: u64 = 4096;

/// How a restore runs.
#[derive(Debug, Clone, Copy)]
pub struct RestoreOptions {
    /// Pieces of one file fetched at once.
    pub parallel_reads: usize,
    /// Small files (up to [`SMALL_FILE`]) of a directory restored at once.
    pub parallel_files: usize,
    /// Give entries their recorded owner and group (only root can).
    pub ownership: bool,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        Self {
            parallel_reads: 8,
            parallel_files: 16,
            ownership: is_root(),
        }
    }
}

/// Whether this process's effective user is root (`Uid:` of `/proc/self/status`: real,
/// effective, …).
fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// What a restore wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RestoreStats {
    /// Directories, the root included.
    pub dirs: u64,
    /// Files.
    pub files: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

impl std::ops::AddAssign for RestoreStats {
    fn add_assign(&mut self, other: Self) {
        self.dirs += other.dirs;
        self.files += other.files;
        self.symlinks += other.symlinks;
        self.bytes += other.bytes;
    }
}

fn child(dir: &Path, name: &str) -> Result<PathBuf, KopiaError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(KopiaError::malformed(
            format!("directory {}", dir.display()),
            format!("an entry is named {name:?}"),
        ));
    }
    Ok(dir.join(name))
}

impl Repository {
    /// Reads every content of `snapshot` (listings, lists, data) as a restore would, writing
    /// nothing: what would fail to restore fails here.
    ///
    /// # Errors
    /// The errors of reading the repository.
    pub async fn verify(
        &self,
        snapshot: &Snapshot,
        options: RestoreOptions,
    ) -> Result<RestoreStats, KopiaError> {
        let mut stats = RestoreStats::default();
        let mut pending = vec![snapshot.root.clone()];
        while let Some(entry) = pending.pop() {
            match entry.kind.as_str() {
                "d" => {
                    stats.dirs += 1;
                    pending.extend(self.directory(&entry.obj).await?);
                }
                "s" => {
                    self.read_object(&ObjectId::parse(&entry.obj)?).await?;
                    stats.symlinks += 1;
                }
                _ => {
                    let chunks = self.chunks(&ObjectId::parse(&entry.obj)?).await?;
                    // Owned items: a stream of closures over borrowed ones is not `Send`.
                    let mut reads = futures::stream::iter(chunks)
                        .map(|c| async move { self.read_chunk(&c).await })
                        .buffer_unordered(options.parallel_reads.max(1));
                    while let Some(data) = reads.try_next().await? {
                        stats.bytes += data.len() as u64;
                    }
                    stats.files += 1;
                }
            }
        }
        Ok(stats)
    }

    /// Restores `snapshot` into `target` (created if missing; it should be empty).
    ///
    /// # Errors
    /// [`KopiaError::Restore`] when writing fails, and the errors of reading the repository.
    pub async fn restore(
        &self,
        snapshot: &Snapshot,
        target: &Path,
        options: RestoreOptions,
    ) -> Result<RestoreStats, KopiaError> {
        let mut stats = RestoreStats::default();
        let root = &snapshot.root;
        if root.kind != "d" {
            fs::create_dir_all(target).map_err(KopiaError::restoring(target))?;
            let path = child(target, &root.name)?;
            stats += self.restore_entry(root, &path, options).await?;
            return Ok(stats);
        }
        fs::create_dir_all(target).map_err(KopiaError::restoring(target))?;
        // Directories get their mode and times after their children are written.
        let mut finished: Vec<(DirEntry, PathBuf)> = Vec::new();
        let mut pending = vec![(root.clone(), target.to_path_buf())];
        while let Some((dir, path)) = pending.pop() {
            stats.dirs += 1;
            let mut small = Vec::new();
            for entry in self.directory(&dir.obj).await? {
                let at = child(&path, &entry.name)?;
                if entry.kind == "d" {
                    fs::create_dir(&at).map_err(KopiaError::restoring(&at))?;
                    pending.push((entry, at));
                } else if entry.kind == "f" && entry.size > SMALL_FILE {
                    stats += self.restore_entry(&entry, &at, options).await?;
                } else {
                    small.push((entry, at));
                }
            }
            // One piece at a time each (a small file is one piece; a listing that says
            // otherwise gets no more memory than that), several files at once: against a
            // remote store, many small files do not wait for each other's round trip. Owned
            // items: a stream of closures over borrowed ones is not `Send`.
            let one_read = RestoreOptions {
                parallel_reads: 1,
                ..options
            };
            let mut restores = futures::stream::iter(small)
                .map(|(entry, at)| async move { self.restore_entry(&entry, &at, one_read).await })
                .buffer_unordered(options.parallel_files.max(1));
            while let Some(done) = restores.try_next().await? {
                stats += done;
            }
            finished.push((dir, path));
        }
        for (dir, path) in finished.iter().rev() {
            finish(dir, path, options)?;
        }
        Ok(stats)
    }

    /// Restores one file or symbolic link; what it wrote.
    async fn restore_entry(
        &self,
        entry: &DirEntry,
        path: &Path,
        options: RestoreOptions,
    ) -> Result<RestoreStats, KopiaError> {
        let mut stats = RestoreStats::default();
        match entry.kind.as_str() {
            "f" => {
                stats.bytes += self.restore_file(entry, path, options).await?;
                stats.files += 1;
            }
            "s" => {
                let id = ObjectId::parse(&entry.obj)?;
                let length = self
                    .chunks(&id)
                    .await?
                    .last()
                    .map_or(0, |c| c.offset.saturating_add(c.length));
                if length > LINK_MAX {
                    return Err(KopiaError::malformed(
                        format!("symbolic link {}", path.display()),
                        format!("its target is {length} bytes long, more than {LINK_MAX}"),
                    ));
                }
                let target = self.read_object(&id).await?;
                // A link's target is bytes on Unix, whatever their encoding.
                let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&target);
                std::os::unix::fs::symlink(target, path).map_err(KopiaError::restoring(path))?;
                if options.ownership {
                    std::os::unix::fs::lchown(path, Some(entry.uid), Some(entry.gid))
                        .map_err(KopiaError::restoring(path))?;
                }
                let mtime = filetime_of(entry);
                filetime::set_symlink_file_times(path, mtime, mtime)
                    .map_err(KopiaError::restoring(path))?;
                stats.symlinks += 1;
            }
            other => {
                // kopia stores files, directories and links only.
                return Err(KopiaError::malformed(
                    format!("entry {}", path.display()),
                    format!("type {other:?}"),
                ));
            }
        }
        Ok(stats)
    }

    /// Writes one file; returns its size.
    async fn restore_file(
        &self,
        entry: &DirEntry,
        path: &Path,
        options: RestoreOptions,
    ) -> Result<u64, KopiaError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(KopiaError::restoring(path))?;
        let chunks = self.chunks(&ObjectId::parse(&entry.obj)?).await?;
        let size = chunks
            .last()
            .map_or(0, |c| c.offset.saturating_add(c.length));
        let mut reads = futures::stream::iter(chunks)
            .map(|chunk| async move {
                self.read_chunk(&chunk)
                    .await
                    .map(|data| (chunk.offset, data))
            })
            .buffer_unordered(options.parallel_reads.max(1));
        while let Some((offset, data)) = reads.try_next().await? {
            write_sparse(&file, offset, &data).map_err(KopiaError::restoring(path))?;
        }
        file.set_len(size).map_err(KopiaError::restoring(path))?;
        drop(file);
        finish(entry, path, options)?;
        Ok(size)
    }
}

/// Writes `data` at `offset`, leaving whole zero blocks as holes.
fn write_sparse(file: &fs::File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    let mut at = 0;
    while at < data.len() {
        let end = (at + BLOCK).min(data.len());
        let block = &data[at..end];
        if block.iter().any(|b| *b != 0) {
            file.write_all_at(block, offset + at as u64)?;
        }
        at = end;
    }
    Ok(())
}

fn filetime_of(entry: &DirEntry) -> filetime::FileTime {
    let ts = entry.mtime;
    filetime::FileTime::from_unix_time(
        ts.as_second(),
        u32::try_from(ts.subsec_nanosecond()).unwrap_or(0),
    )
}

/// Gives a file or directory its owner, mode and modification time.
fn finish(entry: &DirEntry, path: &Path, options: RestoreOptions) -> Result<(), KopiaError> {
    if options.ownership {
        std::os::unix::fs::chown(path, Some(entry.uid), Some(entry.gid))
            .map_err(KopiaError::restoring(path))?;
    }
    fs::set_permissions(path, fs::Permissions::from_mode(entry.unix_mode()))
        .map_err(KopiaError::restoring(path))?;
    let mtime = filetime_of(entry);
    filetime::set_file_times(path, mtime, mtime).map_err(KopiaError::restoring(path))
}
