//! Velero's verb-first forms, with its names and aliases: `get backups` is `backup get`,
//! `get plugins` is `plugin get`,
//! `create backup` is `backup create`, `describe restores` is `restore describe`, `delete
//! schedule` is `schedule delete`. Each becomes the kind-first command and runs the same code.

use clap::Subcommand;

use super::{Command, backup, bsl, plugin, restore, schedule, vsl};

/// `get KIND`.
#[derive(Subcommand, Debug)]
pub enum GetKind {
    /// Show backups.
    #[command(name = "backups", alias = "backup")]
    Backups(backup::BackupGetArgs),
    /// Show schedules.
    #[command(name = "schedules", alias = "schedule")]
    Schedules(schedule::ScheduleGetArgs),
    /// Show restores.
    #[command(name = "restores", alias = "restore")]
    Restores(restore::RestoreGetArgs),
    /// Show backup storage locations.
    #[command(name = "backup-locations", alias = "backup-location")]
    BackupLocations(bsl::BslGetArgs),
    /// Show volume snapshot locations.
    #[command(name = "snapshot-locations", alias = "snapshot-location")]
    SnapshotLocations(vsl::VslGetArgs),
    /// Show the server's plugins.
    #[command(name = "plugins", alias = "plugin")]
    Plugins(plugin::PluginGetArgs),
}

/// `create KIND`.
#[derive(Subcommand, Debug)]
pub enum CreateKind {
    /// Create a backup.
    Backup(Box<backup::BackupCreateArgs>),
    /// Create a schedule.
    Schedule(Box<schedule::ScheduleCreateArgs>),
    /// Create a restore.
    Restore(Box<restore::RestoreCreateArgs>),
    /// Create a backup storage location.
    #[command(name = "backup-location")]
    BackupLocation(Box<bsl::BslCreateArgs>),
    /// Create a volume snapshot location.
    #[command(name = "snapshot-location")]
    SnapshotLocation(vsl::VslCreateArgs),
}

/// `describe KIND`.
#[derive(Subcommand, Debug)]
pub enum DescribeKind {
    /// Describe backups in detail.
    #[command(name = "backups", alias = "backup")]
    Backups(backup::BackupDescribeArgs),
    /// Describe schedules.
    #[command(name = "schedules", alias = "schedule")]
    Schedules(schedule::ScheduleDescribeArgs),
    /// Describe restores.
    #[command(name = "restores", alias = "restore")]
    Restores(restore::RestoreDescribeArgs),
}

/// `delete KIND`.
#[derive(Subcommand, Debug)]
pub enum DeleteKind {
    /// Delete backups with their data.
    #[command(name = "backup", alias = "backups")]
    Backup(backup::BackupDeleteArgs),
    /// Delete backup storage locations.
    #[command(name = "backup-location", alias = "backup-locations")]
    BackupLocation(bsl::BslDeleteArgs),
    /// Delete restores.
    #[command(name = "restore", alias = "restores")]
    Restore(restore::RestoreDeleteArgs),
    /// Delete schedules.
    #[command(name = "schedule", alias = "schedules")]
    Schedule(schedule::ScheduleDeleteArgs),
}

fn backup(command: backup::BackupCommand) -> Command {
    Command::Backup(backup::BackupArgs { command })
}

fn restore(command: restore::RestoreCommand) -> Command {
    Command::Restore(restore::RestoreArgs { command })
}

fn schedule(command: schedule::ScheduleCommand) -> Command {
    Command::Schedule(schedule::ScheduleArgs { command })
}

fn location(command: bsl::BslCommand) -> Command {
    Command::BackupLocation(bsl::BslArgs { command })
}

fn snapshot_location(command: vsl::VslCommand) -> Command {
    Command::SnapshotLocation(vsl::VslArgs { command })
}

impl GetKind {
    /// The kind-first command.
    pub fn into_command(self) -> Command {
        match self {
            Self::Backups(a) => backup(backup::BackupCommand::Get(a)),
            Self::Schedules(a) => schedule(schedule::ScheduleCommand::Get(a)),
            Self::Restores(a) => restore(restore::RestoreCommand::Get(a)),
            Self::BackupLocations(a) => location(bsl::BslCommand::Get(a)),
            Self::SnapshotLocations(a) => snapshot_location(vsl::VslCommand::Get(a)),
            Self::Plugins(a) => Command::Plugin(plugin::PluginArgs {
                command: plugin::PluginCommand::Get(a),
            }),
        }
    }
}

impl CreateKind {
    /// The kind-first command.
    pub fn into_command(self) -> Command {
        match self {
            Self::Backup(a) => backup(backup::BackupCommand::Create(a)),
            Self::Schedule(a) => schedule(schedule::ScheduleCommand::Create(a)),
            Self::Restore(a) => restore(restore::RestoreCommand::Create(a)),
            Self::BackupLocation(a) => location(bsl::BslCommand::Create(a)),
            Self::SnapshotLocation(a) => snapshot_location(vsl::VslCommand::Create(a)),
        }
    }
}

impl DescribeKind {
    /// The kind-first command.
    pub fn into_command(self) -> Command {
        match self {
            Self::Backups(a) => backup(backup::BackupCommand::Describe(a)),
            Self::Schedules(a) => schedule(schedule::ScheduleCommand::Describe(a)),
            Self::Restores(a) => restore(restore::RestoreCommand::Describe(a)),
        }
    }
}

impl DeleteKind {
    /// The kind-first command.
    pub fn into_command(self) -> Command {
        match self {
            Self::Backup(a) => backup(backup::BackupCommand::Delete(a)),
            Self::BackupLocation(a) => location(bsl::BslCommand::Delete(a)),
            Self::Restore(a) => restore(restore::RestoreCommand::Delete(a)),
            Self::Schedule(a) => schedule(schedule::ScheduleCommand::Delete(a)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};

    fn command(args: &[&str]) -> Command {
        let cli = Cli::try_parse_from(std::iter::once("hawser").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.command {
            Command::Get { kind } => kind.into_command(),
            Command::Create { kind } => kind.into_command(),
            Command::Describe { kind } => kind.into_command(),
            Command::Delete { kind } => kind.into_command(),
            other => other,
        }
    }

    /// Both forms, Velero's names and aliases, parse to the same command.
    #[test]
    fn verb_first_forms_are_the_kind_first_commands() {
        let same = |verb_first: &[&str], kind_first: &[&str]| {
            assert_eq!(
                format!("{:?}", command(verb_first)),
                format!("{:?}", command(kind_first)),
                "{verb_first:?}"
            );
        };
        same(
            &["get", "backups", "-l", "a=b"],
            &["backup", "get", "-l", "a=b"],
        );
        same(&["get", "backup", "nightly"], &["backup", "get", "nightly"]);
        same(&["get", "schedules"], &["schedule", "get"]);
        same(
            &["get", "restores", "-o", "json"],
            &["restore", "get", "-o", "json"],
        );
        same(&["get", "backup-locations"], &["backup-location", "get"]);
        same(&["get", "snapshot-location"], &["snapshot-location", "get"]);
        same(
            &["get", "plugins", "-o", "yaml"],
            &["plugin", "get", "-o", "yaml"],
        );
        same(
            &["create", "backup", "b1", "--include-namespaces", "shop"],
            &["backup", "create", "b1", "--include-namespaces", "shop"],
        );
        same(
            &["create", "restore", "--from-backup", "b1"],
            &["restore", "create", "--from-backup", "b1"],
        );
        same(
            &["create", "schedule", "s1", "--schedule", "@daily"],
            &["schedule", "create", "s1", "--schedule", "@daily"],
        );
        same(
            &["create", "snapshot-location", "v1", "--provider", "aws"],
            &["snapshot-location", "create", "v1", "--provider", "aws"],
        );
        same(
            &["describe", "backups", "b1"],
            &["backup", "describe", "b1"],
        );
        same(
            &["describe", "restore", "r1"],
            &["restore", "describe", "r1"],
        );
        same(&["describe", "schedules"], &["schedule", "describe"]);
        same(
            &["delete", "backups", "b1", "--confirm"],
            &["backup", "delete", "b1", "--confirm"],
        );
        same(
            &["delete", "schedule", "s1", "--confirm"],
            &["schedule", "delete", "s1", "--confirm"],
        );
        same(
            &["delete", "restores", "r1", "--confirm"],
            &["restore", "delete", "r1", "--confirm"],
        );
        same(
            &["delete", "backup-location", "l1", "--confirm"],
            &["backup-location", "delete", "l1", "--confirm"],
        );
    }
}
