//! Shared setup of the CLI tests: a kube-sim with Velero's CRDs and a `velero` namespace, a
//! kubeconfig file pointing at it, and a runner for the built `hawser` binary.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use kube_sim::{KubeSim, SimConfig};
use serde_json::{Value, json};

pub const NS: &str = "velero";

pub struct Cluster {
    pub sim: KubeSim,
    pub kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

/// The outcome of a spawned run, once it exited.
pub async fn finished(child: tokio::process::Child) -> Run {
    let output = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("hawser exits in time")
        .expect("hawser output");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// What one run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Cluster {
    pub async fn start() -> Self {
        let cluster = Self::empty().await;
        let store = cluster.sim.store();
        for crd in hawser_api::crd::crds() {
            store
                .insert(serde_json::to_value(crd).unwrap())
                .expect("CRD installs");
        }
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .unwrap();
        cluster
    }

    /// A kube-sim with nothing installed (no CRDs, no `velero` namespace).
    pub async fn empty() -> Self {
        let sim = KubeSim::start(SimConfig::default())
            .await
            .expect("kube-sim starts");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            sim,
            kubeconfig,
            dir,
        }
    }

    /// A directory that lives as long as the cluster, for files passed to the binary.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Runs `hawser ARGS` against this cluster.
    pub async fn hawser(&self, args: &[&str]) -> Run {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("VELERO_NAMESPACE")
            .output()
            .await
            .expect("hawser runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `hawser ARGS` against this cluster with `input` on its stdin (for confirmation
    /// prompts; `hawser` alone gives an empty stdin).
    pub async fn hawser_with_input(&self, args: &[&str], input: &str) -> Run {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("VELERO_NAMESPACE")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("hawser starts");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A child that exits without reading closes the pipe; that is not the test's failure.
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
        finished(child).await
    }

    /// Starts `hawser ARGS` against this cluster without waiting for it (for `--wait`).
    pub fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("VELERO_NAMESPACE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("hawser starts")
    }

    /// Waits (up to 10 s) until the object exists, and returns it.
    pub async fn until_exists(&self, api_version: &str, kind: &str, name: &str) -> Value {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(found) = self.get(api_version, kind, name) {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{kind} {name} was not created"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Replaces the `status` of a stored object, as the server would.
    pub fn set_status(&self, api_version: &str, kind: &str, name: &str, status: Value) {
        let mut object = self.get(api_version, kind, name).expect("object exists");
        object["status"] = status;
        self.sim.store().insert(object).expect("status written");
    }

    /// Stores a BackupStorageLocation `name` in the velero namespace.
    pub fn add_location(&self, name: &str) {
        self.sim
            .store()
            .insert(json!({
                "apiVersion": "velero.io/v1",
                "kind": "BackupStorageLocation",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"provider": "aws", "objectStorage": {"bucket": "b"}},
            }))
            .expect("location stored");
    }

    /// Stores a Completed Backup `name` in the velero namespace.
    pub fn add_backup(&self, name: &str) {
        self.sim
            .store()
            .insert(json!({
                "apiVersion": "velero.io/v1",
                "kind": "Backup",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"includedNamespaces": ["*"]},
                "status": {"phase": "Completed"},
            }))
            .expect("backup stored");
    }

    /// The stored object, or `None`.
    pub fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        self.sim.store().get(api_version, kind, NS, name)
    }
}
