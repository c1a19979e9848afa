//! Flags every command takes: namespace, cluster access and logging.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::CliError;

/// Global flags (velero-compat §9).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Namespace of the hawser server and its velero.io objects.
    #[arg(
        short = 'n',
        long,
        global = true,
        env = "VELERO_NAMESPACE",
        default_value = "velero"
    )]
    pub namespace: String,
    /// Path of the kubeconfig file; without it and without KUBECONFIG the in-cluster
    /// configuration (or ~/.kube/config) is used.
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use instead of its current context.
    #[arg(long, global = true)]
    pub kubecontext: Option<String>,
    /// Log level filter (`error`, `warn`, `info`, `debug`, `trace`, or a tracing directive).
    #[arg(long, global = true, env = "HAWSER_LOG_LEVEL", default_value = "warn")]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(long, global = true, env = "HAWSER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--log-format`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the tracing subscriber for `--log-level` and `--log-format` (logs go to stderr).
pub fn init_logging(args: &GlobalArgs) -> Result<(), CliError> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_level)
        .map_err(|err| CliError::usage("--log-level", err.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|err| CliError::Output {
        source: anyhow::anyhow!(err),
    })
}

impl GlobalArgs {
    /// The Kubernetes client configuration: the named kubeconfig (and context) when given,
    /// otherwise in-cluster or the default kubeconfig.
    pub async fn kube_config(&self) -> Result<kube::Config, CliError> {
        let options = KubeConfigOptions {
            context: self.kubecontext.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path).map_err(|err| CliError::Config {
                    source: anyhow::Error::new(err)
                        .context(format!("reading kubeconfig {}", path.display())),
                })?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(anyhow::Error::new)
            }
            None if self.kubecontext.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(anyhow::Error::new),
            None => kube::Config::infer().await.map_err(anyhow::Error::new),
        };
        config.map_err(|source| CliError::Config { source })
    }

    /// A client for the cluster.
    pub async fn client(&self) -> Result<kube::Client, CliError> {
        let config = self.kube_config().await?;
        kube::Client::try_from(config).map_err(|err| CliError::Config {
            source: anyhow::Error::new(err),
        })
    }
}
