//! hawser and Velero's own server, in turn, against the same real API server (a fresh one each,
//! on one etcd, behind kube-sim in proxy mode for faults) and the same S3-protocol server:
//!
//! 1. backup of N ConfigMaps: wall time and peak RSS of each server (its process tree: Velero's
//!    plugins run as child processes);
//! 2. restore of that backup into a mapped namespace: wall time, objects/s, peak RSS;
//! 3. the seed's scenario: writes of Backups and Restores refused by the API server (503 on
//!    PATCH and PUT of `backups` and `restores`) from the moment the first of each is
//!    `InProgress`, for longer than `--resource-timeout`, then recovery: how many Backups and
//!    Restores each server leaves non-final; then a restart of each server: how many end with a
//!    phase that disagrees with the truth (for a Backup, what was uploaded; for a Restore,
//!    whether every object it restores is in the cluster).
//!
//! The last line is `key=value` pairs. Needs `scripts/real-cluster.sh up DIR` (`--real-kube` or
//! `HAWSER_TEST_REAL_KUBE`), an S3 endpoint (`--s3` or `HAWSER_TEST_S3_ENDPOINT`, moto), the
//! `velero` and `velero-plugin-for-aws` binaries (`--velero-dir`, from `scripts/build-velero.sh`)
//! and a release `hawser` binary (`--hawser`, default beside this program).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};

mod cluster;
mod process;

use cluster::{Cluster, install, resource, seed};
use process::{Running, error_lines};

#[derive(Parser, Debug)]
#[command(about = "hawser against Velero's own server on a real API server")]
struct Args {
    /// ConfigMaps (1 KiB each) in the backed-up namespace.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Backups caught by the outage, and as many Restores.
    #[arg(long, default_value_t = 3)]
    outage_backups: usize,
    /// How long Backup and Restore writes are refused; above `--resource-timeout`.
    #[arg(long, default_value_t = 75)]
    outage_secs: u64,
    /// Passed to both servers.
    #[arg(long, default_value = "1m")]
    resource_timeout: String,
    /// Passed to both servers (Velero's default is 20 / 30; hawser's 500 / 1000).
    #[arg(long, default_value_t = 500)]
    client_qps: u32,
    #[arg(long, default_value_t = 1000)]
    client_burst: u32,
    /// Skip the outage scenario.
    #[arg(long)]
    skip_outage: bool,
    /// Directory made by `scripts/real-cluster.sh up`.
    #[arg(long, env = "HAWSER_TEST_REAL_KUBE")]
    real_kube: PathBuf,
    /// S3 endpoint (moto), e.g. http://127.0.0.1:5000.
    #[arg(long, env = "HAWSER_TEST_S3_ENDPOINT")]
    s3: String,
    /// Directory with `velero` and `velero-plugin-for-aws` (scripts/build-velero.sh prints it).
    #[arg(long)]
    velero_dir: PathBuf,
    /// The hawser binary (a release build).
    #[arg(long)]
    hawser: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Which {
    Hawser,
    Velero,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Hawser => "hawser",
            Which::Velero => "velero",
        }
    }
}

#[derive(Default, Debug)]
struct Figures {
    backup_s: f64,
    backup_rss_kib: u64,
    restore_s: f64,
    restore_rss_kib: u64,
    non_final: usize,
    untruthful: usize,
    outage_details: Vec<String>,
}

const BUCKET: &str = "versus-velero";
/// ConfigMaps in the namespace of the backups and restores caught by the outage.
const SMALL: usize = 5;
const FINAL: &[&str] = &["Completed", "PartiallyFailed", "Failed", "FailedValidation"];

fn phase(o: &DynamicObject) -> String {
    o.data["status"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn wait_phase(
    api: &Api<DynamicObject>,
    name: &str,
    done: impl Fn(&str) -> bool,
    limit: Duration,
) -> Result<String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(o) = api.get_opt(name).await? {
            let p = phase(&o);
            if done(&p) {
                return Ok(p);
            }
        }
        if Instant::now() > deadline {
            bail!("{name} did not reach the phase in {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create(api: &Api<DynamicObject>, kind: &str, name: &str, spec: Value) -> Result<()> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "velero"}, "spec": spec
    }))?;
    api.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// What the bucket holds for a backup: whether its archive is there, and its record's phase.
async fn uploaded(
    bucket: &object_store::aws::AmazonS3,
    prefix: &str,
    name: &str,
) -> Result<(bool, Option<String>)> {
    use object_store::ObjectStoreExt;
    use object_store::path::Path as Key;
    let base = format!("{prefix}/backups/{name}");
    let archive = bucket
        .head(&Key::from(format!("{base}/{name}.tar.gz")))
        .await
        .is_ok();
    let phase = match bucket
        .get(&Key::from(format!("{base}/velero-backup.json")))
        .await
    {
        Ok(record) => {
            let v: Value = serde_json::from_slice(&record.bytes().await?)?;
            v["status"]["phase"].as_str().map(str::to_owned)
        }
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    Ok((archive, phase))
}

/// The phase a backup truly has, from what was uploaded: an archive and a record in a final
/// phase mean that phase; an archive whose record was left in a working phase means the data is
/// all there (`Completed`); no archive means it failed.
fn true_phase(archive: bool, record: Option<&str>) -> &'static str {
    match (archive, record) {
        (true, Some(p)) => FINAL
            .iter()
            .copied()
            .find(|f| *f == p)
            .unwrap_or("Completed"),
        (true, None) => "Completed",
        (false, _) => "Failed",
    }
}

async fn run_one(
    which: Which,
    args: &Args,
    run: &str,
    bucket: &object_store::aws::AmazonS3,
) -> Result<Figures> {
    let mut figures = Figures::default();
    let c = Cluster::start(&args.real_kube).await?;
    install(&c, &args.s3, run, which).await?;
    let seeded = Instant::now();
    seed(&c, "bench", args.objects).await?;
    seed(&c, "small", SMALL).await?;
    eprintln!(
        "{}: seeded {} ConfigMaps in {:.1} s",
        which.name(),
        args.objects,
        seeded.elapsed().as_secs_f64()
    );
    let log = c.dir.path().join("server.log");
    let server = Running::start(which, args, &c, &log)?;
    let locations: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        "velero",
        &resource("BackupStorageLocation", "backupstoragelocations"),
    );
    wait_phase(
        &locations,
        "default",
        |p| p == "Available",
        Duration::from_secs(60),
    )
    .await
    .with_context(|| format!("{} log: {}", which.name(), log.display()))?;
    let backups: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), "velero", &resource("Backup", "backups"));
    let restores: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), "velero", &resource("Restore", "restores"));
    let limit = Duration::from_secs(3600);

    server.take_peak();
    let started = Instant::now();
    create(
        &backups,
        "Backup",
        "big",
        json!({"includedNamespaces": ["bench"], "snapshotVolumes": false}),
    )
    .await?;
    let done = wait_phase(&backups, "big", |p| FINAL.contains(&p), limit).await?;
    figures.backup_s = started.elapsed().as_secs_f64();
    figures.backup_rss_kib = server.take_peak();
    if done != "Completed" {
        bail!(
            "{}: backup ended {done}; errors logged:\n{}",
            which.name(),
            error_lines(&log)
        );
    }

    let started = Instant::now();
    create(
        &restores,
        "Restore",
        "big-copy",
        json!({"backupName": "big", "namespaceMapping": {"bench": "bench-copy"}}),
    )
    .await?;
    let done = wait_phase(&restores, "big-copy", |p| FINAL.contains(&p), limit).await?;
    figures.restore_s = started.elapsed().as_secs_f64();
    figures.restore_rss_kib = server.take_peak();
    let copies: Api<ConfigMap> = Api::namespaced(c.client.clone(), "bench-copy");
    let restored = copies
        .list_metadata(&ListParams::default().labels("app=bench"))
        .await?
        .items
        .len();
    if done != "Completed" || restored != args.objects {
        bail!(
            "{}: restore ended {done} with {restored} of {} ConfigMaps; errors logged:\n{}",
            which.name(),
            args.objects,
            error_lines(&log)
        );
    }

    if args.skip_outage {
        server.stop().await;
        return Ok(figures);
    }
    // The source of the Restores caught by the outage.
    create(
        &backups,
        "Backup",
        "small-source",
        json!({"includedNamespaces": ["small"], "snapshotVolumes": false}),
    )
    .await?;
    let done = wait_phase(&backups, "small-source", |p| FINAL.contains(&p), limit).await?;
    if done != "Completed" {
        bail!("{}: backup small-source ended {done}", which.name());
    }
    // Each backup lists its ConfigMaps slowly and each restore creates them slowly, so that the
    // outage meets them InProgress.
    let slow = [
        c.proxy.faults().latency(
            LatencyFault::new(Duration::from_secs(3))
                .verbs(&["list"])
                .resources(&["configmaps"]),
        ),
        c.proxy.faults().latency(
            LatencyFault::new(Duration::from_secs(3))
                .verbs(&["create"])
                .resources(&["configmaps"]),
        ),
    ];
    let names: Vec<String> = (1..=args.outage_backups)
        .map(|i| format!("outage-{i}"))
        .collect();
    for name in &names {
        create(
            &backups,
            "Backup",
            name,
            json!({"includedNamespaces": ["small"], "snapshotVolumes": false}),
        )
        .await?;
        create(
            &restores,
            "Restore",
            &format!("{name}-restore"),
            json!({"backupName": "small-source", "namespaceMapping": {"small": format!("{name}-copy")}}),
        )
        .await?;
    }
    // The outage starts once the first of each is InProgress: their final status writes are
    // what is lost.
    let first_restore = format!("{}-restore", names[0]);
    for (api, first) in [(&backups, &names[0]), (&restores, &first_restore)] {
        wait_phase(api, first, |p| p == "InProgress", Duration::from_secs(60)).await?;
    }
    let fault = c.proxy.faults().status(
        StatusFault::new(503)
            .verbs(&["patch", "update"])
            .resources(&["backups", "restores"]),
    );
    tokio::time::sleep(Duration::from_secs(args.outage_secs)).await;
    c.proxy.faults().remove(fault);
    for id in slow {
        c.proxy.faults().remove(id);
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    for name in &names {
        let restore = format!("{name}-restore");
        for (api, name) in [(&backups, name), (&restores, &restore)] {
            let p = api.get(name).await.map(|o| phase(&o))?;
            if !FINAL.contains(&p.as_str()) {
                figures.non_final += 1;
            }
            figures
                .outage_details
                .push(format!("{name}: {p} after recovery"));
        }
    }
    server.stop().await;
    let server = Running::start(which, args, &c, &log)?;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let prefix = format!("{run}-{}", which.name());
    for name in &names {
        let p = backups.get(name).await.map(|o| phase(&o))?;
        let (archive, record) = uploaded(bucket, &prefix, name).await?;
        let truth = true_phase(archive, record.as_deref());
        if p != truth {
            figures.untruthful += 1;
        }
        figures.outage_details.push(format!(
            "{name}: {p} after restart; uploaded: archive {archive}, record {}; true phase {truth}",
            record.as_deref().unwrap_or("none")
        ));

        let restore = format!("{name}-restore");
        let p = restores.get(&restore).await.map(|o| phase(&o))?;
        let copies: Api<ConfigMap> = Api::namespaced(c.client.clone(), &format!("{name}-copy"));
        let restored = copies
            .list_metadata(&ListParams::default().labels("app=bench"))
            .await?
            .items
            .len();
        let complete = restored == SMALL;
        let truthful = if complete {
            p == "Completed"
        } else {
            matches!(p.as_str(), "Failed" | "PartiallyFailed")
        };
        if !truthful {
            figures.untruthful += 1;
        }
        figures.outage_details.push(format!(
            "{restore}: {p} after restart; in the cluster: {restored} of {SMALL} ConfigMaps; true phase {}",
            if complete { "Completed" } else { "Failed or PartiallyFailed" }
        ));
    }
    server.stop().await;
    let kept = std::env::temp_dir().join(format!("versus-velero-{run}-{}.log", which.name()));
    std::fs::copy(&log, &kept)?;
    eprintln!("{}: server log kept in {}", which.name(), kept.display());
    Ok(figures)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::new();
    // moto accepts unsigned requests: the bucket is made with a plain PUT.
    http.put(format!("{}/{BUCKET}", args.s3)).send().await?;
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let outage = if args.skip_outage {
        "no outage".to_owned()
    } else {
        format!(
            "outage {} s over {} backups and {} restores",
            args.outage_secs, args.outage_backups, args.outage_backups
        )
    };
    println!(
        "versus-velero: {} ConfigMaps (1 KiB), --resource-timeout {}, --client-qps {} --client-burst {}, {outage}",
        args.objects, args.resource_timeout, args.client_qps, args.client_burst,
    );
    let bucket = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&args.s3)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id("bench")
        .with_secret_access_key("bench")
        .with_allow_http(true)
        .build()?;
    let hawser = run_one(Which::Hawser, &args, &run, &bucket).await?;
    let velero = run_one(Which::Velero, &args, &run, &bucket).await?;
    let objects = args.objects as f64;
    for (which, f) in [("hawser", &hawser), ("velero", &velero)] {
        println!(
            "{which:6}  backup {:8.2} s  peak {:7.1} MiB | restore {:8.2} s  {:8.0} objects/s  peak {:7.1} MiB",
            f.backup_s,
            bench_common::mib(f.backup_rss_kib),
            f.restore_s,
            objects / f.restore_s,
            bench_common::mib(f.restore_rss_kib),
        );
        for line in &f.outage_details {
            println!("{which:6}  {line}");
        }
    }
    println!(
        "ratios (velero / hawser): backup time {:.2}, backup peak RSS {:.2}, restore time {:.2}, restore peak RSS {:.2}",
        velero.backup_s / hawser.backup_s,
        velero.backup_rss_kib as f64 / hawser.backup_rss_kib.max(1) as f64,
        velero.restore_s / hawser.restore_s,
        velero.restore_rss_kib as f64 / hawser.restore_rss_kib.max(1) as f64,
    );
    let mut figures = format!(
        "hawser_backup_s={:.2} velero_backup_s={:.2} hawser_restore_s={:.2} velero_restore_s={:.2} hawser_rss_mib={:.1} velero_rss_mib={:.1}",
        hawser.backup_s,
        velero.backup_s,
        hawser.restore_s,
        velero.restore_s,
        bench_common::mib(hawser.backup_rss_kib.max(hawser.restore_rss_kib)),
        bench_common::mib(velero.backup_rss_kib.max(velero.restore_rss_kib)),
    );
    // With --skip-outage there are no outage figures, rather than zeros.
    if !args.skip_outage {
        figures.push_str(&format!(
            " hawser_non_final={} velero_non_final={} hawser_untruthful={} velero_untruthful={}",
            hawser.non_final, velero.non_final, hawser.untruthful, velero.untruthful,
        ));
    }
    println!("{figures}");
    Ok(())
}
