//! The server's settings as one tree, one branch per part of the server. Built only from the
//! checked flags ([`ServerArgs::settings`](crate::ServerArgs)); each part reads its own branch.

use std::net::SocketAddr;
use std::time::Duration;

use hawser_core::duration::GoDuration;
use hawser_core::restore::Priorities;

/// Everything the server was configured with.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) client: ClientSettings,
    pub(crate) status: StatusSettings,
    pub(crate) backup: BackupSettings,
    pub(crate) restore: RestoreSettings,
    pub(crate) locations: LocationSettings,
    /// `--leader-elect*`: `None` with `--leader-elect=false` (one process, no Lease).
    pub(crate) leader_election: Option<LeaderElectionSettings>,
    pub(crate) shutdown: ShutdownSettings,
    /// `--metrics-address`: where `/metrics`, `/livez` and `/readyz` are served.
    pub(crate) metrics_address: SocketAddr,
    /// `--status-page`: serve `/status` on the metrics listener.
    pub(crate) status_page: bool,
    /// `--download-address`, `--download-url`: the listener of `filesystem` downloads.
    pub(crate) downloads: super::DownloadSettings,
    /// `--disable-controllers`, `--restore-only`: which controllers a term starts.
    pub(crate) controllers: super::Enabled,
}

/// The Kubernetes client.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    /// `--client-qps`; `None`: no client-side rate limit.
    pub(crate) qps: Option<f64>,
    /// `--client-burst`.
    pub(crate) burst: u32,
    /// `--client-page-size`; `None`: no paging.
    pub(crate) page_size: Option<u32>,
}

/// The status truth engine.
#[derive(Debug, Clone)]
pub(crate) struct StatusSettings {
    /// `--resource-timeout`: the deadline of the reconcile path's retries.
    pub(crate) resource_timeout: Duration,
    /// `--status-patch-max-backoff`.
    pub(crate) max_backoff: Duration,
    /// `--status-resync-period`: recovery and the work queues' full LIST.
    pub(crate) resync_period: Duration,
    /// `--resume-attempts`: how many times interrupted work is run again.
    pub(crate) resume_attempts: u32,
}

/// The backup controller.
#[derive(Debug, Clone)]
pub(crate) struct BackupSettings {
    /// `--default-backup-ttl`.
    pub(crate) default_ttl: GoDuration,
    /// `--default-backup-storage-location`.
    pub(crate) default_location: String,
    /// `--concurrent-backups`.
    pub(crate) concurrency: usize,
    /// `--garbage-collection-frequency` (`0s` read as Velero's 1h).
    pub(crate) gc_frequency: Duration,
    /// `--backup-sync-period` (`0s` or less read as Velero's 1m): the sync period of a location
    /// whose `spec.backupSyncPeriod` is unset.
    pub(crate) sync_period: Duration,
    /// `--schedule-skip-immediately`.
    pub(crate) schedule_skip_immediately: bool,
    /// `--schedule-min-interval`.
    pub(crate) schedule_min_interval: Duration,
    /// `--default-volumes-to-fs-backup`: written into a spec that leaves it unset.
    pub(crate) default_volumes_to_fs_backup: bool,
    /// `--default-snapshot-move-data`: written into a spec that leaves it unset.
    pub(crate) default_snapshot_move_data: bool,
    /// `--default-item-operation-timeout`: written into a spec that leaves it unset or zero.
    pub(crate) default_item_operation_timeout: GoDuration,
    /// `--global-backup-volume-policies-configmap`: not built, a warning on every backup.
    pub(crate) global_volume_policies: Option<String>,
}

/// The restore controller.
#[derive(Debug, Clone)]
pub(crate) struct RestoreSettings {
    /// `--restore-resource-priorities`, parsed (Velero's order when unset).
    pub(crate) resource_priorities: Priorities,
    /// How long a restored CRD may take to be established (`--resource-timeout`, as Velero).
    pub(crate) crd_ready_timeout: Duration,
}

/// The storage-location controller.
#[derive(Debug, Clone)]
pub(crate) struct LocationSettings {
    /// `--store-validation-frequency`; `None`: periodic validation disabled.
    pub(crate) validation_frequency: Option<Duration>,
    /// `--filesystem-root`, `--allow-ambient-credentials`: what a location may use.
    pub(crate) policy: hawser_store::LocationPolicy,
}

/// Leader election on a `coordination.k8s.io/v1` Lease in the server's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderElectionSettings {
    /// `--leader-elect-resource-name`: the Lease's name.
    pub(crate) lease_name: String,
    /// `--leader-elect-lease-duration`: how long a follower waits, after it last saw the Lease
    /// change, before it takes the Lease over.
    pub(crate) lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long the leader keeps trying to renew before it
    /// gives up leading (shorter than the lease duration).
    pub(crate) renew_deadline: Duration,
    /// `--leader-elect-retry-period`: the interval of the leader's renewals and of a follower's
    /// looks at the Lease (shorter than the renew deadline).
    pub(crate) retry_period: Duration,
}

/// What happens on SIGTERM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShutdownSettings {
    /// `--shutdown-grace-period`: how long running backups and restores may take to finish.
    pub(crate) grace_period: Duration,
}
