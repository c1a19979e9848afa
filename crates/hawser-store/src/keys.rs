//! The object keys of Velero's bucket layout (velero-compat §5.1) that this crate needs,
//! relative to the location's prefix.

/// Directory of backups.
pub const BACKUPS_DIR: &str = "backups";
/// Directory of restores.
pub const RESTORES_DIR: &str = "restores";

/// Top-level directories a valid location may contain; anything else makes it `Unavailable`.
pub const VALID_TOP_LEVEL: [&str; 6] = ["backups", "restores", "restic", "metadata", "plugins", "kopia"];

/// `backups/<backup>`: the directory of one backup.
#[must_use]
pub fn backup_dir(backup: &str) -> String {
    format!("{BACKUPS_DIR}/{backup}")
}

/// `backups/<backup>/velero-backup.json`: the backup's metadata, whose existence means the
/// backup exists.
#[must_use]
pub fn backup_metadata(backup: &str) -> String {
    format!("{BACKUPS_DIR}/{backup}/velero-backup.json")
}

/// `restores/<restore>`: the directory of one restore.
#[must_use]
pub fn restore_dir(restore: &str) -> String {
    format!("{RESTORES_DIR}/{restore}")
}
