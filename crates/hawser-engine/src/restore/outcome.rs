//! What a restore run takes ([`RestoreOptions`]) and gives ([`RestoreOutcome`]), and the
//! record the caller commits from them ([`record`]).

use std::time::Duration;

use hawser_api::phase::RestorePhase;
use hawser_api::{Restore, RestoreProgress};
use hawser_core::archive::ReaderOptions;
use hawser_core::archive::gzjson::Results;
use hawser_core::restore::Priorities;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::watch;

use super::{Progress, RestoreError};

/// How a restore runs. `RestoreOptions::default()` is what the server uses.
#[derive(Clone)]
pub struct RestoreOptions {
    /// Items of one type created at the same time; default 8.
    pub concurrency: usize,
    /// Bytes of archived items (their JSON text) kept in memory between the checking pass and
    /// their restore; the others wait in a temporary file. Default 16 MiB.
    pub look_ahead_bytes: u64,
    /// Limits of the archive reader (entry and extension-header size, items, total
    /// decompressed size).
    pub reader: ReaderOptions,
    /// `--restore-resource-priorities`; default Velero's list.
    pub priorities: Priorities,
    /// How long a restored CRD may take to become `Established`; default 1 minute.
    pub crd_ready_timeout: Duration,
    /// How long a terminating target namespace is waited on; default 10 minutes (Velero's
    /// `--terminating-resource-timeout`).
    pub terminating_timeout: Duration,
    /// Receives [`Progress`] after every item, when set.
    pub progress: Option<watch::Sender<Progress>>,
    /// The clock for timestamps (start, completion, log lines).
    pub clock: hawser_core::clock::Clock,
    /// How long one request is retried: a read (a live object, a target namespace) while the
    /// API server is unreachable or answers 429/5xx, a write after 429; default
    /// [`RETRY_BUDGET`](crate::cluster::request::RETRY_BUDGET).
    pub api_retry: Duration,
    /// Lines written as warnings at the start of the log (e.g. that the work was interrupted
    /// and is run again); not counted among the results' warnings.
    pub log_warnings: Vec<String>,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            look_ahead_bytes: 16 << 20,
            reader: ReaderOptions::default(),
            priorities: Priorities::default(),
            crd_ready_timeout: Duration::from_secs(60),
            terminating_timeout: Duration::from_secs(600),
            progress: None,
            clock: hawser_core::clock::Clock::system(),
            api_retry: crate::cluster::request::RETRY_BUDGET,
            log_warnings: Vec::new(),
        }
    }
}

impl std::fmt::Debug for RestoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreOptions")
            .field("concurrency", &self.concurrency)
            .field("look_ahead_bytes", &self.look_ahead_bytes)
            .field("reader", &self.reader)
            .field("priorities", &self.priorities)
            .field("progress", &self.progress.is_some())
            .field("api_retry", &self.api_retry)
            .finish_non_exhaustive()
    }
}

impl RestoreOptions {
    /// Sets how many items of one type are created at the same time (at least 1).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Sets the memory budget of the items waiting for their turn (0 keeps them all in the
    /// temporary file).
    #[must_use]
    pub fn with_look_ahead_bytes(mut self, bytes: u64) -> Self {
        self.look_ahead_bytes = bytes;
        self
    }

    /// Replaces the archive reader's limits.
    #[must_use]
    pub fn with_reader(mut self, reader: ReaderOptions) -> Self {
        self.reader = reader;
        self
    }

    /// Replaces the resource priorities.
    #[must_use]
    pub fn with_priorities(mut self, priorities: Priorities) -> Self {
        self.priorities = priorities;
        self
    }

    /// Sets how long a restored CRD may take to be established before its custom resources are
    /// restored anyway (and fail if it never is).
    #[must_use]
    pub fn with_crd_ready_timeout(mut self, timeout: Duration) -> Self {
        self.crd_ready_timeout = timeout;
        self
    }

    /// Sets how long one request is retried (see [`RestoreOptions::api_retry`]).
    #[must_use]
    pub fn with_api_retry(mut self, budget: Duration) -> Self {
        self.api_retry = budget;
        self
    }

    /// Sets how long a terminating target namespace is waited on.
    #[must_use]
    pub fn with_terminating_timeout(mut self, timeout: Duration) -> Self {
        self.terminating_timeout = timeout;
        self
    }

    /// Publishes progress on `sender`.
    #[must_use]
    pub fn with_progress(mut self, sender: watch::Sender<Progress>) -> Self {
        self.progress = Some(sender);
        self
    }

    /// Replaces the clock.
    #[must_use]
    pub fn with_clock(mut self, clock: hawser_core::clock::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Adds `line`, when given, to the lines written as warnings at the start of the log.
    #[must_use]
    pub fn with_log_warning(mut self, line: Option<String>) -> Self {
        self.log_warnings.extend(line);
        self
    }
}

/// What a finished restore run produced (everything but the Restore record).
#[derive(Clone, Debug, PartialEq)]
pub struct RestoreOutcome {
    /// `Completed` without errors, `PartiallyFailed` with errors; `Failed` or
    /// `FailedValidation` only from [`RestoreOutcome::failed`].
    pub phase: RestorePhase,
    /// When the run started.
    pub started: jiff::Timestamp,
    /// When the last artifact was stored.
    pub completed: jiff::Timestamp,
    /// Items handled (created, updated, skipped as unchanged, or failed), created namespaces
    /// included.
    pub items_restored: u64,
    /// Warnings and errors, as stored in the results file.
    pub results: Results,
    /// Bytes of items that waited for their turn in the temporary file (the rest waited in
    /// memory).
    pub spilled_bytes: u64,
    /// How long the checking pass took (reading the archive once, before anything is created).
    pub checking_pass: Duration,
    /// Artifacts that could not be stored (key and reason).
    pub upload_errors: Vec<String>,
    /// Why the restore failed (only for `Failed` and `FailedValidation`).
    pub failure_reason: Option<String>,
    /// Velero's validation messages (only for `FailedValidation` of an invalid spec).
    pub validation_errors: Vec<String>,
    /// The exec hooks attempted and failed (`status.hookStatus`).
    pub hooks: crate::backup::hooks::Tally,
}

impl RestoreOutcome {
    /// Number of warnings.
    #[must_use]
    pub fn warnings(&self) -> u64 {
        self.results.warnings.count() as u64
    }

    /// Number of errors.
    #[must_use]
    pub fn errors(&self) -> u64 {
        self.results.errors.count() as u64
    }

    /// The outcome of a run that ended with `error`, for recording a `Failed` (or
    /// `FailedValidation`) restore.
    #[must_use]
    pub fn failed(
        error: &RestoreError,
        started: jiff::Timestamp,
        completed: jiff::Timestamp,
    ) -> Self {
        Self {
            phase: error.phase(),
            started,
            completed,
            items_restored: 0,
            results: Results::default(),
            spilled_bytes: 0,
            checking_pass: Duration::ZERO,
            upload_errors: Vec::new(),
            failure_reason: Some(error.full_message()),
            validation_errors: match error {
                RestoreError::Validation { messages } => messages.clone(),
                _ => Vec::new(),
            },
            hooks: crate::backup::hooks::Tally::default(),
        }
    }
}

/// The Restore with its final status (phase, start, completion, counts, progress, failure
/// reason, and the validation messages of a `FailedValidation`), to be stored at
/// `Layout::restore_record(name)` as the commit marker.
///
/// # Errors
/// Serialising the Restore failed (not expected: every map key of the type is a string).
pub fn record(
    restore: &Restore,
    outcome: &RestoreOutcome,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut restore = restore.clone();
    let mut status = restore.status.take().unwrap_or_default();
    status.phase = outcome.phase.clone();
    status.start_timestamp = Some(Time(outcome.started));
    status.completion_timestamp = Some(Time(outcome.completed));
    status.warnings = Some(hawser_api::count(outcome.warnings()));
    status.errors = Some(hawser_api::count(outcome.errors()));
    let items = hawser_api::count(outcome.items_restored);
    status.progress = Some(RestoreProgress {
        total_items: Some(items),
        items_restored: Some(items),
    });
    status.failure_reason = outcome.failure_reason.clone();
    if !outcome.validation_errors.is_empty() {
        status.validation_errors = Some(outcome.validation_errors.clone());
    }
    if let Some(hooks) = outcome.hooks.status() {
        status.hook_status = Some(hooks);
    }
    restore.status = Some(status);
    serde_json::to_value(&restore)
}
