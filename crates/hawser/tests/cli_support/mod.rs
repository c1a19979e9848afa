//! Shared setup of the CLI tests: a kube-sim with Velero's CRDs and a `velero` namespace, a
//! kubeconfig file pointing at it, and a runner for the built `hawser` binary.
//!
//! With `HAWSER_TEST_KUBE=real` the same tests run against a real kube-apiserver of their own
//! (see [`real`]); `Cluster::store()` then reads and writes there.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod real;
#[path = "../../../kube-sim/tests/real_kube/mod.rs"]
pub mod real_kube;

use std::path::PathBuf;

use kube_sim::{KubeSim, SimConfig, SimStore};
use serde_json::{Value, json};

pub const NS: &str = "velero";

pub struct Cluster {
    /// kube-sim; against a real API server, kube-sim in front of it as a proxy (its faults and
    /// request log apply to what the programs under test send).
    pub sim: KubeSim,
    pub kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    real: Option<real::RealApi>,
}

/// Reads and writes of the test's own, beside the programs under test: kube-sim's store, or
/// the real API server.
pub enum Store<'a> {
    Sim(SimStore),
    Real(&'a real::RealApi),
}

impl Store<'_> {
    /// Creates or replaces the object, status included.
    pub fn insert(&self, object: Value) -> Result<Value, String> {
        match self {
            Store::Sim(s) => s.insert(object).map_err(|e| e.to_string()),
            Store::Real(r) => r.insert(object),
        }
    }

    pub fn set_status(&self, object: &Value) -> Result<Value, String> {
        match self {
            Store::Sim(s) => s.set_status(object).map_err(|e| e.to_string()),
            Store::Real(r) => r.set_status(object),
        }
    }

    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        match self {
            Store::Sim(s) => s.get(api_version, kind, namespace, name),
            Store::Real(r) => r.get(api_version, kind, namespace, name),
        }
    }

    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        match self {
            Store::Sim(s) => s.list(api_version, kind, namespace),
            Store::Real(r) => r.list(api_version, kind, namespace),
        }
    }

    /// Objects of a kind in every namespace.
    pub fn count(&self, api_version: &str, kind: &str) -> usize {
        match self {
            Store::Sim(s) => s.count(api_version, kind),
            Store::Real(r) => r.list(api_version, kind, None).len(),
        }
    }

    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), String> {
        match self {
            Store::Sim(s) => s
                .delete(api_version, kind, namespace, name)
                .map_err(|e| e.to_string()),
            Store::Real(r) => r.delete(api_version, kind, namespace, name),
        }
    }

    /// kube-sim's store, for what only kube-sim can do (forget its watch history).
    pub fn sim(&self) -> &SimStore {
        match self {
            Store::Sim(s) => s,
            Store::Real(_) => panic!("this test needs kube-sim's own store"),
        }
    }
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

/// Types Ctrl-C at the terminal of `child` (from [`Cluster::spawn_on_terminal`]) and waits for
/// it to end; what the terminal showed is the run's stdout.
pub async fn ctrl_c_at_terminal(mut child: tokio::process::Child) -> Run {
    let mut terminal = child.stdin.take().expect("the terminal's input");
    tokio::io::AsyncWriteExt::write_all(&mut terminal, b"\x03")
        .await
        .expect("Ctrl-C typed");
    finished(child).await
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
        let store = cluster.store();
        for crd in hawser_api::crd::crds() {
            store
                .insert(serde_json::to_value(crd).unwrap())
                .expect("CRD installs");
        }
        if cluster.is_real() {
            cluster.until_crds_served().await;
        }
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .unwrap();
        cluster
    }

    /// A cluster with nothing installed (no CRDs, no `velero` namespace): kube-sim, or a real
    /// API server of its own with `HAWSER_TEST_KUBE=real`.
    pub async fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (sim, real) = if real_kube::wanted() {
            let api = real::RealApi::start().await;
            let sim = KubeSim::start(api.server().proxied(SimConfig::default()))
                .await
                .expect("the proxy starts");
            (sim, Some(api))
        } else {
            let sim = KubeSim::start(SimConfig::default())
                .await
                .expect("kube-sim starts");
            (sim, None)
        };
        sim.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            sim,
            kubeconfig,
            dir,
            real,
        }
    }

    /// The test's own reads and writes.
    pub fn store(&self) -> Store<'_> {
        match &self.real {
            Some(real) => Store::Real(real),
            None => Store::Sim(self.sim.store()),
        }
    }

    /// The real API server of a `HAWSER_TEST_KUBE=real` run; panics naming `test` otherwise
    /// (for the tests that only a real API server can answer, such as its RBAC).
    pub fn real(&self, test: &str) -> &real::RealApi {
        self.real.as_ref().unwrap_or_else(|| {
            panic!("{test} needs a real API server: run it in the `real` profile with HAWSER_TEST_KUBE=real")
        })
    }

    /// Whether this is a real API server (behind kube-sim as a proxy).
    pub fn is_real(&self) -> bool {
        self.real.is_some()
    }

    /// Waits until every installed CRD is served (a real server establishes them a moment after
    /// the create).
    pub async fn until_crds_served(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let store = self.store();
        for crd in hawser_api::crd::crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            loop {
                let established = store
                    .get(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinition",
                        "",
                        &name,
                    )
                    .is_some_and(|o| {
                        o["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter()
                                .any(|c| c["type"] == "Established" && c["status"] == "True")
                        })
                    });
                if established {
                    if let (Some(real), Some(version)) = (&self.real, crd.spec.versions.first()) {
                        real.until_watchable(&crd.spec.group, &version.name, &crd.spec.names)
                            .await;
                    }
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "CRD {name} not established"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }

    /// Makes the whole API unreachable for `outage`, then waits until it answers again. With
    /// kube-sim it refuses connections; against a real API server the server process itself is
    /// stopped and started again on the same address (kube-sim, its proxy, answers 502 while
    /// it is down, as a load balancer in front of a rolling API server does). The kube-sim
    /// faults `lift` are removed once the API is down. Returns when the API answers again:
    /// when it serves Backups and Restores (a restarted real server is ready a moment before it
    /// serves custom resources again; how long that took is printed).
    pub async fn api_outage(&self, outage: std::time::Duration, lift: &[u64]) {
        match &self.real {
            Some(real) => real.server().stop().await,
            None => self.sim.faults().refuse(Some(outage)),
        }
        for id in lift {
            self.sim.faults().remove(*id);
        }
        tokio::time::sleep(outage).await;
        if let Some(real) = &self.real {
            real.server().start_again().await;
            let ready = std::time::Instant::now();
            let deadline = ready + std::time::Duration::from_secs(60);
            while !["Backup", "Restore"]
                .iter()
                .all(|kind| real.serves("velero.io/v1", kind, NS))
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the restarted API server does not serve Backups and Restores"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            println!(
                "the restarted API server served Backups and Restores {:?} after it was ready",
                ready.elapsed()
            );
        }
    }

    /// A directory that lives as long as the cluster, for files passed to the binary.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// `program` pointed at this cluster, with a home of the cluster's own (where the client
    /// configuration file lives) and no `VELERO_NAMESPACE`.
    fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir())
            .env_remove("VELERO_NAMESPACE")
            .kill_on_drop(true);
        command
    }

    /// Runs `hawser ARGS` against this cluster ([`command`](Self::command)).
    pub async fn hawser(&self, args: &[&str]) -> Run {
        self.hawser_with(args, &[]).await
    }

    /// [`hawser`](Self::hawser) with environment variables `env` set.
    pub async fn hawser_with(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let output = self
            .command(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .envs(env.iter().copied())
            .output()
            .await
            .expect("hawser runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `hawser install ARGS --dry-run -o json` (with `--no-default-backup-location` unless
    /// ARGS name a provider, as install requires one or the other); (the objects, stderr).
    pub async fn install_dry_run(&self, args: &[&str]) -> (Vec<Value>, String) {
        let mut all = vec!["install"];
        if !args.contains(&"--provider") {
            all.push("--no-default-backup-location");
        }
        all.extend_from_slice(args);
        all.extend(["--dry-run", "-o", "json"]);
        let run = self.hawser(&all).await;
        assert_eq!(run.code, 0, "{all:?}: {}", run.stderr);
        let list: Value = serde_json::from_str(&run.stdout).unwrap();
        (list["items"].as_array().unwrap().clone(), run.stderr)
    }

    /// Runs `hawser ARGS` against this cluster with `input` on its stdin (for confirmation
    /// prompts; `hawser` alone gives an empty stdin).
    pub async fn hawser_with_input(&self, args: &[&str], input: &str) -> Run {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
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
        self.command(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("hawser starts")
    }

    /// Runs `hawser ARGS` on a pseudo-terminal (util-linux `script`), as a user at a terminal
    /// runs it: its stdout and stderr both go to the terminal, which is the child's stdout;
    /// what is written to the child's stdin is typed at the terminal (`\x03` is Ctrl-C, which
    /// the terminal turns into SIGINT). A missing `script` fails the test; `scripts/test` leaves
    /// these tests out (counted as skipped) when it is not installed.
    pub fn spawn_on_terminal(&self, args: &[&str]) -> tokio::process::Child {
        let found = std::process::Command::new("script")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "util-linux `script` (a pseudo-terminal) is not installed: apt-get install bsdutils"
        );
        let command = std::iter::once(env!("CARGO_BIN_EXE_hawser"))
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        self.command("script")
            .args(["--quiet", "--return", "--command", &command, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("script starts")
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
        self.store().insert(object).expect("status written");
    }

    /// Stores a BackupStorageLocation `name` in the velero namespace.
    pub fn add_location(&self, name: &str) {
        self.store()
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
        self.store()
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
        self.store().get(api_version, kind, NS, name)
    }
}
