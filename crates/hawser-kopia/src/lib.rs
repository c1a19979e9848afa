//! A kopia-compatible repository in Rust: the repositories Velero's
//! file-system backup and CSI data mover write into a backup storage location
//! (`<prefix>/kopia/<namespace>/`, kopia's format 3 with its defaults: index v2 with epochs,
//! `BLAKE2B-256-128`, `AES256-GCM-HMAC-SHA256`, zstd-fastest metadata), read through any
//! provider of `hawser-store`. No Kubernetes here.
//!
//! Create a repository ([`Repository::create`]) or open one with its password
//! ([`Repository::open`]), list its snapshots
//! ([`Repository::snapshots`]), restore one into a directory ([`Repository::restore`]) and
//! write one of a directory ([`Repository::write_snapshot`]) that kopia reads and takes as the
//! parent of its next snapshot of the same source.
//! What this reader does not implement (format 1, error correction, another cipher, an unknown
//! compressor) is refused with a [`KopiaError::Unsupported`] naming it, never read wrongly.

mod blobs;
mod chunker;
pub mod compaction;
mod content;
mod create;
mod crypto;
pub mod epoch;
mod error;
pub mod index;
mod maintenance;
mod merged;
mod object;
mod repo;
mod restore;
pub mod session;
mod snapshot;
mod tree;
mod writer;

pub use blobs::{BlobMeta, Blobs};
pub use compaction::QuickReport;
pub use content::ContentId;
pub use create::{NewRepository, VELERO_MARKER_BLOB, random_password};
pub use crypto::HASHES;
pub use error::KopiaError;
pub use maintenance::{GcReport, MaintenanceReport, Safety};
pub use object::{Chunk, ObjectId};
pub use repo::{FORMAT_BLOB, Repository, RepositoryConfig};
pub use restore::{RestoreOptions, RestoreStats};
pub use snapshot::{DirEntry, Snapshot, Stats};
pub use writer::SourceInfo;

/// Velero's repository password when its Secret `velero-repo-credentials` (key
/// `repository-password`) was created by Velero: one well-known value for every installation.
pub const VELERO_DEFAULT_PASSWORD: &str = "static-passw0rd";

/// What a server needs of these futures: that a task may move between threads.
#[cfg(test)]
mod send {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;

    fn send<T: Send>(_: &T) {}

    #[allow(dead_code)] // checked by the compiler, never run
    fn futures_are_send(blobs: Blobs, repo: &mut Repository, snapshot: &Snapshot, dir: &Path) {
        let open = Repository::open(blobs.clone(), "");
        send(&open);
        let create = Repository::create(blobs, "");
        send(&create);
        let restore = repo.restore(snapshot, dir, RestoreOptions::default());
        send(&restore);
        drop(restore);
        let verify = repo.verify(snapshot, RestoreOptions::default());
        send(&verify);
        drop(verify);
        let source = SourceInfo {
            host: String::new(),
            user: String::new(),
            path: String::new(),
        };
        let tags = BTreeMap::new();
        let write = repo.write_snapshot(dir, &source, &tags);
        send(&write);
        drop(write);
        let delete = repo.delete_snapshot("");
        send(&delete);
        drop(delete);
        let maintain = repo.maintain(true, &Safety::NONE);
        send(&maintain);
    }
}
