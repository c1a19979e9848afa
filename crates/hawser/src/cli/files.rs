//! `hawser backup logs`, `hawser backup download` and `hawser restore logs`: files of a backup
//! or restore, read through the download protocol ([`super::download`]).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use hawser_api::phase::LifecyclePhase as _;
use hawser_api::{Backup, BackupPhase, PhasedResource, Restore, RestorePhase};
use hawser_core::duration::GoDuration;
use hawser_core::layout::DownloadTargetKind;
use kube::{Api, ResourceExt as _};
use serde::de::DeserializeOwned;

use hawser_api::labels;
use serde_json::Value;

use super::describe::{self, Read, Unread, VolumeInfo};
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

/// What `backup describe` shows besides the Backup, read as Velero's describe reads it: the
/// results when there are warnings or errors, the volume infos (or, for a backup without them,
/// what the older snapshot files say), the resource list and item operations with `--details`,
/// and the DeleteBackupRequests and PodVolumeBackups that name it. A file that cannot be read
/// is described by why; a list that fails is said on stderr, and the rest stays.
pub async fn backup_extras(
    client: &kube::Client,
    namespace: &str,
    backup: &Backup,
    flags: &DescribeFlags,
) -> describe::BackupExtras {
    let name = backup.name_any();
    let status = backup.status.clone().unwrap_or_default();
    let reader = Reader {
        client,
        namespace,
        name: &name,
        flags: &flags.download,
    };
    let problems = status.errors.unwrap_or(0) + status.warnings.unwrap_or(0);
    let results = reader.read_if(problems > 0, DownloadTargetKind::BackupResults);
    let resources = reader.read_if(flags.details, DownloadTargetKind::BackupResourceList);
    let attempted = status.backup_item_operations_attempted.unwrap_or(0) > 0;
    let operations = reader.read_if(
        flags.details && attempted,
        DownloadTargetKind::BackupItemOperations,
    );
    // The volume infos are stored when the backup leaves InProgress: before, the file does not
    // exist (Velero's describe asks and is told so), and no server is asked.
    let phase = backup.phase();
    let stored = !(phase.is_waiting()
        || matches!(
            phase,
            BackupPhase::InProgress | BackupPhase::FailedValidation
        ));
    let volumes = async {
        let infos = reader
            .read_if(stored, DownloadTargetKind::BackupVolumeInfos)
            .await;
        match infos.unwrap_or(Err(Unread::NotFound)) {
            Err(Unread::NotFound) => (legacy_volumes(&reader, &status).await, true),
            other => (other.map(|v: Option<Vec<_>>| v.unwrap_or_default()), false),
        }
    };
    let valid = hawser_core::label::valid_label_value(&name);
    let uid = backup.metadata.uid.clone().unwrap_or_default();
    let deletions_selector = format!(
        "{}={valid},{}={uid}",
        labels::BACKUP_NAME,
        labels::BACKUP_UID
    );
    let deletions = labelled(
        client,
        namespace,
        &deletions_selector,
        "DeleteBackupRequests",
        &name,
    );
    let pod_volumes_selector = format!("{}={valid}", labels::BACKUP_NAME);
    let pod_volumes = labelled(
        client,
        namespace,
        &pod_volumes_selector,
        "PodVolumeBackups",
        &name,
    );
    // Each file waits for the server on its own; asked together, a description waits once.
    let (results, resources, operations, (volumes, legacy), deletions, pod_volumes) = tokio::join!(
        results,
        resources,
        operations,
        volumes,
        deletions,
        pod_volumes
    );
    let operations =
        operations.map(|read: Read<Option<Vec<_>>>| read.map(Option::unwrap_or_default));
    describe::BackupExtras {
        details: flags.details,
        results,
        resources,
        operations,
        volumes,
        legacy,
        deletions,
        pod_volumes,
    }
}

/// The volumes of a backup stored without volume infos, concluded as Velero's describe does:
/// native snapshots from `<backup>-volumesnapshots.json.gz`, CSI snapshots from the stored
/// VolumeSnapshotContents (with their claims from the VolumeSnapshots), each read only when
/// the status says some were attempted.
async fn legacy_volumes(
    reader: &Reader<'_>,
    status: &hawser_api::BackupStatus,
) -> Read<Vec<VolumeInfo>> {
    // Velero's error words for these files: which one, and whether it was read or decoded.
    let read = |kind, what: &'static str, file: &'static str| async move {
        reader
            .read::<Option<Vec<Value>>>(kind)
            .await
            .map(Option::unwrap_or_default)
            .map_err(|e| {
                let verb = if matches!(e, Unread::Undecodable(_)) {
                    "decode"
                } else {
                    "download"
                };
                Unread::Failed(format!("{what} snapshot info: error to {verb} {file}: {e}"))
            })
    };
    let text = |v: &Value, pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut infos = Vec::new();
    if status.volume_snapshots_attempted.unwrap_or(0) > 0 {
        let snapshots = read(
            DownloadTargetKind::BackupVolumeSnapshots,
            "native",
            "native snapshot info",
        )
        .await?;
        for snapshot in snapshots {
            infos.push(VolumeInfo {
                pv_name: text(&snapshot, "/spec/persistentVolumeName"),
                backup_method: "NativeSnapshot".to_owned(),
                native_snapshot_info: Some(describe::NativeSnapshotInfo {
                    snapshot_handle: text(&snapshot, "/status/providerSnapshotID"),
                    volume_type: text(&snapshot, "/spec/volumeType"),
                    volume_az: text(&snapshot, "/spec/volumeAZ"),
                    iops: snapshot
                        .pointer("/spec/volumeIOPS")
                        .and_then(Value::as_i64)
                        .map(|i| i.to_string())
                        .unwrap_or_default(),
                }),
                ..VolumeInfo::default()
            });
        }
    }
    if status.csi_volume_snapshots_attempted.unwrap_or(0) > 0 {
        let snapshots = read(
            DownloadTargetKind::CsiBackupVolumeSnapshots,
            "CSI",
            "vs list",
        )
        .await?;
        let contents = read(
            DownloadTargetKind::CsiBackupVolumeSnapshotContents,
            "CSI",
            "vsc list",
        )
        .await?;
        for content in contents {
            let name = text(&content, "/metadata/name");
            let claim = snapshots.iter().find(|s| {
                text(s, "/status/boundVolumeSnapshotContentName") == name
                    && !text(s, "/spec/source/persistentVolumeClaimName").is_empty()
            });
            infos.push(VolumeInfo {
                pvc_name: claim.map_or_else(
                    || "<PVC name not found>".to_owned(),
                    |s| text(s, "/spec/source/persistentVolumeClaimName"),
                ),
                pvc_namespace: claim
                    .map(|s| text(s, "/metadata/namespace"))
                    .unwrap_or_default(),
                backup_method: "CSISnapshot".to_owned(),
                preserve_local_snapshot: true,
                csi_snapshot_info: Some(describe::CsiSnapshotInfo {
                    snapshot_handle: text(&content, "/status/snapshotHandle"),
                    size: content
                        .pointer("/status/restoreSize")
                        .and_then(Value::as_i64)
                        .unwrap_or(0),
                    driver: text(&content, "/spec/driver"),
                    vsc_name: name,
                    operation_id: String::new(),
                }),
                ..VolumeInfo::default()
            });
        }
    }
    Ok(infos)
}

/// What `restore describe` shows besides the Restore (as [`backup_extras`]).
pub async fn restore_extras(
    client: &kube::Client,
    namespace: &str,
    restore: &Restore,
    flags: &DescribeFlags,
) -> describe::RestoreExtras {
    let name = restore.name_any();
    let status = restore.status.clone().unwrap_or_default();
    let reader = Reader {
        client,
        namespace,
        name: &name,
        flags: &flags.download,
    };
    let problems = status.errors.unwrap_or(0) + status.warnings.unwrap_or(0);
    let results = reader.read_if(problems > 0, DownloadTargetKind::RestoreResults);
    let resources = reader.read_if(flags.details, DownloadTargetKind::RestoreResourceList);
    let attempted = status.restore_item_operations_attempted.unwrap_or(0) > 0;
    let operations = reader.read_if(
        flags.details && attempted,
        DownloadTargetKind::RestoreItemOperations,
    );
    // Stored when the restore ends (as for backups: not asked for before).
    let ended = !matches!(
        restore.phase(),
        RestorePhase::New | RestorePhase::InProgress | RestorePhase::FailedValidation
    );
    let volumes = reader.read_if(ended, DownloadTargetKind::RestoreVolumeInfo);
    let valid = hawser_core::label::valid_label_value(&name);
    let selector = format!("{}={valid}", labels::RESTORE_NAME);
    let pod_volumes = labelled(client, namespace, &selector, "PodVolumeRestores", &name);
    let (results, resources, operations, volumes, pod_volumes) =
        tokio::join!(results, resources, operations, volumes, pod_volumes);
    let operations =
        operations.map(|read: Read<Option<Vec<_>>>| read.map(Option::unwrap_or_default));
    let volumes: Read<Option<Vec<_>>> = volumes.unwrap_or(Err(Unread::NotFound));
    describe::RestoreExtras {
        details: flags.details,
        results,
        resources,
        operations,
        volumes: volumes.map(Option::unwrap_or_default),
        pod_volumes,
    }
}

/// The objects of a kind with these labels; on failure, none, said on stderr as Velero says it.
async fn labelled<K>(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
    what: &str,
    of: &str,
) -> Vec<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api
        .list(&kube::api::ListParams::default().labels(selector))
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            eprintln!(
                "error getting {what} for {of}: {}",
                CliError::api("list", what.to_owned(), e).line()
            );
            Vec::new()
        }
    }
}

/// Reads the files of one backup or restore for its description.
struct Reader<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
    name: &'a str,
    flags: &'a DownloadFlags,
}

impl Reader<'_> {
    /// [`Reader::read`] when `wanted`.
    async fn read_if<T: DeserializeOwned>(
        &self,
        wanted: bool,
        kind: DownloadTargetKind,
    ) -> Option<Read<T>> {
        if wanted {
            Some(self.read(kind).await)
        } else {
            None
        }
    }

    /// The file of `kind` decoded from JSON; a missing file is [`Unread::NotFound`].
    async fn read<T: DeserializeOwned>(&self, kind: DownloadTargetKind) -> Read<T> {
        let mut bytes = Vec::new();
        let read = download(
            self.client,
            self.namespace,
            kind,
            self.name,
            DESCRIBE_TIMEOUT,
            self.flags,
            &mut bytes,
        )
        .await;
        match read {
            Ok(_) => serde_json::from_slice(&bytes).map_err(|e| Unread::Undecodable(e.to_string())),
            Err(CliError::NotFound { .. }) => Err(Unread::NotFound),
            Err(e) => Err(Unread::Failed(e.line())),
        }
    }
}
