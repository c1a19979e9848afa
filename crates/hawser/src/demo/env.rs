//! The embedded environment of `hawser demo` and `hawser dev`: kube-sim in-process with Velero's
//! CRDs, the `velero` namespace and a filesystem BackupStorageLocation `default`, and a hawser
//! server running against it in the same process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser as _;
use kube_sim::{KubeSim, SimConfig};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use hawser_server::ServerArgs;

/// Namespace of the server and its velero.io objects.
pub const VELERO_NAMESPACE: &str = "velero";
/// Name of the BackupStorageLocation the environment creates.
pub const LOCATION: &str = "default";
/// Bucket of that location (a directory under the storage root).
pub const BUCKET: &str = "hawser";

/// How to start an [`Environment`].
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// Directory holding the kubeconfig, the storage root and (for the demo) the server log.
    pub dir: PathBuf,
    /// Port of kube-sim's API listener on 127.0.0.1 (0: any free port).
    pub api_port: u16,
    /// Start kube-sim's admin (fault injection) listener on a free loopback port.
    pub admin: bool,
    /// Flags passed to the server, as on the `hawser server` command line.
    pub server_flags: Vec<String>,
}

/// A running kube-sim and hawser server.
#[derive(Debug)]
pub struct Environment {
    /// The simulator (in-process handle: store, faults).
    pub sim: KubeSim,
    /// The kubeconfig written for kube-sim.
    pub kubeconfig: PathBuf,
    /// Root of the filesystem storage location.
    pub storage_root: PathBuf,
    /// Address of the server's `/metrics`, `/livez` and `/readyz`.
    pub metrics_addr: SocketAddr,
    /// kube-sim's CSI side: snapshot CRDs, a snapshot controller and a provisioner for the
    /// StorageClass `sim-csi`.
    pub csi: kube_sim::csi::CsiSim,
    shutdown: CancellationToken,
    server: JoinHandle<anyhow::Result<()>>,
}

/// Parses server flags the way `hawser server` does.
#[derive(clap::Parser, Debug)]
#[command(name = "hawser-server")]
struct ServerFlags {
    #[command(flatten)]
    server: ServerArgs,
}

impl Environment {
    /// Starts kube-sim, installs Velero's CRDs, the namespace and the location, writes the
    /// kubeconfig and starts the server.
    ///
    /// # Errors
    /// A listener cannot be bound, a file cannot be written, or the server flags are invalid.
    pub async fn start(config: EnvConfig) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&config.dir)
            .with_context(|| format!("creating {}", config.dir.display()))?;
        let dir = std::fs::canonicalize(&config.dir)
            .with_context(|| format!("resolving {}", config.dir.display()))?;
        let sim = KubeSim::start(SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], config.api_port)),
            admin_listen: config.admin.then(|| SocketAddr::from(([127, 0, 0, 1], 0))),
            ..SimConfig::default()
        })
        .await
        .context("starting kube-sim")?;
        let storage_root =
            std::path::absolute(dir.join("storage")).context("resolving the storage directory")?;
        std::fs::create_dir_all(&storage_root)
            .and_then(|()| {
                let mut bucket = std::fs::DirBuilder::new();
                // Readable by this user only, as the filesystem provider creates it.
                std::os::unix::fs::DirBuilderExt::mode(&mut bucket, 0o700);
                bucket.recursive(true).create(storage_root.join(BUCKET))
            })
            .with_context(|| format!("creating {}", storage_root.display()))?;
        install_velero(&sim, &storage_root)?;
        let kubeconfig = dir.join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)
            .context("writing the kubeconfig")?;

        let metrics_addr = free_loopback_addr().context("finding a port for /metrics")?;
        let mut argv = vec![
            "hawser-server".to_owned(),
            "--metrics-address".to_owned(),
            metrics_addr.to_string(),
            // The one directory the server's filesystem location may use.
            "--filesystem-root".to_owned(),
            storage_root.display().to_string(),
        ];
        argv.extend(config.server_flags.iter().cloned());
        let args = ServerFlags::try_parse_from(argv)
            .context("parsing the server flags")?
            .server;
        let kube_config = kube_config(&sim).await?;
        let csi_client = kube::Client::try_from(kube_config.clone())
            .context("building a client for kube-sim")?;
        let csi = kube_sim::csi::CsiSim::start(csi_client, kube_sim::csi::CsiConfig::default())
            .await
            .context("starting kube-sim's CSI side")?;
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(hawser_server::serve(
            kube_config,
            VELERO_NAMESPACE.to_owned(),
            args,
            shutdown.clone(),
        ));
        let env = Self {
            sim,
            kubeconfig,
            storage_root,
            metrics_addr,
            csi,
            shutdown,
            server,
        };
        env.wait_ready().await?;
        Ok(env)
    }

    /// Waits until the server answers `/readyz` with 200 (up to 20 s), or fails if it stopped.
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let ready = hawser_core::poll::poll_until(
            std::time::Duration::from_secs(20),
            std::time::Duration::from_millis(25),
            || async {
                if self.server.is_finished() {
                    Some(Err(anyhow::anyhow!(
                        "the hawser server stopped during start-up"
                    )))
                } else {
                    (readyz(self.metrics_addr).await == Some(200)).then_some(Ok(()))
                }
            },
        )
        .await;
        ready.unwrap_or_else(|| {
            Err(anyhow::anyhow!(
                "the hawser server was not ready after 20 s"
            ))
        })
    }

    /// Where the location keeps a backup's files.
    pub fn backup_dir(&self, backup: &str) -> PathBuf {
        self.storage_root.join(BUCKET).join("backups").join(backup)
    }

    /// Whether the server task is still running.
    pub fn server_running(&self) -> bool {
        !self.server.is_finished()
    }

    /// Stops the server, then kube-sim.
    ///
    /// # Errors
    /// The server stopped with an error.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let outcome = match self.server.await {
            Ok(result) => result,
            Err(join) => Err(anyhow::anyhow!("the hawser server task failed: {join}")),
        };
        self.sim.shutdown().await;
        outcome
    }
}

/// Velero's CRDs, the `velero` namespace and the filesystem location `default`.
fn install_velero(sim: &KubeSim, storage_root: &Path) -> anyhow::Result<()> {
    let store = sim.store();
    for crd in hawser_api::crd::crds() {
        let value = serde_json::to_value(&crd).context("encoding a Velero CRD")?;
        store.insert(value).context("installing a Velero CRD")?;
    }
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": VELERO_NAMESPACE}
        }))
        .context("creating the velero namespace")?;
    let root = storage_root
        .to_str()
        .context("the storage directory is not valid UTF-8")?;
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": LOCATION, "namespace": VELERO_NAMESPACE},
            "spec": {
                "provider": "filesystem",
                "default": true,
                "objectStorage": {"bucket": BUCKET},
                "config": {"root": root}
            }
        }))
        .context("creating the backup storage location")?;
    Ok(())
}

async fn kube_config(sim: &KubeSim) -> anyhow::Result<kube::Config> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())
        .context("reading kube-sim's kubeconfig")?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .context("building the client configuration for kube-sim")
}

/// A loopback address with a port that was free a moment ago (the server binds it next).
fn free_loopback_addr() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()
}

/// The status code of `GET /readyz`, if the server answers.
pub async fn readyz(addr: SocketAddr) -> Option<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}
