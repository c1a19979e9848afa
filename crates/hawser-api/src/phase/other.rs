//! Phases of the objects without a long-running lifecycle.

use crate::string_enum::string_enum;

string_enum! {
    /// `status.phase` of a BackupStorageLocation. An empty phase means "not validated yet" and
    /// is kept as `None` in the status.
    pub enum BackupStorageLocationPhase {
        /// The last validation reached the bucket and found Velero's layout.
        Available = "Available",
        /// The last validation failed; see `status.message`.
        Unavailable = "Unavailable",
    }
}

string_enum! {
    /// `status.phase` of a Schedule.
    pub enum SchedulePhase {
        /// Not yet validated (also what `""` and a missing phase read as).
        New = "New",
        /// The cron expression is valid; backups are created when due.
        Enabled = "Enabled",
        /// The schedule is invalid; see `status.validationErrors`.
        FailedValidation = "FailedValidation",
    }
    empty = New;
}

string_enum! {
    /// `status.phase` of a DeleteBackupRequest.
    pub enum DeleteBackupRequestPhase {
        /// Not yet looked at (also what `""` and a missing phase read as).
        New = "New",
        /// The deletion is running.
        InProgress = "InProgress",
        /// Done; non-empty `status.errors` means it failed.
        Processed = "Processed",
    }
    empty = New;
}

impl DeleteBackupRequestPhase {
    /// `New` (or no phase) and `InProgress`: a deletion not processed yet.
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::New | Self::InProgress)
    }
}

string_enum! {
    /// `status.phase` of a DownloadRequest.
    pub enum DownloadRequestPhase {
        /// Not yet answered (also what `""` and a missing phase read as).
        New = "New",
        /// `status.downloadURL` is set.
        Processed = "Processed",
    }
    empty = New;
}

string_enum! {
    /// `status.phase` of a ServerStatusRequest.
    pub enum ServerStatusRequestPhase {
        /// Not yet answered (also what `""` and a missing phase read as).
        New = "New",
        /// The status fields are filled in.
        Processed = "Processed",
    }
    empty = New;
}
