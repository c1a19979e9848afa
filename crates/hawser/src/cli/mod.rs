//! The `hawser` command line: Velero's verbs and flags.
//!
//! `main.rs` calls [`main`]; it parses the arguments (clap exits with code 2 on a usage error),
//! sets up logging, builds a Kubernetes client and runs one command. Exit codes are listed on
//! [`error::ExitStatus`].

pub mod backup;
pub mod bsl;
pub mod bulk;
pub mod client_config;
pub mod debug;
pub mod demo_command;
pub mod describe;
pub mod download;
pub mod error;
pub mod files;
pub mod flags;
pub mod global;
pub mod install;
pub mod install_flags;
pub mod kopia;
pub mod label_selector;
pub mod manifests;
pub mod output;
pub mod plugin;
pub mod rbac;
pub mod repo;
pub mod restore;
pub mod schedule;
mod server;
pub mod template;
pub mod uninstall;
pub mod verb_first;
pub mod version;
pub mod vsl;
pub mod wait;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use error::{CliError, ExitStatus};
pub use global::GlobalArgs;

/// `hawser`: a Kubernetes backup and restore server speaking Velero's `velero.io/v1` API.
#[derive(Parser, Debug)]
#[command(name = "hawser", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of `hawser`.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Work with backup storage locations.
    #[command(name = "backup-location", alias = "bsl")]
    BackupLocation(bsl::BslArgs),
    /// Work with backups.
    Backup(backup::BackupArgs),
    /// Work with restores.
    Restore(restore::RestoreArgs),
    /// Work with schedules.
    Schedule(schedule::ScheduleArgs),
    /// Client-side settings: `client config get|set` (Velero's configuration file).
    Client(client_config::ClientArgs),
    /// Work with volume snapshot locations (kept for Velero's clients: hawser takes CSI
    /// snapshots only).
    #[command(name = "snapshot-location")]
    SnapshotLocation(vsl::VslArgs),
    /// Work with repositories of volume data (`repo get`; hawser makes none yet).
    Repo(repo::RepoArgs),
    /// Work with a kopia repository of volume data directly (create, snapshot, restore, verify).
    Kopia(kopia::KopiaArgs),
    /// Show the server's plugins (`plugin get`: its built-in storage providers).
    Plugin(plugin::PluginArgs),
    /// Get resources: `get backups` is `backup get` (Velero's verb-first forms).
    Get {
        #[command(subcommand)]
        kind: verb_first::GetKind,
    },
    /// Create resources: `create backup` is `backup create`.
    Create {
        #[command(subcommand)]
        kind: verb_first::CreateKind,
    },
    /// Describe resources: `describe backups` is `backup describe`.
    Describe {
        #[command(subcommand)]
        kind: verb_first::DescribeKind,
    },
    /// Delete resources: `delete backup` is `backup delete`.
    Delete {
        #[command(subcommand)]
        kind: verb_first::DeleteKind,
    },
    /// Install the CRDs and the hawser server into the cluster (or print them).
    Install(Box<install::InstallArgs>),
    /// Run the server: the backup and storage-location controllers, recovery, and /metrics.
    /// Velero's `server` flags are accepted; a repeated flag keeps its last value, as Velero.
    #[command(args_override_self = true)]
    Server(Box<hawser_server::ServerArgs>),
    /// Back up and restore a sample application on an embedded cluster, through an API outage.
    Demo(demo_command::DemoArgs),
    /// Run an embedded cluster and a hawser server for trying kubectl and hawser by hand.
    Dev(demo_command::DevArgs),
    /// Print the client's version and the server's.
    Version(version::VersionArgs),
    /// Write a support bundle (a .tar.gz): the namespace's velero.io objects, its pods' logs,
    /// the versions, and optionally a backup's and a restore's description and log.
    Debug(debug::DebugArgs),
    /// Remove what `install` put into the cluster (the backups in the bucket stay).
    Uninstall(uninstall::UninstallArgs),
    /// Print the shell completion script for bash, zsh, fish or powershell, as Velero's
    /// `completion` (e.g. `source <(hawser completion bash)`).
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Parses the process arguments, runs the command and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = parse();
    // The demo logs to a file of its own, so that the log does not interleave with its story.
    // The server logs at info by default, as Velero's; the other commands at warn.
    let logging = match cli.command {
        Command::Demo(_) => Ok(()),
        Command::Server(_) | Command::Dev(_) => global::init_logging(&cli.global, "info"),
        _ => global::init_logging(&cli.global, "warn"),
    };
    if let Err(err) = logging {
        eprintln!("{}", err.for_people());
        return err.exit_status().into();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: could not start the async runtime: {err}");
            return ExitStatus::Failure.into();
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(status) => status.into(),
        Err(err) => {
            eprintln!("{}", err.for_people());
            err.exit_status().into()
        }
    }
}

/// The command line with Velero's client configuration file applied: its namespace when `-n`
/// is not given (it wins over `VELERO_NAMESPACE`, as in Velero), its `colorized` when the flag
/// is not given, its `features` added to the flag's. A file that cannot be read is a warning, as
/// in Velero.
fn parse() -> Cli {
    let matches = Cli::command().get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    if matches!(cli.command, Command::Client(_)) {
        return cli;
    }
    match client_config::load() {
        Ok(config) => {
            let namespace_given =
                matches.value_source("namespace") == Some(clap::parser::ValueSource::CommandLine);
            let given_features = cli.global.features.clone();
            client_config::apply_to(&config, &mut cli.global, namespace_given);
            if matches!(cli.command, Command::Install(_)) {
                // `velero install --features` is install's own flag: only what is given on
                // the command line goes to the server.
                cli.global.features = given_features;
            }
        }
        Err(err) => eprintln!("WARNING: Error reading config file: {}", err.line()),
    }
    cli
}

/// Output piped into a reader that stops early (`hawser install --dry-run | head -1`) ends the
/// command quietly, with the exit code a program stopped by SIGPIPE has (141), as Velero's CLI
/// ends: Rust ignores SIGPIPE, so `print!` to a closed pipe panics, and that one panic is
/// turned into a quiet exit here. Every other panic is reported as before.
fn quiet_on_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

/// Runs one parsed command.
pub async fn run(cli: Cli) -> Result<ExitStatus, CliError> {
    let kind_first = |command| {
        Box::pin(run(Cli {
            global: cli.global.clone(),
            command,
        }))
    };
    match cli.command {
        Command::Get { kind } => kind_first(kind.into_command()).await,
        Command::Create { kind } => kind_first(kind.into_command()).await,
        Command::Describe { kind } => kind_first(kind.into_command()).await,
        Command::Delete { kind } => kind_first(kind.into_command()).await,
        Command::BackupLocation(args) => bsl::run(&cli.global, args).await,
        Command::Backup(args) => backup::run(&cli.global, args).await,
        Command::Restore(args) => restore::run(&cli.global, args).await,
        Command::Schedule(args) => schedule::run(&cli.global, args).await,
        Command::SnapshotLocation(args) => vsl::run(&cli.global, args).await,
        Command::Repo(args) => repo::run(&cli.global, args).await,
        Command::Kopia(args) => kopia::run(&cli.global, args).await,
        Command::Plugin(args) => plugin::run(&cli.global, args).await,
        Command::Client(args) => client_config::run(args),
        Command::Install(args) => install::run(&cli.global, *args).await,
        Command::Server(args) => server::run(&cli.global, *args).await,
        Command::Demo(args) => demo_command::run_demo(&cli.global, args).await,
        Command::Dev(args) => demo_command::run_dev(args).await,
        Command::Version(args) => version::run(&cli.global, args).await,
        Command::Debug(args) => debug::run(&cli.global, args).await,
        Command::Uninstall(args) => uninstall::run(&cli.global, args).await,
        Command::Completion { shell } => {
            use clap::CommandFactory as _;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "hawser", &mut script);
            // Printed as every command prints, so that a closed pipe ends it quietly.
            print!("{}", String::from_utf8_lossy(&script));
            Ok(ExitStatus::Success)
        }
    }
}
