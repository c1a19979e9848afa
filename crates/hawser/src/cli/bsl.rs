//! `hawser backup-location create|get`.

use clap::{Args, Subcommand};
use hawser_api::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationSpec,
    ObjectStorageLocation,
};
use k8s_openapi::api::core::v1::SecretKeySelector;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};

use super::error::{CliError, ExitStatus};
use super::flags::{parse_duration, parse_key_values};
use super::global::GlobalArgs;
use super::output::{OutputFormat, encode, or_none, table};

/// `backup-location` subcommands.
#[derive(Args, Debug)]
pub struct BslArgs {
    #[command(subcommand)]
    pub command: BslCommand,
}

/// What to do with backup storage locations.
#[derive(Subcommand, Debug)]
pub enum BslCommand {
    /// Create a backup storage location.
    Create(Box<BslCreateArgs>),
    /// Show one or all backup storage locations.
    Get(BslGetArgs),
}

/// `backup-location create`.
#[derive(Args, Debug)]
pub struct BslCreateArgs {
    /// Name of the new location.
    pub name: String,
    /// Object-store provider: aws, gcp, azure or filesystem.
    #[arg(long)]
    pub provider: String,
    /// Bucket name.
    #[arg(long)]
    pub bucket: String,
    /// Path inside the bucket under which everything is stored.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Provider settings, `key=value,key=value` (repeatable).
    #[arg(long, value_delimiter = ',')]
    pub config: Vec<String>,
    /// Secret key with the provider's credentials, `secret-name=key`.
    #[arg(long)]
    pub credential: Option<String>,
    /// Make this the default location for backups that name none.
    #[arg(long)]
    pub default: bool,
    /// ReadWrite or ReadOnly.
    #[arg(long, value_parser = ["ReadWrite", "ReadOnly"])]
    pub access_mode: Option<String>,
    /// How often the location is validated (Go duration, e.g. 1m); 0 validates only once.
    #[arg(long)]
    pub validation_frequency: Option<String>,
    /// How often backups are synced from the bucket (Go duration); 0 disables sync.
    #[arg(long)]
    pub backup_sync_period: Option<String>,
    /// Labels of the location, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Print the location in this format instead of creating it.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
}

/// `backup-location get`.
#[derive(Args, Debug)]
pub struct BslGetArgs {
    /// Name of one location; all when omitted.
    pub name: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

/// Runs a `backup-location` subcommand.
pub async fn run(global: &GlobalArgs, args: BslArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        BslCommand::Create(create) => create_location(global, *create).await,
        BslCommand::Get(get) => get_locations(global, get).await,
    }
}

/// Builds the BackupStorageLocation `create` describes (pure; no API calls).
pub fn location_from_args(
    namespace: &str,
    args: &BslCreateArgs,
) -> Result<BackupStorageLocation, CliError> {
    if args.bucket.contains('/') && !args.bucket.starts_with("arn:aws:s3:") {
        return Err(CliError::usage(
            "--bucket",
            format!("{:?} contains '/'; put the path in --prefix", args.bucket),
        ));
    }
    let config = parse_key_values("--config", &args.config)?;
    let labels = parse_key_values("--labels", &args.labels)?;
    let credential = match &args.credential {
        None => None,
        Some(value) => match value.split_once('=') {
            Some((name, key)) if !name.is_empty() && !key.is_empty() => Some(SecretKeySelector {
                name: name.to_owned(),
                key: key.to_owned(),
                optional: None,
            }),
            _ => {
                return Err(CliError::usage(
                    "--credential",
                    format!("{value:?} is not secret-name=key"),
                ));
            }
        },
    };
    let validation_frequency = args
        .validation_frequency
        .as_deref()
        .map(|v| parse_duration("--validation-frequency", v))
        .transpose()?;
    let backup_sync_period = args
        .backup_sync_period
        .as_deref()
        .map(|v| parse_duration("--backup-sync-period", v))
        .transpose()?;
    let spec = BackupStorageLocationSpec {
        provider: args.provider.clone(),
        config: (!config.is_empty()).then_some(config),
        credential,
        object_storage: ObjectStorageLocation {
            bucket: args.bucket.clone(),
            prefix: args.prefix.clone().filter(|p| !p.is_empty()),
            ..ObjectStorageLocation::default()
        },
        default: args.default,
        access_mode: args
            .access_mode
            .as_deref()
            .map(BackupStorageLocationAccessMode::parse),
        backup_sync_period,
        validation_frequency,
    };
    let mut location = BackupStorageLocation::new(&args.name, spec);
    location.metadata = ObjectMeta {
        name: Some(args.name.clone()),
        namespace: Some(namespace.to_owned()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    };
    Ok(location)
}

async fn create_location(global: &GlobalArgs, args: BslCreateArgs) -> Result<ExitStatus, CliError> {
    let location = location_from_args(&global.namespace, &args)?;
    if let Some(format) = args.output {
        print!("{}", encode(&location, format)?);
        return Ok(ExitStatus::Success);
    }
    let client = global.client().await?;
    let api: Api<BackupStorageLocation> = Api::namespaced(client, &global.namespace);
    let object = format!("BackupStorageLocation {}/{}", global.namespace, args.name);
    api.create(&PostParams::default(), &location)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!(
        "Backup storage location {:?} submitted successfully.",
        args.name
    );
    Ok(ExitStatus::Success)
}

async fn get_locations(global: &GlobalArgs, args: BslGetArgs) -> Result<ExitStatus, CliError> {
    let client = global.client().await?;
    let api: Api<BackupStorageLocation> = Api::namespaced(client, &global.namespace);
    let locations = match &args.name {
        Some(name) => {
            let object = format!("BackupStorageLocation {}/{name}", global.namespace);
            match api
                .get_opt(name)
                .await
                .map_err(|err| CliError::api("get", object.clone(), err))?
            {
                Some(location) => vec![location],
                None => {
                    return Err(CliError::NotFound {
                        object,
                        hint: "list the locations with `hawser backup-location get`".to_owned(),
                    });
                }
            }
        }
        None => {
            let object = format!("BackupStorageLocations in namespace {}", global.namespace);
            api.list(&ListParams::default())
                .await
                .map_err(|err| CliError::api("list", object, err))?
                .items
        }
    };
    match args.output {
        OutputFormat::Table => print!("{}", locations_table(&locations)),
        format if args.name.is_some() => print!("{}", encode(&locations[0], format)?),
        format => print!(
            "{}",
            encode(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": locations}),
                format
            )?
        ),
    }
    Ok(ExitStatus::Success)
}

/// The `backup-location get` table (velero-compat §9 columns).
pub fn locations_table(locations: &[BackupStorageLocation]) -> String {
    let rows: Vec<Vec<String>> = locations
        .iter()
        .map(|l| {
            let storage = &l.spec.object_storage;
            let bucket = match storage.prefix.as_deref().filter(|p| !p.is_empty()) {
                Some(prefix) => format!("{}/{}", storage.bucket, prefix),
                None => storage.bucket.clone(),
            };
            let status = l.status.as_ref();
            vec![
                l.metadata.name.clone().unwrap_or_default(),
                l.spec.provider.clone(),
                bucket,
                or_none(
                    status
                        .and_then(|s| s.phase.as_ref())
                        .map(|p| p.as_str().to_owned()),
                )
                .replace("<none>", "Unknown"),
                or_none(
                    status
                        .and_then(|s| s.last_validation_time.as_ref())
                        .map(|t| t.0.to_string()),
                ),
                l.spec
                    .access_mode
                    .as_ref()
                    .map_or("ReadWrite", |m| m.as_str())
                    .to_owned(),
                l.spec.default.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "PROVIDER",
            "BUCKET/PREFIX",
            "PHASE",
            "LAST VALIDATED",
            "ACCESS MODE",
            "DEFAULT",
        ],
        &rows,
    )
}
