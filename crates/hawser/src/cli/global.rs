//! Flags every command takes: namespace, cluster access and logging.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hawser_core::duration::GoDuration;
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
    /// Log level filter (`error`, `warn`, `info`, `debug`, `trace`, or tracing directives such
    /// as `warn,hawser_server=debug`); Velero's `panic`, `fatal` (as `error`) and `warning` are
    /// understood too. Default: `info` for `server` (as Velero's), `warn` for the other
    /// commands.
    #[arg(long, global = true, env = "HAWSER_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format on stderr.
    #[arg(long, global = true, env = "HAWSER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How long one request of a command to the API server may take to connect and to answer
    /// (kubectl's flag; a Go duration). Requests are not retried behind your back: an API
    /// server that refuses, is unreachable, or answers 429 or 5xx ends the command at once with
    /// its answer.
    #[arg(
        long,
        global = true,
        env = "HAWSER_REQUEST_TIMEOUT",
        default_value = "60s"
    )]
    pub request_timeout: GoDuration,
    /// Colours in `describe` (Velero's flag, a Go boolean: `true`, `false`, `1`, `0`, ...;
    /// bare means true, empty means unset). Overrides `colorized` of the client configuration
    /// file. Unset in both: colours only when the output is a terminal (Velero colours by
    /// default, pipes included).
    #[arg(
        long,
        global = true,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = optional_go_bool
    )]
    pub colorized: Option<OptionalBool>,
    /// Comma-separated feature flags (Velero's flag; combined with `features` of the client
    /// configuration file). The server reads `EnableCSI` only to say what hawser does without
    /// it; the other commands act on none.
    #[arg(long, global = true, value_name = "FEATURES")]
    pub features: Option<String>,
}

/// A Go boolean that may be left unset with an empty value (Velero's `OptionalBool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalBool(pub Option<bool>);

fn optional_go_bool(value: &str) -> Result<OptionalBool, String> {
    if value.is_empty() {
        return Ok(OptionalBool(None));
    }
    hawser_server::velero_flags::go_bool(value).map(|b| OptionalBool(Some(b)))
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
/// Velero's `--log-level` values and `--log-format text|json` mean the same here, so a Velero
/// Deployment's logging flags are honoured.
pub fn init_logging(args: &GlobalArgs, default_level: &str) -> Result<(), CliError> {
    // kube's client logs a whole response body it cannot decode at `warn`: an object a client
    // wrote (a Secret's data, an object nested to break the parser) would land in the log. The
    // error itself still reaches the caller, which logs it without the body.
    //
    // The client's own ERROR line for a failed request ("failed with error client error
    // (Connect)") repeats what the command reports; it is shown only at debug and trace.
    let level = checked_level(args.log_level.as_deref().unwrap_or(default_level))?;
    let level = level.as_str();
    let builder_errors = if matches!(level, "debug" | "trace") {
        ""
    } else {
        ",kube_client::client::builder=off"
    };
    let directive = format!("{level},kube_client::client=error{builder_errors}");
    let filter = tracing_subscriber::EnvFilter::try_new(directive)
        .map_err(|err| CliError::usage("--log-level", err.to_string()))?;
    // Colours only on a terminal: a container's log (what `kubectl logs` shows, what log
    // collectors parse) gets plain text, as Velero's.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|err| CliError::Output {
        source: anyhow::anyhow!(err),
    })
}

/// Velero's (logrus') level names that are not tracing's, as the nearest tracing level; anything
/// else is a tracing directive already. Without this, `warning` would parse as a target name and
/// turn every level on for it.
fn level_directive(level: &str) -> &str {
    match level {
        "panic" | "fatal" => "error",
        "warning" => "warn",
        other => other,
    }
}

const LEVELS: [&str; 9] = [
    "panic", "fatal", "error", "warning", "warn", "info", "debug", "trace", "off",
];

/// `--log-level` as a tracing directive, refused (exit 2) when a part is neither a level nor
/// `target=level`: a bare word would otherwise be read as a target name and silently log
/// nothing but that target.
pub fn checked_level(value: &str) -> Result<String, CliError> {
    let refused = || {
        CliError::usage(
            "--log-level",
            format!(
                "{value:?} is not a level ({}) or tracing directives such as warn,hawser_server=debug",
                LEVELS.join(", ")
            ),
        )
    };
    let mut parts = Vec::new();
    for part in value.split(',').map(str::trim) {
        let (target, level) = match part.split_once('=') {
            Some((target, level)) if !target.is_empty() => (Some(target), level),
            Some(_) => return Err(refused()),
            None => (None, part),
        };
        let level = level.to_ascii_lowercase();
        if !LEVELS.contains(&level.as_str()) {
            return Err(refused());
        }
        let level = level_directive(&level);
        parts.push(match target {
            Some(target) => format!("{target}={level}"),
            None => level.to_owned(),
        });
    }
    Ok(parts.join(","))
}

impl GlobalArgs {
    /// Whether `describe` colours its phases: `--colorized`, else the client configuration's
    /// `colorized` (read by [`super::parse`] into the flag), else whether stdout is a terminal.
    pub fn colour(&self) -> bool {
        self.colorized
            .and_then(|c| c.0)
            .unwrap_or_else(|| std::io::stdout().is_terminal())
    }

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
        let timeout = self
            .request_timeout
            .to_std()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| CliError::usage("--request-timeout", "it must be greater than 0s"))?;
        let mut config = self.kube_config().await?;
        config.connect_timeout = Some(timeout);
        hawser_engine::cluster::client::client_without_retries(config, timeout).map_err(|err| {
            CliError::Config {
                source: anyhow::Error::new(err),
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn a_word_that_is_no_level_is_refused() {
        for bad in ["bogus", "", "warn,", "=debug", "hawser=loud"] {
            assert!(checked_level(bad).is_err(), "{bad:?}");
        }
        for (good, directive) in [
            ("warning", "warn"),
            ("info", "info"),
            ("warning,hawser_server=DEBUG", "warn,hawser_server=debug"),
            ("kube=fatal", "kube=error"),
        ] {
            assert_eq!(checked_level(good).unwrap(), directive);
        }
    }

    #[test]
    fn velero_level_names_become_tracing_levels() {
        for (velero, tracing) in [
            ("panic", "error"),
            ("fatal", "error"),
            ("error", "error"),
            ("warning", "warn"),
            ("info", "info"),
            ("debug", "debug"),
            ("trace", "trace"),
            ("hawser_server=debug", "hawser_server=debug"),
        ] {
            assert_eq!(level_directive(velero), tracing);
        }
    }
}
