//! `hawser debug`: Velero's support bundle, a `.tar.gz` of what someone helping with a problem
//! asks for first, gathered in one command: every `velero.io` object of the namespace (as YAML),
//! the logs of every container of the server's pods, the client's and server's versions, and
//! optionally one backup's and one restore's `describe --details` and log.
//!
//! Velero gathers the same with an embedded crashd script; the bundle's entries here are laid
//! out under `velero-bundle/` with names of their own (`resources/<group_version>/<plural>/…`,
//! `logs/<pod>/<container>.log`, `version.txt`, and Velero's `backup_describe_<name>.txt`,
//! `backup_<name>.log`, `restore_describe_<name>.txt`, `restore_<name>.log`). What cannot be
//! read is written in its place as the error, and the rest is gathered.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;
use hawser_api::{Backup, Restore};
use hawser_core::layout::DownloadTargetKind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams, LogParams};
use kube::discovery::{ApiResource, Scope};
use kube::{Api, ResourceExt as _};

use super::download::{DownloadFlags, download};
use super::error::{CliError, ExitStatus};
use super::files::{DescribeFlags, backup_extras, restore_extras};
use super::flags::get_required;
use super::global::GlobalArgs;

/// `debug`: Velero's flags.
#[derive(Args, Debug)]
pub struct DebugArgs {
    /// The bundle to write; `./bundle-<YYYY>-<MM>-<DD>-<HH>-<MM>-<SS>.tar.gz` by default.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// A backup whose description and log go into the bundle.
    #[arg(long)]
    pub backup: Option<String>,
    /// A restore whose description and log go into the bundle.
    #[arg(long)]
    pub restore: Option<String>,
    /// Say each part as it is gathered.
    #[arg(long)]
    pub verbose: bool,
}

/// How long the server may take to answer for a version, a description's files or a log.
const ANSWER: std::time::Duration = std::time::Duration::from_secs(30);

/// The bundle being written: a gzipped tar, each entry (under `velero-bundle/`) added as soon
/// as it is gathered, so that only one is held at a time.
struct Bundle {
    tar: tar::Builder<flate2::write::GzEncoder<std::fs::File>>,
    /// The first write that failed; nothing more is written after it.
    failed: Option<std::io::Error>,
    now: u64,
    verbose: bool,
}

impl Bundle {
    fn new(file: std::fs::File, verbose: bool) -> Self {
        let gzip = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        Self {
            tar: tar::Builder::new(gzip),
            failed: None,
            now: jiff::Timestamp::now().as_second().max(0).unsigned_abs(),
            verbose,
        }
    }

    fn add(&mut self, path: String, content: impl AsRef<[u8]>) {
        if self.failed.is_some() {
            return;
        }
        let content = content.as_ref();
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(self.now);
        let added = self
            .tar
            .append_data(&mut header, format!("velero-bundle/{path}"), content);
        match added {
            Ok(()) if self.verbose => eprintln!("Collected {path}"),
            Ok(()) => {}
            Err(e) => self.failed = Some(e),
        }
    }

    /// Ends the archive and the file.
    fn finish(self) -> std::io::Result<()> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.tar.into_inner()?.finish()?.sync_all()
    }
}

/// Runs `hawser debug`.
pub async fn run(global: &GlobalArgs, args: DebugArgs) -> Result<ExitStatus, CliError> {
    let namespace = &global.namespace;
    let client = global.client().await?;
    let output = args.output.clone().unwrap_or_else(|| {
        let now = jiff::Zoned::now().strftime("%Y-%m-%d-%H-%M-%S").to_string();
        PathBuf::from(format!("bundle-{now}.tar.gz"))
    });
    // Velero's checks, before anything is gathered: the server is installed here, and the
    // backup and restore named exist.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let installed = deployments
        .list(&ListParams::default().labels("component=velero"))
        .await
        .map_err(|e| CliError::api("list", format!("Deployments in namespace {namespace}"), e))?;
    if installed.items.is_empty() {
        return Err(CliError::NotFound {
            object: format!(
                "the server's Deployment (label component=velero) in namespace {namespace}"
            ),
            hint: "run `hawser install`, or name the server's namespace with -n".to_owned(),
        });
    }
    let backup = match &args.backup {
        Some(name) => Some(
            get_required(
                &Api::<Backup>::namespaced(client.clone(), namespace),
                format!("Backup {namespace}/{name}"),
                name,
                "name an existing backup (`hawser backup get`)".to_owned(),
            )
            .await?,
        ),
        None => None,
    };
    let restore = match &args.restore {
        Some(name) => Some(
            get_required(
                &Api::<Restore>::namespaced(client.clone(), namespace),
                format!("Restore {namespace}/{name}"),
                name,
                "name an existing restore (`hawser restore get`)".to_owned(),
            )
            .await?,
        ),
        None => None,
    };
    let file = std::fs::File::create(&output).map_err(|source| CliError::File {
        path: output.display().to_string(),
        source,
    })?;

    let mut bundle = Bundle::new(file, args.verbose);
    eprintln!("Collecting velero resources in namespace: {namespace}");
    resources(&client, namespace, &mut bundle).await;
    bundle.add("version.txt".to_owned(), version(&client, namespace).await);
    eprintln!("Collecting velero deployment logs in namespace: {namespace}");
    pod_logs(&client, namespace, &mut bundle).await;
    let flags = DescribeFlags {
        details: true,
        download: DownloadFlags::default(),
    };
    if let Some(backup) = &backup {
        let name = backup.name_any();
        eprintln!("Collecting log and information for backup: {name}");
        let extras = backup_extras(&client, namespace, backup, &flags).await;
        let text = super::describe::backup(backup, &extras, false);
        bundle.add(format!("backup_describe_{name}.txt"), text);
        let log = log(&client, namespace, DownloadTargetKind::BackupLog, &name).await;
        bundle.add(format!("backup_{name}.log"), log);
    }
    if let Some(restore) = &restore {
        let name = restore.name_any();
        eprintln!("Collecting log and information for restore: {name}");
        let extras = restore_extras(&client, namespace, restore, &flags).await;
        let text = super::describe::restore(restore, &extras, false);
        bundle.add(format!("restore_describe_{name}.txt"), text);
        let log = log(&client, namespace, DownloadTargetKind::RestoreLog, &name).await;
        bundle.add(format!("restore_{name}.log"), log);
    }
    let shown = output.display().to_string();
    bundle.finish().map_err(|source| CliError::File {
        path: shown.clone(),
        source,
    })?;
    let path = std::fs::canonicalize(&output).unwrap_or(output);
    println!("Generated debug information bundle: {}", path.display());
    Ok(ExitStatus::Success)
}

/// Every object of every `velero.io` resource the API server serves, in the namespace (or, for
/// a cluster-scoped one, all of them), one YAML file each.
async fn resources(client: &kube::Client, namespace: &str, bundle: &mut Bundle) {
    let group = match kube::discovery::group(client, "velero.io").await {
        Ok(group) => group,
        Err(e) => {
            bundle.add(
                "resources/error.txt".to_owned(),
                format!("discovery of velero.io: {e}\n"),
            );
            return;
        }
    };
    for version in group.versions() {
        for (resource, capabilities) in group.versioned_resources(version) {
            if resource.plural.contains('/') {
                continue;
            }
            let dir = format!(
                "resources/velero.io_{}/{}",
                resource.version, resource.plural
            );
            let api: Api<DynamicObject> = match capabilities.scope {
                Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &resource),
                Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for object in list.items {
                        let name = object.name_any();
                        let text = yaml(&object, &resource);
                        bundle.add(format!("{dir}/{name}.yaml"), text);
                    }
                }
                Err(e) => bundle.add(format!("{dir}/error.txt"), format!("list: {e}\n")),
            }
        }
    }
}

/// An object as YAML with its `apiVersion` and `kind` (a list's items may lack them).
fn yaml(object: &DynamicObject, resource: &ApiResource) -> String {
    let mut object = object.clone();
    object.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    serde_yaml::to_string(&object).unwrap_or_else(|e| format!("# not written as YAML: {e}\n"))
}

/// `version`'s text: the client's, and the server's or why it did not answer.
async fn version(client: &kube::Client, namespace: &str) -> String {
    let mut text = super::version::client_text();
    match super::version::server_status(client, namespace, ANSWER).await {
        Ok(request) => {
            let version = request
                .status
                .and_then(|s| s.server_version)
                .unwrap_or_default();
            text.push_str(&super::version::server_text(&version));
        }
        Err(e) => text.push_str(&format!("<error getting server version: {}>\n", e.line())),
    }
    text
}

/// The logs of every container of every pod of the namespace (the server's and any other
/// there), as Velero's bundle has them.
async fn pod_logs(client: &kube::Client, namespace: &str, bundle: &mut Bundle) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            bundle.add("logs/error.txt".to_owned(), format!("list pods: {e}\n"));
            return;
        }
    };
    for pod in list {
        let name = pod.name_any();
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| c.name.clone());
        for container in containers.collect::<Vec<_>>() {
            let params = LogParams {
                container: Some(container.clone()),
                ..LogParams::default()
            };
            let text = match pods.logs(&name, &params).await {
                Ok(text) => text,
                Err(e) => format!("<error getting the log: {e}>\n"),
            };
            bundle.add(format!("logs/{name}/{container}.log"), text);
        }
    }
}

/// A backup's or restore's log from its storage location, or why it could not be read.
async fn log(
    client: &kube::Client,
    namespace: &str,
    kind: DownloadTargetKind,
    name: &str,
) -> Vec<u8> {
    let mut log = Vec::new();
    let read = download(
        client,
        namespace,
        kind,
        name,
        ANSWER,
        &DownloadFlags::default(),
        &mut log,
    )
    .await;
    match read {
        Ok(_) => log,
        Err(e) => {
            let _ = writeln!(log, "<error getting the log: {}>", e.line());
            log
        }
    }
}
