//! Running a backup in the engine tests as the server does: its spec checked first.

use hawser_api::Backup;
use hawser_engine::backup::{self, BackupError, BackupOptions, BackupOutcome, ValidatedBackup};
use hawser_store::Location;
use kube::Client;

/// Checks `backup` (as the server does before it claims a Backup), then runs it.
pub async fn check_and_run(
    client: Client,
    location: &Location,
    backup: &Backup,
    options: BackupOptions,
) -> Result<BackupOutcome, BackupError> {
    let valid = ValidatedBackup::check(&client, backup.clone(), options.api_retry).await?;
    backup::run(client, location, &valid, options).await
}
