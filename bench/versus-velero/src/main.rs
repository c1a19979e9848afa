//! hawser and Velero's own server (once per `--velero-item-block-workers` value), in turn,
//! against the same kind of real API server (a fresh one each time, on one etcd, behind
//! kube-sim in proxy mode for faults) and the same S3-protocol server, for `--rounds` rounds in
//! an order that alternates from one round to the next; medians and spreads are reported:
//!
//! 0. the fixed overhead: a backup of an empty namespace and its restore, timed apart;
//! 1. backup of N ConfigMaps: wall time and peak memory of each server, as the sum of the PSS of
//!    its process tree (Velero's plugins run as child processes; a shared page counts once);
//! 2. restore of that backup into a mapped namespace: wall time, objects/s, peak PSS; before
//!    hawser's, the API server's own create floor for the same objects (`floor.rs`), with the
//!    servers' client limits and with none, and hawser's restore as a ratio to the first;
//! 3. in the first round, the #7207 outage scenario: writes of Backups and Restores refused by the API server (503 on
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
mod floor;
mod process;
mod summary;
mod truth;

use cluster::{Cluster, install, resource, seed};
use process::{Running, error_lines, log_tail};
use summary::Summary;
use truth::{true_phase, uploaded};

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
    /// Skip the outage scenario (else it runs in the first round, for each contender).
    #[arg(long)]
    skip_outage: bool,
    /// Rounds: the contenders take turns in an order that alternates from one round to the
    /// next, each on a fresh API server; medians and spreads are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Velero's `--item-block-worker-count`, one Velero contender per value (1 is Velero's
    /// default; more lets its backup work on item blocks in parallel). Velero restores one item
    /// at a time whatever the setting.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    velero_item_block_workers: Vec<u32>,
    /// Directory made by `scripts/real-cluster.sh up`.
    #[arg(long, env = "HAWSER_TEST_REAL_KUBE")]
    real_kube: PathBuf,
    /// S3 endpoint (moto), e.g. http://127.0.0.1:5000.
    #[arg(long, env = "HAWSER_TEST_S3_ENDPOINT")]
    s3: String,
    /// Directory with `velero` and `velero-plugin-for-aws` (scripts/build-velero.sh prints it);
    /// not needed with `--no-velero`.
    #[arg(long, required_unless_present = "no_velero")]
    velero_dir: Option<PathBuf>,
    /// The hawser binary (a release build).
    #[arg(long)]
    hawser: Option<PathBuf>,
    /// hawser alone (with the create floors), no Velero contender.
    #[arg(long)]
    no_velero: bool,
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

/// One server with its settings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Contender {
    which: Which,
    /// Velero's `--item-block-worker-count`.
    item_block_workers: u32,
}

impl Contender {
    fn name(self) -> String {
        match (self.which, self.item_block_workers) {
            (Which::Velero, workers) if workers != 1 => format!("velero-w{workers}"),
            (which, _) => which.name().to_owned(),
        }
    }
}

#[derive(Default, Debug)]
struct Figures {
    /// A backup of an empty namespace, and its restore: the fixed overhead of each, apart.
    empty_backup_s: f64,
    empty_restore_s: f64,
    backup_s: f64,
    backup_pss_kib: u64,
    restore_s: f64,
    restore_pss_kib: u64,
    /// hawser's rounds: the API server's create floor with the servers' limits, and with none.
    floor_limited_s: f64,
    floor_unlimited_s: f64,
    non_final: usize,
    untruthful: usize,
    outage_details: Vec<String>,
}

const BUCKET: &str = "versus-velero";
/// ConfigMaps in the namespace of the backups and restores caught by the outage.
const SMALL: usize = 5;
pub(crate) const FINAL: &[&str] = &["Completed", "PartiallyFailed", "Failed", "FailedValidation"];
/// The longest wait for a Backup or Restore to end.
const LIMIT: Duration = Duration::from_secs(3600);

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

/// Creates a Backup or Restore and waits for its final phase: the phase, and the seconds from
/// the creation to reading it.
async fn timed(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    spec: Value,
) -> Result<(String, f64)> {
    let started = Instant::now();
    create(api, kind, name, spec).await?;
    let done = wait_phase(api, name, |p| FINAL.contains(&p), LIMIT).await?;
    Ok((done, started.elapsed().as_secs_f64()))
}

/// One contender's round on a fresh API server, under `prefix` of the bucket; the outage
/// scenario when `outage`.
async fn run_one(
    contender: Contender,
    args: &Args,
    prefix: &str,
    outage: bool,
    bucket: &object_store::aws::AmazonS3,
) -> Result<Figures> {
    let mut figures = Figures::default();
    let name = contender.name();
    let c = Cluster::start(&args.real_kube).await?;
    install(&c, &args.s3, prefix).await?;
    let seeded = Instant::now();
    seed(&c, "bench", args.objects).await?;
    seed(&c, "small", SMALL).await?;
    eprintln!(
        "{}: seeded {} ConfigMaps in {:.1} s",
        name,
        args.objects,
        seeded.elapsed().as_secs_f64()
    );
    let log = c.dir.path().join("server.log");
    let server = Running::start(contender, args, &c, &log)?;
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
    .with_context(|| {
        format!(
            "{name}'s storage location; its log ends:\n{}",
            log_tail(&log)
        )
    })?;
    let backups: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), "velero", &resource("Backup", "backups"));
    let restores: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), "velero", &resource("Restore", "restores"));

    // The fixed overhead: a backup of a namespace with nothing in it, and its restore.
    let (done, secs) = timed(
        &backups,
        "Backup",
        "empty",
        json!({"includedNamespaces": ["empty"], "snapshotVolumes": false}),
    )
    .await?;
    figures.empty_backup_s = secs;
    let (restored, secs) = timed(
        &restores,
        "Restore",
        "empty-copy",
        json!({"backupName": "empty", "namespaceMapping": {"empty": "empty-copy"}}),
    )
    .await?;
    figures.empty_restore_s = secs;
    if done != "Completed" || restored != "Completed" {
        bail!("{name}: the empty backup ended {done}, its restore {restored}");
    }

    server.take_peak();
    let (done, secs) = timed(
        &backups,
        "Backup",
        "big",
        json!({"includedNamespaces": ["bench"], "snapshotVolumes": false}),
    )
    .await?;
    figures.backup_s = secs;
    figures.backup_pss_kib = server.take_peak();
    if done != "Completed" {
        bail!(
            "{}: backup ended {done}; errors logged:\n{}",
            name,
            error_lines(&log)
        );
    }

    if contender.which == Which::Hawser {
        // Before the restore: its objects then meet an API server holding the floors' too.
        (figures.floor_limited_s, figures.floor_unlimited_s) = floor::creates(
            &c,
            (args.client_qps, args.client_burst),
            args.objects,
            prefix,
        )
        .await?;
    }
    let (done, secs) = timed(
        &restores,
        "Restore",
        "big-copy",
        json!({"backupName": "big", "namespaceMapping": {"bench": "bench-copy"}}),
    )
    .await?;
    figures.restore_s = secs;
    figures.restore_pss_kib = server.take_peak();
    let copies: Api<ConfigMap> = Api::namespaced(c.client.clone(), "bench-copy");
    let restored = copies
        .list_metadata(&ListParams::default().labels("app=bench"))
        .await?
        .items
        .len();
    if done != "Completed" || restored != args.objects {
        bail!(
            "{}: restore ended {done} with {restored} of {} ConfigMaps; errors logged:\n{}",
            name,
            args.objects,
            error_lines(&log)
        );
    }

    if !outage {
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
    let done = wait_phase(&backups, "small-source", |p| FINAL.contains(&p), LIMIT).await?;
    if done != "Completed" {
        bail!("{}: backup small-source ended {done}", name);
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
    let server = Running::start(contender, args, &c, &log)?;
    tokio::time::sleep(Duration::from_secs(30)).await;
    for name in &names {
        let p = backups.get(name).await.map(|o| phase(&o))?;
        let (archive, record) = uploaded(bucket, prefix, name).await?;
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
    let kept = std::env::temp_dir().join(format!("versus-velero-{prefix}.log"));
    std::fs::copy(&log, &kept)?;
    eprintln!("{}: server log kept in {}", name, kept.display());
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
            "outage {} s over {} backups and {} restores in the first round",
            args.outage_secs, args.outage_backups, args.outage_backups
        )
    };
    let mut contenders = vec![Contender {
        which: Which::Hawser,
        item_block_workers: 1,
    }];
    let mut workers = args.velero_item_block_workers.clone();
    if workers.contains(&0) {
        bail!("--velero-item-block-workers takes counts of 1 or more");
    }
    workers.sort_unstable();
    workers.dedup();
    if args.no_velero {
        workers.clear();
    }
    contenders.extend(workers.iter().map(|&workers| Contender {
        which: Which::Velero,
        item_block_workers: workers,
    }));
    println!(
        "versus-velero: {} ConfigMaps (1 KiB), --resource-timeout {}, --client-qps {} --client-burst {} for every server, Velero's --item-block-worker-count {:?}, {} rounds in alternating order, {outage}",
        args.objects,
        args.resource_timeout,
        args.client_qps,
        args.client_burst,
        workers,
        args.rounds,
    );
    let bucket = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&args.s3)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id("bench")
        .with_secret_access_key("bench")
        .with_allow_http(true)
        .build()?;
    let mut rounds: Vec<Vec<Figures>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut outages: Vec<Option<Figures>> = contenders.iter().map(|_| None).collect();
    for round in 0..args.rounds.max(1) {
        let mut order: Vec<usize> = (0..contenders.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let contender = contenders[i];
            let prefix = format!("{run}-{}-r{round}", contender.name());
            let outage = round == 0 && !args.skip_outage;
            let mut figures = run_one(contender, &args, &prefix, outage, &bucket).await?;
            eprintln!(
                "round {round}: {} backup {:.2} s, restore {:.2} s",
                contender.name(),
                figures.backup_s,
                figures.restore_s
            );
            if outage {
                outages[i] = Some(Figures {
                    non_final: figures.non_final,
                    untruthful: figures.untruthful,
                    outage_details: std::mem::take(&mut figures.outage_details),
                    ..Figures::default()
                });
            }
            rounds[i].push(figures);
        }
    }
    let summaries: Vec<Summary> = contenders
        .iter()
        .zip(&rounds)
        .map(|(c, r)| Summary::of(c.name(), r, args.objects))
        .collect();
    for (c, outage) in contenders.iter().zip(&outages) {
        for line in outage.iter().flat_map(|o| &o.outage_details) {
            println!("{:10} {line}", c.name());
        }
    }
    let hawser = &summaries[0];
    let mut figures = Vec::new();
    for s in &summaries {
        let key = s.name.replace('-', "_");
        figures.push(format!(
            "{key}_empty_backup_s={:.2} {key}_empty_restore_s={:.2} {key}_backup_s={:.2} {key}_restore_s={:.2} {key}_backup_pss_mib={:.1} {key}_restore_pss_mib={:.1}",
            s.empty_backup_s, s.empty_restore_s, s.backup_s, s.restore_s, s.backup_mib, s.restore_mib
        ));
        if let Some((limited, none)) = s.floors {
            figures.push(format!(
                "{key}_floor_limited_s={limited:.2} {key}_floor_unlimited_s={none:.2} {key}_restore_to_floor={:.2}",
                s.restore_s / limited
            ));
        }
        if s.name != hawser.name {
            println!(
                "ratios ({} / hawser, medians): backup time {:.2}, backup peak PSS {:.2}, restore time {:.2}, restore peak PSS {:.2}",
                s.name,
                s.backup_s / hawser.backup_s,
                s.backup_mib / hawser.backup_mib,
                s.restore_s / hawser.restore_s,
                s.restore_mib / hawser.restore_mib,
            );
        }
    }
    // Without the outage there are no outage figures, rather than zeros.
    for (c, outage) in contenders.iter().zip(&outages) {
        if let Some(o) = outage {
            let key = c.name().replace('-', "_");
            figures.push(format!(
                "{key}_non_final={} {key}_untruthful={}",
                o.non_final, o.untruthful
            ));
        }
    }
    println!("{}", figures.join(" "));
    Ok(())
}
