//! `hawser snapshot-location create|get|set`, as Velero's: the VolumeSnapshotLocation objects
//! of a Velero installation. hawser takes no native snapshots (only CSI ones), so a location is
//! kept for Velero's clients and manifests, and `create` says that it will not be used.

use clap::{Args, Subcommand};
use hawser_api::{VolumeSnapshotLocation, VolumeSnapshotLocationSpec};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::bsl::parse_credential;
use super::error::{CliError, ExitStatus};
use super::flags::{
    Listing, fetch, get_required, new_object_meta, parse_key_values, print_objects,
};
use super::global::GlobalArgs;
use super::output::{OutputFormat, Table, print_uncreated};

/// `snapshot-location` subcommands.
#[derive(Args, Debug)]
pub struct VslArgs {
    #[command(subcommand)]
    pub command: VslCommand,
}

/// What to do with volume snapshot locations.
#[derive(Subcommand, Debug)]
pub enum VslCommand {
    /// Create a volume snapshot location.
    Create(VslCreateArgs),
    /// Show snapshot locations.
    Get(VslGetArgs),
    /// Set the credential of a snapshot location.
    Set(VslSetArgs),
}

/// `snapshot-location create`.
#[derive(Args, Debug)]
pub struct VslCreateArgs {
    /// Name of the new location.
    pub name: String,
    /// Volume snapshot provider (e.g. aws, azure, gcp).
    #[arg(long)]
    pub provider: String,
    /// Provider settings, `key=value,key=value` (repeatable).
    #[arg(long, value_delimiter = ',')]
    pub config: Vec<String>,
    /// Labels of the location, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Secret key with the provider's credentials, `secret-name=key`.
    #[arg(long)]
    pub credential: Option<String>,
    /// Print the location in this format instead of creating it.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
}

/// `snapshot-location get`.
#[derive(Args, Debug)]
pub struct VslGetArgs {
    /// Names of the locations; all when omitted.
    pub names: Vec<String>,
    /// Only locations whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub listing: Listing,
}

/// `snapshot-location set`.
#[derive(Args, Debug)]
pub struct VslSetArgs {
    /// Name of the location.
    pub name: String,
    /// Secret key with the provider's credentials, `secret-name=key`.
    #[arg(long)]
    pub credential: String,
}

/// Runs a `snapshot-location` subcommand.
pub async fn run(global: &GlobalArgs, args: VslArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        VslCommand::Create(create) => create_location(global, create).await,
        VslCommand::Get(get) => get_locations(global, get).await,
        VslCommand::Set(set) => set_location(global, set).await,
    }
}

/// Builds the VolumeSnapshotLocation `create` describes (pure; no API calls).
pub fn location_from_args(
    namespace: &str,
    args: &VslCreateArgs,
) -> Result<VolumeSnapshotLocation, CliError> {
    if args.provider.is_empty() {
        return Err(CliError::usage("--provider", "it is required"));
    }
    let config = parse_key_values("--config", &args.config)?;
    let labels = parse_key_values("--labels", &args.labels)?;
    let spec = VolumeSnapshotLocationSpec {
        provider: args.provider.clone(),
        config: (!config.is_empty()).then_some(config),
        credential: args
            .credential
            .as_deref()
            .map(parse_credential)
            .transpose()?,
    };
    let mut location = VolumeSnapshotLocation::new(&args.name, spec);
    location.metadata = new_object_meta(&args.name, namespace, labels);
    Ok(location)
}

async fn create_location(global: &GlobalArgs, args: VslCreateArgs) -> Result<ExitStatus, CliError> {
    let location = location_from_args(&global.namespace, &args)?;
    if let Some(format) = args.output {
        print_uncreated(&location, format, locations_table)?;
        return Ok(ExitStatus::Success);
    }
    let api: Api<VolumeSnapshotLocation> =
        Api::namespaced(global.client().await?, &global.namespace);
    let object = format!("VolumeSnapshotLocation {}/{}", global.namespace, args.name);
    api.create(&PostParams::default(), &location)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!(
        "Snapshot volume location {:?} configured successfully.",
        args.name
    );
    eprintln!(
        "warning: hawser takes no native volume snapshots, only CSI ones: a backup that names this location gets a warning and its volumes are snapshotted through CSI"
    );
    Ok(ExitStatus::Success)
}

async fn get_locations(global: &GlobalArgs, args: VslGetArgs) -> Result<ExitStatus, CliError> {
    let api: Api<VolumeSnapshotLocation> =
        Api::namespaced(global.client().await?, &global.namespace);
    let locations = fetch(
        &api,
        &global.namespace,
        ("VolumeSnapshotLocation", "snapshot-location"),
        &args.names,
        args.selector.as_deref(),
    )
    .await?;
    print_objects(
        &locations,
        args.names.len() == 1,
        &args.listing,
        locations_table,
    )?;
    Ok(ExitStatus::Success)
}

async fn set_location(global: &GlobalArgs, args: VslSetArgs) -> Result<ExitStatus, CliError> {
    let credential = parse_credential(&args.credential)?;
    let namespace = &global.namespace;
    let api: Api<VolumeSnapshotLocation> = Api::namespaced(global.client().await?, namespace);
    let object = format!("VolumeSnapshotLocation {namespace}/{}", args.name);
    get_required(
        &api,
        object.clone(),
        &args.name,
        "list the locations with `hawser snapshot-location get`".to_owned(),
    )
    .await?;
    let patch = serde_json::json!({"spec": {"credential": {"name": credential.name, "key": credential.key}}});
    api.patch(&args.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|err| CliError::api("patch", object, err))?;
    println!(
        "Volume snapshot location {:?} configured successfully.",
        args.name
    );
    Ok(ExitStatus::Success)
}

/// The `snapshot-location get` table: Velero's columns.
pub fn locations_table(locations: &[VolumeSnapshotLocation]) -> Table {
    let rows = locations
        .iter()
        .map(|l| {
            vec![
                l.metadata.name.clone().unwrap_or_default(),
                l.spec.provider.clone(),
            ]
        })
        .collect();
    Table::new(&["NAME", "PROVIDER"], rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> VslCreateArgs {
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            create: VslCreateArgs,
        }
        let argv = ["x", "primary"].iter().chain(extra).copied();
        <Wrapper as clap::Parser>::try_parse_from(argv)
            .unwrap()
            .create
    }

    #[test]
    fn create_builds_velero_s_object() {
        let location = location_from_args(
            "velero",
            &args(&[
                "--provider",
                "aws",
                "--config",
                "region=eu-west-1,profile=backup",
                "--labels",
                "team=storage",
                "--credential",
                "cloud-credentials=snapshots",
            ]),
        )
        .unwrap();
        let json = serde_json::to_value(&location).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "velero.io/v1", "kind": "VolumeSnapshotLocation",
                "metadata": {"name": "primary", "namespace": "velero", "labels": {"team": "storage"}},
                "spec": {"provider": "aws",
                         "config": {"region": "eu-west-1", "profile": "backup"},
                         "credential": {"name": "cloud-credentials", "key": "snapshots"}}
            })
        );
    }

    #[test]
    fn bad_input_is_refused_before_any_call() {
        for extra in [
            &["--provider", "", "--config", "a=b"][..],
            &["--provider", "aws", "--config", "no-equals"][..],
            &["--provider", "aws", "--credential", "no-key"][..],
        ] {
            let err = location_from_args("velero", &args(extra)).unwrap_err();
            assert_eq!(err.exit_status(), ExitStatus::Usage, "{extra:?}: {err:?}");
        }
    }

    #[test]
    fn the_table_has_velero_s_columns() {
        let location = location_from_args("velero", &args(&["--provider", "gcp"])).unwrap();
        let table = locations_table(&[location]).to_string();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAME", "PROVIDER"]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["primary", "gcp"]
        );
    }
}
