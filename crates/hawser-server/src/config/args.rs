//! The flags of `hawser server`, with Velero's names and defaults, and their checked form.

use std::path::PathBuf;
use std::time::Duration;

use hawser_core::duration::GoDuration;
use hawser_core::restore::Priorities;
use hawser_store::LocationPolicy;

use super::controllers::Enabled;
use super::downloads::DownloadArgs;
use super::error::{
    ArgsError, is_object_name, non_negative, ordered, parse_listen_address, positive,
};
use super::settings::{
    BackupSettings, ClientSettings, LeaderElectionSettings, LocationSettings, RestoreSettings,
    Settings, ShutdownSettings, StatusSettings,
};
use crate::velero_flags::{Accepted, ServerFlags};

/// The Lease's name when `--leader-elect-resource-name` is not given.
pub(crate) const DEFAULT_LEASE_NAME: &str = "hawser-server";

/// Velero's garbage-collection frequency, also what `--garbage-collection-frequency 0s` means.
const DEFAULT_GC_FREQUENCY: Duration = Duration::from_secs(3600);

/// Velero's backup sync period, also what `--backup-sync-period` of 0s or less means.
const DEFAULT_BACKUP_SYNC_PERIOD: Duration = Duration::from_secs(60);

/// Flags of `hawser server`. Every flag also reads the environment variable `HAWSER_<NAME>`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Deadline of a status write's retries on the reconcile path (then the re-driver takes
    /// over), how long one read of a backup or restore is retried while the API server is
    /// unreachable or answers 429/5xx, and how long a restore waits for a restored CRD to be
    /// established.
    #[arg(long, env = "HAWSER_RESOURCE_TIMEOUT", default_value = "10m")]
    pub resource_timeout: GoDuration,

    /// How often each BackupStorageLocation is validated; `0s` disables periodic validation.
    #[arg(long, env = "HAWSER_STORE_VALIDATION_FREQUENCY", default_value = "1m")]
    pub store_validation_frequency: GoDuration,

    /// TTL of a Backup whose spec.ttl is unset.
    #[arg(long, env = "HAWSER_DEFAULT_BACKUP_TTL", default_value = "720h")]
    pub default_backup_ttl: GoDuration,

    /// Location of a Backup that names none, when no BackupStorageLocation has spec.default=true.
    #[arg(
        long,
        env = "HAWSER_DEFAULT_BACKUP_STORAGE_LOCATION",
        default_value = "default"
    )]
    pub default_backup_storage_location: String,

    /// Sustained Kubernetes API requests per second (0: no limit).
    ///
    /// Higher than Velero's 20: the load the API server feels is bounded by how many requests
    /// are in flight (at most 8 restore creates, 4 backup LISTs, plus status writes), its
    /// priority and fairness sheds the rest with 429, which hawser honours; at 500/s a
    /// 30,000-object restore takes about a minute instead of 25 (docs/bench-restore.md).
    #[arg(long, env = "HAWSER_CLIENT_QPS", default_value_t = 500.0)]
    pub client_qps: f64,

    /// Kubernetes API requests allowed in a burst above --client-qps (must be > 0).
    #[arg(long, env = "HAWSER_CLIENT_BURST", default_value_t = 1000)]
    pub client_burst: u32,

    /// Items per page of the LISTs a backup makes (0: no paging).
    #[arg(long, env = "HAWSER_CLIENT_PAGE_SIZE", default_value_t = 500)]
    pub client_page_size: u32,

    /// Address of the HTTP server with /metrics, /livez and /readyz (`:8085` is all interfaces).
    #[arg(long, env = "HAWSER_METRICS_ADDRESS", default_value = ":8085")]
    pub metrics_address: String,

    /// Serve a read-only status page at /status on --metrics-address: Backups, Restores and
    /// Schedules with their phases, progress and warnings, the phases this server stored, and
    /// the statuses it still owes. Off by default (it shows object names to whoever reaches
    /// the metrics port).
    #[arg(
        long,
        env = "HAWSER_STATUS_PAGE",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub status_page: bool,

    /// Backups that run at the same time (must be > 0).
    #[arg(long, env = "HAWSER_CONCURRENT_BACKUPS", default_value_t = 1)]
    pub concurrent_backups: usize,

    /// Order in which a restore creates resources (comma list; a lone `-` separates high from
    /// low priorities). Unset: Velero's built-in order.
    #[arg(long, env = "HAWSER_RESTORE_RESOURCE_PRIORITIES")]
    pub restore_resource_priorities: Option<String>,

    /// Cap of the backoff between status-write attempts.
    #[arg(long, env = "HAWSER_STATUS_PATCH_MAX_BACKOFF", default_value = "5s")]
    pub status_patch_max_backoff: GoDuration,

    /// How often unfinished Backups/Restores owned by no live worker are looked for and resolved.
    #[arg(long, env = "HAWSER_STATUS_RESYNC_PERIOD", default_value = "1m")]
    pub status_resync_period: GoDuration,

    /// How many times a Backup or Restore left `InProgress` with no record by a server that
    /// stopped (killed, or stepped down) is run again from the start, before it is `Failed`
    /// with every attempt's reason; 0 fails it at once.
    #[arg(long, env = "HAWSER_RESUME_ATTEMPTS", default_value_t = 2)]
    pub resume_attempts: u32,

    /// Run controllers and recovery only while holding the Lease --leader-elect-resource-name
    /// in the server's namespace; `--leader-elect=false` for a single process without a Lease.
    #[arg(
        long,
        env = "HAWSER_LEADER_ELECT",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub leader_elect: bool,

    /// Name of the `coordination.k8s.io/v1` Lease the servers of a namespace elect a leader on.
    #[arg(
        long,
        env = "HAWSER_LEADER_ELECT_RESOURCE_NAME",
        default_value = DEFAULT_LEASE_NAME
    )]
    pub leader_elect_resource_name: String,

    /// How long a follower waits, after it last saw the Lease renewed, before it takes over.
    #[arg(
        long,
        env = "HAWSER_LEADER_ELECT_LEASE_DURATION",
        default_value = "15s"
    )]
    pub leader_elect_lease_duration: GoDuration,

    /// How long the leader keeps trying to renew the Lease before it steps down (its work
    /// stops, it follows and competes for the Lease again); must be shorter than
    /// --leader-elect-lease-duration.
    #[arg(
        long,
        env = "HAWSER_LEADER_ELECT_RENEW_DEADLINE",
        default_value = "10s"
    )]
    pub leader_elect_renew_deadline: GoDuration,

    /// Interval of the leader's renewals and of a follower's tries; must be shorter than
    /// --leader-elect-renew-deadline.
    #[arg(long, env = "HAWSER_LEADER_ELECT_RETRY_PERIOD", default_value = "2s")]
    pub leader_elect_retry_period: GoDuration,

    /// How often expired backups are looked for and deleted (through a DeleteBackupRequest);
    /// `0s` means Velero's default, 1h.
    #[arg(
        long,
        env = "HAWSER_GARBAGE_COLLECTION_FREQUENCY",
        default_value = "1h"
    )]
    pub garbage_collection_frequency: GoDuration,

    /// How often the backups of a storage location are synced into the cluster, for a location
    /// whose spec.backupSyncPeriod is unset; 0s or less means Velero's default, 1m.
    #[arg(
        long,
        env = "HAWSER_BACKUP_SYNC_PERIOD",
        default_value = "1m",
        allow_hyphen_values = true
    )]
    pub backup_sync_period: GoDuration,

    /// Skip the first due run of a Schedule whose spec.skipImmediately is unset (true and
    /// false as Velero's flag).
    #[arg(
        long,
        env = "HAWSER_SCHEDULE_SKIP_IMMEDIATELY",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub schedule_skip_immediately: bool,

    /// The shortest time between two backups of one Schedule: a Schedule whose runs come closer
    /// (`@every 1s`) is FailedValidation, as each run makes a whole backup. Cron expressions
    /// run at most once a minute.
    #[arg(long, env = "HAWSER_SCHEDULE_MIN_INTERVAL", default_value = "1m")]
    pub schedule_min_interval: GoDuration,

    /// `spec.defaultVolumesToFsBackup` of a Backup that leaves it unset, written into its spec
    /// when it starts, as Velero does. File-system backup is not built: a backup with it true
    /// carries a warning saying its pod volumes have no data.
    #[arg(
        long,
        env = "HAWSER_DEFAULT_VOLUMES_TO_FS_BACKUP",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub default_volumes_to_fs_backup: bool,

    /// `spec.snapshotMoveData` of a Backup that leaves it unset, written into its spec when it
    /// starts, as Velero does. Snapshot data movement is not built: a backup with it true
    /// carries a warning.
    #[arg(
        long,
        env = "HAWSER_DEFAULT_SNAPSHOT_MOVE_DATA",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub default_snapshot_move_data: bool,

    /// `spec.itemOperationTimeout` of a Backup that leaves it unset or zero, written into its
    /// spec when it starts: how long its CSI snapshots may take to become ready.
    #[arg(
        long,
        env = "HAWSER_DEFAULT_ITEM_OPERATION_TIMEOUT",
        default_value = "4h"
    )]
    pub default_item_operation_timeout: GoDuration,

    /// Velero's ConfigMap of global backup volume policies, merged into every backup. Not
    /// built: each backup then carries a warning that they were not used.
    #[arg(long, env = "HAWSER_GLOBAL_BACKUP_VOLUME_POLICIES_CONFIGMAP")]
    pub global_backup_volume_policies_configmap: Option<String>,

    /// On SIGTERM, how long running backups and restores may take to finish before the server
    /// stops anyway (what is unfinished is resolved by the next leader's recovery). Keep it
    /// below the Pod's terminationGracePeriodSeconds.
    #[arg(long, env = "HAWSER_SHUTDOWN_GRACE_PERIOD", default_value = "60s")]
    pub shutdown_grace_period: GoDuration,

    /// A directory `filesystem` locations may be rooted in (repeatable; the environment
    /// variable holds one): a BackupStorageLocation's spec.config.root must be one of them or
    /// under one, after `..` and symbolic links are resolved. None given: no `filesystem`
    /// location is usable.
    #[arg(
        long = "filesystem-root",
        env = "HAWSER_FILESYSTEM_ROOT",
        value_name = "DIR"
    )]
    pub filesystem_roots: Vec<PathBuf>,

    /// Let a location that names no spec.credential use the server's own credentials (AWS
    /// environment variables, web identity and instance metadata; GCP application default
    /// credentials; Azure managed or workload identity), as Velero's plugins do. With
    /// `=false` such a location is Unavailable.
    #[arg(
        long,
        env = "HAWSER_ALLOW_AMBIENT_CREDENTIALS",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_ambient_credentials: bool,

    /// A custom storage endpoint (`s3Url`, `storeEndpoint`, `storageAccountURI`,
    /// `activeDirectoryAuthorityURI`) that locations may send credentials to, as a URL; compared
    /// by scheme, host and port (repeatable; `HAWSER_TRUSTED_ENDPOINTS` holds a comma-separated
    /// list). Another custom endpoint gets credentials only when the credential Secret names the
    /// location in its `hawser.io/locations` annotation. A bearer token (GCS, Azure AD) goes over
    /// plain http:// only to an endpoint listed here with http://.
    #[arg(
        long = "trusted-endpoint",
        env = "HAWSER_TRUSTED_ENDPOINTS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub trusted_endpoints: Vec<String>,

    /// Controllers not to start, Velero's names (repeatable comma list): backup, backup-queue,
    /// backup-operations, backup-finalizer, backup-deletion, backup-sync, download-request,
    /// gc, restore, schedule, server-status-request, volume-snapshot-location; Velero's
    /// backup-repo, restore-operations and restore-finalizer are accepted with nothing to
    /// disable. The storage-location controller always runs.
    #[arg(
        long = "disable-controllers",
        env = "HAWSER_DISABLE_CONTROLLERS",
        value_delimiter = ',',
        value_name = "NAMES"
    )]
    pub disable_controllers: Vec<String>,

    /// Deprecated in Velero (use a ReadOnly storage location): run no backup, backup-deletion,
    /// backup-operations, gc or schedule controller, so that only restores are made.
    #[arg(
        long,
        env = "HAWSER_RESTORE_ONLY",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub restore_only: bool,

    #[command(flatten)]
    pub downloads: DownloadArgs,
    /// The other flags of `velero server`: accepted so that a Velero Deployment's arguments
    /// parse, without effect.
    #[command(flatten)]
    pub velero: Accepted<ServerFlags>,
}

/// The leader-election flags, checked; `None` with `--leader-elect=false`.
fn leader_election(
    elect: bool,
    lease_name: String,
    lease_duration: GoDuration,
    renew_deadline: GoDuration,
    retry_period: GoDuration,
) -> Result<Option<LeaderElectionSettings>, ArgsError> {
    if !elect {
        return Ok(None);
    }
    if !is_object_name(&lease_name) {
        return Err(ArgsError::LeaseName { value: lease_name });
    }
    let duration = (
        "leader-elect-lease-duration",
        lease_duration,
        positive("leader-elect-lease-duration", lease_duration)?,
    );
    let deadline = (
        "leader-elect-renew-deadline",
        renew_deadline,
        positive("leader-elect-renew-deadline", renew_deadline)?,
    );
    let retry = (
        "leader-elect-retry-period",
        retry_period,
        positive("leader-elect-retry-period", retry_period)?,
    );
    ordered(deadline, duration)?;
    ordered(retry, deadline)?;
    Ok(Some(LeaderElectionSettings {
        lease_name,
        lease_duration: duration.2,
        renew_deadline: deadline.2,
        retry_period: retry.2,
    }))
}

impl ServerArgs {
    /// Checks every value and converts the flags to the server's settings tree. The flags are
    /// destructured without `..`, so a new flag that is not given a place fails to compile.
    pub(crate) fn settings(&self) -> Result<Settings, ArgsError> {
        let Self {
            resource_timeout,
            store_validation_frequency,
            default_backup_ttl,
            default_backup_storage_location,
            client_qps,
            client_burst,
            client_page_size,
            metrics_address,
            status_page,
            concurrent_backups,
            restore_resource_priorities,
            status_patch_max_backoff,
            status_resync_period,
            resume_attempts,
            leader_elect,
            leader_elect_resource_name,
            leader_elect_lease_duration,
            leader_elect_renew_deadline,
            leader_elect_retry_period,
            garbage_collection_frequency,
            backup_sync_period,
            schedule_skip_immediately,
            schedule_min_interval,
            default_volumes_to_fs_backup,
            default_snapshot_move_data,
            default_item_operation_timeout,
            global_backup_volume_policies_configmap,
            shutdown_grace_period,
            filesystem_roots,
            allow_ambient_credentials,
            trusted_endpoints,
            disable_controllers,
            restore_only,
            downloads,
            // Logged by the command as accepted and not implemented; nothing to check.
            velero: _,
        } = self.clone();
        if !client_qps.is_finite() || client_qps < 0.0 {
            return Err(ArgsError::Number {
                flag: "client-qps",
                requirement: "must be 0 or more",
                value: client_qps.to_string(),
            });
        }
        if client_burst == 0 {
            return Err(ArgsError::Number {
                flag: "client-burst",
                requirement: "must be greater than 0",
                value: "0".to_owned(),
            });
        }
        if concurrent_backups == 0 {
            return Err(ArgsError::Number {
                flag: "concurrent-backups",
                requirement: "must be greater than 0",
                value: "0".to_owned(),
            });
        }
        if default_backup_storage_location.trim().is_empty() {
            return Err(ArgsError::EmptyLocation);
        }
        if let Some(value) = filesystem_roots.iter().find(|r| !r.is_absolute()) {
            return Err(ArgsError::FilesystemRoot {
                value: value.clone(),
            });
        }
        let resource_timeout = positive("resource-timeout", resource_timeout)?;
        let validation_frequency =
            non_negative("store-validation-frequency", store_validation_frequency)?;
        non_negative("default-backup-ttl", default_backup_ttl)?;
        Ok(Settings {
            client: ClientSettings {
                qps: (client_qps > 0.0).then_some(client_qps),
                burst: client_burst,
                page_size: (client_page_size > 0).then_some(client_page_size),
            },
            status: StatusSettings {
                resource_timeout,
                max_backoff: positive("status-patch-max-backoff", status_patch_max_backoff)?,
                resync_period: positive("status-resync-period", status_resync_period)?,
                resume_attempts,
            },
            backup: BackupSettings {
                default_ttl: default_backup_ttl,
                default_location: default_backup_storage_location,
                concurrency: concurrent_backups,
                gc_frequency: match non_negative(
                    "garbage-collection-frequency",
                    garbage_collection_frequency,
                )? {
                    zero if zero.is_zero() => DEFAULT_GC_FREQUENCY,
                    frequency => frequency,
                },
                sync_period: backup_sync_period
                    .to_std()
                    .filter(|d| !d.is_zero())
                    .unwrap_or(DEFAULT_BACKUP_SYNC_PERIOD),
                schedule_skip_immediately,
                schedule_min_interval: non_negative(
                    "schedule-min-interval",
                    schedule_min_interval,
                )?,
                default_volumes_to_fs_backup,
                default_snapshot_move_data,
                default_item_operation_timeout: {
                    positive(
                        "default-item-operation-timeout",
                        default_item_operation_timeout,
                    )?;
                    default_item_operation_timeout
                },
                global_volume_policies: global_backup_volume_policies_configmap
                    .filter(|name| !name.is_empty()),
            },
            restore: RestoreSettings {
                resource_priorities: Priorities::from_flag(restore_resource_priorities.as_deref())
                    .map_err(ArgsError::Priorities)?,
                crd_ready_timeout: resource_timeout,
            },
            locations: LocationSettings {
                validation_frequency: (!validation_frequency.is_zero())
                    .then_some(validation_frequency),
                policy: LocationPolicy::default()
                    .with_filesystem_roots(filesystem_roots)
                    .with_ambient_credentials(allow_ambient_credentials)
                    .with_trusted_endpoints(trusted_endpoints),
            },
            leader_election: leader_election(
                leader_elect,
                leader_elect_resource_name,
                leader_elect_lease_duration,
                leader_elect_renew_deadline,
                leader_elect_retry_period,
            )?,
            shutdown: ShutdownSettings {
                grace_period: non_negative("shutdown-grace-period", shutdown_grace_period)?,
            },
            metrics_address: parse_listen_address(&metrics_address)?,
            status_page,
            downloads: downloads.settings()?,
            controllers: Enabled::new(&disable_controllers, restore_only)?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "args_tests.rs"]
mod tests;
