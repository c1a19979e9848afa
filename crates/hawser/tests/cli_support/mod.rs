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
    _dir: tempfile::TempDir,
}

/// What one run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Cluster {
    pub async fn start() -> Self {
        let sim = KubeSim::start(SimConfig::default())
            .await
            .expect("kube-sim starts");
        let store = sim.store();
        for crd in hawser_api::crd::crds() {
            store
                .insert(serde_json::to_value(crd).unwrap())
                .expect("CRD installs");
        }
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            sim,
            kubeconfig,
            _dir: dir,
        }
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

    /// The stored object, or `None`.
    pub fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        self.sim.store().get(api_version, kind, NS, name)
    }
}
