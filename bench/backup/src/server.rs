//! `--through-server`: the same backup through the path a user runs. `hawser server` is started
//! as its own process against the same kube-sim, a Backup is created through the API, and the
//! time is taken from that create until the Backup reads `Completed` (the server marks it so
//! after its `velero-backup.json` is stored). The server's peak RSS (`VmHWM`) is read from
//! `/proc` before it is stopped. One server per size, so each peak is that size's alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

/// What one backup through the server took.
pub struct ServerRun {
    /// From creating the Backup to reading it `Completed`.
    pub secs: f64,
    /// The server process's peak resident memory, KiB.
    pub peak_rss_kib: u64,
    /// `status.progress.itemsBackedUp`.
    pub items: u64,
}

/// The `hawser` binary beside this one (`cargo build --release -p hawser -p bench-backup`), or
/// `--hawser`.
pub fn hawser_binary(given: Option<&Path>) -> Result<PathBuf> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?
            .parent()
            .context("no directory")?
            .join("hawser"),
    };
    anyhow::ensure!(
        path.is_file(),
        "{} not found: build it with `cargo build --release -p hawser` or pass --hawser",
        path.display()
    );
    Ok(path)
}

fn velero(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "velero.io".into(),
        version: "v1".into(),
        api_version: "velero.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Velero's CRDs and the server's namespace (kube-sim establishes a CRD at once).
pub async fn install(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in hawser_api::crd::crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let velero = serde_json::from_value(json!({"metadata": {"name": "velero"}}))?;
    namespaces.create(&PostParams::default(), &velero).await?;
    Ok(())
}

async fn create(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    name: &str,
    spec: Value,
) -> Result<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "velero", &velero(kind, plural));
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "velero"}, "spec": spec
    }))?;
    api.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// Polls the object every 20 ms until `done` holds for it (at most `limit`).
async fn wait(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    name: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "velero", &velero(kind, plural));
    let deadline = Instant::now() + limit;
    loop {
        if let Some(o) = api.get_opt(name).await?
            && done(&o.data)
        {
            return Ok(o.data);
        }
        if Instant::now() > deadline {
            bail!("{kind} {name} did not get there in {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `VmHWM` of `pid`, KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no VmHWM")
}

/// A backup of the whole cluster (`n` objects seeded) through `hawser server` at `hawser`.
pub async fn backup(
    client: &kube::Client,
    url: &str,
    hawser: &Path,
    n: usize,
) -> Result<ServerRun> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kube_sim::kubeconfig_yaml(url))?;
    let root = dir.path().join("store");
    std::fs::create_dir(&root)?;
    let name = format!("through-server-{n}");
    let root_text = root.to_str().context("UTF-8 path")?;
    create(
        client,
        "BackupStorageLocation",
        "backupstoragelocations",
        &name,
        json!({"provider": "filesystem", "objectStorage": {"bucket": "bench"},
               "config": {"root": root_text}}),
    )
    .await?;
    let log = std::fs::File::create(dir.path().join("server.log"))?;
    let mut server = tokio::process::Command::new(hawser)
        .args(["server", "--leader-elect=false", "--namespace", "velero"])
        .args([
            "--metrics-address",
            "127.0.0.1:0",
            "--download-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--filesystem-root")
        .arg(&root)
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting hawser server")?;
    let pid = server.id().context("no pid")?;
    let available = |o: &Value| o["status"]["phase"] == "Available";
    let ready = wait(
        client,
        "BackupStorageLocation",
        "backupstoragelocations",
        &name,
        Duration::from_secs(60),
        available,
    )
    .await;
    let measured = match ready {
        Ok(_) => {
            let started = Instant::now();
            create(
                client,
                "Backup",
                "backups",
                &name,
                json!({"storageLocation": name}),
            )
            .await?;
            let finished = |o: &Value| {
                matches!(
                    o["status"]["phase"].as_str(),
                    Some("Completed" | "PartiallyFailed" | "Failed" | "FailedValidation")
                )
            };
            let done = wait(
                client,
                "Backup",
                "backups",
                &name,
                Duration::from_secs(3600),
                finished,
            )
            .await;
            let secs = started.elapsed().as_secs_f64();
            done.map(|o| (o, secs))
        }
        Err(e) => Err(e),
    };
    let peak = peak_rss_kib(pid);
    let _ = server.kill().await;
    let (object, secs) = measured.with_context(|| {
        std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default()
    })?;
    let phase = object["status"]["phase"].as_str().unwrap_or_default();
    anyhow::ensure!(
        phase == "Completed",
        "the backup through the server ended {phase}: {object}"
    );
    anyhow::ensure!(
        root.join("bench/backups")
            .join(&name)
            .join("velero-backup.json")
            .is_file(),
        "no velero-backup.json stored"
    );
    Ok(ServerRun {
        secs,
        peak_rss_kib: peak?,
        items: object["status"]["progress"]["itemsBackedUp"]
            .as_u64()
            .unwrap_or(0),
    })
}
