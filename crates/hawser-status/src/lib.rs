//! The status truth engine: every Backup and Restore reaches its true final phase.
//!
//! Controllers hand their status changes to [`StatusEngine::write`]; the engine owns everything
//! after that:
//!
//! 1. **Where**: discovery says per kind whether the `/status` subresource exists; the status is a
//!    JSON merge patch of the status delta to `/status` or to the main resource (Velero's CRDs have
//!    no subresource). The owner annotation that marks an object as this instance's work is written
//!    in the same patch as `InProgress` (two patches when the subresource exists, see
//!    [`writer`](self)).
//! 2. **Monotonic**: each attempt checks the `hawser-api` transition table against the phase the
//!    object has, and sends `metadata.resourceVersion` as a precondition; a 409 re-reads and
//!    re-checks. A status that may no longer be applied is dropped.
//! 3. **Deadline**: attempts are retried with capped exponential backoff and jitter
//!    (`hawser_core::backoff`), honouring `Retry-After`, until `--resource-timeout` has passed;
//!    every attempt has a timeout no longer than the time left. kube-rs's hidden retry layer is off
//!    ([`hawser_engine::cluster::client`]).
//! 4. **Classified errors**: transport errors, timeouts, 5xx and 429 are retried; 404 stops quietly;
//!    400/403/422 stop with an error log and a Warning Event; 409 re-reads.
//! 5. **Re-driver**: a final status not stored by the deadline is handed to a background task that
//!    keeps trying once per (jittered) cap interval; the caller returns at once.
//! 6. **Recovery**: when the server starts to lead and every `--status-resync-period`,
//!    started-but-unfinished objects that no live worker here owns are resolved from the storage
//!    record, handed back to be run again (`--resume-attempts`), or marked `Failed` with a reason
//!    saying the server restarted ([`StatusEngine::run_recovery`]). A server that steps down
//!    keeps landing only the pending statuses a record decides ([`StatusEngine::step_down`]).
//! 7. **Progress**: `status.progress` of running work is one attempt, paused for a cap after a
//!    transient failure ([`StatusEngine::write_progress`]).
//! 8. **Observable**: attempt counters by kind and outcome, a landing-time histogram, a pending
//!    gauge ([`crate::metrics::StatusMetrics`]), Events, structured logs with attempt counts.

mod api;
mod engine;
mod error;
pub mod events;
mod journal;
mod kind;
mod liveness;
pub mod metrics;
mod outcome;
mod progress;
mod recovery;
mod redriver;
mod retry;
pub mod tolerant;
mod update;
mod writer;

pub use engine::{Landing, StatusConfig, StatusEngine, WorkerGuard};
pub use error::{AttemptError, Class, RecoveryError, WriteError};
pub use journal::{PendingStatus, PhaseChange};
pub use kind::{Kind, ObjectKey};
pub use outcome::{MemoryRecords, RecordError, RecordSource, RecordedOutcome};
pub use progress::ProgressWrite;
pub use recovery::{
    RecoveryReport, Rerun, Resumed, abandoned_failure_reason, restart_failure_reason,
};
pub use update::{Observed, StatusUpdate};
