//! `hawser client config get|set`: Velero's client configuration file,
//! `$HOME/.config/velero/config.json` (a JSON object of strings), read and written as Velero's
//! CLI does, so that a Velero user's settings apply to hawser too. Its `namespace` is the
//! namespace of every command unless `-n` is given, as in Velero (it wins over
//! `VELERO_NAMESPACE`); its `colorized` and `features` are read as the global flags' defaults
//! ([`apply_to`]). Velero's `cacert` is kept and shown; hawser's commands do not read it.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use hawser_server::velero_flags::go_bool;

use super::error::{CliError, ExitStatus};
use super::global::{GlobalArgs, OptionalBool};

/// `client` subcommands.
#[derive(Args, Debug)]
pub struct ClientArgs {
    #[command(subcommand)]
    pub command: ClientCommand,
}

/// Client-side commands.
#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Get and set the client configuration file's values.
    Config(ConfigArgs),
}

/// `client config` subcommands.
#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// What to do with the client configuration file.
#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print values of the file: the named keys (`<NOT SET>` when absent), or all.
    Get {
        /// Keys to print; all when omitted.
        keys: Vec<String>,
    },
    /// Set values: `KEY=VALUE` each; an empty value removes the key.
    Set {
        /// `KEY=VALUE` pairs.
        #[arg(required = true)]
        pairs: Vec<String>,
    },
}

/// The client configuration: key → value.
pub type ClientConfig = BTreeMap<String, Value>;

/// `$HOME/.config/velero/config.json`, Velero's file (`None` without `HOME`).
pub fn config_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".config/velero/config.json"))
}

fn broken(path: &std::path::Path, source: impl Into<anyhow::Error>) -> CliError {
    CliError::ClientConfig {
        path: path.display().to_string(),
        source: source.into(),
    }
}

/// Reads the file; an absent file (or no `HOME`) is an empty configuration.
pub fn load() -> Result<ClientConfig, CliError> {
    let Some(path) = config_path() else {
        return Ok(ClientConfig::new());
    };
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| broken(&path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ClientConfig::new()),
        Err(e) => Err(broken(&path, e)),
    }
}

/// Writes the file (its directory `0700`, the file `0600`, as Velero does).
fn save(config: &ClientConfig) -> Result<(), CliError> {
    let path = config_path().ok_or_else(|| CliError::ClientConfig {
        path: "$HOME/.config/velero/config.json".to_owned(),
        source: anyhow::anyhow!("HOME is not set"),
    })?;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| broken(dir, e))?;
    let mut text = serde_json::to_string(config).map_err(|e| broken(&path, e))?;
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| broken(&path, e))?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| broken(&path, e))
}

/// Applies the file to the global flags as Velero's CLI does: `namespace` unless `-n` was
/// given, `colorized` (a Go boolean; anything else is ignored, as Velero ignores it) unless
/// `--colorized` was given a value, and `features` joined with `--features`.
pub fn apply_to(config: &ClientConfig, global: &mut GlobalArgs, namespace_given: bool) {
    let text = |key: &str| {
        config
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if !namespace_given && let Some(namespace) = text("namespace") {
        global.namespace = namespace.to_owned();
    }
    if global.colorized.is_none_or(|c| c.0.is_none())
        && let Some(colorized) = text("colorized").and_then(|v| go_bool(v).ok())
    {
        global.colorized = Some(OptionalBool(Some(colorized)));
    }
    if let Some(features) = text("features") {
        global.features = Some(match global.features.take().filter(|f| !f.is_empty()) {
            Some(given) => format!("{features},{given}"),
            None => features.to_owned(),
        });
    }
}

/// A value as Velero's `get` prints it: a string as itself, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Applies `set`'s `KEY=VALUE` pairs to `config`; the pairs that are not `KEY=VALUE` (exactly
/// one `=`), which Velero skips with a warning.
pub fn apply(config: &mut ClientConfig, pairs: &[String]) -> Vec<String> {
    let mut skipped = Vec::new();
    for pair in pairs {
        let parts: Vec<&str> = pair.split('=').collect();
        match parts.as_slice() {
            [key, ""] => {
                config.remove(*key);
            }
            [key, value] => {
                config.insert((*key).to_owned(), Value::String((*value).to_owned()));
            }
            _ => skipped.push(pair.clone()),
        }
    }
    skipped
}

/// Runs a `client` subcommand.
pub fn run(args: ClientArgs) -> Result<ExitStatus, CliError> {
    let ClientCommand::Config(config_args) = args.command;
    let mut config = load()?;
    match config_args.command {
        ConfigCommand::Get { keys } if keys.is_empty() => {
            for (key, value) in &config {
                println!("{key}: {}", shown(value));
            }
        }
        ConfigCommand::Get { keys } => {
            for key in keys {
                let value = config
                    .get(&key)
                    .map_or_else(|| "<NOT SET>".to_owned(), shown);
                println!("{key}: {value}");
            }
        }
        ConfigCommand::Set { pairs } => {
            for pair in apply(&mut config, &pairs) {
                eprintln!("WARNING: invalid KEY=VALUE: {pair:?}");
            }
            save(&config)?;
        }
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn set_pairs_add_replace_and_remove_keys_and_skip_the_rest() {
        let mut config = ClientConfig::new();
        config.insert("colorized".into(), Value::String("true".into()));
        let skipped = apply(
            &mut config,
            &[
                "namespace=backups".into(),
                "colorized=".into(),
                "features=EnableCSI".into(),
                "no-equals".into(),
                "a=b=c".into(),
            ],
        );
        assert_eq!(skipped, ["no-equals", "a=b=c"]);
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            serde_json::json!({"features": "EnableCSI", "namespace": "backups"})
        );
        assert_eq!(shown(&Value::Bool(true)), "true");
    }

    #[test]
    fn the_file_gives_namespace_colours_and_features_unless_flags_do() {
        use clap::Parser as _;
        let global = |args: &[&str]| crate::cli::Cli::try_parse_from(args).unwrap().global;
        let config: ClientConfig = serde_json::from_value(serde_json::json!({
            "namespace": "backups", "colorized": "false", "features": "EnableCSI"
        }))
        .unwrap();

        let mut plain = global(&["hawser", "version"]);
        apply_to(&config, &mut plain, false);
        assert_eq!(plain.namespace, "backups");
        assert_eq!(plain.colorized, Some(OptionalBool(Some(false))));
        assert!(!plain.colour());
        assert_eq!(plain.features.as_deref(), Some("EnableCSI"));

        let mut given = global(&[
            "hawser",
            "version",
            "-n",
            "mine",
            "--colorized",
            "--features=EnableAPIGroupVersions",
        ]);
        apply_to(&config, &mut given, true);
        assert_eq!(given.namespace, "mine");
        assert!(given.colour());
        assert_eq!(
            given.features.as_deref(),
            Some("EnableCSI,EnableAPIGroupVersions")
        );

        // A value that is no Go boolean is ignored, as Velero ignores it; `--colorized=` unsets.
        let odd: ClientConfig = serde_json::from_value(
            serde_json::json!({"colorized": "sometimes", "namespace": true}),
        )
        .unwrap();
        let mut unset = global(&["hawser", "version", "--colorized="]);
        apply_to(&odd, &mut unset, false);
        assert_eq!(unset.colorized, Some(OptionalBool(None)));
        assert_eq!(unset.namespace, "velero");
        let mut unset = global(&["hawser", "version", "--colorized="]);
        apply_to(&config, &mut unset, false);
        assert_eq!(unset.colorized, Some(OptionalBool(Some(false))));
        assert!(
            crate::cli::Cli::try_parse_from(["hawser", "version", "--colorized=maybe"]).is_err()
        );
    }
}
