//! `hawser restore create|get|describe|delete`.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use hawser_api::{Backup, Restore, RestoreSpec, RestoreStatusSpec, Schedule};
use k8s_openapi::jiff::Zoned;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use super::bulk::{ConfirmArgs, SelectArgs, select};
use super::describe;
use super::error::{CliError, ExitStatus};
use super::flags::{
    Listing, MetaArgs, SelectorArgs, config_map_ref, fetch, get_required, list, parse_duration,
    print_objects,
};
use super::global::GlobalArgs;
use super::label_selector::selector_column;
use super::output::{OutputFormat, Table, count, or_none, print_uncreated, time_cell};
use super::wait::wait_for_final;

/// `restore` subcommands.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    #[command(subcommand)]
    pub command: RestoreCommand,
}

/// What to do with restores.
#[derive(Subcommand, Debug)]
pub enum RestoreCommand {
    /// Create a restore from a backup.
    Create(Box<RestoreCreateArgs>),
    /// Show restores.
    Get(RestoreGetArgs),
    /// Describe restores in detail.
    Describe(RestoreDescribeArgs),
    /// Delete restores (the server removes their files from object storage first).
    Delete(RestoreDeleteArgs),
    /// Print a finished restore's log.
    Logs(super::files::LogsArgs),
}

/// `restore create`.
#[derive(Args, Debug)]
pub struct RestoreCreateArgs {
    /// Name of the new restore; defaults to `<backup or schedule>-<local time YYYYMMDDhhmmss>`.
    pub name: Option<String>,
    /// Backup to restore from.
    #[arg(long, conflicts_with = "from_schedule")]
    pub from_backup: Option<String>,
    /// Schedule whose newest completed backup the server restores (`spec.scheduleName`).
    #[arg(long)]
    pub from_schedule: Option<String>,
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
    #[command(flatten)]
    pub selectors: SelectorArgs,
    /// Restore namespaces under other names, `source:target,source:target`.
    #[arg(long, value_delimiter = ',')]
    pub namespace_mappings: Vec<String>,
    /// What to do with objects that already exist: `none` (leave them) or `update`.
    #[arg(long, value_parser = ["none", "update"])]
    pub existing_resource_policy: Option<String>,
    /// Resources whose `status` is restored too (comma-separated; `*` means all).
    #[arg(long, value_delimiter = ',')]
    pub status_include_resources: Vec<String>,
    /// Resources whose `status` is not restored (needs --status-include-resources).
    #[arg(long, value_delimiter = ',')]
    pub status_exclude_resources: Vec<String>,
    /// Keep the node ports of Services (`--preserve-nodeports` alone means true).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub preserve_nodeports: Option<bool>,
    /// Restore claims from their CSI snapshots (`--restore-volumes` alone means true); unset
    /// restores them; `false` restores the claims and volumes as archived objects only.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub restore_volumes: Option<bool>,
    /// ConfigMap in the server's namespace whose resource-modifier rules patch the restored
    /// items.
    #[arg(long)]
    pub resource_modifier_configmap: Option<String>,
    /// How long asynchronous item operations may take (Go duration); written into the spec as
    /// Velero does (hawser's restores have none).
    #[arg(long, allow_hyphen_values = true)]
    pub item_operation_timeout: Option<String>,
    /// Velero's restore resource policies; not built, so it is refused.
    #[arg(long)]
    pub resource_policies_configmap: Option<String>,
    /// Velero's choice of `PartiallyFailed` backups with `--from-schedule`; not built, so
    /// `true` is refused.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub allow_partially_failed: Option<bool>,
    /// Velero's parallel downloads of file-system restores and moved snapshot data; not built,
    /// so it is refused.
    #[arg(long)]
    pub parallel_files_download: Option<i64>,
    /// Velero's sparse files in restored volume data; not built, so `true` is refused.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub write_sparse_files: Option<bool>,
    #[command(flatten)]
    pub meta: MetaArgs,
    /// Print the restore in this format instead of creating it.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
    /// Wait until the restore has finished, showing its progress.
    #[arg(short = 'w', long)]
    pub wait: bool,
}

/// `restore get`.
#[derive(Args, Debug)]
pub struct RestoreGetArgs {
    /// Names of the restores; all when omitted.
    pub names: Vec<String>,
    /// Only restores whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub listing: Listing,
}

/// `restore describe`.
#[derive(Args, Debug)]
pub struct RestoreDescribeArgs {
    /// Names of the restores; all when omitted.
    pub names: Vec<String>,
    /// Only restores whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub files: super::files::DescribeFlags,
}

/// `restore delete`.
#[derive(Args, Debug)]
pub struct RestoreDeleteArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// Runs a `restore` subcommand.
pub async fn run(global: &GlobalArgs, args: RestoreArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        RestoreCommand::Create(create) => create_restore(global, *create).await,
        RestoreCommand::Get(get) => get_restores(global, get).await,
        RestoreCommand::Describe(describe) => describe_restores(global, describe).await,
        RestoreCommand::Delete(delete) => delete_restores(global, delete).await,
        RestoreCommand::Logs(logs) => super::files::restore_logs(global, logs).await,
    }
}

/// The default name of a restore: `<backup>-<YYYYMMDDhhmmss>` in the local time `now`.
pub fn default_name(backup: &str, now: &Zoned) -> String {
    format!("{backup}-{}", now.strftime("%Y%m%d%H%M%S"))
}

/// Parses `--namespace-mappings`: `source:target` items; a source may appear once, and no two
/// sources may map to one target.
pub fn parse_namespace_mappings(items: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    const FLAG: &str = "--namespace-mappings";
    let mut mappings = BTreeMap::new();
    let mut targets: BTreeMap<String, String> = BTreeMap::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let (source, target) = match item.split_once(':') {
            Some((s, t)) if !s.trim().is_empty() && !t.trim().is_empty() && !t.contains(':') => {
                (s.trim().to_owned(), t.trim().to_owned())
            }
            _ => {
                return Err(CliError::usage(
                    FLAG,
                    format!("{item:?} is not source:target"),
                ));
            }
        };
        if mappings.contains_key(&source) {
            return Err(CliError::usage(
                FLAG,
                format!("namespace {source:?} is mapped more than once"),
            ));
        }
        if let Some(other) = targets.insert(target.clone(), source.clone()) {
            return Err(CliError::usage(
                FLAG,
                format!("namespaces {other:?} and {source:?} both map to {target:?}"),
            ));
        }
        mappings.insert(source, target);
    }
    Ok(mappings)
}

/// Builds the Restore `create` describes (pure; no API calls). `now` gives the default name.
/// What a restore is made from: a backup, or a schedule's newest completed backup (the
/// server resolves it).
enum Source {
    Backup(String),
    Schedule(String),
}

impl Source {
    fn name(&self) -> &str {
        match self {
            Self::Backup(name) | Self::Schedule(name) => name,
        }
    }
}

/// A flag's value, unless empty.
fn given(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

fn restore_source(args: &RestoreCreateArgs) -> Result<Source, CliError> {
    match (
        given(args.from_backup.as_deref()),
        given(args.from_schedule.as_deref()),
    ) {
        (Some(backup), _) => Ok(Source::Backup(backup.to_owned())),
        (None, Some(schedule)) => Ok(Source::Schedule(schedule.to_owned())),
        (None, None) => Err(CliError::usage(
            "--from-backup",
            "either a backup (--from-backup) or a schedule (--from-schedule) must be named",
        )),
    }
}

/// Refuses Velero's flags that ask for what hawser does not do yet (see
/// [`CliError::NotBuilt`]).
fn refuse_what_is_not_built(args: &RestoreCreateArgs) -> Result<(), CliError> {
    let refused = [
        (
            args.resource_policies_configmap.is_some(),
            "--resource-policies-configmap",
            "restore resource policies",
        ),
        (
            args.allow_partially_failed == Some(true),
            "--allow-partially-failed",
            "restoring a schedule's newest PartiallyFailed backup",
        ),
        (
            args.parallel_files_download.is_some(),
            "--parallel-files-download",
            "parallel downloads of file-system backups and moved snapshot data",
        ),
        (
            args.write_sparse_files == Some(true),
            "--write-sparse-files",
            "sparse files in restored volume data",
        ),
    ];
    match refused.into_iter().find(|(given, ..)| *given) {
        Some((_, flag, what)) => Err(CliError::NotBuilt { flag, what }),
        None => Ok(()),
    }
}

pub fn restore_from_args(
    namespace: &str,
    args: &RestoreCreateArgs,
    now: &Zoned,
) -> Result<Restore, CliError> {
    refuse_what_is_not_built(args)?;
    let source = restore_source(args)?;
    let (label_selector, or_label_selectors) = args.selectors.resolve()?;
    let mappings = parse_namespace_mappings(&args.namespace_mappings)?;
    let status_include = list(&args.status_include_resources);
    let status_exclude = list(&args.status_exclude_resources);
    if status_include.is_none() && status_exclude.is_some() {
        return Err(CliError::usage(
            "--status-exclude-resources",
            "it only applies together with --status-include-resources",
        ));
    }
    let restore_status = status_include.map(|included| RestoreStatusSpec {
        included_resources: Some(included),
        excluded_resources: status_exclude,
    });
    let spec = RestoreSpec {
        backup_name: match &source {
            Source::Backup(name) => Some(name.clone()),
            Source::Schedule(_) => None,
        },
        schedule_name: match &source {
            Source::Schedule(name) => Some(name.clone()),
            Source::Backup(_) => None,
        },
        included_namespaces: list(&args.include_namespaces),
        excluded_namespaces: list(&args.exclude_namespaces),
        included_resources: list(&args.include_resources),
        excluded_resources: list(&args.exclude_resources),
        include_cluster_resources: args.include_cluster_resources,
        namespace_mapping: (!mappings.is_empty()).then_some(mappings),
        label_selector,
        or_label_selectors,
        existing_resource_policy: args.existing_resource_policy.clone(),
        restore_status,
        preserve_node_ports: args.preserve_nodeports,
        restore_pvs: args.restore_volumes,
        resource_modifier: args
            .resource_modifier_configmap
            .as_deref()
            .map(config_map_ref),
        item_operation_timeout: args
            .item_operation_timeout
            .as_deref()
            .map(|t| parse_duration("--item-operation-timeout", t))
            .transpose()?,
        ..RestoreSpec::default()
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(source.name(), now));
    let mut restore = Restore::new(&name, spec);
    restore.metadata = args.meta.metadata(namespace, &name)?;
    Ok(restore)
}

async fn create_restore(
    global: &GlobalArgs,
    args: RestoreCreateArgs,
) -> Result<ExitStatus, CliError> {
    let restore = restore_from_args(&global.namespace, &args, &Zoned::now())?;
    let name = restore.metadata.name.clone().unwrap_or_default();
    if let Some(format) = args.output {
        if args.wait {
            return Err(CliError::usage(
                "--wait",
                "-o prints the restore without creating it, so there is nothing to wait for",
            ));
        }
        print_uncreated(&restore, format, restores_table)?;
        return Ok(ExitStatus::Success);
    }
    let client = global.client().await?;
    let namespace = &global.namespace;
    match restore_source(&args)? {
        Source::Backup(backup) => {
            let backups: Api<Backup> = Api::namespaced(client.clone(), namespace);
            get_required(
                &backups,
                format!("Backup {namespace}/{backup}"),
                &backup,
                "list the backups with `hawser backup get`".to_owned(),
            )
            .await?;
        }
        Source::Schedule(schedule) => {
            let schedules: Api<Schedule> = Api::namespaced(client.clone(), namespace);
            get_required(
                &schedules,
                format!("Schedule {namespace}/{schedule}"),
                &schedule,
                "list the schedules with `hawser schedule get`".to_owned(),
            )
            .await?;
        }
    }
    let api: Api<Restore> = Api::namespaced(client, namespace);
    let object = format!("Restore {namespace}/{name}");
    api.create(&PostParams::default(), &restore)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!("Restore request {name:?} submitted successfully.");
    if !args.wait {
        println!("Run `hawser restore describe {name}` for more details.");
        return Ok(ExitStatus::Success);
    }
    println!(
        "Waiting for the restore to finish. Ctrl-C stops waiting; the restore goes on in the \
         background."
    );
    let waited = wait_for_final(api, &name).await?;
    Ok(super::wait::report(&waited, &name))
}

async fn fetch_restores(
    global: &GlobalArgs,
    names: &[String],
    selector: Option<&str>,
) -> Result<Vec<Restore>, CliError> {
    let api: Api<Restore> = Api::namespaced(global.client().await?, &global.namespace);
    fetch(
        &api,
        &global.namespace,
        ("Restore", "restore"),
        names,
        selector,
    )
    .await
}

async fn get_restores(global: &GlobalArgs, args: RestoreGetArgs) -> Result<ExitStatus, CliError> {
    let restores = fetch_restores(global, &args.names, args.selector.as_deref()).await?;
    print_objects(
        &restores,
        args.names.len() == 1,
        &args.listing,
        restores_table,
    )?;
    Ok(ExitStatus::Success)
}

async fn describe_restores(
    global: &GlobalArgs,
    args: RestoreDescribeArgs,
) -> Result<ExitStatus, CliError> {
    let restores = fetch_restores(global, &args.names, args.selector.as_deref()).await?;
    let client = global.client().await?;
    let mut texts = Vec::new();
    for restore in &restores {
        let extras =
            super::files::restore_extras(&client, &global.namespace, restore, &args.files).await;
        texts.push(describe::restore(restore, &extras, global.colour()));
    }
    describe::print(&texts);
    Ok(ExitStatus::Success)
}

async fn delete_restores(
    global: &GlobalArgs,
    args: RestoreDeleteArgs,
) -> Result<ExitStatus, CliError> {
    args.select.check("restore")?;
    args.confirm.require()?;
    let namespace = &global.namespace;
    let api: Api<Restore> = Api::namespaced(global.client().await?, namespace);
    let (found, mut tally) = select(&api, namespace, ("Restore", "restore"), &args.select)
        .await?
        .report("No restores found");
    for restore in &found {
        let name = restore.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => println!(
                "Request to delete restore {name:?} submitted successfully.\nThe restore will be \
                 fully deleted after all associated data (restore files in object storage) are \
                 removed."
            ),
            Err(err) => tally.fail(&CliError::api(
                "delete",
                format!("Restore {namespace}/{name}"),
                err,
            )),
        }
    }
    Ok(tally.status())
}

/// The `restore get` table (Velero's columns).
pub fn restores_table(restores: &[Restore]) -> Table {
    let rows: Vec<Vec<String>> = restores
        .iter()
        .map(|r| {
            let status = r.status.as_ref();
            vec![
                r.metadata.name.clone().unwrap_or_default(),
                or_none(r.spec.backup_name.clone()),
                r.phase().as_str().to_owned(),
                time_cell(status.and_then(|s| s.start_timestamp.as_ref())),
                time_cell(status.and_then(|s| s.completion_timestamp.as_ref())),
                count(status.and_then(|s| s.errors)),
                count(status.and_then(|s| s.warnings)),
                time_cell(r.metadata.creation_timestamp.as_ref()),
                selector_column(
                    r.spec.label_selector.as_ref(),
                    r.spec.or_label_selectors.as_deref(),
                ),
            ]
        })
        .collect();
    Table::new(
        &[
            "NAME",
            "BACKUP",
            "STATUS",
            "STARTED",
            "COMPLETED",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "SELECTOR",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn items(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn mappings_parse_and_refuse_malformed_and_colliding_items() {
        let mappings = parse_namespace_mappings(&items(&["a:b", " c : d ", ""])).unwrap();
        assert_eq!(mappings.len(), 2);
        assert_eq!(mappings["a"], "b");
        assert_eq!(mappings["c"], "d");
        for (bad, said) in [
            (&["a"][..], "source:target"),
            (&[":b"][..], "source:target"),
            (&["a:"][..], "source:target"),
            (&["a:b:c"][..], "source:target"),
            (&["a:b", "a:c"][..], "more than once"),
            (&["a:x", "b:x"][..], "both map to \"x\""),
        ] {
            let err = parse_namespace_mappings(&items(bad)).unwrap_err();
            assert!(err.to_string().contains(said), "{bad:?}: {err}");
            assert_eq!(err.exit_status(), ExitStatus::Usage);
        }
    }

    #[test]
    fn default_name_is_backup_and_local_time() {
        let now: Zoned = "2024-03-01T10:04:05+01:00[Europe/Paris]".parse().unwrap();
        assert_eq!(default_name("nightly", &now), "nightly-20240301100405");
    }
}
