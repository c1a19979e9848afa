//! The Backup spec flags shared by `backup create` and `schedule create` (where they become the
//! schedule's template), and the Backup that `backup create --from-schedule` makes from a
//! Schedule (pure; no API calls).

use std::collections::BTreeMap;

use clap::Args;
use hawser_api::{Backup, BackupSpec, Schedule, labels};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::api::ObjectMeta;

use super::error::CliError;
use super::flags::{SelectorArgs, config_map_ref, list, parse_duration};

/// The clap ids of every [`BackupSpecArgs`] flag, for `conflicts_with_all` (`--from-schedule`).
pub const SPEC_FLAG_IDS: &[&str] = &[
    "include_namespaces",
    "exclude_namespaces",
    "include_resources",
    "exclude_resources",
    "include_cluster_resources",
    "include_cluster_scoped_resources",
    "exclude_cluster_scoped_resources",
    "include_namespace_scoped_resources",
    "exclude_namespace_scoped_resources",
    "selector",
    "or_selector",
    "ttl",
    "storage_location",
    "snapshot_volumes",
    "csi_snapshot_timeout",
    "item_operation_timeout",
    "resource_policies_configmap",
    "ordered_resources",
    "snapshot_move_data",
    "default_volumes_to_fs_backup",
    "data_mover",
    "parallel_files_upload",
    "volume_snapshot_locations",
];

/// The flags that make a Backup spec (velero-compat §9, `backup create`).
#[derive(Args, Debug, Clone, Default)]
pub struct BackupSpecArgs {
    /// Namespaces to include (comma-separated, globs allowed); `*` means all.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub include_namespaces: Vec<String>,
    /// Namespaces to exclude (comma-separated, globs allowed).
    #[arg(long, value_delimiter = ',')]
    pub exclude_namespaces: Vec<String>,
    /// Resources to include (`resource[.group]`, comma-separated); `*` means all.
    #[arg(long, value_delimiter = ',')]
    pub include_resources: Vec<String>,
    /// Resources to exclude (`resource[.group]`, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub exclude_resources: Vec<String>,
    /// Include cluster-scoped resources (`--include-cluster-resources` alone means true); unset
    /// lets the server decide.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub include_cluster_resources: Option<bool>,
    /// Cluster-scoped resources to include (comma-separated); `*` means all.
    #[arg(long, value_delimiter = ',')]
    pub include_cluster_scoped_resources: Vec<String>,
    /// Cluster-scoped resources to exclude (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub exclude_cluster_scoped_resources: Vec<String>,
    /// Namespace-scoped resources to include (comma-separated); `*` means all.
    #[arg(long, value_delimiter = ',')]
    pub include_namespace_scoped_resources: Vec<String>,
    /// Namespace-scoped resources to exclude (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub exclude_namespace_scoped_resources: Vec<String>,
    #[command(flatten)]
    pub selectors: SelectorArgs,
    /// How long the backup is kept (Go duration, e.g. 720h); unset uses the server default.
    #[arg(long, allow_hyphen_values = true)]
    pub ttl: Option<String>,
    /// Backup storage location to write to; unset uses the default location.
    #[arg(long)]
    pub storage_location: Option<String>,
    /// Take CSI snapshots of the backed-up claims' volumes (`--snapshot-volumes` alone means
    /// true); unset takes them.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub snapshot_volumes: Option<bool>,
    /// How long a CSI snapshot may take to be cut (Go duration); unset means 10m.
    #[arg(long, allow_hyphen_values = true)]
    pub csi_snapshot_timeout: Option<String>,
    /// How long the backup waits for its snapshots to be ready to use (Go duration); unset
    /// means 4h.
    #[arg(long, allow_hyphen_values = true)]
    pub item_operation_timeout: Option<String>,
    /// ConfigMap in the server's namespace with the backup's resource policies.
    #[arg(long)]
    pub resource_policies_configmap: Option<String>,
    /// The order in which items of a kind are backed up:
    /// `pods=ns1/pod1,ns1/pod2;persistentvolumes=pv4,pv8`.
    #[arg(long)]
    pub ordered_resources: Option<String>,
    /// Velero's CSI snapshot data movement; not built, so `true` is refused (`false` is
    /// written as given).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub snapshot_move_data: Option<bool>,
    /// Velero's file-system backup of pod volumes by default; not built, so `true` is refused
    /// (`false` is written as given).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub default_volumes_to_fs_backup: Option<bool>,
    /// Velero's data mover of moved snapshot data; not built, so it is refused.
    #[arg(long)]
    pub data_mover: Option<String>,
    /// Velero's parallel uploads of file-system backups and data movement; not built, so it is
    /// refused.
    #[arg(long)]
    pub parallel_files_upload: Option<i64>,
    /// Velero's native volume snapshot locations; hawser takes CSI snapshots only, so a
    /// location is refused.
    #[arg(long, value_delimiter = ',')]
    pub volume_snapshot_locations: Vec<String>,
}

/// Velero's `--ordered-resources`: `kind=name,name;kind=name`, each entry one `=`.
pub fn parse_ordered_resources(value: &str) -> Result<BTreeMap<String, String>, CliError> {
    value
        .split(';')
        .map(
            |entry| match entry.split('=').collect::<Vec<_>>().as_slice() {
                [kind, order] => Ok((kind.trim().to_owned(), order.trim().to_owned())),
                _ => Err(CliError::usage(
                    "--ordered-resources",
                    format!("{entry:?} is not kind=name,name (entries separated by ';')"),
                )),
            },
        )
        .collect()
}

impl BackupSpecArgs {
    /// The Backup spec of the flags; refuses mixed filter families, both selector flags, and
    /// unparsable or negative values.
    pub fn spec(&self) -> Result<BackupSpec, CliError> {
        let old = !self.include_resources.is_empty()
            || !self.exclude_resources.is_empty()
            || self.include_cluster_resources.is_some();
        let new = !self.include_cluster_scoped_resources.is_empty()
            || !self.exclude_cluster_scoped_resources.is_empty()
            || !self.include_namespace_scoped_resources.is_empty()
            || !self.exclude_namespace_scoped_resources.is_empty();
        if old && new {
            return Err(CliError::usage(
                "--include-*-scoped-resources",
                "--include-resources, --exclude-resources and --include-cluster-resources cannot \
                 be combined with the --include/exclude-cluster-scoped-resources and \
                 --include/exclude-namespace-scoped-resources flags; use one family",
            ));
        }
        self.refuse_what_is_not_built()?;
        let (label_selector, or_label_selectors) = self.selectors.resolve()?;
        let ttl = duration("--ttl", self.ttl.as_deref())?;
        let csi_snapshot_timeout = duration(
            "--csi-snapshot-timeout",
            self.csi_snapshot_timeout.as_deref(),
        )?;
        let item_operation_timeout = duration(
            "--item-operation-timeout",
            self.item_operation_timeout.as_deref(),
        )?;
        Ok(BackupSpec {
            included_namespaces: list(&self.include_namespaces),
            excluded_namespaces: list(&self.exclude_namespaces),
            included_resources: list(&self.include_resources),
            excluded_resources: list(&self.exclude_resources),
            include_cluster_resources: self.include_cluster_resources,
            included_cluster_scoped_resources: list(&self.include_cluster_scoped_resources),
            excluded_cluster_scoped_resources: list(&self.exclude_cluster_scoped_resources),
            included_namespace_scoped_resources: list(&self.include_namespace_scoped_resources),
            excluded_namespace_scoped_resources: list(&self.exclude_namespace_scoped_resources),
            label_selector,
            or_label_selectors,
            ttl,
            storage_location: self.storage_location.clone().filter(|s| !s.is_empty()),
            snapshot_volumes: self.snapshot_volumes,
            csi_snapshot_timeout,
            item_operation_timeout,
            resource_policy: self
                .resource_policies_configmap
                .as_deref()
                .map(config_map_ref),
            ordered_resources: self
                .ordered_resources
                .as_deref()
                .map(parse_ordered_resources)
                .transpose()?,
            snapshot_move_data: self.snapshot_move_data,
            default_volumes_to_fs_backup: self.default_volumes_to_fs_backup,
            ..BackupSpec::default()
        })
    }

    /// Refuses Velero's flags that ask for what hawser does not do yet (see
    /// [`CliError::NotBuilt`]).
    fn refuse_what_is_not_built(&self) -> Result<(), CliError> {
        let refused = [
            (
                self.snapshot_move_data == Some(true),
                "--snapshot-move-data",
                "CSI snapshot data movement",
            ),
            (
                self.default_volumes_to_fs_backup == Some(true),
                "--default-volumes-to-fs-backup",
                "file-system backup of pod volumes",
            ),
            (
                self.data_mover.as_deref().is_some_and(|m| !m.is_empty()),
                "--data-mover",
                "a data mover of CSI snapshot data",
            ),
            (
                self.parallel_files_upload.is_some(),
                "--parallel-files-upload",
                "parallel uploads of file-system backups and moved snapshot data",
            ),
            (
                !self.volume_snapshot_locations.is_empty(),
                "--volume-snapshot-locations",
                "native volume snapshots (hawser takes CSI snapshots only)",
            ),
        ];
        match refused.into_iter().find(|(given, ..)| *given) {
            Some((_, flag, what)) => Err(CliError::NotBuilt { flag, what }),
            None => Ok(()),
        }
    }
}

/// The Go duration `value` of `flag`, when given; a negative one is refused.
fn duration(
    flag: &'static str,
    value: Option<&str>,
) -> Result<Option<hawser_core::duration::GoDuration>, CliError> {
    let parsed = value.map(|v| parse_duration(flag, v)).transpose()?;
    if parsed.is_some_and(|t| t.is_negative()) {
        return Err(CliError::usage(flag, "it must not be negative"));
    }
    Ok(parsed)
}

/// The Backup `name` that `backup create --from-schedule` makes from `schedule`, as Velero's
/// `BackupBuilder.FromSchedule` does: the template as the spec; the template's
/// `metadata.labels` when set, otherwise the Schedule's labels, plus
/// `velero.io/schedule-name=<schedule>`; the Schedule's annotations; and a controller owner
/// reference to the Schedule when `useOwnerReferencesInBackup` is true. `extra` (the `--labels`
/// and `--annotations` of the command) is merged over that, as in Velero.
pub fn backup_from_schedule(
    schedule: &Schedule,
    namespace: &str,
    name: &str,
    extra: &ObjectMeta,
) -> Backup {
    let schedule_name = schedule.metadata.name.clone().unwrap_or_default();
    let template_labels = schedule
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    let mut backup_labels = template_labels
        .or_else(|| schedule.metadata.labels.clone())
        .unwrap_or_default();
    backup_labels.insert(labels::SCHEDULE_NAME.to_owned(), schedule_name.clone());
    backup_labels.extend(extra.labels.clone().unwrap_or_default());
    let mut annotations: BTreeMap<String, String> =
        schedule.metadata.annotations.clone().unwrap_or_default();
    annotations.extend(extra.annotations.clone().unwrap_or_default());
    let owner = (schedule.spec.use_owner_references_in_backup == Some(true)).then(|| {
        vec![OwnerReference {
            api_version: Schedule::api_version(&()).into_owned(),
            kind: Schedule::kind(&()).into_owned(),
            name: schedule_name,
            uid: schedule.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        }]
    });
    let mut backup = Backup::new(name, schedule.spec.template.clone());
    backup.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(backup_labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: owner,
        ..ObjectMeta::default()
    };
    backup
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hawser_api::{ScheduleSpec, TemplateMetadata};

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn schedule(template_labels: Option<BTreeMap<String, String>>, owners: bool) -> Schedule {
        let template = BackupSpec {
            included_namespaces: Some(vec!["shop".into()]),
            metadata: template_labels.map(|labels| TemplateMetadata {
                labels: Some(labels),
            }),
            ..BackupSpec::default()
        };
        let mut schedule = Schedule::new(
            "daily",
            ScheduleSpec {
                template,
                schedule: "@daily".into(),
                use_owner_references_in_backup: Some(owners),
                ..ScheduleSpec::default()
            },
        );
        schedule.metadata.uid = Some("uid-1".into());
        schedule.metadata.labels = map(&[("team", "a")]);
        schedule.metadata.annotations = map(&[("note", "n")]);
        schedule
    }

    #[test]
    fn schedule_labels_are_used_unless_the_template_has_labels() {
        let extra = ObjectMeta {
            labels: map(&[("why", "drill")]),
            annotations: map(&[("ticket", "7")]),
            ..ObjectMeta::default()
        };
        let backup = backup_from_schedule(&schedule(None, false), "velero", "b", &extra);
        assert_eq!(
            backup.metadata.labels,
            map(&[
                ("team", "a"),
                ("velero.io/schedule-name", "daily"),
                ("why", "drill")
            ])
        );
        assert_eq!(
            backup.metadata.annotations,
            map(&[("note", "n"), ("ticket", "7")])
        );
        assert_eq!(backup.metadata.owner_references, None);
        assert_eq!(
            backup.spec.included_namespaces,
            Some(vec!["shop".to_owned()])
        );

        let with_template = schedule(map(&[("tier", "gold")]), true);
        let backup = backup_from_schedule(&with_template, "velero", "b", &ObjectMeta::default());
        assert_eq!(
            backup.metadata.labels,
            map(&[("tier", "gold"), ("velero.io/schedule-name", "daily")])
        );
        // The template (with its metadata) is the spec, unchanged.
        assert_eq!(backup.spec, with_template.spec.template);
        let owner = &backup.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Schedule", "daily", "uid-1")
        );
        assert_eq!(owner.controller, Some(true));
    }
}
