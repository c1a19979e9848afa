//! The in-process tests' server: an in-process kube-sim with Velero's CRDs, a [`Context`] built
//! from the server's own flags and settings as a term of leadership builds it (but with a
//! client without `--client-qps` throttling and a 5 s read timeout, and `filesystem` download
//! URLs that point nowhere), and the controllers a test names started from the table, each
//! alone. Real time: the API is a loopback socket.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use hawser_core::clock::Clock;
use hawser_status::StatusEngine;
use hawser_status::metrics::StatusMetrics;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{KubeSim, SimConfig};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::ServerArgs;
use crate::context::Context;
use crate::controllers::table;
use crate::locations::Locations;
use crate::metrics::VeleroMetrics;
use crate::records::StorageRecords;
use crate::serve::status_config;

pub(crate) const NS: &str = "velero";
/// The bucket of the filesystem locations [`Harness::location`] makes.
pub(crate) const BUCKET: &str = "bkt";

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    server: ServerArgs,
}

/// kube-sim, a context, and the controllers started so far (stopped when dropped).
pub(crate) struct Harness {
    pub(crate) sim: KubeSim,
    pub(crate) ctx: Arc<Context>,
    /// Where the filesystem locations are rooted (the server's `--filesystem-root`).
    pub(crate) root: PathBuf,
    _root: Option<TempDir>,
    tasks: JoinSet<()>,
}

impl Harness {
    /// A fresh kube-sim (Velero's CRDs, namespace `velero`) and a server context with the
    /// flags `args`, its filesystem locations rooted in a new directory.
    pub(crate) async fn start(args: &[&str]) -> Self {
        let dir = TempDir::new().unwrap();
        let root = dir.path().to_owned();
        let mut harness = Self::start_at(&root, args).await;
        harness._root = Some(dir);
        harness
    }

    /// As [`start`](Self::start), with the filesystem locations rooted at `root` (a directory
    /// the caller keeps).
    pub(crate) async fn start_at(root: &Path, args: &[&str]) -> Self {
        let sim = KubeSim::start(SimConfig::default())
            .await
            .expect("kube-sim starts");
        for crd in hawser_api::crd::crds() {
            sim.store()
                .insert(serde_json::to_value(crd).unwrap())
                .unwrap();
        }
        sim.store()
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .unwrap();
        let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let client =
            hawser_engine::cluster::client::client_without_retries(config, Duration::from_secs(5))
                .unwrap();
        let root_flag = root.to_str().unwrap();
        let mut all = vec!["hawser", "--filesystem-root", root_flag];
        all.extend_from_slice(args);
        let settings = Cli::try_parse_from(all).unwrap().server.settings().unwrap();
        let clock = Clock::system();
        let mut registry = prometheus_client::registry::Registry::default();
        let engine = StatusEngine::new(
            client.clone(),
            status_config(&settings, NS, &clock),
            StatusMetrics::register(&mut registry),
        );
        let locations = Locations::new(
            client.clone(),
            NS.to_owned(),
            settings.locations.policy.clone(),
        )
        .served_by(Arc::new(hawser_store::FileUrls::new("http://127.0.0.1:1/")));
        let records = StorageRecords::new(
            client.clone(),
            locations.clone(),
            settings.backup.default_location.clone(),
        );
        let ctx = Arc::new(Context {
            client,
            namespace: NS.to_owned(),
            settings,
            clock,
            engine,
            metrics: VeleroMetrics::register(&mut registry),
            locations,
            records,
            shutdown: CancellationToken::new(),
            workers: crate::queue::Workers::default(),
            backup_queue: Arc::default(),
        });
        Self {
            sim,
            ctx,
            root: root.to_owned(),
            _root: None,
            tasks: JoinSet::new(),
        }
    }

    /// Starts the controllers named (Velero's names, as in `--disable-controllers`).
    pub(crate) fn run(&mut self, controllers: &[&str]) {
        for name in controllers {
            table::start_one(name, &self.ctx, &mut self.tasks);
        }
    }

    /// Inserts `object`.
    pub(crate) fn insert(&self, object: Value) -> Value {
        self.sim.store().insert(object).unwrap()
    }

    /// The object `kind` (of `velero.io/v1` unless `api_version` says otherwise) `name` in
    /// `namespace`, if it exists.
    pub(crate) fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        self.sim.store().get(api_version, kind, namespace, name)
    }

    /// The `velero.io/v1` object `kind`/`name` of the server namespace, if it exists.
    pub(crate) fn velero(&self, kind: &str, name: &str) -> Option<Value> {
        self.get("velero.io/v1", kind, NS, name)
    }

    /// The `velero.io/v1` objects of `kind` in the server namespace.
    pub(crate) fn all(&self, kind: &str) -> Vec<Value> {
        self.sim.store().list("velero.io/v1", kind, Some(NS))
    }

    /// Inserts a filesystem BackupStorageLocation `name` (under [`Harness::root`]), the
    /// default one.
    pub(crate) fn location(&self, name: &str) {
        self.insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "provider": "filesystem",
                "default": true,
                "objectStorage": {"bucket": BUCKET},
                "config": {"root": self.root.to_str().unwrap()}
            }
        }));
    }

    /// Namespace `shop` with `count` ConfigMaps `cm-<i>`.
    pub(crate) fn seed(&self, count: usize) {
        self.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}));
        for i in 0..count {
            self.insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "shop"},
                "data": {"index": i.to_string()}
            }));
        }
    }

    /// Inserts a `velero.io/v1` object `kind`/`name` of the server namespace with `spec`.
    pub(crate) fn create(&self, kind: &str, name: &str, spec: Value) -> Value {
        self.insert(json!({
            "apiVersion": "velero.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": NS},
            "spec": spec
        }))
    }

    /// A file of backup `backup` in the location [`location`](Self::location) made.
    pub(crate) fn artifact(&self, backup: &str, file: &str) -> PathBuf {
        self.root
            .join(BUCKET)
            .join("backups")
            .join(backup)
            .join(file)
    }

    /// Waits (30 s at most) until `found` gives something, and returns it; panics naming
    /// `what` otherwise.
    pub(crate) async fn until<T>(&self, what: &str, found: impl Fn(&Self) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = found(self) {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the `velero.io/v1` object `kind`/`name` has `status.phase` `phase`;
    /// returns it.
    pub(crate) async fn until_phase(&self, kind: &str, name: &str, phase: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let object = self.velero(kind, name);
            let seen = object.as_ref().and_then(|o| o.pointer("/status/phase"));
            if seen.and_then(Value::as_str) == Some(phase) {
                return object.unwrap_or_default();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {kind} {name} in phase {phase}; it is {object:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.ctx.shutdown.cancel();
        self.tasks.abort_all();
    }
}
