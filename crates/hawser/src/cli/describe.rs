//! The human text of `backup describe`, `restore describe` and `schedule describe` (pure: object
//! and the files read for it in, text out), in the order of Velero's describe: what a Velero
//! user looks for is where they expect it.

use std::fmt::Write as _;

use hawser_api::{Backup, BackupSpec, Restore, Schedule};
use hawser_core::archive::gzjson::{ResourceList, ResultMessages, Results};
use hawser_core::csi::BackupOperation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

use super::label_selector::format_selector;
use super::output::{count, joined, key_values, or_none, when};

/// Prints described objects, one blank line apart. What they hold may come from a bucket
/// (result messages) or from whoever wrote the object: it is made
/// [terminal-safe](hawser_core::errors::terminal_safe) first.
pub fn print(texts: &[String]) {
    print!("{}", hawser_core::errors::terminal_safe(&texts.join("\n")));
}

/// Lines of `key: value` pairs, values aligned; sections are separated by blank lines.
struct Text(String);

impl Text {
    fn section(&mut self, rows: &[(&str, String)]) {
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
        for (key, value) in rows {
            let label = format!("{key}:");
            let _ = writeln!(self.0, "{label:<width$}  {value}");
        }
        self.0.push('\n');
    }

    fn list(&mut self, title: &str, items: &[String]) {
        let _ = writeln!(self.0, "{title}:");
        for item in items {
            let _ = writeln!(self.0, "  {item}");
        }
        self.0.push('\n');
    }

    /// `inner` under a `title:` line, indented by two spaces.
    fn nested(&mut self, title: &str, inner: &Text) {
        let _ = writeln!(self.0, "{title}:");
        for line in inner.0.lines() {
            if line.is_empty() {
                self.0.push('\n');
            } else {
                let _ = writeln!(self.0, "  {line}");
            }
        }
    }
}

/// A `resourcePolicy` or `resourceModifier` reference as Velero's describe shows it: its type
/// and name under `title`.
fn config_map_reference(
    text: &mut Text,
    title: &str,
    reference: Option<&k8s_openapi::api::core::v1::TypedLocalObjectReference>,
) {
    if let Some(r) = reference {
        let mut inner = Text(String::new());
        inner.section(&[("Type", r.kind.clone()), ("Name", r.name.clone())]);
        text.nested(title, &inner);
    }
}

/// Files of a backup or restore read from its storage location for the description: each is
/// `None` when not asked for, `Err` with why when it could not be read.
#[derive(Debug, Default)]
pub struct Files {
    /// The results file (read when there are errors or warnings).
    pub results: Option<Result<Results, String>>,
    /// The resource list (read with `--details`).
    pub resources: Option<Result<ResourceList, String>>,
    /// A backup's item operations (read with `--details` when it has some).
    pub operations: Option<Result<Vec<BackupOperation>, String>>,
}

impl Files {
    /// The warnings and errors, per scope, after the counts.
    fn describe_results(&self, text: &mut Text) {
        match &self.results {
            None => {}
            Some(Err(why)) => {
                let _ = writeln!(text.0, "<error getting the results: {why}>\n");
            }
            Some(Ok(results)) => {
                messages(text, "Warnings", &results.warnings);
                messages(text, "Errors", &results.errors);
            }
        }
    }

    /// `Backup Item Operations:` one entry per operation, as Velero lists them.
    fn describe_operations(&self, text: &mut Text) {
        match &self.operations {
            None => {}
            Some(Err(why)) => {
                let _ = writeln!(
                    text.0,
                    "Backup Item Operations:  <error getting the operations: {why}>\n"
                );
            }
            Some(Ok(operations)) => {
                let _ = writeln!(text.0, "Backup Item Operations:");
                for operation in operations {
                    let r = &operation.spec.resource_identifier;
                    let _ = writeln!(
                        text.0,
                        "  Operation for {}.{} {}/{}:",
                        r.resource, r.group, r.namespace, r.name
                    );
                    let _ = writeln!(
                        text.0,
                        "    Backup Item Action Plugin:  {}",
                        operation.spec.backup_item_action
                    );
                    let _ = writeln!(
                        text.0,
                        "    Operation ID:               {}",
                        operation.spec.operation_id
                    );
                    let _ = writeln!(
                        text.0,
                        "    Phase:                      {:?}",
                        operation.status.phase
                    );
                    if !operation.status.error.is_empty() {
                        let _ = writeln!(
                            text.0,
                            "    Operation Error:            {}",
                            operation.status.error
                        );
                    }
                    for (label, time) in [
                        ("Created", &operation.status.created),
                        ("Started", &operation.status.started),
                        ("Updated", &operation.status.updated),
                    ] {
                        if let Some(time) = time {
                            let _ = writeln!(text.0, "    {:<28}{time}", format!("{label}:"));
                        }
                    }
                }
                text.0.push('\n');
            }
        }
    }

    /// `Resource List:` with every `apiVersion/Kind` and its items.
    fn describe_resources(&self, text: &mut Text) {
        match &self.resources {
            None => {}
            Some(Err(why)) => {
                let _ = writeln!(
                    text.0,
                    "Resource List:  <error getting the resource list: {why}>\n"
                );
            }
            Some(Ok(list)) if list.is_empty() => {
                text.section(&[("Resource List", "<none>".to_owned())])
            }
            Some(Ok(list)) => {
                let _ = writeln!(text.0, "Resource List:");
                for (kind, items) in list.iter() {
                    let _ = writeln!(text.0, "  {kind}:");
                    for item in items {
                        let _ = writeln!(text.0, "    - {item}");
                    }
                }
                text.0.push('\n');
            }
        }
    }
}

/// One kind of messages of a results file: `Velero`, `Cluster` and `Namespaces`, as Velero
/// prints them.
fn messages(text: &mut Text, title: &str, messages: &ResultMessages) {
    let _ = writeln!(text.0, "{title}:");
    let list = |text: &mut Text, indent: usize, label: &str, items: &[String]| {
        let pad = " ".repeat(indent);
        match items {
            [] => {
                let _ = writeln!(text.0, "{pad}{label}:  <none>");
            }
            [one] => {
                let _ = writeln!(text.0, "{pad}{label}:  {one}");
            }
            many => {
                let _ = writeln!(text.0, "{pad}{label}:");
                for item in many {
                    let _ = writeln!(text.0, "{pad}  {item}");
                }
            }
        }
    };
    list(text, 2, "Velero", &messages.velero);
    list(text, 2, "Cluster", &messages.cluster);
    if messages.namespaces.is_empty() {
        let _ = writeln!(text.0, "  Namespaces:  <none>");
    } else {
        let _ = writeln!(text.0, "  Namespaces:");
        for (namespace, items) in &messages.namespaces {
            list(text, 4, namespace, items);
        }
    }
    text.0.push('\n');
}

fn metadata_rows(metadata: &ObjectMeta) -> Vec<(&'static str, String)> {
    vec![
        ("Name", metadata.name.clone().unwrap_or_default()),
        ("Namespace", metadata.namespace.clone().unwrap_or_default()),
        ("Labels", key_values(metadata.labels.as_ref())),
        ("Annotations", key_values(metadata.annotations.as_ref())),
    ]
}

fn optional_bool(value: Option<bool>, unset: &str) -> String {
    value.map_or_else(|| unset.to_owned(), |v| v.to_string())
}

fn selectors_rows(
    selector: Option<&LabelSelector>,
    or_selectors: Option<&[LabelSelector]>,
) -> Vec<(&'static str, String)> {
    let or_text = match or_selectors {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(format_selector)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "<none>".to_owned(),
    };
    vec![
        (
            "Label selector",
            selector.map_or_else(|| "<none>".to_owned(), format_selector),
        ),
        ("Or label selector", or_text),
    ]
}

/// The filters, selectors, storage location and TTL of a Backup spec (or a Schedule's template).
fn spec_sections(text: &mut Text, spec: &BackupSpec) {
    text.section(&[
        (
            "Included namespaces",
            joined(spec.included_namespaces.as_deref(), "*"),
        ),
        (
            "Excluded namespaces",
            joined(spec.excluded_namespaces.as_deref(), "<none>"),
        ),
    ]);
    let uses_new = [
        &spec.included_cluster_scoped_resources,
        &spec.excluded_cluster_scoped_resources,
        &spec.included_namespace_scoped_resources,
        &spec.excluded_namespace_scoped_resources,
    ]
    .iter()
    .any(|l| l.as_ref().is_some_and(|l| !l.is_empty()));
    if uses_new {
        text.section(&[
            (
                "Included cluster-scoped resources",
                joined(spec.included_cluster_scoped_resources.as_deref(), "<none>"),
            ),
            (
                "Excluded cluster-scoped resources",
                joined(spec.excluded_cluster_scoped_resources.as_deref(), "<none>"),
            ),
            (
                "Included namespace-scoped resources",
                joined(spec.included_namespace_scoped_resources.as_deref(), "*"),
            ),
            (
                "Excluded namespace-scoped resources",
                joined(
                    spec.excluded_namespace_scoped_resources.as_deref(),
                    "<none>",
                ),
            ),
        ]);
    } else {
        text.section(&[
            (
                "Included resources",
                joined(spec.included_resources.as_deref(), "*"),
            ),
            (
                "Excluded resources",
                joined(spec.excluded_resources.as_deref(), "<none>"),
            ),
            (
                "Cluster-scoped",
                optional_bool(spec.include_cluster_resources, "auto"),
            ),
        ]);
    }
    text.section(&selectors_rows(
        spec.label_selector.as_ref(),
        spec.or_label_selectors.as_deref(),
    ));
    text.section(&[
        ("Storage location", or_none(spec.storage_location.clone())),
        (
            "TTL",
            spec.ttl
                .map_or_else(|| "<server default>".to_owned(), |t| t.to_string()),
        ),
    ]);
    let duration = |d: Option<hawser_core::duration::GoDuration>, default: &str| {
        d.filter(|d| !d.is_zero())
            .map_or_else(|| format!("{default} (default)"), |d| d.to_string())
    };
    text.section(&[
        (
            "Snapshot volumes",
            optional_bool(spec.snapshot_volumes, "auto"),
        ),
        (
            "FS backup by default",
            optional_bool(spec.default_volumes_to_fs_backup, "false"),
        ),
        (
            "Snapshot move data",
            optional_bool(spec.snapshot_move_data, "false"),
        ),
        (
            "CSI snapshot timeout",
            duration(spec.csi_snapshot_timeout, "10m0s"),
        ),
        (
            "Item operation timeout",
            duration(spec.item_operation_timeout, "4h0m0s"),
        ),
    ]);
}

/// The description of one backup, with the files read for it.
pub fn backup(backup: &Backup, files: &Files) -> String {
    let mut text = Text(String::new());
    let spec = &backup.spec;
    let status = backup.status.clone().unwrap_or_default();
    text.section(&metadata_rows(&backup.metadata));
    text.section(&[("Phase", backup.phase().as_str().to_owned())]);
    config_map_reference(
        &mut text,
        "Resource policies",
        spec.resource_policy.as_ref(),
    );
    text.section(&[
        ("Errors", count(status.errors)),
        ("Warnings", count(status.warnings)),
    ]);
    files.describe_results(&mut text);
    if let Some(errors) = status
        .validation_errors
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        text.list("Validation errors", errors);
    }
    if let Some(reason) = status.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        text.section(&[("Failure reason", reason.to_owned())]);
    }
    spec_sections(&mut text, spec);
    text.section(&[
        ("Created", when(backup.metadata.creation_timestamp.as_ref())),
        ("Started", when(status.start_timestamp.as_ref())),
        ("Completed", when(status.completion_timestamp.as_ref())),
        ("Expiration", when(status.expiration.as_ref())),
    ]);
    if let Some(progress) = &status.progress {
        text.section(&[
            ("Total items to be backed up", count(progress.total_items)),
            ("Items backed up", count(progress.items_backed_up)),
        ]);
    }
    if status.backup_item_operations_attempted.unwrap_or(0) > 0 {
        text.section(&[
            (
                "Backup item operations",
                format!(
                    "{} attempted, {} completed, {} failed",
                    count(status.backup_item_operations_attempted),
                    count(status.backup_item_operations_completed),
                    count(status.backup_item_operations_failed)
                ),
            ),
            (
                "CSI snapshots",
                format!(
                    "{} attempted, {} completed",
                    count(status.csi_volume_snapshots_attempted),
                    count(status.csi_volume_snapshots_completed)
                ),
            ),
        ]);
    }
    let hook_specs = spec
        .hooks
        .iter()
        .flat_map(|h| h.resources.iter().flatten())
        .map(|r| r.name.clone());
    hook_sections(&mut text, hook_specs, status.hook_status.as_ref());
    files.describe_operations(&mut text);
    files.describe_resources(&mut text);
    text.0
}

/// The description of one restore, with the files read for it.
pub fn restore(restore: &Restore, files: &Files) -> String {
    let mut text = Text(String::new());
    let spec = &restore.spec;
    let status = restore.status.clone().unwrap_or_default();
    text.section(&metadata_rows(&restore.metadata));
    text.section(&[("Phase", restore.phase().as_str().to_owned())]);
    config_map_reference(
        &mut text,
        "Resource modifier",
        spec.resource_modifier.as_ref(),
    );
    text.section(&[
        ("Errors", count(status.errors)),
        ("Warnings", count(status.warnings)),
    ]);
    files.describe_results(&mut text);
    if let Some(errors) = status
        .validation_errors
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        text.list("Validation errors", errors);
    }
    if let Some(reason) = status.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        text.section(&[("Failure reason", reason.to_owned())]);
    }
    text.section(&[
        ("Backup", or_none(spec.backup_name.clone())),
        (
            "Included namespaces",
            joined(spec.included_namespaces.as_deref(), "*"),
        ),
        (
            "Excluded namespaces",
            joined(spec.excluded_namespaces.as_deref(), "<none>"),
        ),
        (
            "Included resources",
            joined(spec.included_resources.as_deref(), "*"),
        ),
        (
            "Excluded resources",
            joined(spec.excluded_resources.as_deref(), "<none>"),
        ),
        (
            "Cluster-scoped",
            optional_bool(spec.include_cluster_resources, "auto"),
        ),
        (
            "Namespace mappings",
            key_values(spec.namespace_mapping.as_ref())
                .replace(',', ", ")
                .replace('=', ":"),
        ),
    ]);
    text.section(&selectors_rows(
        spec.label_selector.as_ref(),
        spec.or_label_selectors.as_deref(),
    ));
    let restore_status = spec.restore_status.as_ref();
    text.section(&[
        (
            "Existing resource policy",
            or_none(spec.existing_resource_policy.clone()),
        ),
        (
            "Restore status of",
            joined(
                restore_status.and_then(|r| r.included_resources.as_deref()),
                "<none>",
            ),
        ),
        (
            "Except status of",
            joined(
                restore_status.and_then(|r| r.excluded_resources.as_deref()),
                "<none>",
            ),
        ),
        (
            "Preserve node ports",
            optional_bool(spec.preserve_node_ports, "auto"),
        ),
    ]);
    text.section(&[
        (
            "Created",
            when(restore.metadata.creation_timestamp.as_ref()),
        ),
        ("Started", when(status.start_timestamp.as_ref())),
        ("Completed", when(status.completion_timestamp.as_ref())),
    ]);
    if let Some(progress) = &status.progress {
        text.section(&[
            ("Total items to be restored", count(progress.total_items)),
            ("Items restored", count(progress.items_restored)),
        ]);
    }
    let hook_specs = spec
        .hooks
        .iter()
        .flat_map(|h| h.resources.iter().flatten())
        .map(|r| r.name.clone());
    hook_sections(&mut text, hook_specs, status.hook_status.as_ref());
    files.describe_resources(&mut text);
    text.0
}

/// `Hooks:` the hook specs by name, and the hooks run with Velero's labels once some were.
fn hook_sections(
    text: &mut Text,
    specs: impl Iterator<Item = String>,
    status: Option<&hawser_api::HookStatus>,
) {
    let specs: Vec<String> = specs.collect();
    text.section(&[("Hooks", joined(Some(specs.as_slice()), "<none>"))]);
    if let Some(hooks) = status {
        text.section(&[
            ("HooksAttempted", count(hooks.hooks_attempted)),
            ("HooksFailed", count(hooks.hooks_failed)),
        ]);
    }
}

/// The description of one schedule: its state, cron expression and the template of its backups.
pub fn schedule(schedule: &Schedule) -> String {
    let mut text = Text(String::new());
    let spec = &schedule.spec;
    let status = schedule.status.clone().unwrap_or_default();
    text.section(&metadata_rows(&schedule.metadata));
    text.section(&[("Phase", status.phase.as_str().to_owned())]);
    if let Some(errors) = status
        .validation_errors
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        text.list("Validation errors", errors);
    }
    text.section(&[
        ("Paused", spec.paused.to_string()),
        ("Schedule", spec.schedule.clone()),
        (
            "Skip immediately",
            optional_bool(spec.skip_immediately, "<server default>"),
        ),
        (
            "Use owner references in backup",
            optional_bool(spec.use_owner_references_in_backup, "false"),
        ),
    ]);
    let mut template = Text(String::new());
    template.section(&[(
        "Labels",
        key_values(
            spec.template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref()),
        ),
    )]);
    spec_sections(&mut template, &spec.template);
    text.nested("Backup template", &template);
    text.section(&[
        (
            "Created",
            when(schedule.metadata.creation_timestamp.as_ref()),
        ),
        (
            "Last backup",
            status
                .last_backup
                .as_ref()
                .map_or_else(|| "<never>".to_owned(), |t| when(Some(t))),
        ),
        (
            "Last skipped",
            status
                .last_skipped
                .as_ref()
                .map_or_else(|| "<never>".to_owned(), |t| when(Some(t))),
        ),
    ]);
    text.0
}
