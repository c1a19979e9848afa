//! status-chaos: M Backups reach their final status while the API server is unreachable for T.
//!
//! Two runs at the same time, each against its own in-process kube-sim with the same outage
//! (the API port refuses connections and drops open ones):
//!
//! * `hawser`: every final status goes through hawser's status engine (deadline retries, then
//!   the background re-driver).
//! * `velero`: every final status goes through an exact model of Velero's retry helper
//!   (client-go backoff, 10 ms start, factor 5, 10 % jitter, cap = `--resource-timeout`, giving up
//!   on the step that would exceed the cap; velero-compat §2.6) around a merge patch. A CR whose
//!   helper gave up stays non-final (Velero only fixes it at the next server restart).
//!
//! Two scenarios, one after the other: an outage longer than the timeout (`--outage`, default
//! three times it), where Velero's helper gives up, and an outage that ends before the helper's
//! last attempt (`--short-outage`, default 60 % of the time of that attempt), where both policies
//! should land every status.
//!
//! Printed per scenario and policy: CRs left non-final, p50/p99 landing time after the API came
//! back, attempts per CR during the outage, and when the worker was free again. Each scenario
//! ends with a `key=value` summary line.
//!
//! A third scenario, `lease-outage` ([`lease`]), runs `hawser server` itself with leader
//! election on through a whole-API outage longer than its renew deadline (`--lease-outage`,
//! default 30 s; `0s` skips it).

mod lease;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use futures::future::join_all;
use hawser_api::phase::{BackupPhase, Phase};
use hawser_core::backoff::{VeleroBackoff, VeleroNext, velero_schedule};
use hawser_core::duration::GoDuration;
use hawser_engine::cluster::client::client_without_retries;
use hawser_status::metrics::{AttemptOutcome, StatusMetrics};
use hawser_status::{Kind, StatusConfig, StatusEngine, StatusUpdate};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{KubeSim, SimConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tokio::time::Instant;

const NS: &str = "velero";

#[derive(Debug, Parser)]
#[command(
    about = "Final statuses of M Backups through an API outage: hawser's policy and Velero's"
)]
struct Args {
    /// Number of Backups finishing during the outage.
    #[arg(long, default_value_t = 200)]
    crs: usize,
    /// `--resource-timeout` of both policies.
    #[arg(long, default_value = "10s")]
    timeout: GoDuration,
    /// Length of the outage (default: three times the timeout); `0s` skips it.
    #[arg(long)]
    outage: Option<GoDuration>,
    /// Length of the second, short outage (default: 60 % of the time of the last attempt of
    /// Velero's helper, so that its last attempt finds the API back); `0s` skips it.
    #[arg(long)]
    short_outage: Option<GoDuration>,
    /// hawser's `--status-patch-max-backoff`.
    #[arg(long, default_value = "5s")]
    max_backoff: GoDuration,
    /// hawser's per-request timeout.
    #[arg(long, default_value = "2s")]
    request_timeout: GoDuration,
    /// How long after recovery to wait for stragglers before counting non-final CRs.
    #[arg(long, default_value = "15s")]
    settle: GoDuration,
    /// RNG seed (jitter of both policies).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Length of the whole-API outage of the `lease-outage` scenario (`0s` skips it).
    #[arg(long, default_value = "30s")]
    lease_outage: GoDuration,
    /// `--leader-elect-renew-deadline` of the server in the `lease-outage` scenario (the lease
    /// duration is 1.5 times it, the retry period a fifth of it, as the defaults).
    #[arg(long, default_value = "10s")]
    renew_deadline: GoDuration,
    /// Backups of the `lease-outage` scenario (each runs through the server's controller).
    #[arg(long, default_value_t = 20)]
    lease_crs: usize,
}

fn std(d: GoDuration, what: &str) -> anyhow::Result<Duration> {
    d.to_std()
        .with_context(|| format!("--{what} must not be negative"))
}

/// What one policy's run measured.
#[derive(Debug)]
struct Figures {
    policy: &'static str,
    non_final: usize,
    /// Landing times after recovery, seconds, sorted (only CRs that landed after it).
    after_recovery: Vec<f64>,
    landed_during_outage: usize,
    attempts_per_cr_during_outage: f64,
    /// When the workers' write calls returned (p50, seconds after the outage began).
    worker_free_p50: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn sim_with_backups(n: usize) -> anyhow::Result<KubeSim> {
    let sim = KubeSim::start(SimConfig {
        admin_listen: None,
        ..SimConfig::default()
    })
    .await?;
    let store = sim.store();
    for crd in hawser_api::crd::crds() {
        store.insert(serde_json::to_value(crd)?)?;
    }
    store.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))?;
    for i in 0..n {
        store.insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": format!("b{i:04}"), "namespace": NS},
            "spec": {"includedNamespaces": ["*"]},
            "status": {"phase": "InProgress"},
        }))?;
    }
    Ok(sim)
}

async fn client_for(sim: &KubeSim, read_timeout: Duration) -> anyhow::Result<kube::Client> {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(client_without_retries(config, read_timeout)?)
}

/// Poll the store until every CR is final or `until` passes; the landing time of each CR
/// (seconds since `t0`), `None` for CRs that never became final.
async fn watch_landings(sim: &KubeSim, n: usize, t0: Instant, until: Instant) -> Vec<Option<f64>> {
    let mut landed: Vec<Option<f64>> = vec![None; n];
    loop {
        let now = t0.elapsed().as_secs_f64();
        for obj in sim.store().list("velero.io/v1", "Backup", Some(NS)) {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some(i) = name.strip_prefix('b').and_then(|s| s.parse::<usize>().ok()) else {
                continue;
            };
            if i < n && landed[i].is_none() && Phase::of(Kind::Backup, &obj).is_final() {
                landed[i] = Some(now);
            }
        }
        if landed.iter().all(Option::is_some) || Instant::now() >= until {
            return landed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The landing times after the outage (`outage` seconds from the start) of the CRs that landed
/// after it, sorted, in seconds after the outage.
fn after_outage(landed: &[Option<f64>], outage: f64) -> Vec<f64> {
    let mut after: Vec<f64> = landed
        .iter()
        .flatten()
        .filter(|t| **t >= outage)
        .map(|t| t - outage)
        .collect();
    after.sort_by(f64::total_cmp);
    after
}

fn figures(
    policy: &'static str,
    landed: &[Option<f64>],
    outage: f64,
    attempts_during: f64,
    worker_free: Vec<f64>,
) -> Figures {
    let after = after_outage(landed, outage);
    let mut free = worker_free;
    free.sort_by(f64::total_cmp);
    Figures {
        policy,
        non_final: landed.iter().filter(|l| l.is_none()).count(),
        landed_during_outage: landed.iter().flatten().filter(|t| **t < outage).count(),
        after_recovery: after,
        attempts_per_cr_during_outage: attempts_during,
        worker_free_p50: quantile(&free, 0.5),
    }
}

async fn run_hawser(args: &Args, outage: Duration) -> anyhow::Result<Figures> {
    let n = args.crs;
    let sim = sim_with_backups(n).await?;
    let request_timeout = std(args.request_timeout, "request-timeout")?;
    let client = client_for(&sim, request_timeout).await?;
    let metrics = StatusMetrics::default();
    let config = StatusConfig {
        instance_id: "bench".to_owned(),
        resource_timeout: std(args.timeout, "timeout")?,
        max_backoff: std(args.max_backoff, "max-backoff")?,
        request_timeout,
        namespace: Some(NS.to_owned()),
        rng_seed: Some(args.seed),
        ..StatusConfig::default()
    };
    let engine = StatusEngine::new(client, config, metrics.clone());
    let t0 = Instant::now();
    sim.faults().refuse(Some(outage));
    let rvs: Vec<String> = (0..n)
        .map(|i| {
            let obj = sim
                .store()
                .get("velero.io/v1", "Backup", NS, &format!("b{i:04}"));
            obj.and_then(|o| {
                o.pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default()
        })
        .collect();
    let writes = rvs.into_iter().enumerate().map(|(i, rv)| {
        let engine = engine.clone();
        tokio::spawn(async move {
            // A controller writes the final status of the object it holds: its resourceVersion
            // goes along as the precondition.
            let u = StatusUpdate::backup(NS, format!("b{i:04}"), BackupPhase::Completed)
                .observed(rv, BackupPhase::InProgress);
            let _outcome = engine.write(u).await;
            t0.elapsed().as_secs_f64()
        })
    });
    let writes = tokio::spawn(join_all(writes));
    let attempts_at_recovery = {
        let m = metrics.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(t0 + outage).await;
            m.attempts(Kind::Backup, AttemptOutcome::Transient)
        })
    };
    let settle = std(args.settle, "settle")?;
    let landed = watch_landings(&sim, n, t0, t0 + outage + settle).await;
    let free: Vec<f64> = writes.await?.into_iter().filter_map(Result::ok).collect();
    #[allow(clippy::cast_precision_loss)]
    let attempts = attempts_at_recovery.await? as f64 / n as f64;
    engine.shutdown();
    sim.shutdown().await;
    Ok(figures(
        "hawser",
        &landed,
        outage.as_secs_f64(),
        attempts,
        free,
    ))
}

/// Velero's `PatchResourceWithRetriesOnErrors` for one CR: merge patch, retried by the helper.
async fn velero_write(
    api: Api<DynamicObject>,
    name: String,
    timeout: Duration,
    seed: u64,
    attempts: Arc<AtomicU64>,
    outage_end: Instant,
) -> f64 {
    let start = Instant::now();
    let mut helper = VeleroBackoff::for_timeout(timeout);
    let mut rng = StdRng::seed_from_u64(seed);
    let patch = json!({"status": {"phase": "Completed"}});
    loop {
        if Instant::now() < outage_end {
            attempts.fetch_add(1, Ordering::Relaxed);
        }
        // Velero sends it with context.Background(): no per-request timeout.
        if api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            break;
        }
        match helper.after_failure(&mut rng) {
            Some(VeleroNext::RetryAfter(d)) => tokio::time::sleep(d).await,
            Some(VeleroNext::GiveUpAfter(d)) => {
                tokio::time::sleep(d).await;
                break;
            }
            None => break,
        }
    }
    start.elapsed().as_secs_f64()
}

async fn run_velero(args: &Args, outage: Duration) -> anyhow::Result<Figures> {
    let n = args.crs;
    let sim = sim_with_backups(n).await?;
    // Velero's client has no read timeout of its own; a generous one keeps the run bounded.
    let client = client_for(&sim, Duration::from_secs(60)).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &Kind::Backup.api_resource());
    let timeout = std(args.timeout, "timeout")?;
    let attempts = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    sim.faults().refuse(Some(outage));
    let writes = (0..n).map(|i| {
        let seed = args.seed.wrapping_add(i as u64);
        tokio::spawn(velero_write(
            api.clone(),
            format!("b{i:04}"),
            timeout,
            seed,
            attempts.clone(),
            t0 + outage,
        ))
    });
    let writes = tokio::spawn(join_all(writes));
    let settle = std(args.settle, "settle")?;
    let landed = watch_landings(&sim, n, t0, t0 + outage + settle).await;
    let free: Vec<f64> = writes.await?.into_iter().filter_map(Result::ok).collect();
    #[allow(clippy::cast_precision_loss)]
    let per_cr = attempts.load(Ordering::Relaxed) as f64 / n as f64;
    sim.shutdown().await;
    Ok(figures(
        "velero",
        &landed,
        outage.as_secs_f64(),
        per_cr,
        free,
    ))
}

fn print(f: &Figures, n: usize) {
    println!(
        "{:<7} non-final {:>4}/{n}  landed-during-outage {:>4}  after recovery p50 {:>6.2}s p99 {:>6.2}s  attempts/CR during outage {:>5.1}  worker free after {:>6.2}s (p50)",
        f.policy,
        f.non_final,
        f.landed_during_outage,
        quantile(&f.after_recovery, 0.5),
        quantile(&f.after_recovery, 0.99),
        f.attempts_per_cr_during_outage,
        f.worker_free_p50,
    );
}

/// When Velero's helper makes its last attempt for `timeout`, without jitter (jitter only delays
/// it).
fn velero_last_attempt(timeout: Duration) -> Duration {
    let mut rng = StdRng::seed_from_u64(0);
    velero_schedule(timeout, false, 64, &mut rng)
        .attempt_starts
        .last()
        .copied()
        .unwrap_or_default()
}

/// Runs both policies through one outage and prints their figures and the summary line.
async fn scenario(args: &Args, name: &str, outage: Duration) -> anyhow::Result<()> {
    let timeout = std(args.timeout, "timeout")?;
    println!(
        "status-chaos [{name}]: {} Backups finish during an API outage of {:.1}s; --resource-timeout {:.1}s (Velero's last attempt at {:.2}s), hawser cap {:.1}s",
        args.crs,
        outage.as_secs_f64(),
        timeout.as_secs_f64(),
        velero_last_attempt(timeout).as_secs_f64(),
        std(args.max_backoff, "max-backoff")?.as_secs_f64()
    );
    let (h, v) = tokio::join!(run_hawser(args, outage), run_velero(args, outage));
    let (h, v) = (h?, v?);
    print(&h, args.crs);
    print(&v, args.crs);
    let p = |f: &Figures, q| {
        let x = quantile(&f.after_recovery, q);
        if x.is_nan() {
            "none".to_owned()
        } else {
            format!("{x:.2}")
        }
    };
    println!(
        "scenario={name} crs={} outage_s={:.1} timeout_s={:.1} hawser_non_final={} hawser_p50_s={} hawser_p99_s={} hawser_attempts_per_cr={:.1} velero_non_final={} velero_p50_s={} velero_p99_s={} velero_attempts_per_cr={:.1}",
        args.crs,
        outage.as_secs_f64(),
        timeout.as_secs_f64(),
        h.non_final,
        p(&h, 0.5),
        p(&h, 0.99),
        h.attempts_per_cr_during_outage,
        v.non_final,
        p(&v, 0.5),
        p(&v, 0.99),
        v.attempts_per_cr_during_outage,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let timeout = std(args.timeout, "timeout")?;
    let outage = match args.outage {
        Some(o) => std(o, "outage")?,
        None => timeout * 3,
    };
    let short = match args.short_outage {
        Some(o) => std(o, "short-outage")?,
        None => velero_last_attempt(timeout).mul_f64(0.6),
    };
    if !outage.is_zero() {
        scenario(&args, "outage", outage).await?;
    }
    if !short.is_zero() {
        println!();
        scenario(&args, "short-outage", short).await?;
    }
    let lease_outage = std(args.lease_outage, "lease-outage")?;
    if !lease_outage.is_zero() {
        println!();
        lease::run(&lease::LeaseOutage {
            crs: args.lease_crs,
            outage: lease_outage,
            resource_timeout: timeout,
            max_backoff: std(args.max_backoff, "max-backoff")?,
            renew_deadline: std(args.renew_deadline, "renew-deadline")?,
            settle: std(args.settle, "settle")?,
        })
        .await?;
    }
    Ok(())
}
