//! `hawser plugin get`, as Velero's: the plugins the server reports through a
//! ServerStatusRequest. hawser's are its built-in object-store providers, named as Velero names
//! its plugins. Velero's `plugin add|remove` (init containers of the server's Deployment) take
//! Velero's arguments and are refused with exit 2, changing nothing: hawser loads no plugin
//! images.

use clap::{Args, Subcommand};
use hawser_api::PluginInfo;
use hawser_core::duration::GoDuration;

use super::error::{CliError, ExitStatus};
use super::global::GlobalArgs;
use super::output::{OutputFormat, Table, encode};
use super::version::{no_answer, positive_timeout, server_status};

/// `plugin` subcommands.
#[derive(Args, Debug)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// What to do with plugins.
#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Show the plugins of the server.
    Get(PluginGetArgs),
    /// Velero's: add a plugin image to the server's Deployment. Refused: hawser loads none.
    Add(PluginChangeArgs),
    /// Velero's: remove a plugin from the server's Deployment. Refused: hawser loads none.
    Remove(PluginChangeArgs),
}

/// `plugin add IMAGE` and `plugin remove NAME|IMAGE`, with Velero's flag.
#[derive(Args, Debug)]
pub struct PluginChangeArgs {
    /// The plugin image (add), or its name or image (remove).
    pub plugin: String,
    /// Velero's pull policy of the plugin's init container.
    #[arg(long)]
    pub image_pull_policy: Option<String>,
}

/// `plugin get`.
#[derive(Args, Debug)]
pub struct PluginGetArgs {
    /// How long to wait for the server to report its plugins.
    #[arg(long, default_value = "5s")]
    pub timeout: GoDuration,
    /// Output format: the table, or the answered ServerStatusRequest.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

/// Runs a `plugin` subcommand.
pub async fn run(global: &GlobalArgs, args: PluginArgs) -> Result<ExitStatus, CliError> {
    let get = match args.command {
        PluginCommand::Get(get) => get,
        PluginCommand::Add(_) => return Err(CliError::NoPlugins { verb: "add" }),
        PluginCommand::Remove(_) => return Err(CliError::NoPlugins { verb: "remove" }),
    };
    let timeout = positive_timeout(&get.timeout)?;
    let client = global.client().await?;
    match server_status(&client, &global.namespace, timeout).await {
        Ok(request) => {
            match get.output {
                OutputFormat::Table => {
                    let plugins = request.status.and_then(|s| s.plugins).unwrap_or_default();
                    print!("{}", plugins_table(plugins));
                }
                format => print!("{}", encode(&request, format)?),
            }
            Ok(ExitStatus::Success)
        }
        Err(e) => Ok(no_answer("plugin information", &e)),
    }
}

/// Velero's table: `NAME` and `KIND`, sorted by kind, then name.
pub fn plugins_table(mut plugins: Vec<PluginInfo>) -> Table {
    plugins.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    let rows = plugins.into_iter().map(|p| vec![p.name, p.kind]).collect();
    Table::new(&["NAME", "KIND"], rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugins_are_sorted_by_kind_then_name() {
        let plugin = |name: &str, kind: &str| PluginInfo {
            name: name.to_owned(),
            kind: kind.to_owned(),
        };
        let table = plugins_table(vec![
            plugin("velero.io/gcp", "ObjectStore"),
            plugin("velero.io/csi", "BackupItemAction"),
            plugin("velero.io/aws", "ObjectStore"),
        ]);
        assert_eq!(
            table.rows,
            [
                ["velero.io/csi", "BackupItemAction"],
                ["velero.io/aws", "ObjectStore"],
                ["velero.io/gcp", "ObjectStore"],
            ]
        );
    }
}
