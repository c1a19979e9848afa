//! Pure logic of hawser, with no Kubernetes client and no I/O: Go-style durations, backoff and
//! deadline arithmetic, and (as they are built) selection, ordering and the archive format.

pub mod archive;
pub mod backoff;
pub mod backup_hooks;
pub mod clock;
pub mod csi;
pub mod duration;
pub mod errors;
pub mod json;
pub mod label;
pub mod layout;
pub mod pod_annotations;
pub mod poll;
pub mod restore;
pub mod retry;
pub mod retry_after;
pub mod schedule;
pub mod selection;
pub mod strategic;
