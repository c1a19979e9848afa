//! `hawser install`: the CRDs, namespace, RBAC, Deployment and optionally a credentials Secret
//! and the default BackupStorageLocation (the objects are built in [`super::manifests`]).
//!
//! With `--dry-run` the objects are printed (multi-document YAML, or a `v1` List in JSON) and the
//! cluster is not contacted. Otherwise each object is applied with server-side apply (field
//! manager `hawser-install`, forced), so a second install updates what the first created; the
//! BackupStorageLocation is applied only once the CRDs are established. With `--wait` install
//! then waits until the Deployment has a ready Pod.
//!
//! The flags are `velero install`'s, written as pflag writes them (`--wait`, `--wait=true`).
//! Those hawser has no use for ([`super::install_flags`]) are accepted and each one given is
//! reported as a warning.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, ValueEnum};
use hawser_core::poll::poll_until;
use hawser_server::velero_flags::{Accepted, go_bool};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};

use super::error::{CliError, ExitStatus};
use super::flags::{parse_duration, parse_key_values};
use super::global::GlobalArgs;
use super::install_flags::InstallFlags;
use super::manifests::{
    DEFAULT_IMAGE, InstallPlan, LocationPlan, Manifest, NAME, PodPlan, PodResources, RbacMode,
    manifests,
};

/// Field manager of the server-side applies.
pub const FIELD_MANAGER: &str = "hawser-install";
/// How long install waits for the CRDs to be established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `--wait` waits for the Deployment to be ready (Velero's wait).
pub const READY_TIMEOUT: Duration = Duration::from_secs(180);

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
    /// Create no Secret, even with --secret-file (credentials come from elsewhere, e.g. a
    /// workload identity).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub no_secret: bool,
    /// Create no BackupStorageLocation, even with --provider and --bucket.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub no_default_backup_location: bool,
    /// File with a PEM CA bundle for the object store, set as the location's
    /// `objectStorage.caCert`.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// Install only the CustomResourceDefinitions (to update them for an existing install).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub crds_only: bool,
    /// After applying, wait (at most 3 minutes) until the Deployment has a ready Pod, i.e. a
    /// server that leads and has listed every kind it watches.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub wait: bool,
    /// Accepted for Velero's install: hawser always updates existing objects (server-side
    /// apply).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub apply: bool,
    /// Annotations added to the server Pod, `key=value,...` (they override Velero's
    /// `prometheus.io/*` ones).
    #[arg(long, value_delimiter = ',')]
    pub pod_annotations: Vec<String>,
    /// Labels added to the server Pod, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub pod_labels: Vec<String>,
    /// Annotations of the ServiceAccount `velero`, `key=value,...` (e.g. for a workload
    /// identity).
    #[arg(long, value_delimiter = ',')]
    pub sa_annotations: Vec<String>,
    /// What the server's account is granted: `cluster-admin` (Velero's binding) or `minimal`
    /// (read everything but Secrets across the cluster, write what restores create, the
    /// server namespace's velero.io objects, ConfigMaps, Events, Leases and Secrets).
    #[arg(long, value_enum, default_value = "cluster-admin")]
    pub rbac: RbacMode,
    /// An existing ServiceAccount for the server; the ServiceAccount `velero` and its
    /// ClusterRoleBinding are then not created (bind the account yourself; with `--rbac
    /// minimal` its roles are bound to this account).
    #[arg(long)]
    pub service_account_name: Option<String>,
    /// CPU request of the server (`0`: none).
    #[arg(long, default_value = "500m")]
    pub velero_pod_cpu_request: String,
    /// Memory request of the server (`0`: none).
    #[arg(long, default_value = "128Mi")]
    pub velero_pod_mem_request: String,
    /// CPU limit of the server (`0`: none).
    #[arg(long, default_value = "1000m")]
    pub velero_pod_cpu_limit: String,
    /// Memory limit of the server (`0`: none).
    #[arg(long, default_value = "512Mi")]
    pub velero_pod_mem_limit: String,
    /// PriorityClass of the server Pod.
    #[arg(long)]
    pub server_priority_class_name: Option<String>,
    /// `--default-backup-ttl` of the server (Go duration).
    #[arg(long)]
    pub default_backup_ttl: Option<String>,
    /// `--garbage-collection-frequency` of the server (Go duration).
    #[arg(long)]
    pub garbage_collection_frequency: Option<String>,
    /// `--concurrent-backups` of the server.
    #[arg(long)]
    pub concurrent_backups: Option<u32>,
    /// Pass `--schedule-skip-immediately=true` to the server.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub schedule_skip_immediately: bool,
    /// Pass `--restore-only` to the server (deprecated in Velero: no backups, deletions or
    /// schedules run; a ReadOnly storage location is the lasting way).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub restore_only: bool,
    /// Pass `--default-volumes-to-fs-backup` to the server (file-system backup is not built:
    /// backups then say that their pod volumes have no data).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub default_volumes_to_fs_backup: bool,
    /// Pass `--default-snapshot-move-data` to the server (snapshot data movement is not
    /// built: backups then say so).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub default_snapshot_move_data: bool,
    /// Another argument for `hawser server`, passed as given (repeatable), e.g.
    /// `--server-arg=--client-qps=100`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Print the objects instead of applying them; the cluster is not contacted.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool, action = ArgAction::Set, default_value = "false")]
    pub dry_run: bool,
    /// Output format of --dry-run.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<InstallOutput>,
    /// The other flags of `velero install`: accepted, without effect.
    #[command(flatten)]
    pub velero: Accepted<InstallFlags>,
}

/// `install -o`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallOutput {
    /// Multi-document YAML.
    Yaml,
    /// A `v1` List.
    Json,
}

fn read_file(path: &std::path::Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|err| CliError::File {
        path: path.display().to_string(),
        source: err,
    })
}

/// Builds the plan from the flags (reads the credentials and CA files; no API calls).
/// `features` is the global `--features`, passed on to the server as Velero's install passes it.
pub fn plan_from_args(
    namespace: &str,
    args: &InstallArgs,
    features: Option<&str>,
) -> Result<InstallPlan, CliError> {
    let location = match (&args.provider, &args.bucket) {
        (Some(_), Some(_)) if args.no_default_backup_location => None,
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
                ca_cert: args.cacert.as_deref().map(read_file).transpose()?,
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
    let credentials = match &args.secret_file {
        Some(path) if !args.no_secret => Some(read_file(path)?),
        _ => None,
    };
    let mut server_args = Vec::new();
    for (flag, value) in [
        ("--default-backup-ttl", &args.default_backup_ttl),
        (
            "--garbage-collection-frequency",
            &args.garbage_collection_frequency,
        ),
    ] {
        if let Some(value) = value {
            let value = parse_duration(flag, value)?;
            server_args.push(format!("{flag}={value}"));
        }
    }
    if let Some(count) = args.concurrent_backups {
        server_args.push(format!("--concurrent-backups={count}"));
    }
    if args.schedule_skip_immediately {
        server_args.push("--schedule-skip-immediately=true".to_owned());
    }
    for (given, flag) in [
        (args.restore_only, "--restore-only"),
        (
            args.default_volumes_to_fs_backup,
            "--default-volumes-to-fs-backup",
        ),
        (
            args.default_snapshot_move_data,
            "--default-snapshot-move-data",
        ),
    ] {
        if given {
            server_args.push(flag.to_owned());
        }
    }
    // Credentials are given: locations that name none do not borrow the server's own identity.
    if credentials.is_some() {
        server_args.push("--allow-ambient-credentials=false".to_owned());
    }
    if let Some(features) = features.filter(|f| !f.is_empty()) {
        server_args.push(format!("--features={features}"));
    }
    server_args.extend(args.server_args.iter().cloned());
    // As Velero: a server without a storage location is asked for, not fallen into (checked
    // after every other flag, so that a bad value is named first).
    if location.is_none() && !args.no_default_backup_location && !args.crds_only {
        return Err(CliError::usage(
            "--provider",
            "a storage location is required: pass --provider and --bucket, or --no-default-backup-location to install without one",
        ));
    }
    let service_account = args
        .service_account_name
        .clone()
        .filter(|name| !name.is_empty());
    Ok(InstallPlan {
        namespace: namespace.to_owned(),
        image: args.image.clone(),
        server_args,
        credentials,
        location,
        crds_only: args.crds_only,
        rbac: args.rbac,
        pod: PodPlan {
            service_account,
            service_account_annotations: parse_key_values(
                "--sa-annotations",
                &args.sa_annotations,
            )?,
            annotations: parse_key_values("--pod-annotations", &args.pod_annotations)?,
            labels: parse_key_values("--pod-labels", &args.pod_labels)?,
            resources: PodResources {
                cpu_request: args.velero_pod_cpu_request.clone(),
                memory_request: args.velero_pod_mem_request.clone(),
                cpu_limit: args.velero_pod_cpu_limit.clone(),
                memory_limit: args.velero_pod_mem_limit.clone(),
            },
            priority_class_name: args
                .server_priority_class_name
                .clone()
                .filter(|name| !name.is_empty()),
        },
    })
}

/// One line per `velero install` flag given that hawser does not act on.
pub fn ignored_flag_warnings(args: &InstallArgs) -> Vec<String> {
    args.velero
        .given()
        .iter()
        .map(|flag| {
            format!(
                "warning: --{}={} is accepted for compatibility with `velero install` and has \
                 no effect in hawser",
                flag.name, flag.value
            )
        })
        .collect()
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
    let plan = plan_from_args(&global.namespace, &args, global.features.as_deref())?;
    for warning in ignored_flag_warnings(&args) {
        eprintln!("{warning}");
    }
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
    if plan.crds_only {
        return Ok(ExitStatus::Success);
    }
    if args.wait {
        println!("Waiting for the hawser Deployment to be ready.");
        wait_ready(&client, &global.namespace).await?;
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

/// True once the Deployment's controller has seen its latest spec and a Pod of it is ready.
fn is_ready(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or_default();
    deployment.status.as_ref().is_some_and(|status| {
        status.observed_generation.unwrap_or_default() >= generation
            && status.ready_replicas.unwrap_or_default() > 0
    })
}

/// Polls the Deployment every second until it is ready, for at most [`READY_TIMEOUT`].
async fn wait_ready(client: &Client, namespace: &str) -> Result<(), CliError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let object = format!("Deployment {namespace}/{NAME}");
    let done = poll_until(READY_TIMEOUT, Duration::from_secs(1), || async {
        match api.get_opt(NAME).await {
            Err(err) => Some(Err(CliError::api("get", object.clone(), err))),
            Ok(Some(deployment)) if is_ready(&deployment) => Some(Ok(())),
            Ok(_) => None,
        }
    })
    .await;
    done.unwrap_or_else(|| {
        Err(CliError::Timeout {
            what: format!(
                "{object} to be ready (check `kubectl logs deployment/{NAME} -n {namespace}`)"
            ),
            after: READY_TIMEOUT,
        })
    })
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
