//! `hawser repo get`, as Velero's: the BackupRepository objects (the kopia or restic
//! repositories of volume data in a storage location). hawser does not move volume data yet
//! and makes none; the ones Velero made are listed.

use clap::{Args, Subcommand};
use hawser_api::BackupRepository;
use kube::Api;

use super::error::{CliError, ExitStatus};
use super::flags::{Listing, fetch, print_objects};
use super::global::GlobalArgs;
use super::output::{Table, when};

/// `repo` subcommands.
#[derive(Args, Debug)]
pub struct RepoArgs {
    #[command(subcommand)]
    pub command: RepoCommand,
}

/// What to do with repositories.
#[derive(Subcommand, Debug)]
pub enum RepoCommand {
    /// Show repositories.
    Get(RepoGetArgs),
}

/// `repo get`.
#[derive(Args, Debug)]
pub struct RepoGetArgs {
    /// Names of the repositories; all when omitted.
    pub names: Vec<String>,
    /// Only repositories whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub listing: Listing,
}

/// Runs a `repo` subcommand.
pub async fn run(global: &GlobalArgs, args: RepoArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        RepoCommand::Get(get) => get_repositories(global, get).await,
    }
}

async fn get_repositories(global: &GlobalArgs, args: RepoGetArgs) -> Result<ExitStatus, CliError> {
    let api: Api<BackupRepository> = Api::namespaced(global.client().await?, &global.namespace);
    let repositories = fetch(
        &api,
        &global.namespace,
        ("BackupRepository", "repo"),
        &args.names,
        args.selector.as_deref(),
    )
    .await?;
    print_objects(
        &repositories,
        args.names.len() == 1,
        &args.listing,
        repositories_table,
    )?;
    Ok(ExitStatus::Success)
}

/// The `repo get` table: Velero's columns; an unset phase reads `New` and a repository never
/// maintained `<never>`, as in Velero.
pub fn repositories_table(repositories: &[BackupRepository]) -> Table {
    let rows = repositories
        .iter()
        .map(|r| {
            let status = r.status.as_ref();
            let last = status.and_then(|s| s.last_maintenance_time.as_ref());
            vec![
                r.metadata.name.clone().unwrap_or_default(),
                status
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default()
                    .to_string(),
                last.map_or_else(|| "<never>".to_owned(), |t| when(Some(t))),
            ]
        })
        .collect();
    Table::new(&["NAME", "STATUS", "LAST MAINTENANCE"], rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn the_table_reads_new_and_never_for_what_is_unset() {
        let fresh: BackupRepository = serde_json::from_value(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "BackupRepository",
            "metadata": {"name": "shop-default-kopia-x1"},
            "spec": {"volumeNamespace": "shop", "backupStorageLocation": "default",
                     "resticIdentifier": "", "maintenanceFrequency": "1h0m0s"}
        }))
        .unwrap();
        let mut kept = fresh.clone();
        kept.metadata.name = Some("db-default-kopia-x2".to_owned());
        kept.status = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "Ready", "lastMaintenanceTime": "2026-12-01T10:00:00Z"
            }))
            .unwrap(),
        );
        assert_eq!(
            repositories_table(&[fresh, kept]).rows,
            [
                ["shop-default-kopia-x1", "New", "<never>"],
                [
                    "db-default-kopia-x2",
                    "Ready",
                    &when(Some(&Time("2026-12-01T10:00:00Z".parse().unwrap())))
                ],
            ]
        );
    }
}
