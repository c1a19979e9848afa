//! The `lease-outage` scenario: `hawser server` itself, in-process with leader election on,
//! through a whole-API outage (its Lease included) longer than its renew deadline.
//!
//! M Backups (one namespace each) run through the server's backup controller into a
//! `filesystem` location; once every one is `InProgress`, status writes of Backups answer 503
//! until every record
//! (`velero-backup.json`) is stored, so each final status is pending when the API then refuses
//! connections for T. The server cannot renew its Lease: it steps down in-process, keeps
//! re-driving the statuses its records decide, and competes for the Lease again. Measured: CRs
//! left non-final once the run settles, landing times after the API came back, when the server
//! led again, and whether the server's task was still running at the end (it must be: losing
//! the Lease to an outage never ends the process). Velero runs one server without leader
//! election (velero-compat), so there is no Velero side to this scenario.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use hawser_server::ServerArgs;
use kube_sim::{KubeSim, LatencyFault, SimConfig, SimStore, StatusFault};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{NS, after_outage, quantile, watch_landings};

/// What the scenario is run with.
pub(crate) struct LeaseOutage {
    pub(crate) crs: usize,
    pub(crate) outage: Duration,
    pub(crate) resource_timeout: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) settle: Duration,
}

#[derive(clap::Parser)]
struct Flags {
    #[command(flatten)]
    server: ServerArgs,
}

const BUCKET: &str = "bkt";
const LEASE: &str = "hawser-server";

/// Runs the scenario and prints its figures and its `key=value` line.
pub(crate) async fn run(s: &LeaseOutage) -> anyhow::Result<()> {
    println!(
        "status-chaos [lease-outage]: {} Backups with stored records and pending final statuses; the whole API (the Lease included) down {:.1}s; hawser server in-process, leader election on, renew deadline {:.1}s, lease duration {:.1}s, cap {:.1}s",
        s.crs,
        s.outage.as_secs_f64(),
        s.renew_deadline.as_secs_f64(),
        lease_duration(s.renew_deadline).as_secs_f64(),
        s.max_backoff.as_secs_f64()
    );
    let sim = KubeSim::start(SimConfig {
        admin_listen: None,
        ..SimConfig::default()
    })
    .await?;
    let storage = tempfile::tempdir()?;
    install(&sim, storage.path(), s.crs)?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let root = storage.path().display().to_string();
    let go = |d: Duration| format!("{}ms", d.as_millis());
    let argv = [
        "hawser-server".to_owned(),
        "--metrics-address=127.0.0.1:0".to_owned(),
        "--download-address=127.0.0.1:0".to_owned(),
        format!("--filesystem-root={root}"),
        format!("--resource-timeout={}", go(s.resource_timeout)),
        format!("--status-patch-max-backoff={}", go(s.max_backoff)),
        format!("--concurrent-backups={}", s.crs.max(1)),
        format!("--leader-elect-renew-deadline={}", go(s.renew_deadline)),
        format!(
            "--leader-elect-lease-duration={}",
            go(lease_duration(s.renew_deadline))
        ),
        format!("--leader-elect-retry-period={}", go(s.renew_deadline / 5)),
    ];
    let args = Flags::try_parse_from(argv)
        .context("parsing the server flags")?
        .server;
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(hawser_server::serve(
        config,
        NS.to_owned(),
        args,
        shutdown.clone(),
    ));
    until(Duration::from_secs(30), || lease_version(&sim.store()))
        .await
        .context("the server never led")?;

    // Each backup's LIST of ConfigMaps takes a second, so that all are `InProgress` at once.
    let slow = sim.faults().latency(
        LatencyFault::new(Duration::from_secs(1))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    for i in 0..s.crs {
        sim.store().insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": format!("b{i:04}"), "namespace": NS},
            "spec": {"includedNamespaces": [format!("app-{i}")]},
        }))?;
    }
    let store = sim.store();
    let in_phase = |wanted: &str| {
        store
            .list("velero.io/v1", "Backup", Some(NS))
            .iter()
            .filter(|b| b.pointer("/status/phase").and_then(Value::as_str) == Some(wanted))
            .count()
    };
    until(Duration::from_secs(60), || {
        (in_phase("InProgress") == s.crs).then_some(())
    })
    .await
    .context("the Backups never all started")?;
    let held = sim.faults().status(
        StatusFault::new(503)
            .verbs(&["patch", "update"])
            .resources(&["backups"]),
    );
    sim.faults().remove(slow);
    let records = |_: ()| {
        (0..s.crs).all(|i| {
            storage
                .path()
                .join(format!("{BUCKET}/backups/b{i:04}/velero-backup.json"))
                .is_file()
        })
    };
    until(Duration::from_secs(60), || records(()).then_some(()))
        .await
        .context("the records were never all stored")?;
    let pending = s.crs - in_phase("Completed");
    sim.faults().remove(held);

    let t0 = Instant::now();
    sim.faults().refuse(Some(s.outage));
    let before = lease_version(&sim.store());
    // The first write of the Lease after the outage began: the server leads again.
    let renewed = tokio::spawn({
        let store = sim.store();
        let limit = s.outage + s.settle;
        async move {
            until(limit, || {
                (lease_version(&store) != before).then(|| t0.elapsed())
            })
            .await
        }
    });
    let landed = watch_landings(&sim, s.crs, t0, t0 + s.outage + s.settle).await;
    let led_again = renewed.await?;
    let running = !server.is_finished();
    let outage = s.outage.as_secs_f64();
    let after = after_outage(&landed, outage);
    let non_final = landed.iter().filter(|l| l.is_none()).count();
    let p = |q| {
        let x = quantile(&after, q);
        if x.is_nan() {
            "none".to_owned()
        } else {
            format!("{x:.2}")
        }
    };
    println!(
        "hawser  pending at the outage {pending:>4}/{n}  non-final {non_final:>4}/{n}  after recovery p50 {:>5}s p99 {:>5}s  led again {}  server still running: {}",
        p(0.5),
        p(0.99),
        led_again.map_or_else(
            || "no".to_owned(),
            |t| format!("{:.2}s after the outage began", t.as_secs_f64())
        ),
        if running { "yes" } else { "NO" },
        n = s.crs,
    );
    println!(
        "scenario=lease-outage crs={} outage_s={outage:.1} renew_deadline_s={:.1} pending={pending} hawser_non_final={non_final} hawser_p50_s={} hawser_p99_s={} led_again_s={} server_running={running}",
        s.crs,
        s.renew_deadline.as_secs_f64(),
        p(0.5),
        p(0.99),
        led_again.map_or_else(|| "none".to_owned(), |t| format!("{:.2}", t.as_secs_f64())),
    );
    shutdown.cancel();
    let _stopped = tokio::time::timeout(Duration::from_secs(30), server).await;
    sim.shutdown().await;
    Ok(())
}

/// The lease duration paired with `renew_deadline` (the defaults' ratio, 15 s to 10 s).
fn lease_duration(renew_deadline: Duration) -> Duration {
    renew_deadline.mul_f64(1.5)
}

/// Velero's CRDs, the server namespace, a `filesystem` location under `root`, and `crs`
/// namespaces `app-<i>` with a ConfigMap each (one per backup: backups that share a namespace
/// would wait for each other in the backup queue).
fn install(sim: &KubeSim, root: &std::path::Path, crs: usize) -> anyhow::Result<()> {
    let store = sim.store();
    for crd in hawser_api::crd::crds() {
        store.insert(serde_json::to_value(crd)?)?;
    }
    store.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))?;
    for i in 0..crs {
        let ns = format!("app-{i}");
        store.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))?;
        store.insert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ns},
            "data": {"index": i.to_string()}
        }))?;
    }
    let mut bucket = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut bucket, 0o700);
    bucket.recursive(true).create(root.join(BUCKET))?;
    store.insert(json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {
            "provider": "filesystem",
            "objectStorage": {"bucket": BUCKET},
            "config": {"root": root.display().to_string()},
            "default": true
        }
    }))?;
    Ok(())
}

/// The resourceVersion of the leader Lease, once a server holds it.
fn lease_version(store: &SimStore) -> Option<String> {
    let lease = store.get("coordination.k8s.io/v1", "Lease", NS, LEASE)?;
    lease
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())?;
    lease
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Polls `found` every 20 ms until it gives a value or `limit` passes.
async fn until<T>(limit: Duration, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = found() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
