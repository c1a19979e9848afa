//! `hawser demo` and `hawser dev`: flags, logging and exit codes around [`crate::demo`].

use std::path::PathBuf;
use std::sync::Mutex;

use clap::Args;
use hawser_core::duration::GoDuration;

use super::error::{CliError, ExitStatus};
use super::global::{self, GlobalArgs, LogFormat};
use crate::demo::DemoOptions;
use crate::demo::dev::DevOptions;

/// `hawser demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Limit of the whole run.
    #[arg(long, default_value = "2m")]
    pub timeout: GoDuration,
    /// Directory for the kubeconfig, the storage location and the server log; without it a
    /// fresh directory under the system temporary directory, removed when every check passed.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `hawser dev`.
#[derive(Args, Debug)]
pub struct DevArgs {
    /// Directory for the kubeconfig and the storage location; without it a fresh directory
    /// under the system temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Port of the Kubernetes API on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

fn fresh_dir(prefix: &str) -> PathBuf {
    let id = uuid::Uuid::new_v4().simple().to_string();
    std::env::temp_dir().join(format!("{prefix}-{}", &id[..8]))
}

/// Runs the demo; the server's logs go to `server.log` in the demo's directory, so that they do
/// not interleave with the story on stdout.
///
/// # Errors
/// `--timeout` is not positive, or the log file cannot be created.
pub(crate) async fn run_demo(global: &GlobalArgs, args: DemoArgs) -> Result<ExitStatus, CliError> {
    let timeout = args
        .timeout
        .to_std()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| CliError::usage("--timeout", "must be greater than 0s"))?;
    let temporary = args.dir.is_none();
    let dir = args.dir.unwrap_or_else(|| fresh_dir("hawser-demo"));
    std::fs::create_dir_all(&dir).map_err(|source| CliError::File {
        path: dir.display().to_string(),
        source,
    })?;
    let log = dir.join("server.log");
    let file = std::fs::File::create(&log).map_err(|source| CliError::File {
        path: log.display().to_string(),
        source,
    })?;
    let level = global::checked_level(global.log_level.as_deref().unwrap_or("warn"))?;
    let filter = tracing_subscriber::EnvFilter::try_new(&level)
        .map_err(|err| CliError::usage("--log-level", err.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file));
    match global.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    }
    .map_err(|err| CliError::Output {
        source: anyhow::anyhow!(err),
    })?;
    let passed = crate::demo::run(DemoOptions {
        dir: dir.clone(),
        log: Some(log),
        timeout,
    })
    .await;
    if passed && temporary {
        // Only the demo's own fresh directory is removed; a leftover is harmless.
        let _ = std::fs::remove_dir_all(&dir);
    } else if !passed {
        println!(
            "The kubeconfig, storage and server log are kept in {}.",
            dir.display()
        );
    }
    Ok(if passed {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// Runs the dev environment until SIGINT or SIGTERM.
///
/// # Errors
/// The environment cannot start or the server stops with an error.
pub(crate) async fn run_dev(args: DevArgs) -> Result<ExitStatus, CliError> {
    let dir = args.dir.unwrap_or_else(|| fresh_dir("hawser-dev"));
    crate::demo::dev::run(
        DevOptions {
            dir,
            port: args.port,
        },
        super::server::wait_for_signal(),
    )
    .await
    .map_err(|source| CliError::Server { source })?;
    Ok(ExitStatus::Success)
}
