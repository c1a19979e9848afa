//! `hawser backup create|get|describe`.

use clap::{Args, Subcommand};
use hawser_api::{Backup, BackupSpec, BackupStorageLocation};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

use super::describe;
use super::error::{CliError, ExitStatus};
use super::flags::parse_duration;
use super::flags::{MetaArgs, SelectorArgs, fetch, get_required, list, print_objects};
use super::global::GlobalArgs;
use super::output::{OutputFormat, count, encode, or_none, table, until, when};
use super::selector::selector_column;
use super::wait::wait_for_final;

/// `backup` subcommands.
#[derive(Args, Debug)]
pub struct BackupArgs {
    #[command(subcommand)]
    pub command: BackupCommand,
}

/// What to do with backups.
#[derive(Subcommand, Debug)]
pub enum BackupCommand {
    /// Create a backup.
    Create(Box<BackupCreateArgs>),
    /// Show backups.
    Get(BackupGetArgs),
    /// Describe backups in detail.
    Describe(BackupDescribeArgs),
}

/// `backup create`.
#[derive(Args, Debug)]
pub struct BackupCreateArgs {
    /// Name of the new backup.
    pub name: String,
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
    #[arg(long)]
    pub ttl: Option<String>,
    /// Backup storage location to write to; unset uses the default location.
    #[arg(long)]
    pub storage_location: Option<String>,
    #[command(flatten)]
    pub meta: MetaArgs,
    /// Print the backup in this format instead of creating it.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
    /// Wait until the backup has finished, showing its progress.
    #[arg(short = 'w', long)]
    pub wait: bool,
}

/// `backup get`.
#[derive(Args, Debug)]
pub struct BackupGetArgs {
    /// Names of the backups; all when omitted.
    pub names: Vec<String>,
    /// Only backups whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

/// `backup describe`.
#[derive(Args, Debug)]
pub struct BackupDescribeArgs {
    /// Names of the backups.
    #[arg(required = true)]
    pub names: Vec<String>,
}

/// Runs a `backup` subcommand.
pub async fn run(global: &GlobalArgs, args: BackupArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        BackupCommand::Create(create) => create_backup(global, *create).await,
        BackupCommand::Get(get) => get_backups(global, get).await,
        BackupCommand::Describe(describe) => describe_backups(global, describe).await,
    }
}

/// Builds the Backup `create` describes (pure; no API calls).
pub fn backup_from_args(namespace: &str, args: &BackupCreateArgs) -> Result<Backup, CliError> {
    let old = !args.include_resources.is_empty()
        || !args.exclude_resources.is_empty()
        || args.include_cluster_resources.is_some();
    let new = !args.include_cluster_scoped_resources.is_empty()
        || !args.exclude_cluster_scoped_resources.is_empty()
        || !args.include_namespace_scoped_resources.is_empty()
        || !args.exclude_namespace_scoped_resources.is_empty();
    if old && new {
        return Err(CliError::usage(
            "--include-*-scoped-resources",
            "--include-resources, --exclude-resources and --include-cluster-resources cannot be \
             combined with the --include/exclude-cluster-scoped-resources and \
             --include/exclude-namespace-scoped-resources flags; use one family",
        ));
    }
    let (label_selector, or_label_selectors) = args.selectors.resolve()?;
    let ttl = args
        .ttl
        .as_deref()
        .map(|v| parse_duration("--ttl", v))
        .transpose()?;
    if ttl.is_some_and(|t| t.is_negative()) {
        return Err(CliError::usage("--ttl", "it must not be negative"));
    }
    let storage_location = args.storage_location.clone().filter(|s| !s.is_empty());
    let spec = BackupSpec {
        included_namespaces: list(&args.include_namespaces),
        excluded_namespaces: list(&args.exclude_namespaces),
        included_resources: list(&args.include_resources),
        excluded_resources: list(&args.exclude_resources),
        include_cluster_resources: args.include_cluster_resources,
        included_cluster_scoped_resources: list(&args.include_cluster_scoped_resources),
        excluded_cluster_scoped_resources: list(&args.exclude_cluster_scoped_resources),
        included_namespace_scoped_resources: list(&args.include_namespace_scoped_resources),
        excluded_namespace_scoped_resources: list(&args.exclude_namespace_scoped_resources),
        label_selector,
        or_label_selectors,
        ttl,
        storage_location,
        ..BackupSpec::default()
    };
    let mut backup = Backup::new(&args.name, spec);
    backup.metadata = args.meta.metadata(namespace, &args.name)?;
    Ok(backup)
}

async fn create_backup(
    global: &GlobalArgs,
    args: BackupCreateArgs,
) -> Result<ExitStatus, CliError> {
    let backup = backup_from_args(&global.namespace, &args)?;
    if let Some(format) = args.output {
        if args.wait {
            return Err(CliError::usage(
                "--wait",
                "-o prints the backup without creating it, so there is nothing to wait for",
            ));
        }
        print!("{}", encode(&backup, format)?);
        return Ok(ExitStatus::Success);
    }
    let client = global.client().await?;
    let namespace = &global.namespace;
    if let Some(location) = &backup.spec.storage_location {
        let locations: Api<BackupStorageLocation> = Api::namespaced(client.clone(), namespace);
        get_required(
            &locations,
            format!("BackupStorageLocation {namespace}/{location}"),
            location,
            format!(
                "list the locations with `hawser backup-location get`, or create one with \
                 `hawser backup-location create {location} --provider P --bucket B`"
            ),
        )
        .await?;
    }
    let api: Api<Backup> = Api::namespaced(client, namespace);
    let object = format!("Backup {namespace}/{}", args.name);
    api.create(&PostParams::default(), &backup)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!("Backup request {:?} submitted successfully.", args.name);
    if !args.wait {
        println!(
            "Run `hawser backup describe {}` for more details.",
            args.name
        );
        return Ok(ExitStatus::Success);
    }
    println!(
        "Waiting for the backup to finish. Ctrl-C stops waiting; the backup goes on in the \
         background."
    );
    let status = wait_for_final(api, &args.name).await?;
    println!(
        "Backup {:?} finished: {}. Run `hawser backup describe {}` for more details.",
        args.name,
        if status == ExitStatus::Success {
            hawser_api::BackupPhase::Completed.name()
        } else {
            "not successful"
        },
        args.name
    );
    Ok(status)
}

async fn fetch_backups(
    global: &GlobalArgs,
    names: &[String],
    selector: Option<&str>,
) -> Result<Vec<Backup>, CliError> {
    let api: Api<Backup> = Api::namespaced(global.client().await?, &global.namespace);
    fetch(
        &api,
        &global.namespace,
        ("Backup", "backup"),
        names,
        selector,
    )
    .await
}

async fn get_backups(global: &GlobalArgs, args: BackupGetArgs) -> Result<ExitStatus, CliError> {
    let backups = fetch_backups(global, &args.names, args.selector.as_deref()).await?;
    let now = Timestamp::now();
    print_objects(&backups, args.names.len() == 1, args.output, |b| {
        backups_table(b, now)
    })?;
    Ok(ExitStatus::Success)
}

async fn describe_backups(
    global: &GlobalArgs,
    args: BackupDescribeArgs,
) -> Result<ExitStatus, CliError> {
    let backups = fetch_backups(global, &args.names, None).await?;
    let texts: Vec<String> = backups.iter().map(describe::backup).collect();
    print!("{}", texts.join("\n"));
    Ok(ExitStatus::Success)
}

/// The `backup get` table (velero-compat §9 columns, without QUEUE POSITION). `now` is the time
/// EXPIRES counts from.
pub fn backups_table(backups: &[Backup], now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = backups
        .iter()
        .map(|b| {
            let status = b.status.as_ref();
            vec![
                b.metadata.name.clone().unwrap_or_default(),
                b.phase().as_str().to_owned(),
                count(status.and_then(|s| s.errors)),
                count(status.and_then(|s| s.warnings)),
                when(b.metadata.creation_timestamp.as_ref()),
                until(status.and_then(|s| s.expiration.as_ref()), now),
                or_none(b.spec.storage_location.clone()),
                selector_column(
                    b.spec.label_selector.as_ref(),
                    b.spec.or_label_selectors.as_deref(),
                ),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "STATUS",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "EXPIRES",
            "STORAGE LOCATION",
            "SELECTOR",
        ],
        &rows,
    )
}
