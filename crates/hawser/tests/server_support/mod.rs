//! Shared setup of the server tests: a `hawser server` process against a kube-sim [`Cluster`],
//! filesystem storage locations, sample objects, and waiting for phases.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cli_support::{Cluster, NS};

pub mod csi;

pub const BUCKET: &str = "bkt";

/// A running `hawser server` process; killed when dropped.
pub struct Server {
    child: tokio::process::Child,
    pub metrics_addr: String,
    pub log: PathBuf,
}

/// Flags that make the server's periodic work fast enough for tests. A server started again
/// after a kill waits for the dead one's Lease to expire: 8 s here instead of 15 s; the renew
/// deadline (6 s) stays above the longest API outage of the tests (4 s).
pub const FAST: &[&str] = &[
    "--status-resync-period",
    "1s",
    "--store-validation-frequency",
    "1s",
    "--leader-elect-lease-duration",
    "8s",
    "--leader-elect-renew-deadline",
    "6s",
    "--leader-elect-retry-period",
    "500ms",
];

impl Server {
    /// Starts `hawser server ARGS` and waits until `/readyz` answers 200.
    pub async fn start(cluster: &Cluster, log_dir: &Path, args: &[&str]) -> Self {
        Self::start_with_env(cluster, log_dir, args, &[]).await
    }

    /// [`start`](Self::start) with extra environment variables.
    pub async fn start_with_env(
        cluster: &Cluster,
        log_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let server = Self::spawn_with_env(cluster, log_dir, args, env);
        server.wait_ready(Duration::from_secs(30)).await;
        server
    }

    /// Starts `hawser server ARGS` without waiting for it (a follower is never ready). The
    /// server allows filesystem locations under `log_dir`, where the tests root them.
    pub fn spawn(cluster: &Cluster, log_dir: &Path, args: &[&str]) -> Self {
        Self::spawn_with_env(cluster, log_dir, args, &[])
    }

    /// [`spawn`](Self::spawn) with extra environment variables.
    pub fn spawn_with_env(
        cluster: &Cluster,
        log_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let metrics_addr = Self::free_address();
        let root = log_dir.to_str().expect("a UTF-8 test directory");
        let mut all = vec![
            "server",
            "--metrics-address",
            &metrics_addr,
            "--filesystem-root",
            root,
        ];
        all.extend_from_slice(args);
        Self::spawn_program(
            cluster,
            log_dir,
            Path::new(env!("CARGO_BIN_EXE_hawser")),
            &all,
            env,
            metrics_addr.clone(),
        )
    }

    /// Starts `program ARGS` (the hawser binary under any name, with the whole argument list,
    /// `--metrics-address` included) without waiting for it; stdout and stderr go to the log.
    pub fn spawn_program(
        cluster: &Cluster,
        log_dir: &Path,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        metrics_addr: String,
    ) -> Self {
        let log = log_dir.join(format!(
            "server-{}.log",
            metrics_addr.rsplit(':').next().unwrap_or_default()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let child = tokio::process::Command::new(program)
            .args(args)
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env_remove("VELERO_NAMESPACE")
            .envs(env.iter().copied())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("hawser server starts");
        Self {
            child,
            metrics_addr,
            log,
        }
    }

    /// Whether the process still runs (it has not exited; a zombie counts as exited).
    pub fn is_running(&self) -> bool {
        self.child.id().is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    stat.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.chars().next())
                })
                .is_some_and(|state| state != 'Z')
        })
    }

    /// The process id, while the process runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// A free local address for `--metrics-address`.
    pub fn free_address() -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("127.0.0.1:{port}")
    }

    /// Waits until `/readyz` answers 200 (panics with the log after `timeout`).
    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.is_ready().await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server not ready in {timeout:?}; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether `/readyz` answers 200 now.
    pub async fn is_ready(&self) -> bool {
        matches!(self.try_get("/readyz").await, Some((200, _)))
    }

    /// `GET path` on the metrics address: (status code, body).
    pub async fn try_get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = tokio::net::TcpStream::connect(&self.metrics_addr)
            .await
            .ok()?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.metrics_addr
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        let code = answer.split_whitespace().nth(1)?.parse().ok()?;
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
        Some((code, body))
    }

    pub async fn metrics(&self) -> String {
        self.try_get("/metrics").await.expect("metrics answer").1
    }

    /// Kills the process with SIGKILL and waits for it.
    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// Sends SIGTERM (what the kubelet sends to stop a Pod), without waiting.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the server runs").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid} failed");
    }

    /// Waits up to `timeout` for the process to exit; its exit code (`None`: killed by a signal).
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.unwrap().code(),
            Err(_) => panic!(
                "server did not exit within {timeout:?}; log:\n{}",
                self.log_text()
            ),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Inserts a filesystem BackupStorageLocation `name` rooted at `root`.
pub fn filesystem_location(cluster: &Cluster, name: &str, root: &Path) {
    cluster
        .store()
        .insert(filesystem_location_object(name, root))
        .unwrap();
}

/// The object [`filesystem_location`] inserts.
pub fn filesystem_location_object(name: &str, root: &Path) -> Value {
    json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "provider": "filesystem",
            "objectStorage": {"bucket": BUCKET},
            "config": {"root": root.to_str().unwrap()}
        }
    })
}

/// Namespace `shop` (`configmaps` ConfigMaps, two Secrets) and namespace `other` (one ConfigMap).
pub fn seed(cluster: &Cluster, configmaps: usize) {
    let store = cluster.store();
    for ns in ["shop", "other"] {
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    for i in 0..configmaps {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "shop"},
                "data": {"index": i.to_string()}
            }))
            .unwrap();
    }
    for name in ["db-password", "api-token"] {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "shop"},
                "type": "Opaque", "data": {"value": "c2VjcmV0"}
            }))
            .unwrap();
    }
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "elsewhere", "namespace": "other"},
            "data": {"k": "v"}
        }))
        .unwrap();
}

/// Inserts a Backup `name` with `spec`.
pub fn create_backup(cluster: &Cluster, name: &str, spec: Value) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec
        }))
        .unwrap();
}

/// A DeleteBackupRequest for `backup`, as `hawser backup delete` makes it.
pub fn request_deletion(cluster: &Cluster, request: &str, backup: &str) {
    let uid = cluster.get("velero.io/v1", "Backup", backup).unwrap()["metadata"]["uid"].clone();
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
            "metadata": {"name": request, "namespace": NS,
                "labels": {"velero.io/backup-name": backup, "velero.io/backup-uid": uid}},
            "spec": {"backupName": backup}
        }))
        .unwrap();
}

/// Waits (up to 20 s) until the velero.io object is gone.
pub async fn until_gone(cluster: &Cluster, server: &Server, kind: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.get("velero.io/v1", kind, name).is_some() {
        assert!(
            Instant::now() < deadline,
            "{kind} {name} is still there\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Inserts a Restore `name` with `spec`.
pub fn create_restore(cluster: &Cluster, name: &str, spec: Value) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec
        }))
        .unwrap();
}

/// Inserts the BackupStorageLocation `default` of `spec` under `prefix`, its credentials (if
/// any) in the Secret `cloud-credentials` under the key `cloud`, as `hawser install
/// --secret-file` makes them (the Secret names the location in `hawser.io/locations`).
/// `sync_period` is its `spec.backupSyncPeriod`.
pub fn storage_location(
    cluster: &Cluster,
    spec: &hawser_store::LocationSpec,
    prefix: &str,
    sync_period: Option<&str>,
) {
    use base64::Engine as _;
    let store = cluster.store();
    let mut bsl = json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {
            "provider": spec.provider,
            "objectStorage": {"bucket": spec.bucket, "prefix": prefix},
            "config": spec.config,
        }
    });
    if let Some(credentials) = &spec.credentials {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "cloud-credentials", "namespace": NS,
                    "annotations": {"hawser.io/locations": "default"}},
                "data": {"cloud": base64::engine::general_purpose::STANDARD.encode(credentials)}
            }))
            .unwrap();
        bsl["spec"]["credential"] = json!({"name": "cloud-credentials", "key": "cloud"});
    }
    if let Some(period) = sync_period {
        bsl["spec"]["backupSyncPeriod"] = json!(period);
    }
    store.insert(bsl).unwrap();
}

/// The phases the work ends in.
pub const FINAL: [&str; 4] = ["Completed", "PartiallyFailed", "Failed", "FailedValidation"];

pub fn is_final(o: &Value) -> bool {
    FINAL.contains(&phase(o))
}

/// Polls `found` every 5 ms until it gives a value (panics with the server log after 30 s).
pub async fn poll<T>(server: &Server, what: &str, found: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = found() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never happened:\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Backups and Restores of the refused-outage tests: reads of `resource` are slowed, so that a
/// final write is still under way when the API goes away right after the record appears.
pub fn slow_reads(cluster: &Cluster, resource: &str) {
    cluster.sim.faults().latency(
        kube_sim::LatencyFault::new(Duration::from_millis(400))
            .verbs(&["get"])
            .resources(&[resource]),
    );
}

/// Returns once the server has listed `resource` (its plural) `passes` times after this call:
/// a controller that lists on every pass has run that many passes. A check that something did
/// *not* happen waits for this instead of sleeping.
pub async fn passes(cluster: &Cluster, server: &Server, resource: &str, passes: usize) {
    let after = cluster.sim.last_request_seq();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = cluster
            .sim
            .requests_since(after)
            .iter()
            .filter(|r| r.verb == "list" && r.resource == resource && (200..300).contains(&r.code))
            .count();
        if seen >= passes {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the server listed {resource} {seen} times in 30 s\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn phase(object: &Value) -> &str {
    object
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Polls the object until `done` holds (panics with the server log after `timeout`).
pub async fn wait_for(
    cluster: &Cluster,
    server: Option<&Server>,
    kind: &str,
    name: &str,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let object = cluster.get("velero.io/v1", kind, name);
        if let Some(o) = &object
            && done(o)
        {
            return o.clone();
        }
        if Instant::now() > deadline {
            panic!(
                "{kind} {name} did not reach the expected state in {timeout:?}: {object:#?}\nserver log:\n{}",
                server.map(Server::log_text).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits (up to 30 s) until the object reaches a final phase.
pub async fn wait_final(cluster: &Cluster, server: &Server, kind: &str, name: &str) -> Value {
    wait_for(
        cluster,
        Some(server),
        kind,
        name,
        Duration::from_secs(30),
        is_final,
    )
    .await
}

/// Waits (up to 20 s) until the object is `InProgress`.
pub async fn wait_in_progress(cluster: &Cluster, server: &Server, kind: &str, name: &str) -> Value {
    wait_for(
        cluster,
        Some(server),
        kind,
        name,
        Duration::from_secs(20),
        |o| phase(o) == "InProgress",
    )
    .await
}

/// The `velero-backup.json` of `name` in a filesystem location rooted at `root`, if stored
/// (and readable whole).
pub fn backup_record(root: &Path, name: &str) -> Option<Value> {
    let bytes = std::fs::read(artifact(root, name, "velero-backup.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The record of the Restore `name` in a filesystem location rooted at `root`, if stored.
pub fn restore_record(root: &Path, name: &str) -> Option<Value> {
    let path = root
        .join(BUCKET)
        .join("restores")
        .join(name)
        .join(format!("restore-{name}-status.json"));
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Peak resident memory of a process so far (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// The text of a gzipped file.
pub fn gunzip(path: &Path) -> String {
    use std::io::Read as _;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// A backup's artifact in a filesystem location rooted at `root`.
pub fn artifact(root: &Path, backup: &str, file: &str) -> PathBuf {
    root.join(BUCKET).join("backups").join(backup).join(file)
}

/// A file of restore `restore` in the filesystem location rooted at `root`.
pub fn restore_artifact(root: &Path, restore: &str, file: &str) -> PathBuf {
    root.join(BUCKET).join("restores").join(restore).join(file)
}

/// The entry paths of a backup archive file.
pub fn archive_paths(path: &Path) -> Vec<String> {
    use hawser_core::archive::{ArchiveReader, ReaderOptions};
    let file = std::fs::File::open(path).unwrap();
    let mut reader = ArchiveReader::new(file, ReaderOptions::default());
    let mut items = reader.items().unwrap();
    let mut paths: Vec<String> = items.by_ref().map(|i| i.unwrap().path).collect();
    paths.sort();
    paths
}
