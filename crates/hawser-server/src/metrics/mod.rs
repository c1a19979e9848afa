//! Prometheus metrics of the hawser server.
//!
//! Label values are bounded: kinds and outcomes are enums; the only names used as label values
//! are those Velero uses (a Schedule's name, a storage location's name), never error strings.
//! The status-truth metrics (`hawser_status_*`) have no Velero counterpart; Velero's own metric
//! names are used where Velero has one.

mod velero;

pub use hawser_status::metrics::*;
pub use velero::{BackupFinished, FinalOutcome, VeleroMetrics};
