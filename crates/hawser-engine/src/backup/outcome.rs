//! What a backup run takes ([`BackupOptions`]) and gives ([`BackupOutcome`]), and the record
//! the caller commits from them ([`record`]).

use std::time::Duration;

use hawser_api::phase::BackupPhase;
use hawser_api::{Backup, BackupProgress};
use hawser_core::archive::FORMAT_VERSION;
use hawser_core::archive::gzjson::Results;
use hawser_core::csi::BackupOperation;
use hawser_core::duration::GoDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::watch;

use super::{BackupError, Progress, operations};
use crate::cluster::request::RETRY_BUDGET;

/// Velero's default `spec.ttl` (30 days).
const DEFAULT_TTL: &str = "720h0m0s";

/// How a backup runs. `BackupOptions::default()` is what the server uses.
#[derive(Clone)]
pub struct BackupOptions {
    /// Items per LIST page (`limit`); default 500.
    pub page_size: u32,
    /// Types listed at the same time; default 4.
    pub concurrency: usize,
    /// gzip level of the archive, 0–9; default 6.
    pub gzip_level: u32,
    /// Receives [`Progress`] after every page, when set.
    pub progress: Option<watch::Sender<Progress>>,
    /// The clock for timestamps (start, completion, log lines).
    pub clock: hawser_core::clock::Clock,
    /// How long one read (a LIST page, a GET) is retried while the API server is unreachable
    /// or answers 429/5xx; default [`RETRY_BUDGET`]. (A backup writes nothing to the API.)
    pub api_retry: Duration,
    /// Lines written as warnings at the start of the log (e.g. that the work was interrupted
    /// and is run again); not counted among the results' warnings.
    pub log_warnings: Vec<String>,
    /// Warnings of the caller (e.g. a server setting hawser does not act on), counted in the
    /// results.
    pub warnings: Vec<String>,
}

impl Default for BackupOptions {
    fn default() -> Self {
        Self {
            page_size: 500,
            concurrency: 4,
            gzip_level: 6,
            progress: None,
            clock: hawser_core::clock::Clock::system(),
            api_retry: RETRY_BUDGET,
            log_warnings: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl std::fmt::Debug for BackupOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupOptions")
            .field("page_size", &self.page_size)
            .field("concurrency", &self.concurrency)
            .field("gzip_level", &self.gzip_level)
            .field("progress", &self.progress.is_some())
            .field("api_retry", &self.api_retry)
            .finish_non_exhaustive()
    }
}

impl BackupOptions {
    /// Sets the LIST page size (at least 1).
    #[must_use]
    pub fn with_page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// Sets how many types are listed at the same time (at least 1).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Sets how long one read is retried (see [`BackupOptions::api_retry`]).
    #[must_use]
    pub fn with_api_retry(mut self, budget: Duration) -> Self {
        self.api_retry = budget;
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

    /// Adds `warning`, when given, to the backup's warnings.
    #[must_use]
    pub fn with_warning(mut self, warning: Option<String>) -> Self {
        self.warnings.extend(warning);
        self
    }
}

/// What a finished backup run produced (everything but `velero-backup.json`).
#[derive(Clone, Debug, PartialEq)]
pub struct BackupOutcome {
    /// `Completed` without errors, `PartiallyFailed` with errors, `Failed` (only from
    /// [`BackupOutcome::failed`]).
    pub phase: BackupPhase,
    /// When the run started.
    pub started: jiff::Timestamp,
    /// When the last artifact was stored.
    pub completed: jiff::Timestamp,
    /// Items written to the archive.
    pub items_backed_up: u64,
    /// Warnings and errors, as stored in the results file.
    pub results: Results,
    /// Size of the stored archive in bytes.
    pub archive_bytes: u64,
    /// Why the backup failed (only for `Failed`).
    pub failure_reason: Option<String>,
    /// The item operations (CSI snapshots waiting for `readyToUse`); when there are some, the
    /// phase is `WaitingForPluginOperations[PartiallyFailed]` and [`operations`] ends the backup.
    pub operations: Vec<BackupOperation>,
    /// The id of the key the archive is sealed with ([`hawser_store::crypt`]), when it is.
    pub archive_key_id: Option<String>,
    /// The backup hooks attempted and failed (`status.hookStatus`).
    pub hooks: super::hooks::Tally,
}

impl BackupOutcome {
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
    /// `FailedValidation`) backup.
    #[must_use]
    pub fn failed(
        error: &BackupError,
        started: jiff::Timestamp,
        completed: jiff::Timestamp,
    ) -> Self {
        Self {
            phase: error.phase(),
            started,
            completed,
            items_backed_up: 0,
            results: Results::default(),
            archive_bytes: 0,
            failure_reason: Some(error.full_message()),
            operations: Vec::new(),
            archive_key_id: None,
            hooks: super::hooks::Tally::default(),
        }
    }
}

/// Annotation of a backup's record whose archive is sealed ([`hawser_store::crypt`]): the id
/// of the key it is sealed with.
pub const ARCHIVE_KEY_ANNOTATION: &str = "hawser.io/archive-key-id";

/// The body of `backups/<name>/velero-backup.json`: the Backup object with its final status
/// (phase, format version, start, completion and expiration, counts, progress), and
/// [`ARCHIVE_KEY_ANNOTATION`] when the archive is sealed.
///
/// # Errors
/// Serialising the Backup failed (not expected: every map key of the type is a string).
pub fn record(
    backup: &Backup,
    outcome: &BackupOutcome,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut backup = backup.clone();
    if let Some(id) = &outcome.archive_key_id {
        backup
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(ARCHIVE_KEY_ANNOTATION.to_owned(), id.clone());
    }
    let mut status = backup.status.take().unwrap_or_default();
    // Meaningful only while `Queued`: the object may have been read while it waited.
    status.queue_position = None;
    status.version = Some(1);
    status.format_version = Some(FORMAT_VERSION.to_owned());
    status.phase = outcome.phase.clone();
    status.start_timestamp = Some(Time(outcome.started));
    status.completion_timestamp = Some(Time(outcome.completed));
    let ttl = backup
        .spec
        .ttl
        .or_else(|| GoDuration::parse(DEFAULT_TTL).ok());
    status.expiration = ttl
        .and_then(|ttl| hawser_api::time::add(outcome.started, ttl))
        .map(Time);
    status.warnings = Some(hawser_api::count(outcome.warnings()));
    status.errors = Some(hawser_api::count(outcome.errors()));
    let items = hawser_api::count(outcome.items_backed_up);
    status.progress = Some(BackupProgress {
        total_items: Some(items),
        items_backed_up: Some(items),
    });
    status.failure_reason = outcome.failure_reason.clone();
    if let Some(hooks) = outcome.hooks.status() {
        status.hook_status = Some(hooks);
    }
    if !outcome.operations.is_empty() {
        status = operations::with_counts(&outcome.operations, status);
    }
    backup.status = Some(status);
    serde_json::to_value(&backup)
}
