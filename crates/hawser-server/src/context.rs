//! What every controller of the server shares.

use hawser_core::clock::Clock;
use hawser_status::StatusEngine;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::backup_queue::BackupQueue;
use crate::config::Settings;
use crate::locations::Locations;
use crate::metrics::VeleroMetrics;
use crate::records::StorageRecords;

/// The label naming the Schedule a Backup was created by.
pub(crate) const SCHEDULE_LABEL: &str = "velero.io/schedule-name";

/// Shared by the controllers of one term of leadership; cheap to clone behind an `Arc`.
pub(crate) struct Context {
    /// The server's client: no hidden retries, `--client-qps`/`--client-burst` applied.
    pub(crate) client: kube::Client,
    /// Where Velero objects live.
    pub(crate) namespace: String,
    pub(crate) settings: Settings,
    /// The one clock of every timestamp the server writes.
    pub(crate) clock: Clock,
    pub(crate) engine: StatusEngine,
    pub(crate) metrics: VeleroMetrics,
    pub(crate) locations: Locations,
    /// Where finished work's outcome is recorded (what recovery reads).
    pub(crate) records: StorageRecords,
    /// Fires when this term of leadership ends: at shutdown, or when the server steps down.
    pub(crate) shutdown: CancellationToken,
    /// The tasks of this term's work (backups, restores, item operations): shutdown waits for
    /// them, stepping down aborts them.
    pub(crate) workers: crate::queue::Workers,
    /// Velero's backup queue: positions and namespace reservations.
    pub(crate) backup_queue: std::sync::Arc<BackupQueue>,
}

/// The storage location a Backup object (as JSON) names, or `default` when it names none.
pub(crate) fn backup_location_name(backup: &Value, default: &str) -> String {
    backup
        .pointer("/spec/storageLocation")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(default)
        .to_owned()
}

/// The `schedule` metric label of an object: its `velero.io/schedule-name` label, or `""`.
pub(crate) fn schedule_of(object: &Value) -> String {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(SCHEDULE_LABEL))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
