//! Velero's server metrics (`velero_*`, velero-compat §8) for what hawser does: backups, restores,
//! schedules, deletions, storage locations and CSI snapshots. Native-snapshot, file-system backup
//! and repository metrics are not exported: hawser does none of that work.
//!
//! Counters and gauges carry the `schedule` label (the Backup's `velero.io/schedule-name` label,
//! `""` for ad-hoc backups; for restores, `spec.scheduleName`). The `""` series exist from start,
//! `velero_backup_last_status` starting at 1, as in Velero.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Velero's duration buckets (seconds).
const DURATION_BUCKETS: [f64; 9] = [
    60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 14400.0,
];

/// The `schedule` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ScheduleLabels {
    /// Schedule name, `""` for ad-hoc work.
    pub schedule: String,
}

/// The `backup_location_name` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LocationLabels {
    /// The BackupStorageLocation's name.
    pub backup_location_name: String,
}

/// The `schedule` and `backupName` labels of Velero's CSI snapshot counters (Velero's names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct SnapshotLabels {
    /// Schedule name, `""` for ad-hoc work.
    pub schedule: String,
    /// The backup's name.
    pub backupName: String,
}

type Counters = Family<ScheduleLabels, Counter>;
type Gauges = Family<ScheduleLabels, Gauge>;

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// A backup that reached a final phase after running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupFinished {
    /// `Completed`, `PartiallyFailed` (`true`) or `Failed`.
    pub outcome: FinalOutcome,
    /// Completion minus start, whole seconds.
    pub duration_seconds: u64,
    /// Size of the stored archive.
    pub tarball_bytes: u64,
    /// `status.progress.totalItems`.
    pub items: u64,
    /// `status.errors`.
    pub errors: u64,
    /// `status.warnings`.
    pub warnings: u64,
    /// Completion time, Unix seconds.
    pub completed_unix: i64,
    /// The backup's name.
    pub backup: String,
    /// CSI snapshots cut (`status.csiVolumeSnapshotsAttempted`).
    pub snapshots_attempted: u64,
    /// Of those, the ones that became ready to use.
    pub snapshots_completed: u64,
}

/// How finished work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalOutcome {
    /// `Completed`.
    Completed,
    /// `PartiallyFailed`.
    PartiallyFailed,
    /// `Failed`.
    Failed,
}

/// Velero's backup, restore and storage-location metrics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct VeleroMetrics {
    backup_total: Gauge,
    backup_attempt: Counters,
    backup_success: Counters,
    backup_partial_failure: Counters,
    backup_failure: Counters,
    backup_validation_failure: Counters,
    backup_duration: Family<ScheduleLabels, Histogram, fn() -> Histogram>,
    backup_tarball_size: Gauges,
    backup_last_successful: Gauges,
    backup_last_status: Gauges,
    backup_items_total: Gauges,
    backup_items_errors: Gauges,
    backup_warning: Counters,
    restore_total: Gauge,
    restore_attempt: Counters,
    restore_success: Counters,
    restore_partial_failure: Counters,
    restore_failed: Counters,
    restore_validation_failed: Counters,
    location_status: Family<LocationLabels, Gauge>,
    deletion_attempt: Counters,
    deletion_success: Counters,
    deletion_failure: Counters,
    schedule_interval: Gauges,
    csi_snapshot_attempt: Family<SnapshotLabels, Counter>,
    csi_snapshot_success: Family<SnapshotLabels, Counter>,
    csi_snapshot_failure: Family<SnapshotLabels, Counter>,
}

impl VeleroMetrics {
    /// Create the metrics and register them in `registry` under Velero's `velero` prefix.
    #[must_use]
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            backup_total: Gauge::default(),
            backup_attempt: Counters::default(),
            backup_success: Counters::default(),
            backup_partial_failure: Counters::default(),
            backup_failure: Counters::default(),
            backup_validation_failure: Counters::default(),
            backup_duration: Family::new_with_constructor(duration_histogram),
            backup_tarball_size: Gauges::default(),
            backup_last_successful: Gauges::default(),
            backup_last_status: Gauges::default(),
            backup_items_total: Gauges::default(),
            backup_items_errors: Gauges::default(),
            backup_warning: Counters::default(),
            restore_total: Gauge::default(),
            restore_attempt: Counters::default(),
            restore_success: Counters::default(),
            restore_partial_failure: Counters::default(),
            restore_failed: Counters::default(),
            restore_validation_failed: Counters::default(),
            location_status: Family::default(),
            deletion_attempt: Counters::default(),
            deletion_success: Counters::default(),
            deletion_failure: Counters::default(),
            schedule_interval: Gauges::default(),
            csi_snapshot_attempt: Family::default(),
            csi_snapshot_success: Family::default(),
            csi_snapshot_failure: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("velero");
        for (name, help, family) in [
            (
                "csi_snapshot_attempt",
                "Total number of CSI attempted volume snapshots",
                &m.csi_snapshot_attempt,
            ),
            (
                "csi_snapshot_success",
                "Total number of CSI successful volume snapshots",
                &m.csi_snapshot_success,
            ),
            (
                "csi_snapshot_failure",
                "Total number of CSI failed volume snapshots",
                &m.csi_snapshot_failure,
            ),
        ] {
            r.register(name, help, family.clone());
        }
        r.register(
            "backup_total",
            "Current number of existent backups",
            m.backup_total.clone(),
        );
        r.register(
            "backup_attempt",
            "Total number of attempted backups",
            m.backup_attempt.clone(),
        );
        r.register(
            "backup_success",
            "Total number of successful backups",
            m.backup_success.clone(),
        );
        r.register(
            "backup_partial_failure",
            "Total number of partially failed backups",
            m.backup_partial_failure.clone(),
        );
        r.register(
            "backup_failure",
            "Total number of failed backups",
            m.backup_failure.clone(),
        );
        r.register(
            "backup_validation_failure",
            "Total number of validation failed backups",
            m.backup_validation_failure.clone(),
        );
        r.register(
            "backup_duration_seconds",
            "Time taken to complete backup, in seconds",
            m.backup_duration.clone(),
        );
        r.register(
            "backup_tarball_size_bytes",
            "Size, in bytes, of a backup",
            m.backup_tarball_size.clone(),
        );
        r.register(
            "backup_last_successful_timestamp",
            "Last time a backup ran successfully, Unix timestamp in seconds",
            m.backup_last_successful.clone(),
        );
        r.register(
            "backup_last_status",
            "Last status of the backup. A value of 1 is success, 0 is failure",
            m.backup_last_status.clone(),
        );
        r.register(
            "backup_items_total",
            "Total number of items backed up",
            m.backup_items_total.clone(),
        );
        r.register(
            "backup_items_errors",
            "Total number of items that failed to be backed up",
            m.backup_items_errors.clone(),
        );
        r.register(
            "backup_warning",
            "Total number of warned backups",
            m.backup_warning.clone(),
        );
        r.register(
            "restore_total",
            "Current number of existent restores",
            m.restore_total.clone(),
        );
        r.register(
            "restore_attempt",
            "Total number of attempted restores",
            m.restore_attempt.clone(),
        );
        r.register(
            "restore_success",
            "Total number of successful restores",
            m.restore_success.clone(),
        );
        r.register(
            "restore_partial_failure",
            "Total number of partially failed restores",
            m.restore_partial_failure.clone(),
        );
        r.register(
            "restore_failed",
            "Total number of failed restores",
            m.restore_failed.clone(),
        );
        r.register(
            "restore_validation_failed",
            "Total number of failed restores failing validations",
            m.restore_validation_failed.clone(),
        );
        r.register(
            "backup_location_status_gauge",
            "The status of backup storage locations. 1 is Available, 0 is Unavailable",
            m.location_status.clone(),
        );
        r.register(
            "backup_deletion_attempt",
            "Total number of attempted backup deletions",
            m.deletion_attempt.clone(),
        );
        r.register(
            "backup_deletion_success",
            "Total number of successful backup deletions",
            m.deletion_success.clone(),
        );
        r.register(
            "backup_deletion_failure",
            "Total number of failed backup deletions",
            m.deletion_failure.clone(),
        );
        r.register(
            "schedule_expected_interval_seconds",
            "Expected interval between consecutive scheduled backups, in seconds",
            m.schedule_interval.clone(),
        );
        m.init_schedule("");
        m
    }

    /// A backup deletion started (a request taken up).
    pub fn deletion_attempt(&self, schedule: &str) {
        self.deletion_attempt.get_or_create(&labels(schedule)).inc();
    }

    /// A backup deletion ended, with everything deleted (`true`) or with errors.
    pub fn deletion_finished(&self, schedule: &str, deleted: bool) {
        let family = if deleted {
            &self.deletion_success
        } else {
            &self.deletion_failure
        };
        family.get_or_create(&labels(schedule)).inc();
    }

    /// The interval between the next two runs of `schedule`.
    pub fn schedule_interval(&self, schedule: &str, seconds: i64) {
        self.schedule_interval
            .get_or_create(&labels(schedule))
            .set(seconds);
    }

    /// The counter families with the `schedule` label.
    fn schedule_counters(&self) -> [&Counters; 14] {
        [
            &self.backup_attempt,
            &self.backup_success,
            &self.backup_partial_failure,
            &self.backup_failure,
            &self.backup_validation_failure,
            &self.backup_warning,
            &self.restore_attempt,
            &self.restore_success,
            &self.restore_partial_failure,
            &self.restore_failed,
            &self.restore_validation_failed,
            &self.deletion_attempt,
            &self.deletion_success,
            &self.deletion_failure,
        ]
    }

    /// Removes the series of a Schedule that no longer exists.
    pub fn forget_schedule(&self, schedule: &str) {
        let l = labels(schedule);
        for family in self.schedule_counters() {
            family.remove(&l);
        }
        for family in [
            &self.backup_tarball_size,
            &self.backup_items_total,
            &self.backup_items_errors,
            &self.backup_last_successful,
            &self.backup_last_status,
            &self.schedule_interval,
        ] {
            family.remove(&l);
        }
        self.backup_duration.remove(&l);
    }

    /// Creates the series of `schedule` (value 0; last status 1), as Velero does at start.
    pub fn init_schedule(&self, schedule: &str) {
        let l = labels(schedule);
        for family in self.schedule_counters() {
            let _ = family.get_or_create(&l);
        }
        for family in [
            &self.backup_tarball_size,
            &self.backup_items_total,
            &self.backup_items_errors,
            &self.backup_last_successful,
        ] {
            let _ = family.get_or_create(&l);
        }
        self.backup_last_status.get_or_create(&l).set(1);
    }

    /// The number of Backup objects.
    pub fn backup_count(&self, n: usize) {
        self.backup_total.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The number of Restore objects.
    pub fn restore_count(&self, n: usize) {
        self.restore_total.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A backup entered `InProgress`.
    pub fn backup_attempt(&self, schedule: &str) {
        self.backup_attempt.get_or_create(&labels(schedule)).inc();
    }

    /// A backup ended `FailedValidation`.
    pub fn backup_validation_failed(&self, schedule: &str) {
        let l = labels(schedule);
        self.backup_validation_failure.get_or_create(&l).inc();
        self.backup_last_status.get_or_create(&l).set(0);
    }

    /// A backup that ran reached its final phase.
    pub fn backup_finished(&self, schedule: &str, f: &BackupFinished) {
        let l = labels(schedule);
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        // Only backups that cut snapshots get series (one per backup, as Velero labels them).
        if f.snapshots_attempted > 0 {
            let s = SnapshotLabels {
                schedule: schedule.to_owned(),
                backupName: f.backup.clone(),
            };
            let failed = f.snapshots_attempted.saturating_sub(f.snapshots_completed);
            self.csi_snapshot_attempt
                .get_or_create(&s)
                .inc_by(f.snapshots_attempted);
            self.csi_snapshot_success
                .get_or_create(&s)
                .inc_by(f.snapshots_completed);
            self.csi_snapshot_failure.get_or_create(&s).inc_by(failed);
        }
        match f.outcome {
            FinalOutcome::Completed => {
                self.backup_success.get_or_create(&l).inc();
                self.backup_last_status.get_or_create(&l).set(1);
                self.backup_last_successful
                    .get_or_create(&l)
                    .set(f.completed_unix);
            }
            FinalOutcome::PartiallyFailed => {
                self.backup_partial_failure.get_or_create(&l).inc();
                self.backup_last_status.get_or_create(&l).set(0);
            }
            FinalOutcome::Failed => {
                self.backup_failure.get_or_create(&l).inc();
                self.backup_last_status.get_or_create(&l).set(0);
                return;
            }
        }
        // Precision loss above 2^53 s is irrelevant for a duration.
        #[allow(clippy::cast_precision_loss)]
        let seconds = f.duration_seconds as f64;
        self.backup_duration.get_or_create(&l).observe(seconds);
        self.backup_tarball_size
            .get_or_create(&l)
            .set(as_i64(f.tarball_bytes));
        self.backup_items_total
            .get_or_create(&l)
            .set(as_i64(f.items));
        self.backup_items_errors
            .get_or_create(&l)
            .set(as_i64(f.errors));
        if f.warnings > 0 {
            self.backup_warning.get_or_create(&l).inc();
        }
    }

    /// A restore was taken up (before its validation result, as Velero counts it).
    pub fn restore_attempt(&self, schedule: &str) {
        self.restore_attempt.get_or_create(&labels(schedule)).inc();
    }

    /// A restore ended `FailedValidation`.
    pub fn restore_validation_failed(&self, schedule: &str) {
        self.restore_validation_failed
            .get_or_create(&labels(schedule))
            .inc();
    }

    /// A restore that ran reached its final phase.
    pub fn restore_finished(&self, schedule: &str, outcome: FinalOutcome) {
        let l = labels(schedule);
        match outcome {
            FinalOutcome::Completed => self.restore_success.get_or_create(&l).inc(),
            FinalOutcome::PartiallyFailed => self.restore_partial_failure.get_or_create(&l).inc(),
            FinalOutcome::Failed => self.restore_failed.get_or_create(&l).inc(),
        };
    }

    /// The validation result of a storage location.
    pub fn location_status(&self, name: &str, available: bool) {
        self.location_status
            .get_or_create(&LocationLabels {
                backup_location_name: name.to_owned(),
            })
            .set(i64::from(available));
    }
}

fn labels(schedule: &str) -> ScheduleLabels {
    ScheduleLabels {
        schedule: schedule.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn the_ad_hoc_series_exist_from_start_with_velero_names() {
        let mut registry = Registry::default();
        let _m = VeleroMetrics::register(&mut registry);
        let out = text(&registry);
        for line in [
            "velero_backup_attempt_total{schedule=\"\"} 0",
            "velero_backup_success_total{schedule=\"\"} 0",
            "velero_backup_failure_total{schedule=\"\"} 0",
            "velero_backup_last_status{schedule=\"\"} 1",
            "velero_restore_failed_total{schedule=\"\"} 0",
            "velero_restore_validation_failed_total{schedule=\"\"} 0",
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
    }

    #[test]
    fn a_finished_backup_moves_its_schedule_series() {
        let mut registry = Registry::default();
        let m = VeleroMetrics::register(&mut registry);
        m.backup_attempt("nightly");
        m.backup_finished(
            "nightly",
            &BackupFinished {
                outcome: FinalOutcome::PartiallyFailed,
                duration_seconds: 70,
                tarball_bytes: 1234,
                items: 10,
                errors: 2,
                warnings: 1,
                completed_unix: 1_700_000_000,
                backup: "nightly-1".to_owned(),
                snapshots_attempted: 3,
                snapshots_completed: 2,
            },
        );
        m.location_status("default", false);
        let out = text(&registry);
        for line in [
            "velero_backup_attempt_total{schedule=\"nightly\"} 1",
            "velero_backup_partial_failure_total{schedule=\"nightly\"} 1",
            "velero_backup_last_status{schedule=\"nightly\"} 0",
            "velero_backup_tarball_size_bytes{schedule=\"nightly\"} 1234",
            "velero_backup_items_errors{schedule=\"nightly\"} 2",
            "velero_backup_warning_total{schedule=\"nightly\"} 1",
            "velero_backup_duration_seconds_bucket{le=\"300.0\",schedule=\"nightly\"} 1",
            "velero_backup_location_status_gauge{backup_location_name=\"default\"} 0",
            "velero_csi_snapshot_attempt_total{schedule=\"nightly\",backupName=\"nightly-1\"} 3",
            "velero_csi_snapshot_success_total{schedule=\"nightly\",backupName=\"nightly-1\"} 2",
            "velero_csi_snapshot_failure_total{schedule=\"nightly\",backupName=\"nightly-1\"} 1",
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
    }
}
