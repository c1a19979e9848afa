//! `hawser dev`: the demo's environment, kept running for trying `kubectl` and `hawser` by hand.

use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;

use super::env::{EnvConfig, Environment, VELERO_NAMESPACE};

/// How to run the dev environment.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// Directory for the kubeconfig and the storage location.
    pub dir: PathBuf,
    /// Port of kube-sim's API on 127.0.0.1 (0: any free port).
    pub port: u16,
}

/// Starts the environment, prints how to use it, and runs until `stop` completes.
///
/// # Errors
/// The environment cannot start, or the server stops with an error.
pub async fn run(options: DevOptions, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
    let env = Environment::start(EnvConfig {
        dir: options.dir,
        api_port: options.port,
        admin: true,
        server_flags: [
            "--status-resync-period",
            "5s",
            "--store-validation-frequency",
            "10s",
        ]
        .map(str::to_owned)
        .to_vec(),
    })
    .await?;
    let kubeconfig = env.kubeconfig.display().to_string();
    let admin = env.sim.admin_url().unwrap_or_default();
    let text = format!(
        "hawser dev: kube-sim and a hawser server are running.\n\
         \n\
         \x20 Kubernetes API   {api}\n\
         \x20 kubeconfig       {kubeconfig}\n\
         \x20 server metrics   http://{metrics}/metrics\n\
         \x20 storage          {storage} (BackupStorageLocation default, filesystem)\n\
         \x20 faults (admin)   {admin}/faults\n\
         \n\
         Try:\n\
         \x20 export KUBECONFIG={kubeconfig}\n\
         \x20 kubectl create namespace shop && kubectl -n shop create configmap settings --from-literal=currency=EUR\n\
         \x20 hawser backup create b1 --include-namespaces shop --wait\n\
         \x20 hawser restore create --from-backup b1 --namespace-mappings shop:shop-copy --wait\n\
         \x20 kubectl get backups,restores -n {VELERO_NAMESPACE}\n\
         \x20 kubectl -n shop-copy get configmaps\n\
         \x20 curl -X POST -d '{{\"kind\":\"refuse\",\"seconds\":20}}' {admin}/faults   # an API outage\n\
         \n\
         Press Ctrl-C to stop.",
        api = env.sim.api_url(),
        metrics = env.metrics_addr,
        storage = env.storage_root.display(),
    );
    {
        let mut out = std::io::stdout().lock();
        // Nothing to report to when stdout is closed; the environment keeps running.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {
                if !env.server_running() {
                    break;
                }
            }
        }
    }
    env.stop().await
}
