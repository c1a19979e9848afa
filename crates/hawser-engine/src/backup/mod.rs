//! The backup engine's I/O pipeline: from a Backup object to the artifacts of the backup in a
//! storage location.
//!
//! Pipeline of [`run`]:
//!
//! 1. discovery (I/O): the preferred version of every served group → a [`Catalogue`];
//! 2. the namespaces (I/O, one paged LIST): their names, and those labelled
//!    `velero.io/exclude-from-backup=true`, which join `excludedNamespaces`;
//! 3. validate and plan (pure): a [`Selection`] from the spec; an invalid spec is
//!    [`BackupError::Validation`] with Velero's messages;
//! 4. act (I/O): per selected type, paged LISTs (`limit`, `continue`, one per label selector
//!    and, unless every namespace is included, per namespace), [`BackupOptions::concurrency`]
//!    types at a time; items passing the per-item checks go, one page at a time, through a
//!    bounded channel to one streaming archive writer on a blocking thread, whose bytes stream
//!    into the location's upload. Memory is bounded by page size × (concurrency + channel
//!    capacity), never by the number of objects. Then the Namespace objects of the tracked
//!    namespaces and, unless CRDs are filtered explicitly, the CRD of every custom resource type
//!    that had items;
//! 5. the resource list, the results (warnings and errors per namespace) and the backup's log,
//!    each gzipped to its layout key;
//! 6. the [`BackupOutcome`]. `velero-backup.json` is *not* written here: the caller commits it
//!    last (after the status is settled), with the body from [`record`].
//!
//! A type that disappears during the backup (its LIST answers 404) is a warning; any other
//! failed LIST is an error (the backup ends `PartiallyFailed`). A storage failure ends the run
//! with [`BackupError::Storage`] or [`BackupError::Archive`]; the unfinished archive upload is
//! aborted, so no archive is stored and nothing claims success.

mod collect;
mod error;
pub mod operations;
mod progress;
mod related;
mod results;
mod sink;
mod snapshots;

use std::collections::BTreeSet;

use bytes::Bytes;
use futures::StreamExt;
use hawser_api::phase::BackupPhase;
use hawser_api::{Backup, BackupProgress};
use hawser_core::archive::gzjson::{Results, to_gz_json};
use hawser_core::archive::{FORMAT_VERSION, WriterOptions};
use hawser_core::csi::BackupOperation;
use std::time::Duration;

use hawser_core::duration::GoDuration;
use hawser_core::layout::Layout;
use hawser_core::selection::{
    ApiResource, BackupFilters, CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, Selection, SkipReason,
    namespaces_excluded_by_label,
};
use hawser_store::Location;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

pub use error::BackupError;
pub use hawser_core::selection::Catalogue;
pub use progress::Progress;

use crate::cluster::path::Collection;
use crate::cluster::request::{self, RETRY_BUDGET, list_all};
use collect::{Lister, ResourceReport};
use progress::ProgressHandle;
use results::{BackupLog, Messages, Scope};
use sink::Batch;

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
    status.warnings = Some(i64::try_from(outcome.warnings()).unwrap_or(i64::MAX));
    status.errors = Some(i64::try_from(outcome.errors()).unwrap_or(i64::MAX));
    let items = i64::try_from(outcome.items_backed_up).unwrap_or(i64::MAX);
    status.progress = Some(BackupProgress {
        total_items: Some(items),
        items_backed_up: Some(items),
    });
    status.failure_reason = outcome.failure_reason.clone();
    if !outcome.operations.is_empty() {
        let count = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX));
        let (completed, failed) = operations::counts(&outcome.operations);
        let attempted = count(outcome.operations.len() as u64);
        status.backup_item_operations_attempted = attempted;
        status.backup_item_operations_completed = count(completed);
        status.backup_item_operations_failed = count(failed);
        status.csi_volume_snapshots_attempted = attempted;
        status.csi_volume_snapshots_completed = count(completed);
    }
    backup.status = Some(status);
    serde_json::to_value(&backup)
}

/// Velero's checks of a Backup's spec that need no API (filter styles, include/exclude lists,
/// namespace names, selectors): the messages for `validationErrors`, empty when it is valid.
/// [`run`] makes the checks that need discovery.
#[must_use]
pub fn validate_spec(backup: &Backup) -> Vec<String> {
    hawser_core::selection::validate(&filters_of(backup, &[]))
}

pub(crate) use hawser_core::errors::chain_text as error_text;

/// Runs one backup of `backup` into `location` (see the module docs).
///
/// # Errors
/// [`BackupError`]: [`BackupError::phase`] says whether the backup is `FailedValidation` or
/// `Failed`.
pub async fn run(
    client: Client,
    location: &Location,
    backup: &Backup,
    options: BackupOptions,
) -> Result<BackupOutcome, BackupError> {
    let name = backup
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(BackupError::Unnamed)?;
    let namespace = backup.metadata.namespace.clone().unwrap_or_default();
    let span = tracing::info_span!("backup", namespace = %namespace, name = %name);
    run_named(client, location, backup, options, name, namespace)
        .instrument(span)
        .await
}

async fn run_named(
    client: Client,
    location: &Location,
    backup: &Backup,
    options: BackupOptions,
    name: String,
    namespace: String,
) -> Result<BackupOutcome, BackupError> {
    if location.is_read_only() {
        return Err(BackupError::ReadOnlyLocation);
    }
    let started = options.clock.now();
    let mut log = BackupLog::new(format!("{namespace}/{name}"), options.clock.clone());
    log.info("Starting backup");
    for line in &options.log_warnings {
        log.line("warning", line);
    }
    let mut messages = Messages::default();
    for warning in backup.spec.unsupported_fields() {
        log.line("warning", &warning);
        messages.warn(Scope::Velero, warning);
    }

    let catalogue = crate::cluster::catalogue(&client).await?;
    let namespaces_resource = catalogue.resolve(NAMESPACES).cloned();
    let namespace_objects = match &namespaces_resource {
        Some(r) => list_all(
            &client,
            &Collection::of(r).path(None),
            options.page_size,
            options.api_retry,
        )
        .await
        .map_err(BackupError::Namespaces)?,
        None => Vec::new(),
    };

    let filters = filters_of(backup, &namespace_objects);
    let selection = Selection::new(&filters, &catalogue)
        .map_err(|messages| BackupError::Validation { messages })?;
    let existing: Vec<String> = namespace_objects
        .iter()
        .filter_map(|ns| {
            ns.pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
        })
        .map(str::to_owned)
        .collect();
    for missing in selection.missing_included_namespaces(&existing) {
        messages.error(
            Scope::Velero,
            format!("included namespace {missing} does not exist"),
        );
    }
    let scope = selection.namespace_scope(&existing);
    let walked = selection.resources_to_back_up();
    let (namespace_type, types): (Vec<&ApiResource>, Vec<&ApiResource>) = walked
        .iter()
        .partition(|r| r.group_resource() == NAMESPACES);

    let layout = Layout::new(None);
    let archive_key = layout.backup_contents(&name);
    // Sealed with the location's archive key, when it names one.
    let out = location
        .archive_writer(&archive_key)
        .map_err(|source| BackupError::storage(archive_key.clone(), source))?;
    let concurrency = options.concurrency.max(1);
    let (sender, receiver) = mpsc::channel::<Batch>(concurrency);
    let progress = ProgressHandle::new(options.progress.clone());
    let writer_options = WriterOptions {
        mtime: u64::try_from(started.as_second()).unwrap_or(0),
        level: options.gzip_level,
    };
    let writer_progress = progress.clone();
    let span = tracing::Span::current();
    let writer = tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        sink::write_archive(out, writer_options, receiver, writer_progress)
    });

    let ordered = backup.spec.ordered_resources.clone().unwrap_or_default();
    let lister = Lister {
        client: &client,
        selection: &selection,
        scope: &scope,
        page_size: options.page_size.max(1),
        api_retry: options.api_retry,
        progress: progress.clone(),
        sender,
        ordered: &ordered,
        concurrency,
        related: related::Related::default(),
        hold_claims: backup.spec.snapshot_volumes != Some(false)
            && snapshots::served(&catalogue).is_some(),
    };
    // Owned resources and a plain reference keep the future `Send` (no higher-ranked closure).
    let owned: Vec<ApiResource> = types.iter().map(|r| (*r).clone()).collect();
    let lister_ref = &lister;
    let reports: Vec<(String, ResourceReport)> = futures::stream::iter(owned)
        .map(move |r: ApiResource| collect_one(lister_ref, r))
        .buffer_unordered(concurrency)
        .collect()
        .await;

    let mut item_namespaces = BTreeSet::new();
    let mut stopped = false;
    let mut objects_only = 0;
    let mut operations = Vec::new();
    let mut custom_types = Vec::new();
    for (group_resource, report) in reports {
        stopped |= report.stopped;
        if !report.stopped {
            log.info(&format!(
                "Backed up {} items of {group_resource}",
                report.selected
            ));
        }
        if report.being_deleted > 0 {
            log.info(&related::skipped_line(
                &group_resource,
                SkipReason::BeingDeleted.as_str(),
                report.being_deleted,
                &report.being_deleted_names,
            ));
        }
        log.messages(&report.messages);
        if report.selected > 0 {
            custom_types.push(group_resource);
        }
        item_namespaces.extend(report.namespaces);
        messages.append(report.messages);
    }

    if !stopped {
        let added = related::back_up_related(&lister, &catalogue, &mut log, &mut messages).await;
        item_namespaces.extend(added.namespaces);
        let taken = snapshots::take_snapshots(
            &lister,
            &catalogue,
            backup,
            &options.clock,
            &mut log,
            &mut messages,
        )
        .await;
        objects_only = taken.objects_only;
        operations = taken.operations;
        if let Some(r) = namespace_type.first() {
            let mut tracker = selection.namespace_tracker(&namespace_objects);
            for ns in &item_namespaces {
                tracker.track(ns);
            }
            let items: Vec<serde_json::Value> = namespace_objects
                .iter()
                .filter(|ns| {
                    ns.pointer("/metadata/name")
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|n| tracker.is_tracked(n))
                })
                .map(|ns| typed(ns.clone(), r))
                .filter(|ns| selection.check_item(r, ns, false).is_ok())
                .collect();
            log.info(&format!("Backed up {} items of {NAMESPACES}", items.len()));
            send(&lister.sender, r, items, &progress).await;
        }
        let crd_type = catalogue.resolve(CUSTOM_RESOURCE_DEFINITIONS).cloned();
        let crds_walked = walked
            .iter()
            .any(|r| r.group_resource() == CUSTOM_RESOURCE_DEFINITIONS);
        if let (Some(crd_type), false, true) = (
            crd_type,
            crds_walked,
            selection.adds_crds_of_custom_resources(),
        ) {
            let crds = crds_of(
                &client,
                &crd_type,
                &custom_types,
                options.api_retry,
                &mut messages,
            )
            .await;
            if !crds.is_empty() {
                log.info(&format!(
                    "Backed up {} CustomResourceDefinitions of backed-up custom resources",
                    crds.len()
                ));
            }
            send(&lister.sender, &crd_type, crds, &progress).await;
        }
    }
    for warning in lister.related.annotation_warnings() {
        log.line("warning", &warning);
        messages.warn(Scope::Velero, warning);
    }
    drop(lister);
    if let Some(warning) = backup.spec.unsnapshotted_claims(objects_only) {
        log.line("warning", &warning);
        messages.warn(Scope::Velero, warning);
    }

    let report = writer.await.map_err(BackupError::WriterGone)??;
    for (ns, message) in &report.item_errors {
        let scope = ns.clone().map_or(Scope::Cluster, Scope::Namespace);
        log.line("error", message);
        messages.error(scope, message.clone());
    }
    progress.finish(report.stats.items);

    let results = messages.to_results();
    let resource_list = report.resource_list;
    let list = tokio::task::spawn_blocking(move || resource_list.into_gz_json())
        .await
        .map_err(BackupError::WriterGone)?
        .map_err(BackupError::TemporaryFile)?;
    put_bytes(location, &layout.backup_resource_list(&name), list).await?;
    put_gz(location, &layout.backup_results(&name), &results).await?;
    // What Velero writes for a backup without volumes or plugin operations, so that Velero's
    // clients (`describe`, DownloadRequests) find every file they look for; the operations
    // when there are some.
    if !operations.is_empty() {
        put_gz(location, &layout.backup_item_operations(&name), &operations).await?;
    }
    let operations_key = layout.backup_item_operations(&name);
    for (key, json) in layout
        .empty_backup_side_files(&name)
        .into_iter()
        .filter(|(key, _)| operations.is_empty() || *key != operations_key)
    {
        put_gzip(location, &key, json.as_bytes()).await?;
    }
    let phase = match (results.errors.count() > 0, operations.is_empty()) {
        (false, true) => BackupPhase::Completed,
        (true, true) => BackupPhase::PartiallyFailed,
        (false, false) => BackupPhase::WaitingForPluginOperations,
        (true, false) => BackupPhase::WaitingForPluginOperationsPartiallyFailed,
    };
    log.info(&format!(
        "Backup finished: {} items, {} warnings, {} errors, phase {phase:?}",
        report.stats.items,
        results.warnings.count(),
        results.errors.count()
    ));
    put_gzip(location, &layout.backup_log(&name), &log.into_bytes()).await?;

    Ok(BackupOutcome {
        phase,
        started,
        completed: options.clock.now(),
        items_backed_up: report.stats.items,
        results,
        archive_bytes: report.size,
        failure_reason: None,
        operations,
        archive_key_id: location.archive_key().map(|k| k.id().to_owned()),
    })
}

async fn collect_one(lister: &Lister<'_>, r: ApiResource) -> (String, ResourceReport) {
    if lister.sender.is_closed() {
        let report = ResourceReport {
            stopped: true,
            ..ResourceReport::default()
        };
        return (r.group_resource(), report);
    }
    let report = lister.collect(&r).await;
    (r.group_resource(), report)
}

/// The selection fields of the spec, with the namespaces labelled for exclusion added.
fn filters_of(backup: &Backup, namespaces: &[serde_json::Value]) -> BackupFilters {
    let mut filters = BackupFilters::from(&backup.spec);
    for excluded in namespaces_excluded_by_label(namespaces) {
        if !filters.excluded_namespaces.contains(&excluded) {
            filters.excluded_namespaces.push(excluded);
        }
    }
    filters
}

/// Sets `apiVersion` and `kind` (absent on the items of a LIST).
pub(crate) fn typed(mut obj: serde_json::Value, r: &ApiResource) -> serde_json::Value {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".to_owned(), r.api_version().into());
        map.insert("kind".to_owned(), r.kind.clone().into());
    }
    obj
}

async fn send(
    sender: &mpsc::Sender<Batch>,
    r: &ApiResource,
    items: Vec<serde_json::Value>,
    progress: &ProgressHandle,
) {
    if items.is_empty() {
        return;
    }
    progress.page_listed(items.len() as u64, 0);
    let batch = Batch {
        group_resource: r.group_resource(),
        version: r.version.clone(),
        api_version: r.api_version(),
        kind: r.kind.clone(),
        items: sink::Item::objects(items),
    };
    // A closed channel means the archive task failed; its error is reported when it is joined.
    let _ = sender.send(batch).await;
}

/// The CRDs of the custom resource types among `types` (group resources with items). A type
/// without a CRD (built in, or served by an aggregated API) is skipped.
async fn crds_of(
    client: &Client,
    crd_type: &ApiResource,
    types: &[String],
    api_retry: Duration,
    messages: &mut Messages,
) -> Vec<serde_json::Value> {
    let mut crds = Vec::new();
    for group_resource in types.iter().filter(|gr| gr.contains('.')) {
        let path = Collection::of(crd_type).item_path(None, group_resource);
        match request::get_opt(client, &path, api_retry).await {
            Ok(Some(crd)) => crds.push(typed(crd, crd_type)),
            Ok(None) => {}
            Err(e) => messages.error(
                Scope::Cluster,
                format!(
                    "error getting the CRD of {group_resource}: {}",
                    error_text(&e)
                ),
            ),
        }
    }
    crds
}

/// Stores `value` as gzipped JSON at `key`.
pub(crate) async fn put_gz<T: serde::Serialize + ?Sized>(
    location: &Location,
    key: &str,
    value: &T,
) -> Result<(), BackupError> {
    put_encoded(location, key, to_gz_json(value)).await
}

/// Stores `text` gzipped at `key`.
pub(crate) async fn put_gzip(
    location: &Location,
    key: &str,
    text: &[u8],
) -> Result<(), BackupError> {
    put_encoded(
        location,
        key,
        hawser_core::archive::gzjson::gzip_bytes(text),
    )
    .await
}

async fn put_encoded(
    location: &Location,
    key: &str,
    encoded: Result<Vec<u8>, hawser_core::archive::gzjson::GzJsonError>,
) -> Result<(), BackupError> {
    let bytes = encoded.map_err(|source| BackupError::Encode {
        key: key.to_owned(),
        source,
    })?;
    put_bytes(location, key, bytes).await
}

async fn put_bytes(location: &Location, key: &str, bytes: Vec<u8>) -> Result<(), BackupError> {
    location
        .put(key, Bytes::from(bytes))
        .await
        .map_err(|source| BackupError::storage(key.to_owned(), source))
}
