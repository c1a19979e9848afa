//! `hawser backup create|get|describe|delete`.

use clap::{Args, Subcommand};
use hawser_api::{
    Backup, BackupPhase, DeleteBackupRequest, DeleteBackupRequestSpec, Schedule, labels,
};
use hawser_core::backoff::Backoff;
use hawser_core::label::valid_label_value;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::bulk::{ConfirmArgs, SelectArgs, select};
use super::describe;
use super::error::{CliError, ExitStatus};
use super::flags::{Listing, MetaArgs, fetch, get_required, print_objects, require_location};
use super::global::GlobalArgs;
use super::label_selector::selector_column;
use super::output::{OutputFormat, Table, count, from_now, or_none, print_uncreated, time_cell};
use super::template::{BackupSpecArgs, SPEC_FLAG_IDS, backup_from_schedule};
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
    /// Delete backups: ask the server to delete each one with its data (a
    /// DeleteBackupRequest per backup).
    Delete(BackupDeleteArgs),
    /// Print a finished backup's log.
    Logs(super::files::LogsArgs),
    /// Download a backup's archive (`<NAME>-data.tar.gz`).
    Download(super::files::BackupDownloadArgs),
}

/// `backup create`.
#[derive(Args, Debug)]
pub struct BackupCreateArgs {
    /// Name of the new backup; optional with --from-schedule, where it defaults to
    /// `<schedule>-<UTC time YYYYMMDDhhmmss>`.
    #[arg(required_unless_present = "from_schedule")]
    pub name: Option<String>,
    #[command(flatten)]
    pub spec: BackupSpecArgs,
    /// Create the backup from the template of this schedule (labels, annotations and owner as
    /// the schedule's own backups get them); the filter flags cannot be combined with it.
    #[arg(long, conflicts_with_all = SPEC_FLAG_IDS)]
    pub from_schedule: Option<String>,
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
    #[command(flatten)]
    pub listing: Listing,
}

/// `backup describe`.
#[derive(Args, Debug)]
pub struct BackupDescribeArgs {
    /// Names of the backups; all when omitted.
    pub names: Vec<String>,
    /// Only backups whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub files: super::files::DescribeFlags,
    /// Velero's output format: `plaintext`; its `json` (a structured description) is not built.
    #[arg(short = 'o', long, value_enum, default_value_t = DescribeOutput::Plaintext)]
    pub output: DescribeOutput,
}

/// `backup describe -o`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescribeOutput {
    /// Velero's text.
    Plaintext,
    /// Velero's structured description (refused: not built).
    Json,
}

/// `backup delete`.
#[derive(Args, Debug)]
pub struct BackupDeleteArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// Runs a `backup` subcommand.
pub async fn run(global: &GlobalArgs, args: BackupArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        BackupCommand::Create(create) => create_backup(global, *create).await,
        BackupCommand::Get(get) => get_backups(global, get).await,
        BackupCommand::Describe(describe) => describe_backups(global, describe).await,
        BackupCommand::Delete(delete) => delete_backups(global, delete).await,
        BackupCommand::Logs(logs) => super::files::backup_logs(global, logs).await,
        BackupCommand::Download(download) => super::files::backup_download(global, download).await,
    }
}

/// Builds the Backup `create` describes from its flags, without `--from-schedule` (pure; no
/// API calls).
pub fn backup_from_args(namespace: &str, args: &BackupCreateArgs) -> Result<Backup, CliError> {
    let name = args.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(CliError::usage(
            "NAME",
            "a backup name is required, unless the backup is created with --from-schedule",
        ));
    }
    let mut backup = Backup::new(name, args.spec.spec()?);
    backup.metadata = args.meta.metadata(namespace, name)?;
    Ok(backup)
}

/// The Backup of `create --from-schedule`: reads the Schedule and builds the backup from it,
/// with `extra` (the `--labels` and `--annotations`) merged in. `now` gives the default name.
async fn backup_of_schedule(
    client: &kube::Client,
    namespace: &str,
    schedule: &str,
    name: Option<&str>,
    extra: &ObjectMeta,
    now: Timestamp,
) -> Result<Backup, CliError> {
    let schedules: Api<Schedule> = Api::namespaced(client.clone(), namespace);
    let found = get_required(
        &schedules,
        format!("Schedule {namespace}/{schedule}"),
        schedule,
        "list the schedules with `hawser schedule get`".to_owned(),
    )
    .await?;
    let name = match name {
        Some(name) => name.to_owned(),
        None => format!("{schedule}-{}", now.strftime("%Y%m%d%H%M%S")),
    };
    Ok(backup_from_schedule(&found, namespace, &name, extra))
}

async fn create_backup(
    global: &GlobalArgs,
    args: BackupCreateArgs,
) -> Result<ExitStatus, CliError> {
    if args.output.is_some() && args.wait {
        return Err(CliError::usage(
            "--wait",
            "-o prints the backup without creating it, so there is nothing to wait for",
        ));
    }
    let namespace = &global.namespace;
    let (backup, client) = match &args.from_schedule {
        Some(schedule) => {
            let schedule = schedule.trim();
            if schedule.is_empty() {
                return Err(CliError::usage(
                    "--from-schedule",
                    "it needs a schedule name",
                ));
            }
            // Parsed before the cluster is contacted, so that bad labels are a usage error.
            let extra = args.meta.metadata(namespace, "")?;
            let client = global.client().await?;
            let name = args.name.as_deref();
            let now = Timestamp::now();
            let backup =
                backup_of_schedule(&client, namespace, schedule, name, &extra, now).await?;
            (backup, Some(client))
        }
        None => (backup_from_args(namespace, &args)?, None),
    };
    if let Some(format) = args.output {
        print_uncreated(&backup, format, |b| backups_table(b, Timestamp::now()))?;
        return Ok(ExitStatus::Success);
    }
    let client = match client {
        Some(client) => client,
        None => global.client().await?,
    };
    if args.from_schedule.is_none()
        && let Some(location) = &backup.spec.storage_location
    {
        require_location(&client, namespace, location).await?;
    }
    let name = backup.name_any();
    let api: Api<Backup> = Api::namespaced(client, namespace);
    let object = format!("Backup {namespace}/{name}");
    api.create(&PostParams::default(), &backup)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!("Backup request {name:?} submitted successfully.");
    if !args.wait {
        println!("Run `hawser backup describe {name}` for more details.");
        return Ok(ExitStatus::Success);
    }
    println!(
        "Waiting for the backup to finish. Ctrl-C stops waiting; the backup goes on in the \
         background."
    );
    let waited = wait_for_final(api, &name).await?;
    Ok(super::wait::report(&waited, &name))
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
    print_objects(&backups, args.names.len() == 1, &args.listing, |b| {
        backups_table(b, now)
    })?;
    Ok(ExitStatus::Success)
}

async fn describe_backups(
    global: &GlobalArgs,
    args: BackupDescribeArgs,
) -> Result<ExitStatus, CliError> {
    if args.output == DescribeOutput::Json {
        return Err(CliError::NotBuilt {
            flag: "--output json",
            what: "Velero's structured (JSON) description",
        });
    }
    let backups = fetch_backups(global, &args.names, args.selector.as_deref()).await?;
    let client = global.client().await?;
    let mut texts = Vec::new();
    for backup in &backups {
        let extras =
            super::files::backup_extras(&client, &global.namespace, backup, &args.files).await;
        texts.push(describe::backup(backup, &extras, global.colour()));
    }
    describe::print(&texts);
    Ok(ExitStatus::Success)
}

/// The DeleteBackupRequest `backup delete` creates for `backup`, as Velero's CLI does:
/// `generateName: <backup>-`, `spec.backupName`, and the labels `velero.io/backup-name` (the
/// name as a valid label value) and `velero.io/backup-uid`.
pub fn delete_request(namespace: &str, backup: &Backup) -> DeleteBackupRequest {
    let name = backup.name_any();
    let mut request = DeleteBackupRequest::new(
        "",
        DeleteBackupRequestSpec {
            backup_name: name.clone(),
        },
    );
    request.metadata = ObjectMeta {
        generate_name: Some(format!("{name}-")),
        namespace: Some(namespace.to_owned()),
        labels: Some(
            [
                (labels::BACKUP_NAME.to_owned(), valid_label_value(&name)),
                (
                    labels::BACKUP_UID.to_owned(),
                    backup.metadata.uid.clone().unwrap_or_default(),
                ),
            ]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    request
}

/// Creates a request named by `generateName`, trying again when the generated name is taken,
/// as Velero's `CreateRetryGenerateName` does (at most 5 attempts).
async fn create_generated(
    api: &Api<DeleteBackupRequest>,
    request: &DeleteBackupRequest,
) -> Result<DeleteBackupRequest, kube::Error> {
    const ATTEMPTS: u32 = 5;
    let backoff = Backoff::default();
    let mut failures = 0;
    loop {
        match api.create(&PostParams::default(), request).await {
            Err(kube::Error::Api(status))
                if status.is_already_exists() && failures + 1 < ATTEMPTS =>
            {
                failures += 1;
                tokio::time::sleep(backoff.nominal(failures)).await;
            }
            result => return result,
        }
    }
}

async fn delete_backups(
    global: &GlobalArgs,
    args: BackupDeleteArgs,
) -> Result<ExitStatus, CliError> {
    args.select.check("backup")?;
    args.confirm.require()?;
    let client = global.client().await?;
    let namespace = &global.namespace;
    let backups: Api<Backup> = Api::namespaced(client.clone(), namespace);
    let (found, mut tally) = select(&backups, namespace, ("Backup", "backup"), &args.select)
        .await?
        .report("No backups found");
    let requests: Api<DeleteBackupRequest> = Api::namespaced(client, namespace);
    for backup in &found {
        let name = backup.name_any();
        match create_generated(&requests, &delete_request(namespace, backup)).await {
            Ok(_) => println!(
                "Request to delete backup {name:?} submitted successfully.\nThe backup will be \
                 fully deleted after all associated data (disk snapshots, backup files, \
                 restores) are removed."
            ),
            Err(err) => tally.fail(&CliError::api(
                "create",
                format!("the DeleteBackupRequest of Backup {namespace}/{name}"),
                err,
            )),
        }
    }
    Ok(tally.status())
}

/// When `backup` expires, as Velero's `get` reads it: `status.expiration`, else its creation
/// plus `spec.ttl`.
fn expiration(backup: &Backup) -> Option<Timestamp> {
    let recorded = backup.status.as_ref().and_then(|s| s.expiration.as_ref());
    recorded.map(|t| t.0).or_else(|| {
        let created = backup.metadata.creation_timestamp.as_ref()?.0;
        let ttl = backup.spec.ttl.filter(|t| !t.is_zero())?.to_std()?;
        created.checked_add(ttl).ok()
    })
}

/// The `backup get` table (velero-compat §9 columns). `now` is the time EXPIRES counts from;
/// QUEUE POSITION is shown for `Queued` backups only.
pub fn backups_table(backups: &[Backup], now: Timestamp) -> Table {
    let rows: Vec<Vec<String>> = backups
        .iter()
        .map(|b| {
            let status = b.status.as_ref();
            vec![
                b.metadata.name.clone().unwrap_or_default(),
                b.phase().as_str().to_owned(),
                count(status.and_then(|s| s.errors)),
                count(status.and_then(|s| s.warnings)),
                // Velero's CREATED is the start of the backup.
                time_cell(status.and_then(|s| s.start_timestamp.as_ref())),
                from_now(expiration(b), now),
                or_none(b.spec.storage_location.clone()),
                status
                    .filter(|s| s.phase == BackupPhase::Queued)
                    .and_then(|s| s.queue_position)
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                selector_column(
                    b.spec.label_selector.as_ref(),
                    b.spec.or_label_selectors.as_deref(),
                ),
            ]
        })
        .collect();
    Table::new(
        &[
            "NAME",
            "STATUS",
            "ERRORS",
            "WARNINGS",
            "CREATED",
            "EXPIRES",
            "STORAGE LOCATION",
            "QUEUE POSITION",
            "SELECTOR",
        ],
        rows,
    )
}
