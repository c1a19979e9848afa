//! Storage locations of hawser: a Velero BackupStorageLocation opened as an object store that
//! backups and restores stream to and from.
//!
//! Pipeline of a caller: read the BSL and its Secrets (I/O, not here) → [`LocationSpec`] →
//! [`Location::new`] (pure: config checks, client construction) → [`validate`] (one LIST) →
//! streaming artifacts ([`Location::writer`], [`Location::blocking_writer`],
//! [`Location::blocking_reader`]) and small objects ([`Location::put`], [`Location::get`]) →
//! [`Location::commit_backup`] last.
//!
//! Providers: `aws` (S3 and compatible), `gcp`, `azure` (through `object_store`) and
//! `filesystem` (a local directory). Config keys and what is tested are in `docs/storage.md`.
//!
//! Tests of callers: with the cargo feature `testing`, the `faults` module fails a location's
//! uploads after a number of bytes or parts (`Location::with_faults`).
//!
//! Memory: one streaming writer holds at most
//! [`LocationOptions::writer_memory_bound`] bytes (default 8 MiB parts, 2 in flight, plus the
//! blocking bridge's 1 MiB), independent of the artifact's size.

mod blocking;
pub mod credentials;
pub mod crypt;
mod durable;
mod error;
#[cfg(feature = "testing")]
pub mod faults;
mod location;
mod policy;
mod provider;
mod signed;
mod spec;
mod stream;
mod validate;

pub use blocking::{
    ArchiveIn, ArchiveOut, BlockingReader, BlockingWriter, CHANNEL_CAPACITY, CHUNK_SIZE,
};
pub use error::{ConfigError, FailureKind, StoreError};
pub use location::{ByteStream, ListedObject, Location, ObjectInfo};
pub use policy::LocationPolicy;
pub use signed::{FileUrls, SignedFile, UrlRefused};
pub use spec::Provider;
pub use spec::{AccessMode, LocationOptions, LocationSpec};
pub use stream::ArtifactWriter;
pub use validate::{ValidationError, validate};
