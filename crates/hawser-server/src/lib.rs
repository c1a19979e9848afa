//! hawser's server: everything `hawser server` runs.
//!
//! The public surface is [`ServerArgs`] (the flags, Velero's names and defaults, each also read
//! from `HAWSER_<NAME>`) and [`serve`], which runs the server until a cancellation token fires.
//! The status truth engine is a crate of its own (`hawser-status`); the server builds it, hands
//! it to every controller and serves its [`metrics`] with Velero's.
//!
//! What runs, in the server that holds the Lease ([`leader`]; every server when
//! `--leader-elect=false`):
//! - the **backup controller** ([`controllers::backup`]) behind a work queue ([`queue`]):
//!   `--concurrent-backups` backups at a time, each independent;
//! - the **restore controller** ([`controllers::restore`]), one restore at a time, as Velero;
//! - the **storage-location controller** ([`controllers::bsl`]), validating every location;
//! - **recovery** (the status engine's, reading the records in the storage locations through
//!   [`records::StorageRecords`]) at start-up and every `--status-resync-period`;
//! - the **VolumeSnapshotLocation reporter** ([`controllers::vsl`]): hawser has no volume
//!   snapshotters, and says so once per location;
//! - the HTTP endpoints ([`http`]) on `--metrics-address`, in followers too.
//!
//! [`ServerArgs`] also accepts every other flag of `velero server` ([`velero_flags`]), so a
//! Velero Deployment's arguments parse; the command logs the ones given as not implemented.
//!
//! On shutdown the queues stop taking work, running backups and restores get
//! `--shutdown-grace-period` to finish, then the Lease is released ([`serve`](fn@serve)).
//!
//! The client has kube-rs's hidden retries off and `--client-qps`/`--client-burst` applied;
//! every controller, the engines and the status engine share it.

pub mod metrics;

mod backup_queue;
mod config;
mod context;
mod controllers;
mod downloads;
mod http;
mod leader;
mod locations;
mod objects;
mod queue;
mod readiness;
mod records;
mod serve;
mod status_page;
pub mod velero_flags;
mod work;

pub use config::{ArgsError, DownloadArgs, ServerArgs};
pub use locations::{LocationError, Locations};
pub use records::StorageRecords;
pub use serve::serve;
