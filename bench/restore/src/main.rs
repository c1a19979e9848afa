//! Restore engine wall time and peak memory against a floor measured in the same run.
//! `cargo run --release -p bench-restore`. For each size, a fresh kube-sim runs in this
//! (parent) process, seeded with N objects and backed up once by the backup engine into a
//! filesystem location (not measured). The floor (the archive read and parsed, and plain
//! creates of its objects, inside the clock), the floor's creates alone, and the restore each
//! run in a child process (this binary in worker mode) whose own peak RSS (`VmHWM`) is
//! reported; each writes into fresh namespaces of its own, and the parent counts what arrived.
//! `--rounds` interleaved rounds (floor, restore, creates alone) give medians and spread.
//!
//! Then the restore a user gets: `hawser server` runs in a child process, once per
//! `--server-limits` setting of `--client-qps`/`--client-burst`, and a Restore object of the
//! first `--server-namespaces` application namespaces is timed from its creation to its final
//! phase (`server.rs`). Goals are printed with PASS/MISS, never asserted; the last line holds
//! the figures as `key=value`.

mod plan;
mod server;
mod worker;

use std::time::Instant;

use anyhow::{Context, Result};
use bench_common::seed::{self, NAMESPACES, TYPES};
use bench_common::worker::{Measured, Runs, run as run_worker};
use bench_common::{mib, push_figures, push_server_figures, verdict};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use hawser_api::{Backup, BackupSpec};
use hawser_engine::backup::{self, BackupOptions, ValidatedBackup};
use kube::Client;
use kube_sim::{KubeSim, SimConfig, SimStore};
use plan::Target;

/// The restore's wall time, at most this many times the floor's (parse + create).
const GOAL_WALL_RATIO: f64 = 1.2;
/// The restore's peak RSS at the largest size, in MiB.
const GOAL_RSS_MIB: f64 = 64.0;
/// The restore's peak RSS at the largest size over that at the smallest.
const GOAL_RSS_GROWTH: f64 = 1.3;
/// The restore's objects per second on kube-sim, at least.
const GOAL_RATE: f64 = 10_000.0;

#[derive(Parser, Debug)]
#[command(about = "hawser restore engine against kube-sim's create throughput")]
struct Args {
    #[command(subcommand)]
    worker: Option<Worker>,
    /// Object counts, ascending: each is seeded into a fresh kube-sim, backed up and restored
    /// (the first and last are compared for the RSS growth goal).
    #[arg(long, env = "BENCH_SIZES", value_delimiter = ',', default_values_t = [10_000, 100_000])]
    sizes: Vec<usize>,
    /// Creates in flight, for the restore (items of one type) and the floor alike.
    #[arg(long, env = "BENCH_CONCURRENCY", default_value_t = 8)]
    concurrency: usize,
    /// The memory budget in MiB of the items waiting for their turn (the server's default
    /// is 16).
    #[arg(long, env = "BENCH_LOOK_AHEAD_MIB", default_value_t = 16)]
    look_ahead_mib: u64,
    /// `qps:burst` settings of the server's client to restore through, comma separated;
    /// `default` for the server's defaults, `0:1` for no limit; empty: no server runs.
    #[arg(
        long,
        env = "BENCH_SERVER_LIMITS",
        value_delimiter = ',',
        default_value = "0:1"
    )]
    server_limits: Vec<String>,
    /// Application namespaces (of 10) each server run restores.
    #[arg(long, env = "BENCH_SERVER_NAMESPACES", default_value_t = 10)]
    server_namespaces: usize,
    /// Interleaved rounds of the floor, the restore and the creates alone (at least 1).
    #[arg(long, env = "BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
}

/// The part of the floor a worker runs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum FloorPart {
    ParseCreate,
    CreatesOnly,
}

#[derive(Subcommand, Debug)]
enum Worker {
    /// Child: plain creates of the archived objects.
    Floor {
        #[arg(long)]
        url: String,
        #[arg(long)]
        root: String,
        #[arg(long)]
        concurrency: usize,
        #[arg(long, value_enum)]
        part: FloorPart,
        #[arg(long)]
        round: usize,
    },
    /// Child: hawser restore of the backup.
    Restore {
        #[arg(long)]
        url: String,
        #[arg(long)]
        root: String,
        #[arg(long)]
        concurrency: usize,
        #[arg(long)]
        look_ahead_mib: u64,
        #[arg(long)]
        round: usize,
    },
    /// Child: `hawser server` with the given flags, and a Restore through it.
    Server {
        #[arg(long)]
        url: String,
        #[arg(long)]
        root: String,
        #[arg(long)]
        run: usize,
        #[arg(long)]
        namespaces: usize,
        /// Flags of `hawser server`.
        #[arg(last = true)]
        flags: Vec<String>,
    },
}

/// Backs the application namespaces up into the location under `root` (not measured).
async fn back_up(client: &Client, root: &str) -> Result<u64> {
    let location = plan::location(root)?;
    let spec = BackupSpec {
        included_namespaces: Some((0..NAMESPACES).map(seed::namespace).collect()),
        ..BackupSpec::default()
    };
    let mut object = Backup::new(plan::BACKUP, spec);
    object.metadata.namespace = Some("velero".to_owned());
    let options = BackupOptions::default();
    let valid = ValidatedBackup::check(client, object.clone(), options.api_retry)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let outcome = backup::run(client.clone(), &location, &valid, options)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    anyhow::ensure!(
        outcome.errors() == 0,
        "the backup had {} errors",
        outcome.errors()
    );
    let record = backup::record(&object, &outcome).context("velero-backup.json body")?;
    let body = serde_json::to_vec(&record).context("serialising velero-backup.json")?;
    location
        .commit_backup(plan::BACKUP, Bytes::from(body), true)
        .await
        .context("committing velero-backup.json")?;
    Ok(outcome.items_backed_up)
}

/// Objects of the seeded types in the namespaces `to(0..namespaces)`.
fn count_in(store: &SimStore, namespaces: usize, to: impl Fn(usize) -> String) -> usize {
    let mut n = 0;
    for (api_version, kind, _) in TYPES {
        for i in 0..namespaces {
            n += store.list(api_version, kind, Some(&to(i))).len();
        }
    }
    n
}

/// Objects of the seeded types in the namespaces of `target` in round `round`.
fn count(store: &SimStore, target: Target, round: usize) -> usize {
    count_in(store, NAMESPACES, |i| target.namespace(round, i))
}

/// The objects the server runs read: the location under `root` as BackupStorageLocation
/// `default`, and the backup as a `Completed` Backup in it.
fn server_objects(store: &SimStore, root: &str) -> Result<()> {
    bench_common::server::install(store, root)?;
    store
        .insert(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": plan::BACKUP, "namespace": bench_common::server::NAMESPACE},
            "spec": {"storageLocation": "default"},
            "status": {"phase": "Completed"}
        }))
        .context("storing the Backup")?;
    Ok(())
}

/// One restore through a server with the client limits `limit` (`qps:burst` or `default`).
async fn through_server(
    store: &SimStore,
    url: &str,
    root: &str,
    run: usize,
    namespaces: usize,
    limit: &str,
) -> Result<Measured> {
    let run_text = run.to_string();
    let namespaces_text = namespaces.to_string();
    let mut argv = vec![
        "server",
        "--url",
        url,
        "--root",
        root,
        "--run",
        &run_text,
        "--namespaces",
        &namespaces_text,
        "--",
    ];
    let flags: Vec<String> = match limit.split_once(':') {
        Some((qps, burst)) => vec![
            "--client-qps".into(),
            qps.into(),
            "--client-burst".into(),
            burst.into(),
        ],
        None if limit == "default" => Vec::new(),
        None => anyhow::bail!("--server-limits: {limit} is neither qps:burst nor default"),
    };
    argv.extend(flags.iter().map(String::as_str));
    let measured = run_worker(&argv).await?;
    let phase = measured
        .extra
        .get("server.phase")
        .map_or("?", String::as_str);
    anyhow::ensure!(
        phase == "Completed",
        "the restore through the server ended {phase}"
    );
    let expected = count_in(store, namespaces, seed::namespace);
    let restored = count_in(store, namespaces, |i| plan::served(run, i));
    anyhow::ensure!(
        restored == expected,
        "the server restored {restored} of {expected} objects"
    );
    print(&format!("server {limit}"), restored, &measured);
    Ok(measured)
}

fn print(label: &str, n: usize, m: &Measured) {
    // counts are far below 2^52: exact
    #[allow(clippy::cast_precision_loss)]
    let rate = n as f64 / m.secs;
    println!(
        "{label:<8} n={n} requests_or_items={} secs={:.3} objects_per_sec={rate:.0} peak_rss_mib={:.1}",
        m.objects,
        m.secs,
        mib(m.peak_rss_kib)
    );
}

/// The figures of one size.
struct Row {
    n: usize,
    floor: Runs,
    creates_only: Runs,
    restore: Runs,
    /// The median restore's checking pass, within its wall time.
    check_secs: f64,
    /// The unthrottled server run of every namespace, when there was one.
    server: Option<Measured>,
}

/// Seeds a fresh kube-sim with `n` objects, backs them up, and measures the floor, the restore
/// and the server runs.
async fn measure(n: usize, args: &Args) -> Result<Row> {
    let concurrency = args.concurrency.max(1).to_string();
    let sim = KubeSim::start(SimConfig {
        admin_listen: None,
        ..SimConfig::default()
    })
    .await
    .context("starting kube-sim")?;
    let url = sim.api_url();
    let client = bench_common::client(&url)?;
    seed::install_crd(&client).await?;
    let store = sim.store();
    seed::namespaces(&store)?;
    let started = Instant::now();
    seed::objects(&store, 0, n)?;
    println!(
        "seed     n={n} (store, not HTTP) secs={:.2}",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().context("temporary directory")?;
    let root = dir
        .path()
        .to_str()
        .context("temporary directory is not UTF-8")?;
    let started = Instant::now();
    let items = back_up(&client, root).await?;
    println!(
        "backup   n={n} items={items} (not measured) secs={:.2}",
        started.elapsed().as_secs_f64()
    );

    let (mut floor, mut creates_only, mut restore) =
        (Runs::default(), Runs::default(), Runs::default());
    let look_ahead = args.look_ahead_mib.to_string();
    for round in 0..args.rounds.max(1) {
        let round_text = round.to_string();
        let worker_args = |mode| {
            vec![
                mode,
                "--url",
                &url,
                "--root",
                root,
                "--concurrency",
                &concurrency,
                "--round",
                &round_text,
            ]
        };
        for (part, target, into) in [
            ("parse-create", Target::ParseCreate, &mut floor),
            ("creates-only", Target::CreatesOnly, &mut creates_only),
        ] {
            let mut argv = worker_args("floor");
            argv.extend(["--part", part]);
            let run = run_worker(&argv).await?;
            let created = count(&store, target, round);
            anyhow::ensure!(
                created == n,
                "the floor ({part}) created {created} of {n} objects"
            );
            into.0.push(run);
            if target == Target::ParseCreate {
                let mut argv = worker_args("restore");
                argv.extend(["--look-ahead-mib", &look_ahead]);
                let run = run_worker(&argv).await?;
                let restored = count(&store, Target::Restore, round);
                anyhow::ensure!(
                    restored == n,
                    "the restore created {restored} of {n} objects"
                );
                restore.0.push(run);
            }
        }
    }
    println!(
        "floor    n={n} (archive read and parsed, then creates, in the clock) {}",
        floor.summary()
    );
    println!(
        "creates  n={n} (the floor's creates alone) {}",
        creates_only.summary()
    );
    let median = restore.median();
    // counts are far below 2^52: exact
    #[allow(clippy::cast_precision_loss)]
    let rate = n as f64 / median.secs;
    println!(
        "restore  n={n} {} objects_per_sec={rate:.0} ratio_to_floor={:.2} ratio_to_creates={:.2} warnings={} spilled_mib={:.1}",
        restore.summary(),
        median.secs / floor.median().secs,
        median.secs / creates_only.median().secs,
        median.extra_u64("restore.warnings")?,
        mib(median.extra_u64("restore.spilled_bytes")? >> 10),
    );
    let check_secs: f64 = median
        .extra
        .get("restore.check_secs")
        .context("the worker printed no check_secs")?
        .parse()
        .context("check_secs is not a number")?;
    println!(
        "restore  checking pass of the median round secs={check_secs:.3} (before anything is created)"
    );

    let mut server = None;
    let limits: Vec<&String> = args
        .server_limits
        .iter()
        .filter(|l| !l.is_empty())
        .collect();
    if !limits.is_empty() {
        server_objects(&store, root)?;
        let namespaces = args.server_namespaces.clamp(1, NAMESPACES);
        for (run, limit) in limits.into_iter().enumerate() {
            let measured = through_server(&store, &url, root, run, namespaces, limit).await?;
            if limit == "0:1" && namespaces == NAMESPACES {
                println!(
                    "server   n={n} ratio_to_engine={:.2}",
                    measured.secs / restore.median().secs
                );
                server = Some(measured);
            }
        }
    }
    sim.shutdown().await;
    Ok(Row {
        n,
        floor,
        creates_only,
        restore,
        check_secs,
        server,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    match args.worker {
        Some(Worker::Floor {
            url,
            root,
            concurrency,
            part,
            round,
        }) => {
            let target = match part {
                FloorPart::ParseCreate => Target::ParseCreate,
                FloorPart::CreatesOnly => Target::CreatesOnly,
            };
            return worker::floor(&url, &root, concurrency, target, round).await;
        }
        Some(Worker::Restore {
            url,
            root,
            concurrency,
            look_ahead_mib,
            round,
        }) => {
            return worker::restore(&url, &root, concurrency, look_ahead_mib << 20, round).await;
        }
        Some(Worker::Server {
            url,
            root,
            run,
            namespaces,
            flags,
        }) => return server::restore(&url, &root, run, namespaces, &flags).await,
        None => {}
    }
    anyhow::ensure!(!args.sizes.is_empty(), "--sizes is empty");
    let mut rows = Vec::new();
    for &n in &args.sizes {
        rows.push(measure(n, &args).await?);
    }

    println!("goals");
    let mut figures = Vec::new();
    for row in &rows {
        let n = row.n;
        let restore = row.restore.median();
        let ratio = restore.secs / row.floor.median().secs;
        println!(
            "  n={n} restore wall <= {GOAL_WALL_RATIO}x floor (parse + create): {ratio:.2}x {}",
            verdict(ratio <= GOAL_WALL_RATIO)
        );
        // counts are far below 2^52: exact
        #[allow(clippy::cast_precision_loss)]
        let rate = n as f64 / restore.secs;
        println!(
            "  n={n} restore >= {GOAL_RATE} objects/s: {rate:.0} {}",
            verdict(rate >= GOAL_RATE)
        );
        push_figures(&mut figures, n, "restore", restore);
        push_figures(&mut figures, n, "floor", row.floor.median());
        push_figures(&mut figures, n, "creates_only", row.creates_only.median());
        figures.push(format!("n{n}_wall_ratio={ratio:.2}"));
        figures.push(format!("n{n}_check_secs={:.3}", row.check_secs));
        if let Some(server) = &row.server {
            push_server_figures(&mut figures, n, server, restore.secs);
        }
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let rss = mib(last.restore.peak_rss_kib());
        println!(
            "  n={} restore peak RSS <= {GOAL_RSS_MIB} MiB: {rss:.1} MiB {}",
            last.n,
            verdict(rss <= GOAL_RSS_MIB)
        );
        if rows.len() > 1 {
            let growth = rss / mib(first.restore.peak_rss_kib());
            println!(
                "  restore RSS n={} / n={} <= {GOAL_RSS_GROWTH}: {growth:.2} {}",
                last.n,
                first.n,
                verdict(growth <= GOAL_RSS_GROWTH)
            );
            figures.push(format!("rss_growth={growth:.2}"));
        }
    }
    figures.push(format!(
        "concurrency={} look_ahead_mib={}",
        args.concurrency.max(1),
        args.look_ahead_mib
    ));
    println!("{}", figures.join(" "));
    Ok(())
}
