//! `hawser install`: the CRDs, namespace, RBAC, Deployment and optionally a credentials Secret
//! and the default BackupStorageLocation (the objects are built in [`super::manifests`]).
//!
//! With `--dry-run` the objects are printed (multi-document YAML, or a `v1` List in JSON) and the
//! cluster is not contacted. Otherwise each object is applied with server-side apply (field
//! manager `hawser-install`, forced), so a second install updates what the first created; the
//! BackupStorageLocation is applied only once the CRDs are established.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use hawser_core::poll::poll_until;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};

use super::error::{CliError, ExitStatus};
use super::flags::{parse_duration, parse_key_values};
use super::global::GlobalArgs;
use super::manifests::{DEFAULT_IMAGE, InstallPlan, LocationPlan, Manifest, manifests};

/// Field manager of the server-side applies.
pub const FIELD_MANAGER: &str = "hawser-install";
/// How long install waits for the CRDs to be established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// `install`.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Image of the server Deployment; its entrypoint must be the hawser binary.
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Object-store provider of the BackupStorageLocation `default` (aws, gcp, azure,
    /// filesystem); needs --bucket.
    #[arg(long)]
    pub provider: Option<String>,
    /// Bucket of the BackupStorageLocation `default`; needs --provider.
    #[arg(long)]
    pub bucket: Option<String>,
    /// Path inside the bucket.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Provider settings of the location, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub backup_location_config: Vec<String>,
    /// File with the object store's credentials, stored in Secret `cloud-credentials` (key
    /// `cloud`) and mounted into the server.
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// `--default-backup-ttl` of the server (Go duration).
    #[arg(long)]
    pub default_backup_ttl: Option<String>,
    /// Another argument for `hawser server`, passed as given (repeatable), e.g.
    /// `--server-arg=--concurrent-backups=2`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Print the objects instead of applying them; the cluster is not contacted.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of --dry-run.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<InstallOutput>,
}

/// `install -o`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallOutput {
    /// Multi-document YAML.
    Yaml,
    /// A `v1` List.
    Json,
}

/// Builds the plan from the flags (reads the credentials file; no API calls).
pub fn plan_from_args(namespace: &str, args: &InstallArgs) -> Result<InstallPlan, CliError> {
    let location = match (&args.provider, &args.bucket) {
        (Some(provider), Some(bucket)) => {
            if bucket.contains('/') {
                return Err(CliError::usage(
                    "--bucket",
                    format!("{bucket:?} contains '/'; put the path in --prefix"),
                ));
            }
            Some(LocationPlan {
                provider: provider.clone(),
                bucket: bucket.clone(),
                prefix: args.prefix.clone(),
                config: parse_key_values("--backup-location-config", &args.backup_location_config)?,
            })
        }
        (None, None) => {
            if args.prefix.is_some() || !args.backup_location_config.is_empty() {
                return Err(CliError::usage(
                    "--provider",
                    "--prefix and --backup-location-config need --provider and --bucket",
                ));
            }
            None
        }
        (Some(_), None) => {
            return Err(CliError::usage("--bucket", "--provider needs --bucket too"));
        }
        (None, Some(_)) => {
            return Err(CliError::usage(
                "--provider",
                "--bucket needs --provider too",
            ));
        }
    };
    let credentials = args
        .secret_file
        .as_ref()
        .map(|path| {
            std::fs::read(path).map_err(|err| CliError::File {
                path: path.display().to_string(),
                source: err,
            })
        })
        .transpose()?;
    let mut server_args = Vec::new();
    if let Some(ttl) = &args.default_backup_ttl {
        let ttl = parse_duration("--default-backup-ttl", ttl)?;
        server_args.push(format!("--default-backup-ttl={ttl}"));
    }
    server_args.extend(args.server_args.iter().cloned());
    Ok(InstallPlan {
        namespace: namespace.to_owned(),
        image: args.image.clone(),
        server_args,
        credentials,
        location,
    })
}

/// Multi-document YAML or a JSON `v1` List of the objects.
pub fn render(all: &[Manifest], format: InstallOutput) -> Result<String, CliError> {
    let output = |err: Box<dyn std::error::Error + Send + Sync>| CliError::Output {
        source: anyhow::anyhow!(err),
    };
    match format {
        InstallOutput::Yaml => {
            let mut docs = Vec::with_capacity(all.len());
            for manifest in all {
                docs.push(serde_yaml::to_string(&manifest.object).map_err(|e| output(e.into()))?);
            }
            Ok(docs.join("---\n"))
        }
        InstallOutput::Json => {
            let items: Vec<&serde_json::Value> = all.iter().map(|m| &m.object).collect();
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            let mut text = serde_json::to_string_pretty(&list).map_err(|e| output(e.into()))?;
            text.push('\n');
            Ok(text)
        }
    }
}

/// Runs `install`.
pub async fn run(global: &GlobalArgs, args: InstallArgs) -> Result<ExitStatus, CliError> {
    if args.output.is_some() && !args.dry_run {
        return Err(CliError::usage(
            "--output",
            "it prints the objects and only goes with --dry-run",
        ));
    }
    let plan = plan_from_args(&global.namespace, &args)?;
    let all = manifests(&plan)?;
    if args.dry_run {
        print!(
            "{}",
            render(&all, args.output.unwrap_or(InstallOutput::Yaml))?
        );
        return Ok(ExitStatus::Success);
    }
    let client = global.client().await?;
    let (crds, rest): (Vec<&Manifest>, Vec<&Manifest>) = all
        .iter()
        .partition(|m| m.resource.kind == "CustomResourceDefinition");
    for manifest in &crds {
        apply(&client, manifest).await?;
    }
    let names: Vec<&str> = crds.iter().map(|m| m.name.as_str()).collect();
    wait_established(&client, &names).await?;
    println!("CustomResourceDefinitions established.");
    for manifest in rest {
        apply(&client, manifest).await?;
    }
    println!(
        "hawser is installed in namespace {ns:?}. Check the server with \
         `kubectl logs deployment/velero -n {ns}`.",
        ns = global.namespace
    );
    Ok(ExitStatus::Success)
}

/// Server-side applies one object and prints whether it was created, changed or unchanged.
async fn apply(client: &Client, manifest: &Manifest) -> Result<(), CliError> {
    let api: Api<DynamicObject> = match &manifest.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &manifest.resource),
        None => Api::all_with(client.clone(), &manifest.resource),
    };
    let label = manifest.label();
    let before = api
        .get_opt(&manifest.name)
        .await
        .map_err(|err| CliError::api("get", label.clone(), err))?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch(&manifest.name, &params, &Patch::Apply(&manifest.object))
        .await
        .map_err(|err| CliError::api("apply", label.clone(), err))?;
    let outcome = match before {
        None => "created",
        Some(before) if before.metadata.resource_version == after.metadata.resource_version => {
            "unchanged"
        }
        Some(_) => "configured",
    };
    println!("{label}: {outcome}");
    Ok(())
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Polls the CRDs until every one is established, for at most [`ESTABLISH_TIMEOUT`].
async fn wait_established(client: &Client, names: &[&str]) -> Result<(), CliError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    // The CRDs not established at the last look.
    let pending = std::cell::RefCell::new(names.to_vec());
    let done = poll_until(ESTABLISH_TIMEOUT, Duration::from_millis(250), || async {
        let names = pending.take();
        let mut still = Vec::new();
        for name in names {
            let object = format!("CustomResourceDefinition {name}");
            match api.get_opt(name).await {
                Err(err) => return Some(Err(CliError::api("get", object, err))),
                Ok(crd) if !crd.as_ref().is_some_and(is_established) => still.push(name),
                Ok(_) => {}
            }
        }
        let finished = still.is_empty();
        pending.replace(still);
        finished.then_some(Ok(()))
    })
    .await;
    if let Some(result) = done {
        return result;
    }
    Err(CliError::Timeout {
        what: format!(
            "CustomResourceDefinition {} to be established",
            pending.into_inner().join(", ")
        ),
        after: ESTABLISH_TIMEOUT,
    })
}
