//! The restore engine: from a backup archive in a storage location back into the cluster.
//!
//! Pipeline of [`ValidatedRestore::check`], then [`run`]:
//!
//! 1. discovery (I/O, once): the preferred version of every served group → a
//!    [`Catalogue`](hawser_core::selection::Catalogue);
//! 2. validate (pure, once): a
//!    [`RestoreSelection`](hawser_core::restore::RestoreSelection) from the spec, and the
//!    resource-modifier ConfigMap read; an invalid spec is [`RestoreError::Validation`] with
//!    Velero's messages. [`run`] takes the checked value and plans from it;
//! 3. the checking pass (I/O, streamed, on a blocking thread): the archive is read once, the
//!    only time it is read, through the untrusted-input checks of the archive reader, without
//!    creating anything. It yields the types present and the number of items to restore per
//!    type (after filters and skip rules), the archived Namespace objects, and the rejected
//!    entries (a path escaping the archive, a link, an oversized entry or extension header, an
//!    item that is not a JSON object, an item under a directory that is not its type's
//!    canonical `resource.group` name, an item path found twice), each of which becomes an
//!    error of the restore (the first [`MAX_REJECTED`](scan::MAX_REJECTED) listed, the rest
//!    counted). The items to restore wait for their turn as the JSON text they were read as,
//!    in memory within [`RestoreOptions::look_ahead_bytes`] and in an unnamed temporary file
//!    beyond it (`spill`). An archive that is unreadable as a whole (not gzip, broken tar, a
//!    decompression bomb), or items that cannot be kept, end the run here: nothing has been
//!    created;
//! 4. the walk (pure order, I/O act): CRDs, then Velero's high priorities in order, then the
//!    other types alphabetically, then the low priorities ([`restore_order`]). Each type's
//!    items are read back on a blocking thread, parsed and restored as they come. Memory is
//!    bounded by the budget and the channel, never by the archive. After the CRDs, each
//!    created or updated CRD is waited on until `Established` and discovery is refreshed, so
//!    that custom resources find their type;
//! 5. per item: the identity check (the archive path decides an item's type, namespace and
//!    name; an object whose `kind`, `metadata.namespace` or `metadata.name` says otherwise is
//!    an error naming the entry, and nothing is created for it), namespace mapping (the target
//!    namespace is ensured from the archived Namespace object before its first item), cleaning
//!    (velero-compat §7.5), create through
//!    the type's collection at the archived `apiVersion`; `AlreadyExists` leads to the
//!    existing-object decision (§7.6); status is re-applied for types in `restoreStatus`.
//!    Up to [`RestoreOptions::concurrency`] items of one type are in flight; types, and so
//!    tiers, are never mixed;
//! 6. the results (warnings and errors per target namespace, cluster and server), the
//!    restored-resource list and the restore's log, each gzipped to its layout key. Upload
//!    failures are logged and listed in [`RestoreOutcome::upload_errors`], as Velero only logs
//!    them. Nothing is stored in a `ReadOnly` location. The Restore record (`restores/<name>/restore-<name>.json`) is *not* written here:
//!    the caller commits it last, with the body from [`record`].
//!
//! Only the restore's own objects are written: the items of the archive that pass the
//! filters and the target namespaces they need.

mod apply;
mod error;
mod exec_hooks;
mod namespaces;
mod outcome;
mod plugin_config;
mod results;
mod scan;
mod validated;
mod volumes;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::RandomState;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use hawser_api::Backup;
use hawser_api::labels::HAWSER_RECORD_UID;
use hawser_api::phase::RestorePhase;
use hawser_core::archive::ReaderOptions;
use hawser_core::archive::gzjson::to_gz_json;
use hawser_core::csi::VOLUME_SNAPSHOTS;
use hawser_core::errors::chain_text;
use hawser_core::layout::Layout;
use hawser_core::poll::poll_until;
use hawser_core::restore::volume_data;
use hawser_core::restore::{
    ArchiveTypes, ExistingPolicy, ImageNames, RestoreFilters, Tier, restore_order,
};
use hawser_core::selection::NAMESPACES;
use hawser_store::Location;
use kube::Client;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::cluster::path::crd_path;
use crate::cluster::request;

pub use error::RestoreError;
pub use outcome::{RestoreOptions, RestoreOutcome, record};
pub use results::Progress;
pub use validated::ValidatedRestore;

use crate::spill::{TypeReader, Waiting};
use apply::{Restorer, SnapshotProof};
use namespaces::Namespaces;
use results::{Report, Scope};
use scan::{Checks, PassError, PassReport};

/// Runs one restore of a checked Restore (its backup's archive is in `location`; see the
/// module docs).
///
/// # Errors
/// [`RestoreError`]: [`RestoreError::phase`] says whether the restore is `FailedValidation`
/// or `Failed`.
pub async fn run(
    client: Client,
    location: &Location,
    valid: &ValidatedRestore,
    options: RestoreOptions,
) -> Result<RestoreOutcome, RestoreError> {
    let (restore, backup) = (&valid.restore, &valid.backup);
    let name = restore
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(RestoreError::Unnamed)?;
    let backup_name = backup
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(RestoreError::BackupUnnamed)?;
    let namespace = restore.metadata.namespace.clone().unwrap_or_default();
    let span =
        tracing::info_span!("restore", namespace = %namespace, name = %name, backup = %backup_name);
    let report = Report::new(
        format!("{namespace}/{name}"),
        options.clock.clone(),
        options.progress.clone(),
    );
    run_named(
        client,
        location,
        valid,
        options,
        name,
        (backup_name, own_uid(backup)),
        report,
    )
    .instrument(span)
    .await
}

/// The checking pass over the archive at `key` (see the module docs): its report, and the
/// items to restore waiting in a [`Waiting`] of `budget` bytes.
async fn check_archive(
    location: &Location,
    key: &str,
    options: ReaderOptions,
    checks: Arc<Checks>,
    budget: u64,
) -> Result<(PassReport, Waiting), RestoreError> {
    let reader =
        location
            .archive_reader(key)
            .await
            .map_err(|source| RestoreError::OpenArchive {
                key: key.to_owned(),
                source: Box::new(source),
            })?;
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        let mut waiting = Waiting::new(budget);
        scan::run_pass(reader, options, &checks, &mut waiting).map(|report| (report, waiting))
    })
    .await
    .map_err(RestoreError::ReaderGone)?
    .map_err(|e| match e {
        PassError::Archive(source) => RestoreError::Archive {
            key: key.to_owned(),
            source,
        },
        PassError::Keep(source) => RestoreError::Waiting(source),
    })
}

/// Restores the waiting items of `gr`, read back and parsed on a blocking thread as the
/// restore takes them (those of `left_out` left out).
async fn restore_waiting(
    restorer: &Restorer,
    gr: &str,
    items: TypeReader,
    left_out: Arc<HashSet<u64>>,
) -> Result<(), RestoreError> {
    let (sender, mut receiver) = mpsc::channel(restorer.concurrency.max(1) * 2);
    let span = tracing::Span::current();
    let task = tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        scan::read_back(items, &left_out, |item| sender.blocking_send(item).is_ok())
    });
    let items = futures::stream::poll_fn(|cx| receiver.poll_recv(cx));
    restorer.restore_type(gr, items).await;
    task.await
        .map_err(RestoreError::ReaderGone)?
        .map_err(RestoreError::Waiting)
}

/// The uid `backup` was made under, which its snapshots carry: the one in its record when it
/// was synced from a location, else its own.
fn own_uid(backup: &Backup) -> String {
    let meta = &backup.metadata;
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(HAWSER_RECORD_UID))
        .or(meta.uid.as_ref())
        .cloned()
        .unwrap_or_default()
}

async fn run_named(
    client: Client,
    location: &Location,
    valid: &ValidatedRestore,
    options: RestoreOptions,
    name: String,
    (backup_name, backup_uid): (String, String),
    report: Report,
) -> Result<RestoreOutcome, RestoreError> {
    let restore = &valid.restore;
    let started = options.clock.now();
    report.info(&format!("Starting restore of backup {backup_name}"));
    for line in &options.log_warnings {
        report.line("warning", line);
    }
    for warning in restore.spec.unsupported_fields() {
        report.warn(Scope::Velero, warning);
    }
    // The backup's volume side files, read once: volume data made by Velero that is not
    // restored here is named (unless no volume data was asked for), and the volume info is
    // what an archived snapshot handle is checked against.
    let side_files = crate::backup::operations::load_volume_side_files(location, &backup_name)
        .await
        .map_err(|e| chain_text(&e));
    if restore.spec.restore_pvs != Some(false) {
        match &side_files {
            Ok(files) => {
                for warning in volume_data::warnings(files) {
                    report.warn(Scope::Velero, warning);
                }
            }
            Err(why) => report.warn(
                Scope::Velero,
                format!(
                    "the backup's volume side files could not be read, so volume data it holds that hawser cannot restore (file-system backups, native snapshots, moved snapshot data) is not named here: {why}"
                ),
            ),
        }
    }
    let (catalogue, selection) = (valid.catalogue.clone(), valid.selection.clone());
    let filters = RestoreFilters::from(&restore.spec);
    if let Some(reference) = &restore.spec.resource_modifier
        && valid.modifiers.is_some()
    {
        report.info(&format!(
            "Applying the resource modifiers provided in configmap {}",
            reference.name
        ));
    }
    let layout = Layout::new(None);
    let checks = Arc::new(Checks {
        selection: selection.clone(),
        types: ArchiveTypes::new(&catalogue),
        hasher: RandomState::new(),
    });
    let mut restorer = Restorer {
        client,
        catalogue,
        selection,
        backup_name: backup_name.clone(),
        restore_name: name.clone(),
        restore_uid: restore.metadata.uid.clone().unwrap_or_default(),
        preserve_node_ports: filters.preserve_node_ports == Some(true),
        mapping: filters.namespace_mapping.clone(),
        policy: ExistingPolicy::parse(filters.existing_resource_policy.as_deref()),
        concurrency: options.concurrency.max(1),
        api_retry: options.api_retry,
        report: report.clone(),
        namespaces: Namespaces::new(BTreeMap::new(), options.terminating_timeout),
        reprovisioned_pvs: BTreeSet::new(),
        snapshots: BTreeMap::new(),
        crds_touched: Mutex::default(),
        proof: SnapshotProof {
            backup_uid,
            ..SnapshotProof::default()
        },
        exec_hooks: valid.exec_hooks.clone(),
        hooked_pods: Mutex::default(),
        storage_classes: BTreeMap::new(),
        image_names: ImageNames::default(),
        modifiers: valid.modifiers.clone(),
        init_hooks: valid.init_hooks.clone(),
    };
    let namespace = restore.metadata.namespace.clone().unwrap_or_default();
    let (storage_classes, warnings) =
        plugin_config::storage_classes(&restorer.client, &namespace, options.api_retry).await;
    restorer.storage_classes = storage_classes;
    let (image_names, warning) =
        plugin_config::image_names(&restorer.client, &namespace, options.api_retry).await;
    restorer.image_names = image_names;
    for warning in warnings.into_iter().chain(warning) {
        report.warn(Scope::Velero, warning);
    }
    let key = layout.backup_contents(&backup_name);
    let checking = std::time::Instant::now();
    let (mut checked, mut waiting) = check_archive(
        location,
        &key,
        options.reader,
        checks,
        options.look_ahead_bytes,
    )
    .await?;
    let checking_pass = checking.elapsed();
    report_checking_pass(&restorer, &checked);
    let left_out = Arc::new(std::mem::take(&mut checked.left_out));
    restorer.namespaces = Namespaces::new(checked.namespaces, options.terminating_timeout);
    restorer.reprovisioned_pvs = std::mem::take(&mut checked.reprovisioned_pvs);
    // `restorePVs: false`: the claims and volumes come back as archived objects only.
    if restore.spec.restore_pvs != Some(false) {
        restorer.snapshots = std::mem::take(&mut checked.snapshots);
    }
    if checked.counts.contains_key(VOLUME_SNAPSHOTS) {
        restorer.proof.volume_info = Some(side_files.map(|files| files.volume_info));
    }
    let to_restore: u64 = checked
        .counts
        .iter()
        .filter(|(gr, _)| gr.as_str() != NAMESPACES)
        .map(|(_, n)| n)
        .sum();
    report.add_total(to_restore);
    let spilled_bytes = waiting.spilled_bytes();
    report.info(&format!(
        "Archive checked in {:.1}s: {to_restore} items to restore, {spilled_bytes} bytes of them wait for their turn in a temporary file",
        checking_pass.as_secs_f64()
    ));
    let resolved = options.priorities.resolve(&restorer.catalogue);
    let order = restore_order(checked.counts.keys().map(String::as_str), &resolved);
    for (tier, gr) in &order {
        restore_waiting(&restorer, gr, waiting.take(gr), left_out.clone()).await?;
        if *tier == Tier::Crds {
            wait_for_crds(&restorer, options.crd_ready_timeout).await;
            restorer.catalogue = crate::cluster::catalogue(&restorer.client)
                .await
                .map_err(RestoreError::Discovery)?;
        }
    }
    drop(waiting);
    let backup_volumes = match &restorer.proof.volume_info {
        Some(Ok(info)) => info.as_slice(),
        _ => &[],
    };
    let restored_volumes = volumes::settle(&restorer, backup_volumes, options.api_retry).await;
    let hooked = std::mem::take(
        &mut *restorer
            .hooked_pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    if !hooked.is_empty() {
        report.finalizing();
    }
    let hooks = exec_hooks::run(&restorer, hooked, options.api_retry).await;

    let items_restored = report.finish_progress();
    let phase = if report.error_count() > 0 {
        RestorePhase::PartiallyFailed
    } else {
        RestorePhase::Completed
    };
    report.info(&format!(
        "Restore finished: {items_restored} items, phase {phase}"
    ));
    let (results, restored, log) = report.take();
    let mut upload_errors = Vec::new();
    let mut uploads: Vec<(String, Result<Vec<u8>, _>)> = vec![
        (layout.restore_results(&name), to_gz_json(&results)),
        (layout.restore_resource_list(&name), to_gz_json(&restored)),
    ];
    // Velero's files of a restore without plugin operations or volumes; the volume info
    // when volumes were provisioned from snapshots.
    let volume_info_key = layout.restore_volume_info(&name);
    uploads.extend(layout.empty_restore_side_files(&name).map(|(key, json)| {
        let bytes = if key == volume_info_key && !restored_volumes.is_empty() {
            to_gz_json(&restored_volumes)
        } else {
            hawser_core::archive::gzjson::gzip_bytes(json.as_bytes())
        };
        (key, bytes)
    }));
    uploads.push((
        layout.restore_log(&name),
        hawser_core::archive::gzjson::gzip_bytes(log.as_bytes()),
    ));
    for (key, bytes) in uploads {
        if location.is_read_only() {
            // A read-only location keeps nothing of a restore; the outcome is on the Restore.
            tracing::debug!(key = %key, "not stored: the location is read-only");
            continue;
        }
        let stored = match bytes {
            Ok(bytes) => location
                .put(&key, Bytes::from(bytes))
                .await
                .map_err(|e| e.full_message()),
            Err(e) => Err(chain_text(&e)),
        };
        if let Err(reason) = stored {
            tracing::warn!(key = %key, "storing a restore artifact failed: {reason}");
            upload_errors.push(format!("{key}: {reason}"));
        }
    }
    Ok(RestoreOutcome {
        phase,
        started,
        completed: options.clock.now(),
        items_restored,
        results,
        spilled_bytes,
        checking_pass,
        upload_errors,
        failure_reason: None,
        validation_errors: Vec::new(),
        hooks,
    })
}

/// Rejected entries become errors (in the target namespace of the entry's path when it has
/// one); selected control objects become a warning per type; skip-rule counts go to the log.
fn report_checking_pass(restorer: &Restorer, checked: &PassReport) {
    for e in &checked.rejected {
        let scope = match &e.namespace {
            Some(ns) => Scope::Namespace(restorer.selection.target_namespace(ns).to_owned()),
            None => Scope::Velero,
        };
        restorer.report.error(scope, e.message.clone());
    }
    if checked.rejected_more > 0 {
        restorer.report.error(
            Scope::Velero,
            format!(
                "{} more archive entries were rejected (only the first {} are listed)",
                checked.rejected_more,
                scan::MAX_REJECTED
            ),
        );
    }
    for (gr, n) in &checked.control {
        restorer.report.warn(
            Scope::Velero,
            format!(
                "{n} {gr} objects in the backup were not restored: they are the backup server's own control objects, which a restore never creates"
            ),
        );
    }
    for ((gr, why), n) in &checked.skipped {
        restorer
            .report
            .info(&format!("Skipped {n} items of {gr}: {why}"));
    }
    for (gr, n) in &checked.added {
        restorer.report.info(&format!(
            "Adding {n} items of {gr} the filters left out: restored items need them"
        ));
    }
    if checked.counts.is_empty() && checked.rejected.is_empty() {
        restorer.report.warn(
            Scope::Velero,
            "the backup has no items that this restore selects".to_owned(),
        );
    }
}

/// How often a restored CRD is looked at until it is established.
const CRD_POLL: Duration = Duration::from_millis(250);

/// Waits for every CRD the restore created or updated to be `Established`; one that is not
/// within `timeout` is an error (its custom resources then fail on their own).
async fn wait_for_crds(restorer: &Restorer, timeout: Duration) {
    let names = std::mem::take(
        &mut *restorer
            .crds_touched
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    for name in names {
        let path = crd_path(&name);
        let established = poll_until(timeout, CRD_POLL, || async {
            // Sent once per poll: the poll is the retry.
            request::get(&restorer.client, &path, Duration::ZERO)
                .await
                .is_ok_and(|crd| is_established(&crd))
                .then_some(())
        })
        .await;
        if established.is_none() {
            restorer.report.error(
                Scope::Cluster,
                format!(
                    "CustomResourceDefinition {name} was not established within {}s",
                    timeout.as_secs()
                ),
            );
        }
    }
}

fn is_established(crd: &serde_json::Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(serde_json::Value::as_str) == Some("Established")
                    && c.get("status").and_then(serde_json::Value::as_str) == Some("True")
            })
        })
}
