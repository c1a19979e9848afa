//! Real API servers for tests.
//!
//! `HAWSER_TEST_REAL_KUBE` names a directory made by `scripts/real-cluster.sh up DIR` (it holds
//! `kubeconfig` and `etcd-url`). Without it a test that needs a real server fails; `scripts/test`
//! leaves those tests out, counted as skipped, when it is not set.
//!
//! With `HAWSER_TEST_KUBE=real` the conformance suites run against the real thing: their
//! fixtures start an API server of the test's own on that etcd ([`ApiServer`], under a key
//! prefix of its own, so tests running at once never see each other's objects) and put kube-sim
//! in front of it in proxy mode, so the faults and the request log still work. The `hawser`
//! crate's process suites use [`ApiServer`] the same way.
#![allow(dead_code, clippy::panic, clippy::expect_used)] // a missing required server is a test failure

use std::path::{Path, PathBuf};

/// Set to `real` to run the suites against a real API server.
pub const MODE_ENV: &str = "HAWSER_TEST_KUBE";
/// Where the shared etcd runs: a directory made by `scripts/real-cluster.sh up`.
pub const REAL_KUBE_ENV: &str = "HAWSER_TEST_REAL_KUBE";

/// A running real API server.
pub struct RealKube {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

/// Whether `HAWSER_TEST_KUBE=real` asks for the real API server.
pub fn wanted() -> bool {
    std::env::var(MODE_ENV).as_deref() == Ok("real")
}

/// The `up` directory. Its absence fails the test: `scripts/test` leaves the tests that need a
/// real server out (and nextest counts them as skipped) when [`REAL_KUBE_ENV`] is not set.
pub fn configured(test: &str) -> PathBuf {
    std::env::var_os(REAL_KUBE_ENV)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{test}: {REAL_KUBE_ENV} is not set (start a server with \
                 scripts/real-cluster.sh up DIR)"
            )
        })
}

/// The real server to run `test` against.
pub fn real_kube(test: &str) -> RealKube {
    let dir = configured(test);
    let kubeconfig = dir.join("kubeconfig");
    assert!(
        kubeconfig.is_file(),
        "{test}: {REAL_KUBE_ENV}={} has no kubeconfig; is the server up?",
        dir.display()
    );
    RealKube { dir, kubeconfig }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/real-cluster.sh")
}

/// One API server of a test's own on the shared etcd, stopped when dropped. It has no
/// controller manager: namespaces are not emptied and nothing is garbage-collected.
pub struct ApiServer {
    dir: tempfile::TempDir,
}

impl ApiServer {
    /// Starts an API server on the etcd of the `up` directory `up_dir` (about 3 s).
    pub async fn start(up_dir: &Path) -> Self {
        let etcd = std::fs::read_to_string(up_dir.join("etcd-url"))
            .unwrap_or_else(|e| panic!("{}/etcd-url: {e}", up_dir.display()));
        let dir = tempfile::tempdir().expect("a temporary directory");
        // Unique per test: nextest runs each test in a process of its own.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let prefix = format!("/hawser-test-{}-{nanos}", std::process::id());
        let out = tokio::process::Command::new(script())
            .arg("apiserver")
            .arg(dir.path())
            .arg(etcd.trim())
            .arg(&prefix)
            .output()
            .await
            .expect("scripts/real-cluster.sh runs");
        assert!(
            out.status.success(),
            "the API server did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir }
    }

    /// Starts one for a test that asked for the real server with [`MODE_ENV`]; panics when
    /// none is configured.
    pub async fn for_test() -> Self {
        Self::start(&configured(MODE_ENV)).await
    }

    /// The kubeconfig of the API server itself (an admin token, TLS not verified).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// kube-sim's configuration `config` turned into a proxy in front of this server.
    pub fn proxied(&self, config: kube_sim::SimConfig) -> kube_sim::SimConfig {
        let upstream =
            kube_sim::Upstream::from_kubeconfig(self.kubeconfig()).expect("the kubeconfig reads");
        kube_sim::SimConfig {
            upstream: Some(upstream),
            ..config
        }
    }

    /// Stops the API server process (SIGTERM, as a rollout does); etcd keeps running.
    pub async fn stop(&self) {
        self.script("stop-apiserver").await;
    }

    /// Starts the stopped API server again on the same address; returns once it is ready.
    pub async fn start_again(&self) {
        self.script("start-apiserver").await;
    }

    async fn script(&self, verb: &str) {
        let out = tokio::process::Command::new(script())
            .arg(verb)
            .arg(self.dir.path())
            .output()
            .await
            .expect("scripts/real-cluster.sh runs");
        assert!(
            out.status.success(),
            "real-cluster.sh {verb} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The API server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _stopped = std::process::Command::new(script())
            .arg("down")
            .arg(self.dir.path())
            .status();
    }
}

/// A simulator started by a conformance fixture: kube-sim itself, or with
/// `HAWSER_TEST_KUBE=real` kube-sim in proxy mode in front of an [`ApiServer`] of the test's
/// own (kept running while this lives).
pub struct Sim {
    sim: kube_sim::KubeSim,
    real: Option<ApiServer>,
}

impl Sim {
    /// Starts kube-sim with `config`, as a proxy in front of a fresh real API server when
    /// [`wanted`] and `config` names no upstream of its own.
    pub async fn start(config: kube_sim::SimConfig) -> Self {
        let real = if wanted() && config.upstream.is_none() {
            Some(ApiServer::for_test().await)
        } else {
            None
        };
        let config = match &real {
            Some(real) => real.proxied(config),
            None => config,
        };
        let sim = kube_sim::KubeSim::start(config)
            .await
            .expect("simulator starts");
        Self { sim, real }
    }

    /// Stops kube-sim, then the real API server behind it.
    pub async fn shutdown(self) {
        self.sim.shutdown().await;
    }

    /// The real API server behind the proxy, if any.
    pub fn real(&self) -> Option<&ApiServer> {
        self.real.as_ref()
    }
}

impl std::ops::Deref for Sim {
    type Target = kube_sim::KubeSim;
    fn deref(&self) -> &kube_sim::KubeSim {
        &self.sim
    }
}
