//! `hawser backup-location create|get|set|delete`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use hawser_api::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationSpec,
    ObjectStorageLocation,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::SecretKeySelector;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use super::bulk::{ConfirmArgs, SelectArgs, select};
use super::error::{CliError, ExitStatus};
use super::flags::{
    Listing, get_required, new_object_meta, parse_duration, parse_key_values, print_objects,
};
use super::global::GlobalArgs;
use super::output::{OutputFormat, Table, or_none, print_uncreated};

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
    /// Change the default flag, the credential or the CA certificate of a location.
    Set(BslSetArgs),
    /// Delete backup storage locations (only the locations: their backups stay).
    Delete(BslDeleteArgs),
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
    #[command(flatten)]
    pub listing: Listing,
}

/// `backup-location set`.
#[derive(Args, Debug)]
pub struct BslSetArgs {
    /// Name of the location.
    pub name: String,
    /// Make this the default location (`--default` alone means true); `--default=false` makes it
    /// an ordinary one.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub default: Option<bool>,
    /// Secret key with the provider's credentials, `secret-name=key`.
    #[arg(long)]
    pub credential: Option<String>,
    /// File with the certificate bundle that verifies the object store's TLS certificate (stored
    /// in spec.objectStorage.caCert).
    #[arg(long)]
    pub cacert: Option<PathBuf>,
}

/// `backup-location delete`.
#[derive(Args, Debug)]
pub struct BslDeleteArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// Runs a `backup-location` subcommand.
pub async fn run(global: &GlobalArgs, args: BslArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        BslCommand::Create(create) => create_location(global, *create).await,
        BslCommand::Get(get) => get_locations(global, get).await,
        BslCommand::Set(set) => set_location(global, set).await,
        BslCommand::Delete(delete) => delete_locations(global, delete).await,
    }
}

/// Parses `--credential secret-name=key`.
pub fn parse_credential(value: &str) -> Result<SecretKeySelector, CliError> {
    match value.split_once('=') {
        Some((name, key)) if !name.is_empty() && !key.is_empty() => Ok(SecretKeySelector {
            name: name.to_owned(),
            key: key.to_owned(),
            optional: None,
        }),
        _ => Err(CliError::usage(
            "--credential",
            format!("{value:?} is not secret-name=key"),
        )),
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
    let credential = args
        .credential
        .as_deref()
        .map(parse_credential)
        .transpose()?;
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
    location.metadata = new_object_meta(&args.name, namespace, labels);
    Ok(location)
}

async fn create_location(global: &GlobalArgs, args: BslCreateArgs) -> Result<ExitStatus, CliError> {
    let location = location_from_args(&global.namespace, &args)?;
    if let Some(format) = args.output {
        print_uncreated(&location, format, locations_table)?;
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
    print_objects(
        &locations,
        args.name.is_some(),
        &args.listing,
        locations_table,
    )?;
    Ok(ExitStatus::Success)
}

/// What `set` changes: `None` leaves a field as it is.
#[derive(Debug, Default, PartialEq)]
pub struct LocationChanges {
    /// `spec.default`.
    pub default: Option<bool>,
    /// `spec.credential`.
    pub credential: Option<SecretKeySelector>,
    /// `spec.objectStorage.caCert`, the contents of the `--cacert` file.
    pub ca_cert: Option<Vec<u8>>,
}

impl LocationChanges {
    /// The merge patch of the changes; fields left `None` are not in it.
    pub fn patch(&self) -> Result<serde_json::Value, CliError> {
        let mut spec = serde_json::Map::new();
        if let Some(default) = self.default {
            spec.insert("default".into(), default.into());
        }
        if let Some(credential) = &self.credential {
            spec.insert(
                "credential".into(),
                serde_json::json!({"name": credential.name, "key": credential.key}),
            );
        }
        if let Some(ca_cert) = &self.ca_cert {
            let encoded = serde_json::to_value(ByteString(ca_cert.clone()))
                .map_err(|err| CliError::Output { source: err.into() })?;
            spec.insert(
                "objectStorage".into(),
                serde_json::json!({ "caCert": encoded }),
            );
        }
        Ok(serde_json::json!({ "spec": spec }))
    }
}

/// Reads the flags of `set` (the `--cacert` file included); no flag at all is a usage error.
fn changes_from_args(args: &BslSetArgs) -> Result<LocationChanges, CliError> {
    if args.default.is_none() && args.credential.is_none() && args.cacert.is_none() {
        return Err(CliError::usage(
            "--default/--credential/--cacert",
            "nothing to set; give at least one of them",
        ));
    }
    let credential = args
        .credential
        .as_deref()
        .map(parse_credential)
        .transpose()?;
    let ca_cert = match &args.cacert {
        None => None,
        Some(path) => Some(std::fs::read(path).map_err(|source| CliError::File {
            path: path.display().to_string(),
            source,
        })?),
    };
    Ok(LocationChanges {
        default: args.default,
        credential,
        ca_cert,
    })
}

async fn set_location(global: &GlobalArgs, args: BslSetArgs) -> Result<ExitStatus, CliError> {
    let changes = changes_from_args(&args)?;
    let namespace = &global.namespace;
    let api: Api<BackupStorageLocation> = Api::namespaced(global.client().await?, namespace);
    let object = format!("BackupStorageLocation {namespace}/{}", args.name);
    let location = get_required(
        &api,
        object.clone(),
        &args.name,
        "list the locations with `hawser backup-location get`".to_owned(),
    )
    .await?;
    if changes.default == Some(true) {
        let others: Vec<String> = api
            .list(&ListParams::default())
            .await
            .map_err(|err| {
                CliError::api(
                    "list",
                    format!("BackupStorageLocations in namespace {namespace}"),
                    err,
                )
            })?
            .items
            .into_iter()
            .filter(|l| l.spec.default && l.name_any() != args.name)
            .map(|l| l.name_any())
            .collect();
        if let Some(first) = others.first() {
            return Err(CliError::Refused {
                action: "set --default on",
                object,
                reason: match others.as_slice() {
                    [one] => format!("BackupStorageLocation {one:?} is already the default"),
                    many => format!("BackupStorageLocations {many:?} are already the default"),
                },
                hint: format!(
                    "unset the current default first: `hawser backup-location set {first} \
                     --default=false`"
                ),
            });
        }
    }
    if changes.ca_cert.is_some() && location.spec.object_storage.ca_cert_ref.is_some() {
        return Err(CliError::Refused {
            action: "set --cacert on",
            object,
            reason: "the location has spec.objectStorage.caCertRef, and a location with both \
                     caCert and caCertRef is invalid"
                .to_owned(),
            hint: "keep the certificate in the Secret caCertRef names, or remove caCertRef first"
                .to_owned(),
        });
    }
    api.patch(
        &args.name,
        &PatchParams::default(),
        &Patch::Merge(changes.patch()?),
    )
    .await
    .map_err(|err| CliError::api("patch", object, err))?;
    println!(
        "Backup storage location {:?} configured successfully.",
        args.name
    );
    Ok(ExitStatus::Success)
}

async fn delete_locations(
    global: &GlobalArgs,
    args: BslDeleteArgs,
) -> Result<ExitStatus, CliError> {
    args.select.check("backup-location")?;
    args.confirm.require()?;
    let namespace = &global.namespace;
    let api: Api<BackupStorageLocation> = Api::namespaced(global.client().await?, namespace);
    let kind = ("BackupStorageLocation", "backup-location");
    let (found, mut tally) = select(&api, namespace, kind, &args.select)
        .await?
        .report("No backup-locations found");
    for location in &found {
        let name = location.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => println!("Backup storage location {name:?} deleted successfully."),
            Err(err) => tally.fail(&CliError::api(
                "delete",
                format!("BackupStorageLocation {namespace}/{name}"),
                err,
            )),
        }
    }
    Ok(tally.status())
}

/// The `backup-location get` table (velero-compat §9 columns).
pub fn locations_table(locations: &[BackupStorageLocation]) -> Table {
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
    Table::new(
        &[
            "NAME",
            "PROVIDER",
            "BUCKET/PREFIX",
            "PHASE",
            "LAST VALIDATED",
            "ACCESS MODE",
            "DEFAULT",
        ],
        rows,
    )
}
