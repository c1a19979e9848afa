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
pub mod hooks;
pub mod operations;
mod outcome;
mod policies;
mod progress;
mod related;
mod results;
mod sink;
mod snapshots;
mod store;
mod validated;
mod volume_info;

use std::collections::BTreeSet;

use futures::StreamExt;
use hawser_api::Backup;
use hawser_core::archive::WriterOptions;
use hawser_core::backup_hooks::BackupHooks;
use std::time::Duration;

use hawser_core::layout::Layout;
use hawser_core::selection::policies::ResourcePolicies;
use hawser_core::selection::{
    ApiResource, BackupFilters, CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, NamespaceScope, Selection,
    SkipReason, namespaces_excluded_by_label,
};
use hawser_store::Location;
use kube::Client;
use tokio::sync::mpsc;
use tracing::Instrument;

pub use error::BackupError;
pub use hawser_core::selection::Catalogue;
pub use outcome::{ARCHIVE_KEY_ANNOTATION, BackupOptions, BackupOutcome, record};
use policies::resource_policies;
pub use progress::Progress;
pub use validated::ValidatedBackup;

use crate::cluster::path::Collection;
use crate::cluster::request::{self, list_all};
use collect::{Lister, ResourceReport};
use progress::ProgressHandle;
use results::{BackupLog, Messages, Scope};
use sink::Batch;
use store::store_side_files;

/// Velero's checks of a Backup's spec that need no API (filter styles, include/exclude lists,
/// namespace names, selectors): the messages for `validationErrors`, empty when it is valid.
/// [`run`] makes the checks that need discovery.
#[must_use]
pub fn validate_spec(backup: &Backup) -> Vec<String> {
    spec_checks(backup).0
}

/// [`validate_spec`]'s messages, and the hook specs compiled when they are valid.
fn spec_checks(backup: &Backup) -> (Vec<String>, Option<BackupHooks>) {
    let mut messages = hawser_core::selection::validate(&filters_of(backup, &[]));
    let hooks = BackupHooks::new(backup.spec.hook_specs())
        .map_err(|e| messages.push(e))
        .ok();
    (messages, hooks)
}

/// What is wrong with the include/exclude part of `policies` for `backup` (see
/// [`hawser_core::selection::policy_errors`]).
#[must_use]
fn policy_errors(backup: &Backup, policies: Option<&ResourcePolicies>) -> Vec<String> {
    hawser_core::selection::policy_errors(
        &filters_of(backup, &[]),
        policies.and_then(|p| p.include_exclude.as_ref()),
    )
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
    valid: &ValidatedBackup,
    options: BackupOptions,
) -> Result<BackupOutcome, BackupError> {
    let backup = &valid.backup;
    let name = backup
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(BackupError::Unnamed)?;
    let namespace = backup.metadata.namespace.clone().unwrap_or_default();
    let span = tracing::info_span!("backup", namespace = %namespace, name = %name);
    run_named(client, location, valid, options, name, namespace)
        .instrument(span)
        .await
}

async fn run_named(
    client: Client,
    location: &Location,
    valid: &ValidatedBackup,
    options: BackupOptions,
    name: String,
    namespace: String,
) -> Result<BackupOutcome, BackupError> {
    let backup = &valid.backup;
    if location.is_read_only() {
        return Err(BackupError::ReadOnlyLocation);
    }
    let started = options.clock.now();
    let mut notes = Notes::begin(valid, &options, format!("{namespace}/{name}"));
    let plan = Plan::make(&client, valid, &options, &mut notes).await?;
    let runner = hooks::Runner::new(&client, &valid.hooks, backup, options.api_retry);
    runner.settle_pending(backup).await;
    let layout = Layout::new(None);
    let progress = ProgressHandle::new(options.progress.clone());
    let concurrency = options.concurrency.max(1);
    let (sender, writer) = start_archive(
        location,
        &layout.backup_contents(&name),
        &options,
        started,
        &progress,
    )?;
    let ordered = backup.spec.ordered_resources.clone().unwrap_or_default();
    let lister = Lister {
        client: &client,
        selection: &plan.selection,
        scope: &plan.scope,
        page_size: options.page_size.max(1),
        api_retry: options.api_retry,
        progress: progress.clone(),
        sender,
        ordered: &ordered,
        concurrency,
        related: related::Related::default(),
        hold_claims: backup.spec.snapshot_volumes != Some(false)
            && snapshots::served(&plan.catalogue).is_some(),
        hooks: &valid.hooks,
    };
    let listed = list_types(&lister, &plan, &mut notes).await;
    let taken = if listed.stopped {
        snapshots::Taken::default()
    } else {
        back_up_the_rest(
            &lister,
            &plan,
            (valid, &runner),
            &options,
            listed,
            &mut notes,
        )
        .await
    };
    let hook_tally = runner.finish(&mut notes.log, &mut notes.messages);
    for warning in lister.related.annotation_warnings() {
        notes.warn(warning);
    }
    // Dropping the lister closes the archive's channel: the writer finishes.
    drop(lister);
    if let Some(warning) = backup.spec.unsnapshotted_claims(taken.objects_only) {
        notes.warn(warning);
    }
    let report = writer.await.map_err(BackupError::WriterGone)??;
    for (ns, message) in &report.item_errors {
        let scope = ns.clone().map_or(Scope::Cluster, Scope::Namespace);
        notes.log.line("error", message);
        notes.messages.error(scope, message.clone());
    }
    progress.finish(report.stats.items);
    let (phase, results) = store_side_files(
        location,
        &layout,
        &name,
        notes,
        report.resource_list,
        report.stats.items,
        &taken,
    )
    .await?;
    let operations = taken.operations;
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
        hooks: hook_tally,
    })
}

/// The backup's log and the warnings and errors its results will hold.
struct Notes {
    log: BackupLog,
    messages: Messages,
}

impl Notes {
    /// The log's first lines: the start, the caller's warnings, the spec fields hawser does
    /// not act on.
    fn begin(valid: &ValidatedBackup, options: &BackupOptions, name: String) -> Self {
        let backup = &valid.backup;
        let mut notes = Self {
            log: BackupLog::new(name, options.clock.clone()),
            messages: Messages::default(),
        };
        notes.log.info("Starting backup");
        for line in &options.log_warnings {
            notes.log.line("warning", line);
        }
        for warning in backup
            .spec
            .unsupported_fields()
            .into_iter()
            .chain(options.warnings.iter().cloned())
        {
            notes.warn(warning);
        }
        let policy_name = backup
            .spec
            .resource_policy
            .as_ref()
            .map(|r| r.name.as_str());
        if let Some(warning) = valid
            .policies()
            .zip(policy_name)
            .and_then(|(p, name)| p.unapplied(name))
        {
            notes.warn(warning);
        }
        notes
    }

    /// A warning of the whole backup, in the log and in the results.
    fn warn(&mut self, warning: String) {
        self.log.line("warning", &warning);
        self.messages.warn(Scope::Velero, warning);
    }
}

/// What the backup takes, decided before the first item is listed.
struct Plan {
    catalogue: Catalogue,
    /// Every Namespace object of the cluster.
    namespace_objects: Vec<serde_json::Value>,
    selection: Selection,
    scope: NamespaceScope,
}

impl Plan {
    /// Discovery, the namespaces, the selection from the spec (an invalid spec is
    /// [`BackupError::Validation`]); an included namespace that does not exist is an error of
    /// the backup.
    async fn make(
        client: &Client,
        valid: &ValidatedBackup,
        options: &BackupOptions,
        notes: &mut Notes,
    ) -> Result<Self, BackupError> {
        let catalogue = crate::cluster::catalogue(client).await?;
        let namespace_objects = match catalogue.resolve(NAMESPACES) {
            Some(r) => list_all(
                client,
                &Collection::of(r).path(None),
                options.page_size,
                options.api_retry,
            )
            .await
            .map_err(BackupError::Namespaces)?,
            None => Vec::new(),
        };
        let filters = filters_of(&valid.backup, &namespace_objects);
        let policy = valid.policies().and_then(|p| p.include_exclude.as_ref());
        let selection = Selection::with_policy(&filters, &catalogue, policy)
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
            notes.messages.error(
                Scope::Velero,
                format!("included namespace {missing} does not exist"),
            );
        }
        let scope = selection.namespace_scope(&existing);
        Ok(Self {
            catalogue,
            namespace_objects,
            selection,
            scope,
        })
    }

    /// The Namespace type, when the selection walks it: its objects are backed up last, once
    /// the namespaces that had items are known.
    fn namespace_type(&self) -> Option<&ApiResource> {
        self.selection
            .resources_to_back_up()
            .into_iter()
            .find(|r| r.group_resource() == NAMESPACES)
    }
}

/// The archive's writer, running until its channel closes.
type ArchiveTask = tokio::task::JoinHandle<Result<sink::SinkReport, BackupError>>;

/// The archive's writer on a blocking thread, fed through the returned channel, its bytes
/// streaming into the location's upload (sealed with the location's archive key, when it names
/// one).
fn start_archive(
    location: &Location,
    key: &str,
    options: &BackupOptions,
    started: jiff::Timestamp,
    progress: &ProgressHandle,
) -> Result<(mpsc::Sender<Batch>, ArchiveTask), BackupError> {
    let out = location
        .archive_writer(key)
        .map_err(|source| BackupError::storage(key.to_owned(), source))?;
    let (sender, receiver) = mpsc::channel::<Batch>(options.concurrency.max(1));
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
    Ok((sender, writer))
}

/// What listing the selected types found.
struct Listed {
    /// The archive stopped taking items (its error comes when the writer is joined).
    stopped: bool,
    /// The namespaces that had items.
    namespaces: BTreeSet<String>,
    /// The types that had items (group resources), whose CRDs go with them.
    types_with_items: Vec<String>,
}

/// Every selected type but Namespaces, [`BackupOptions::concurrency`] at a time, into the
/// archive.
async fn list_types(lister: &Lister<'_>, plan: &Plan, notes: &mut Notes) -> Listed {
    // Owned resources and a plain reference keep the future `Send` (no higher-ranked closure).
    let types: Vec<ApiResource> = plan
        .selection
        .resources_to_back_up()
        .into_iter()
        .filter(|r| r.group_resource() != NAMESPACES)
        .cloned()
        .collect();
    let reports: Vec<(String, ResourceReport)> = futures::stream::iter(types)
        .map(move |r: ApiResource| collect_one(lister, r))
        .buffer_unordered(lister.concurrency)
        .collect()
        .await;
    let mut listed = Listed {
        stopped: false,
        namespaces: BTreeSet::new(),
        types_with_items: Vec::new(),
    };
    for (group_resource, report) in reports {
        listed.stopped |= report.stopped;
        if !report.stopped {
            notes.log.info(&format!(
                "Backed up {} items of {group_resource}",
                report.selected
            ));
        }
        if report.being_deleted > 0 {
            notes.log.info(&related::skipped_line(
                &group_resource,
                SkipReason::BeingDeleted.as_str(),
                report.being_deleted,
                &report.being_deleted_names,
            ));
        }
        notes.log.messages(&report.messages);
        if report.selected > 0 {
            listed.types_with_items.push(group_resource);
        }
        listed.namespaces.extend(report.namespaces);
        notes.messages.append(report.messages);
    }
    listed
}

/// After the listed types: the items they name (the built-in item actions), the CSI
/// snapshots of the claims between the hooks of the Pods that mount them, the Namespace
/// objects of the namespaces with items, and (unless CRDs are filtered explicitly) the CRDs of
/// the custom resource types with items.
async fn back_up_the_rest(
    lister: &Lister<'_>,
    plan: &Plan,
    (valid, hooks): (&ValidatedBackup, &hooks::Runner<'_>),
    options: &BackupOptions,
    mut listed: Listed,
    notes: &mut Notes,
) -> snapshots::Taken {
    let added =
        related::back_up_related(lister, &plan.catalogue, &mut notes.log, &mut notes.messages)
            .await;
    listed.namespaces.extend(added.namespaces);
    let taken = snapshots::take_snapshots(
        lister,
        &plan.catalogue,
        (&valid.backup, valid.policies()),
        &options.clock,
        hooks,
        &mut notes.log,
        &mut notes.messages,
    )
    .await;
    if let Some(r) = plan.namespace_type() {
        let mut tracker = plan.selection.namespace_tracker(&plan.namespace_objects);
        for ns in &listed.namespaces {
            tracker.track(ns);
        }
        let items: Vec<serde_json::Value> = plan
            .namespace_objects
            .iter()
            .filter(|ns| {
                ns.pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|n| tracker.is_tracked(n))
            })
            .map(|ns| typed(ns.clone(), r))
            .filter(|ns| plan.selection.check_item(r, ns, false).is_ok())
            .collect();
        notes
            .log
            .info(&format!("Backed up {} items of {NAMESPACES}", items.len()));
        send(&lister.sender, r, items, &lister.progress).await;
    }
    let crds_walked = plan
        .selection
        .resources_to_back_up()
        .iter()
        .any(|r| r.group_resource() == CUSTOM_RESOURCE_DEFINITIONS);
    if let (Some(crd_type), false, true) = (
        plan.catalogue.resolve(CUSTOM_RESOURCE_DEFINITIONS),
        crds_walked,
        plan.selection.adds_crds_of_custom_resources(),
    ) {
        let crds = crds_of(
            lister.client,
            crd_type,
            &listed.types_with_items,
            options.api_retry,
            &mut notes.messages,
        )
        .await;
        if !crds.is_empty() {
            notes.log.info(&format!(
                "Backed up {} CustomResourceDefinitions of backed-up custom resources",
                crds.len()
            ));
        }
        send(&lister.sender, crd_type, crds, &lister.progress).await;
    }
    taken
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
