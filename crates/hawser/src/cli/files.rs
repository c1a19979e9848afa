//! `hawser backup logs`, `hawser backup download` and `hawser restore logs`: files of a backup
//! or restore, read through the download protocol ([`super::download`]).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use hawser_api::phase::LifecyclePhase as _;
use hawser_api::{Backup, PhasedResource, Restore};
use hawser_core::duration::GoDuration;
use hawser_core::layout::DownloadTargetKind;
use kube::Api;
use serde::de::DeserializeOwned;

use super::download::{DownloadFlags, download};
use super::error::{CliError, ExitStatus};
use super::flags::get_required;
use super::global::GlobalArgs;

/// `backup logs` and `restore logs`.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// Name of the backup (or restore).
    pub name: String,
    /// How long to wait for the server to answer the download request.
    #[arg(long, default_value = "1m")]
    pub timeout: GoDuration,
    #[command(flatten)]
    pub download: DownloadFlags,
}

/// `backup download`.
#[derive(Args, Debug)]
pub struct BackupDownloadArgs {
    /// Name of the backup.
    pub name: String,
    /// File to write the archive to; default `<NAME>-data.tar.gz` in the current directory.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// How long to wait for the server to answer the download request.
    #[arg(long, default_value = "1m")]
    pub timeout: GoDuration,
    #[command(flatten)]
    pub download: DownloadFlags,
}

fn timeout(value: GoDuration) -> Result<std::time::Duration, CliError> {
    value
        .to_std()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| CliError::usage("--timeout", "it must be greater than 0s"))
}

/// Reads the backup or restore `name` and checks Velero's gate: its log exists once it has
/// finished (or waits only for plugin operations).
async fn finished<K>(
    client: &kube::Client,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Result<(), CliError>
where
    K: PhasedResource + kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let object = format!("{kind} {namespace}/{name}");
    let command = kind.to_lowercase();
    let found = get_required(
        &api,
        object.clone(),
        name,
        format!("list them with `hawser {command} get`"),
    )
    .await?;
    let phase = found.phase();
    if phase.has_log() {
        return Ok(());
    }
    if phase == K::Phase::failed_validation() {
        // It never ran, so there is no log: say why instead of asking to wait.
        let json = serde_json::to_value(&found).unwrap_or_default();
        let errors: Vec<&str> = json
            .pointer("/status/validationErrors")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        return Err(CliError::Refused {
            action: "show the logs of",
            object,
            reason: format!(
                "{command} {name:?} failed validation and never ran, so it has no log; why: {}",
                if errors.is_empty() {
                    "no validation error was recorded".to_owned()
                } else {
                    errors.join("; ")
                }
            ),
            hint: format!("correct the spec and create a new {command}"),
        });
    }
    Err(CliError::Refused {
        action: "show the logs of",
        object,
        reason: format!(
            "logs for {command} {name:?} are not available until it's finished processing \
             (phase {phase})"
        ),
        hint: format!("wait until the {command} has a phase of Completed or Failed and try again"),
    })
}

/// `hawser backup logs NAME`: the backup's log on stdout.
pub async fn backup_logs(global: &GlobalArgs, args: LogsArgs) -> Result<ExitStatus, CliError> {
    logs::<Backup>(global, args, "Backup", DownloadTargetKind::BackupLog).await
}

/// `hawser restore logs NAME`: the restore's log on stdout.
pub async fn restore_logs(global: &GlobalArgs, args: LogsArgs) -> Result<ExitStatus, CliError> {
    logs::<Restore>(global, args, "Restore", DownloadTargetKind::RestoreLog).await
}

async fn logs<K>(
    global: &GlobalArgs,
    args: LogsArgs,
    kind: &str,
    target: DownloadTargetKind,
) -> Result<ExitStatus, CliError>
where
    K: PhasedResource + kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let timeout = timeout(args.timeout)?;
    let client = global.client().await?;
    let namespace = &global.namespace;
    finished::<K>(&client, namespace, kind, &args.name).await?;
    // The log comes from the bucket: its control sequences are shown, not run by the terminal.
    let mut stdout = hawser_core::errors::TerminalSafe::new(std::io::stdout());
    download(
        &client,
        namespace,
        target,
        &args.name,
        timeout,
        &args.download,
        &mut stdout,
    )
    .await?;
    Ok(ExitStatus::Success)
}

/// `hawser backup download NAME`: the backup's archive, as stored, to a file.
pub async fn backup_download(
    global: &GlobalArgs,
    args: BackupDownloadArgs,
) -> Result<ExitStatus, CliError> {
    let timeout = timeout(args.timeout)?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}-data.tar.gz", args.name)));
    let client = global.client().await?;
    let namespace = &global.namespace;
    let backups: Api<Backup> = Api::namespaced(client.clone(), namespace);
    get_required(
        &backups,
        format!("Backup {namespace}/{}", args.name),
        &args.name,
        "list them with `hawser backup get`".to_owned(),
    )
    .await?;
    // Velero's modes: a new file, or with --force one truncated; never a partial overwrite.
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let shown = output.display().to_string();
    let mut file = match options.open(&output) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(CliError::Refused {
                action: "write",
                object: shown,
                reason: "the file exists".to_owned(),
                hint: "pass --force to overwrite it, or -o to choose another file".to_owned(),
            });
        }
        Err(source) => {
            return Err(CliError::File {
                path: shown,
                source,
            });
        }
    };
    let result = download(
        &client,
        namespace,
        DownloadTargetKind::BackupContents,
        &args.name,
        timeout,
        &args.download,
        &mut file,
    )
    .await;
    if let Err(e) = result {
        // What was written is not the archive; leave nothing that could be taken for it.
        drop(file);
        let _ = std::fs::remove_file(&output);
        return Err(e);
    }
    file.flush().map_err(|source| CliError::File {
        path: shown.clone(),
        source,
    })?;
    let path = std::fs::canonicalize(&output).unwrap_or(output);
    println!(
        "Backup {} has been successfully downloaded to {}",
        args.name,
        path.display()
    );
    Ok(ExitStatus::Success)
}

/// How long `describe` waits for each file (Velero's describe waits 30 s per request).
const DESCRIBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Flags of `backup describe` and `restore describe`: Velero's.
#[derive(Args, Debug, Clone, Default)]
pub struct DescribeFlags {
    /// Also list every resource backed up or restored (read from the storage location).
    #[arg(long)]
    pub details: bool,
    #[command(flatten)]
    pub download: DownloadFlags,
}

/// The files `describe` shows for an object with `problems` errors and warnings, read through
/// the download protocol: the results when there are any, the resource list with `--details`.
/// A file that cannot be read is described by why, and the rest of the description stays.
pub async fn describe_files(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    (results, resources): (DownloadTargetKind, DownloadTargetKind),
    problems: i64,
    flags: &DescribeFlags,
) -> super::describe::Files {
    super::describe::Files {
        results: if problems > 0 {
            Some(read_json(client, namespace, results, name, &flags.download).await)
        } else {
            None
        },
        resources: if flags.details {
            Some(read_json(client, namespace, resources, name, &flags.download).await)
        } else {
            None
        },
        operations: None,
    }
}

/// The item operations of backup `name` (its `<name>-itemoperations.json.gz`), for
/// `describe --details`.
pub async fn backup_operations(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    flags: &DescribeFlags,
) -> Result<Vec<hawser_core::csi::BackupOperation>, String> {
    let operations: Option<Vec<_>> = read_json(
        client,
        namespace,
        DownloadTargetKind::BackupItemOperations,
        name,
        &flags.download,
    )
    .await?;
    Ok(operations.unwrap_or_default())
}

async fn read_json<T: DeserializeOwned>(
    client: &kube::Client,
    namespace: &str,
    kind: DownloadTargetKind,
    name: &str,
    flags: &DownloadFlags,
) -> Result<T, String> {
    let mut bytes = Vec::new();
    download(
        client,
        namespace,
        kind,
        name,
        DESCRIBE_TIMEOUT,
        flags,
        &mut bytes,
    )
    .await
    .map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("it is not valid JSON: {e}"))
}
