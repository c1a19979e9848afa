//! hawser's engines: what a backup and a restore do, from a Backup or Restore object to the
//! artifacts in a storage location and the objects in a cluster.
//!
//! - [`backup`]: discovery → paged LISTs → one streaming archive → upload, with results, the
//!   resource list and the log;
//! - [`restore`]: one checking pass over the untrusted archive, the items to restore waiting
//!   per type → the ordered walk → cleaning → create or the existing-object policy, with
//!   results and the log;
//! - [`cluster`]: the one Kubernetes adapter both use (paths, raw requests, paged LISTs,
//!   discovery).
//!
//! The engines know nothing of controllers, statuses or the server: the caller decides when a
//! run starts and what its outcome means for the object's phase.

pub mod backup;
pub mod cluster;
pub mod restore;
mod spill;
