//! `backup describe` as Velero's `DescribeBackup` lays it out.

use hawser_api::{
    Backup, BackupPhase, BackupSpec, DeleteBackupRequest, DeleteBackupRequestPhase, PodVolumeBackup,
};
use hawser_core::archive::gzjson::{ResourceList, Results};
use hawser_core::csi::{BackupOperation, OperationStatus, ResourceIdentifier};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;

use super::volumes::VolumeInfo;
use super::{Describer, Read, Unread, duration, list_or, put, time_or_na, tristate};
use crate::cli::output::when;

/// Velero's annotation naming the cluster-wide volume policy a backup followed.
const GLOBAL_VOLUME_POLICY: &str = "velero.io/global-backup-volume-policy-configmap";

/// What a backup's description shows besides the object: files of its storage location and
/// the objects that refer to it.
#[derive(Debug)]
pub struct BackupExtras {
    /// `--details`.
    pub details: bool,
    /// The results file; read only when the backup has warnings or errors.
    pub results: Option<Read<Results>>,
    /// The resource list; read only with `--details`.
    pub resources: Option<Read<ResourceList>>,
    /// The item operations; read only with `--details` when some were attempted.
    pub operations: Option<Read<Vec<BackupOperation>>>,
    /// The volume infos, or the ones concluded from the older snapshot files (`legacy`).
    pub volumes: Read<Vec<VolumeInfo>>,
    /// Whether `volumes` was concluded from the older files.
    pub legacy: bool,
    /// The DeleteBackupRequests of this backup.
    pub deletions: Vec<DeleteBackupRequest>,
    /// The PodVolumeBackups of this backup.
    pub pod_volumes: Vec<PodVolumeBackup>,
}

/// The description of one backup.
pub fn backup(backup: &Backup, extras: &BackupExtras, colour: bool) -> String {
    let mut d = Describer::new(colour);
    let status = backup.status.clone().unwrap_or_default();
    let name = backup.metadata.name.as_deref().unwrap_or_default();
    d.metadata(&backup.metadata);

    d.blank();
    let phase = backup.phase();
    let shown = match phase {
        BackupPhase::FailedValidation | BackupPhase::PartiallyFailed | BackupPhase::Failed => {
            d.red(phase.as_str())
        }
        BackupPhase::Completed => d.green(phase.as_str()),
        _ => super::safe(phase.as_str()),
    };
    let note = if matches!(phase, BackupPhase::Failed | BackupPhase::PartiallyFailed) {
        format!(
            " (run `velero backup logs {}` for more information)",
            super::safe(name)
        )
    } else {
        String::new()
    };
    d.put_painted(&format!("Phase:\t{shown}{note}\n"));
    failure_reason(&mut d, status.failure_reason.as_deref());
    if phase == BackupPhase::Queued {
        put!(
            d,
            "Queue position:\t{}\n",
            status.queue_position.unwrap_or(0)
        );
    }
    resource_policy(&mut d, backup.spec.resource_policy.as_ref());
    let global = backup
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GLOBAL_VOLUME_POLICY))
        .filter(|n| !n.is_empty());
    if let Some(global) = global {
        d.blank();
        d.put("Global volume policies:\n");
        d.put("\tType:\tconfigmap\n");
        put!(d, "\tName:\t{global}\n");
    }
    uploader_config(&mut d, &backup.spec);
    d.validation_errors(status.validation_errors.as_deref());

    d.blank();
    let (warnings, errors) = (status.warnings.unwrap_or(0), status.errors.unwrap_or(0));
    match &extras.results {
        None => {}
        Some(Err(Unread::NotFound)) => {
            put!(d, "Errors:\t{errors}\n");
            put!(d, "Warnings:\t{warnings}\n");
        }
        Some(Err(e)) => d.unread_results(e),
        Some(Ok(results)) => d.results(results, warnings, errors),
    }

    d.blank();
    spec(&mut d, &backup.spec);

    d.blank();
    put!(
        d,
        "Backup Format Version:\t{}\n",
        status.format_version.as_deref().unwrap_or_default()
    );
    d.blank();
    put!(
        d,
        "Started:\t{}\n",
        time_or_na(status.start_timestamp.as_ref())
    );
    put!(
        d,
        "Completed:\t{}\n",
        time_or_na(status.completion_timestamp.as_ref())
    );
    d.blank();
    let expiration = status
        .expiration
        .as_ref()
        .map_or_else(|| "<nil>".to_owned(), |t| when(Some(t)));
    put!(d, "Expiration:\t{expiration}\n");
    d.blank();
    if let Some(progress) = &status.progress {
        let (total, done) = (
            progress.total_items.unwrap_or(0),
            progress.items_backed_up.unwrap_or(0),
        );
        if phase == BackupPhase::InProgress {
            put!(d, "Estimated total items to be backed up:\t{total}\n");
            put!(d, "Items backed up so far:\t{done}\n");
        } else {
            put!(d, "Total items to be backed up:\t{total}\n");
            put!(d, "Items backed up:\t{done}\n");
        }
        d.blank();
    }
    operations(&mut d, &status, extras);
    if let Some(resources) = &extras.resources {
        d.resource_list("backup", resources);
        d.blank();
    }
    super::volumes::backup_volumes(&mut d, extras);
    if let Some(hooks) = &status.hook_status {
        d.blank();
        put!(
            d,
            "HooksAttempted:\t{}\n",
            hooks.hooks_attempted.unwrap_or(0)
        );
        put!(d, "HooksFailed:\t{}\n", hooks.hooks_failed.unwrap_or(0));
    }
    if !extras.deletions.is_empty() {
        d.blank();
        deletions(&mut d, &extras.deletions);
    }
    d.finish()
}

/// `Failure reason:` in a block of its own after the phase, when the server gave one: the one
/// line Velero's describe does not have (Velero leaves the reason to `-o yaml`).
pub(super) fn failure_reason(d: &mut Describer, reason: Option<&str>) {
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        d.blank();
        put!(d, "Failure reason:\t{reason}\n");
    }
}

/// `Resource policies:` when a Backup's or a Restore's spec names one.
pub(super) fn resource_policy(d: &mut Describer, policy: Option<&TypedLocalObjectReference>) {
    if let Some(policy) = policy {
        d.blank();
        d.put("Resource policies:\n");
        put!(d, "\tType:\t{}\n", policy.kind);
        put!(d, "\tName:\t{}\n", policy.name);
    }
}

/// `Uploader config:` when the spec sets parallel uploads.
pub(super) fn uploader_config(d: &mut Describer, spec: &BackupSpec) {
    let parallel = spec
        .uploader_config
        .as_ref()
        .and_then(|u| u.parallel_files_upload)
        .unwrap_or(0);
    if parallel > 0 {
        d.blank();
        d.put("Uploader config:\n");
        put!(d, "\tParallel files upload:\t{parallel}\n");
    }
}

/// The spec part, shared with a schedule's backup template (Velero's `DescribeBackupSpec`).
pub(super) fn spec(d: &mut Describer, spec: &BackupSpec) {
    d.put("Namespaces:\n");
    put!(
        d,
        "\tIncluded:\t{}\n",
        list_or(spec.included_namespaces.as_deref(), "*")
    );
    put!(
        d,
        "\tExcluded:\t{}\n",
        list_or(spec.excluded_namespaces.as_deref(), "<none>")
    );

    d.blank();
    d.put("Resources:\n");
    let old_filters = spec.include_cluster_resources.is_some()
        || spec
            .included_resources
            .as_ref()
            .is_some_and(|l| !l.is_empty())
        || spec
            .excluded_resources
            .as_ref()
            .is_some_and(|l| !l.is_empty());
    if old_filters {
        d.old_resource_filters(
            spec.included_resources.as_deref(),
            spec.excluded_resources.as_deref(),
            spec.include_cluster_resources,
        );
    } else {
        for (label, list, empty) in [
            (
                "Included cluster-scoped",
                &spec.included_cluster_scoped_resources,
                "<none>",
            ),
            (
                "Excluded cluster-scoped",
                &spec.excluded_cluster_scoped_resources,
                "<none>",
            ),
            (
                "Included namespace-scoped",
                &spec.included_namespace_scoped_resources,
                "*",
            ),
            (
                "Excluded namespace-scoped",
                &spec.excluded_namespace_scoped_resources,
                "<none>",
            ),
        ] {
            put!(d, "\t{label}:\t{}\n", list_or(list.as_deref(), empty));
        }
    }

    d.blank();
    d.selectors(
        spec.label_selector.as_ref(),
        spec.or_label_selectors.as_deref(),
    );

    d.blank();
    put!(
        d,
        "Storage Location:\t{}\n",
        spec.storage_location.as_deref().unwrap_or_default()
    );

    d.blank();
    put!(
        d,
        "Velero-Native Snapshot PVs:\t{}\n",
        tristate(spec.snapshot_volumes, "false", "true", "auto")
    );
    if let Some(fs) = spec.default_volumes_to_fs_backup {
        put!(d, "File System Backup (Default):\t{fs}\n");
    }
    put!(
        d,
        "Snapshot Move Data:\t{}\n",
        tristate(spec.snapshot_move_data, "false", "true", "auto")
    );
    let mover = spec
        .data_mover
        .as_deref()
        .filter(|m| !m.is_empty())
        .unwrap_or("velero");
    put!(d, "Data Mover:\t{mover}\n");

    d.blank();
    put!(d, "TTL:\t{}\n", duration(spec.ttl));
    d.blank();
    put!(
        d,
        "CSISnapshotTimeout:\t{}\n",
        duration(spec.csi_snapshot_timeout)
    );
    put!(
        d,
        "ItemOperationTimeout:\t{}\n",
        duration(spec.item_operation_timeout)
    );

    d.blank();
    hooks(d, spec);
    if let Some(ordered) = &spec.ordered_resources {
        d.blank();
        d.put("OrderedResources:\n");
        for (kind, names) in ordered {
            put!(d, "\t{kind}: {names}\n");
        }
    }
}

fn hooks(d: &mut Describer, spec: &BackupSpec) {
    let resources = spec
        .hooks
        .as_ref()
        .and_then(|h| h.resources.as_deref())
        .unwrap_or_default();
    if resources.is_empty() {
        d.put("Hooks:\t<none>\n");
        return;
    }
    d.put("Hooks:\n");
    d.put("\tResources:\n");
    for hook in resources {
        put!(d, "\t\t{}:\n", hook.name);
        d.put("\t\t\tNamespaces:\n");
        put!(
            d,
            "\t\t\t\tIncluded:\t{}\n",
            list_or(hook.included_namespaces.as_deref(), "*")
        );
        put!(
            d,
            "\t\t\t\tExcluded:\t{}\n",
            list_or(hook.excluded_namespaces.as_deref(), "<none>")
        );
        d.blank();
        d.put("\t\t\tResources:\n");
        put!(
            d,
            "\t\t\t\tIncluded:\t{}\n",
            list_or(hook.included_resources.as_deref(), "*")
        );
        put!(
            d,
            "\t\t\t\tExcluded:\t{}\n",
            list_or(hook.excluded_resources.as_deref(), "<none>")
        );
        d.blank();
        let selector = hook.label_selector.as_ref().map_or_else(
            || "<none>".to_owned(),
            crate::cli::label_selector::format_selector,
        );
        put!(d, "\t\t\tLabel selector:\t{selector}\n");
        for (title, list) in [("Pre", &hook.pre), ("Post", &hook.post)] {
            for exec in list.iter().flatten().map(|h| &h.exec) {
                d.blank();
                put!(d, "\t\t\t{title} Exec Hook:\n");
                put!(
                    d,
                    "\t\t\t\tContainer:\t{}\n",
                    exec.container.as_deref().unwrap_or_default()
                );
                put!(d, "\t\t\t\tCommand:\t{}\n", exec.command.join(" "));
                let on_error = exec
                    .on_error
                    .as_ref()
                    .map(|e| e.as_str())
                    .unwrap_or_default();
                put!(d, "\t\t\t\tOn Error:\t{on_error}\n");
                put!(d, "\t\t\t\tTimeout:\t{}\n", duration(exec.timeout));
            }
        }
    }
}

fn operations(d: &mut Describer, status: &hawser_api::BackupStatus, extras: &BackupExtras) {
    let counts = [
        status.backup_item_operations_attempted,
        status.backup_item_operations_completed,
        status.backup_item_operations_failed,
    ]
    .map(|n| n.unwrap_or(0));
    item_operations(d, "Backup", counts, extras.operations.as_ref(), |o| {
        OperationLines {
            side: "Backup",
            plugin: &o.spec.backup_item_action,
            resource: &o.spec.resource_identifier,
            operation_id: &o.spec.operation_id,
            post_items: &o.spec.post_operation_items,
            status: &o.status,
        }
    });
}

/// `Backup Item Operations:` (or `Restore …`) when some were attempted: the counts, or with
/// `--details` each operation as read (`counts`: attempted, completed, failed).
pub(super) fn item_operations<T>(
    d: &mut Describer,
    side: &str,
    [attempted, completed, failed]: [i64; 3],
    read: Option<&Read<Vec<T>>>,
    lines: impl Fn(&T) -> OperationLines<'_>,
) {
    if attempted <= 0 {
        return;
    }
    match read {
        None => put!(
            d,
            "{side} Item Operations:\t{completed} of {attempted} completed successfully, {failed} failed (specify --details for more information)\n"
        ),
        Some(Err(e)) => put!(
            d,
            "{side} Item Operations:\t<error {} operation info: {e}>\n",
            e.verb("reading")
        ),
        Some(Ok(operations)) => {
            put!(d, "{side} Item Operations:\n");
            for operation in operations {
                lines(operation).write(d);
            }
        }
    }
}

/// A resource identifier as Velero prints it: `resource.group` (`resource` in the core group).
fn group_resource(r: &ResourceIdentifier) -> String {
    if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    }
}

/// One item operation as Velero lists it with `--details`: a backup's (`Backup Item Action
/// Plugin`, the items it updates) or a restore's (`Restore Item Action Plugin`, none).
pub(super) struct OperationLines<'a> {
    /// `Backup` or `Restore`.
    pub(super) side: &'static str,
    pub(super) plugin: &'a str,
    pub(super) resource: &'a ResourceIdentifier,
    pub(super) operation_id: &'a str,
    pub(super) post_items: &'a [ResourceIdentifier],
    pub(super) status: &'a OperationStatus,
}

impl OperationLines<'_> {
    pub(super) fn write(&self, d: &mut Describer) {
        let (r, status) = (self.resource, self.status);
        put!(
            d,
            "\tOperation for {} {}/{}:\n",
            group_resource(r),
            r.namespace,
            r.name
        );
        put!(
            d,
            "\t\t{} Item Action Plugin:\t{}\n",
            self.side,
            self.plugin
        );
        put!(d, "\t\tOperation ID:\t{}\n", self.operation_id);
        if !self.post_items.is_empty() {
            d.put("\t\tItems to Update:\n");
        }
        for item in self.post_items {
            put!(
                d,
                "\t\t\t{} {}/{}\n",
                group_resource(item),
                item.namespace,
                item.name
            );
        }
        put!(d, "\t\tPhase:\t{}\n", status.phase.as_str());
        if !status.error.is_empty() {
            put!(d, "\t\tOperation Error:\t{}\n", status.error);
        }
        if status.n_total > 0 || status.n_completed > 0 {
            put!(
                d,
                "\t\tProgress:\t{} of {} complete ({})\n",
                status.n_completed,
                status.n_total,
                status.operation_units
            );
        }
        if !status.description.is_empty() {
            put!(d, "\t\tProgress description:\t{}\n", status.description);
        }
        for (label, time) in [
            ("Created", &status.created),
            ("Started", &status.started),
            ("Updated", &status.updated),
        ] {
            if let Some(time) = time {
                put!(d, "\t\t{label}:\t{}\n", go_time_text(time));
            }
        }
    }
}

/// An RFC 3339 time of an item operation as Go prints it; as written when it does not parse.
fn go_time_text(text: &str) -> String {
    text.parse::<jiff::Timestamp>()
        .map(|t| {
            when(Some(&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                t,
            )))
        })
        .unwrap_or_else(|_| text.to_owned())
}

fn deletions(d: &mut Describer, requests: &[DeleteBackupRequest]) {
    let failed = requests
        .iter()
        .filter(|r| {
            let status = r.status.clone().unwrap_or_default();
            status.phase == DeleteBackupRequestPhase::Processed
                && status.errors.is_some_and(|e| !e.is_empty())
        })
        .count();
    d.put("Deletion Attempts");
    if failed > 0 {
        put!(d, " ({failed} failed)");
    }
    d.put(":\n");
    for (i, request) in requests.iter().enumerate() {
        if i > 0 {
            d.blank();
        }
        let created = request.metadata.creation_timestamp.as_ref().map_or_else(
            || "0001-01-01 00:00:00 +0000 UTC".to_owned(),
            |t| when(Some(t)),
        );
        // A request no server has taken yet has no status: Velero prints its empty phase.
        let phase = request.status.as_ref().map_or("", |s| s.phase.as_str());
        put!(d, "\t{created}: {phase}\n");
        let status = request.status.clone().unwrap_or_default();
        let errors = status.errors.unwrap_or_default();
        if !errors.is_empty() {
            d.put("\tErrors:\n");
            for error in errors {
                put!(d, "\t\t{error}\n");
            }
        }
    }
}
