//! Backup engine wall time and peak memory against a floor measured in the same run.
//! `cargo run --release -p bench-backup`. kube-sim runs in this (parent) process; the floor
//! and the backup each run in a child process (this binary in worker mode) whose own peak RSS
//! (`VmHWM`) is reported. The floor is the least work that does the same job (`worker::Part`):
//! the same four LISTs at once, head-only decoding, and a pipelined gzip thread over the bytes
//! the archive holds, into a file; its LIST-only and gzip-only parts are measured apart, and
//! the larger of the two is a lower bound no pipeline can beat. Every size runs `--rounds`
//! interleaved rounds (floor, backup, LIST-only, gzip-only) and reports medians and spread. With `--through-server` the same backup also runs through `hawser
//! server` in a child process (`server.rs`). With `--sealed` the backup also runs with its
//! archive sealed (archive encryption), interleaved with plain runs, medians compared. Goals are
//! printed with PASS/MISS, never asserted; the last line holds the figures as `key=value`.

mod server;
mod worker;

use std::path::PathBuf;

use anyhow::{Context, Result};
use bench_common::worker::{Runs, run as run_child};
use bench_common::{mib, push_figures, push_server_figures, seed, verdict};
use clap::{Parser, Subcommand};
use kube_sim::{KubeSim, SimConfig};

/// The backup's wall time, at most this many times the floor's, at every size.
const GOAL_WALL_RATIO: f64 = 1.15;
/// The backup's peak RSS at sizes up to 100k, in MiB.
const GOAL_RSS_MIB: f64 = 64.0;
/// The backup's peak RSS at 1M over that at 100k.
const GOAL_RSS_GROWTH: f64 = 1.1;

#[derive(Parser, Debug)]
#[command(about = "hawser backup engine against a LIST + gzip floor")]
struct Args {
    #[command(subcommand)]
    worker: Option<Worker>,
    /// Object counts, ascending (100000 and 1000000 are compared for the RSS growth goal).
    #[arg(long, env = "BENCH_SIZES", value_delimiter = ',', default_values_t = [10_000, 100_000])]
    sizes: Vec<usize>,
    /// Also back each size up through `hawser server` (in a child process, against the same
    /// kube-sim): the end-to-end time, its ratio to the engine's, and the server's peak RSS.
    #[arg(long, env = "BENCH_THROUGH_SERVER")]
    through_server: bool,
    /// Also run each size's backup with its archive sealed (archive encryption), interleaved
    /// with the plain one `--sealed-runs` times each; the medians and their ratio are printed.
    #[arg(long, env = "BENCH_SEALED")]
    sealed: bool,
    /// Runs of each of the plain and the sealed backup with `--sealed`.
    #[arg(long, env = "BENCH_SEALED_RUNS", default_value_t = 3)]
    sealed_runs: usize,
    /// Interleaved rounds of the floor and the backup at every size (at least 1).
    #[arg(long, env = "BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
}

#[derive(Subcommand, Debug)]
enum Worker {
    /// Child: a part of the floor, writing into `dir`.
    Floor {
        #[arg(long)]
        url: String,
        #[arg(long, value_enum)]
        part: worker::Part,
        #[arg(long)]
        dir: PathBuf,
    },
    /// Child: hawser backup into a filesystem location under `root`.
    Backup {
        #[arg(long)]
        url: String,
        #[arg(long)]
        root: PathBuf,
        /// Seal the archive with a key (archive encryption).
        #[arg(long)]
        sealed: bool,
    },
    /// Child: `hawser server` with its location under `root`, and Backup `name` through it.
    Server {
        #[arg(long)]
        url: String,
        #[arg(long)]
        root: String,
        #[arg(long)]
        name: String,
    },
}

/// The plain and the sealed backup of `n` objects, `runs` times each, interleaved (plain,
/// sealed, plain, …); prints each median wall time and their ratio.
async fn sealed_pairs(url: &str, n: usize, runs: usize) -> Result<()> {
    let mut plain = Vec::new();
    let mut sealed = Vec::new();
    for _ in 0..runs.max(1) {
        for (seal, into) in [(false, &mut plain), (true, &mut sealed)] {
            let dir = tempfile::tempdir().context("temporary directory")?;
            let root = dir
                .path()
                .to_str()
                .context("temporary directory is not UTF-8")?;
            let mut args = vec!["backup", "--url", url, "--root", root];
            if seal {
                args.push("--sealed");
            }
            let run = run_child(&args).await?;
            anyhow::ensure!(
                run.extra_u64("archive.items")? == n as u64,
                "a backup's archive holds another count than {n}"
            );
            into.push(run.secs);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (plain, sealed) = (median(&mut plain), median(&mut sealed));
    println!(
        "sealed   n={n} runs={runs} plain_median_secs={plain:.3} sealed_median_secs={sealed:.3} sealed_over_plain={:.2}",
        sealed / plain
    );
    Ok(())
}

/// The figures of one size.
struct Row {
    n: usize,
    floor: Runs,
    list_only: Runs,
    gzip_only: Runs,
    backup: Runs,
    server: Option<bench_common::worker::Measured>,
}

/// The goals with PASS/MISS, then the figures as one line of `key=value`.
fn print_goals(rows: &[Row]) {
    println!("goals");
    let mut figures = Vec::new();
    for row in rows {
        let n = row.n;
        let ratio = row.backup.median().secs / row.floor.median().secs;
        let rss = mib(row.backup.peak_rss_kib());
        println!(
            "  n={n} wall <= {GOAL_WALL_RATIO}x floor: {ratio:.2}x {}",
            verdict(ratio <= GOAL_WALL_RATIO)
        );
        if n <= 100_000 {
            println!(
                "  n={n} peak RSS <= {GOAL_RSS_MIB} MiB: {rss:.1} MiB {}",
                verdict(rss <= GOAL_RSS_MIB)
            );
        }
        push_figures(&mut figures, n, "backup", row.backup.median());
        push_figures(&mut figures, n, "floor", row.floor.median());
        push_figures(&mut figures, n, "list_only", row.list_only.median());
        push_figures(&mut figures, n, "gzip_only", row.gzip_only.median());
        figures.push(format!("n{n}_wall_ratio={ratio:.2}"));
        if let Some(server) = &row.server {
            push_server_figures(&mut figures, n, server, row.backup.median().secs);
        }
    }
    let at = |n: usize| rows.iter().find(|r| r.n == n);
    if let (Some(small), Some(large)) = (at(100_000), at(1_000_000)) {
        // KiB counts are far below 2^52: exact
        #[allow(clippy::cast_precision_loss)]
        let growth = large.backup.peak_rss_kib() as f64 / small.backup.peak_rss_kib() as f64;
        println!(
            "  RSS n=1000000 / n=100000 <= {GOAL_RSS_GROWTH}: {growth:.2} {}",
            verdict(growth <= GOAL_RSS_GROWTH)
        );
        figures.push(format!("rss_growth_1m_100k={growth:.2}"));
    }
    println!("{}", figures.join(" "));
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    match args.worker {
        Some(Worker::Floor { url, part, dir }) => return worker::floor(&url, part, &dir).await,
        Some(Worker::Backup { url, root, sealed }) => {
            return worker::backup(&url, &root, sealed).await;
        }
        Some(Worker::Server { url, root, name }) => {
            return server::backup(&url, &root, &name).await;
        }
        None => {}
    }
    anyhow::ensure!(!args.sizes.is_empty(), "--sizes is empty");
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
    // The server's location: one directory for the run, a backup per size.
    let server_dir = tempfile::tempdir().context("temporary directory")?;
    let server_root = server_dir
        .path()
        .to_str()
        .context("temporary directory is not UTF-8")?;
    if args.through_server {
        bench_common::server::install(&store, server_root)?;
    }

    let mut rows = Vec::new();
    let mut loaded = 0;
    for &n in &args.sizes {
        let started = std::time::Instant::now();
        seed::objects(&store, loaded, n)?;
        loaded = loaded.max(n);
        println!(
            "seed     n={n} (store, not HTTP) secs={:.2}",
            started.elapsed().as_secs_f64()
        );
        let mut row = Row {
            n,
            floor: Runs::default(),
            list_only: Runs::default(),
            gzip_only: Runs::default(),
            backup: Runs::default(),
            server: None,
        };
        for _ in 0..args.rounds.max(1) {
            let dir = tempfile::tempdir().context("temporary directory")?;
            let root = dir
                .path()
                .to_str()
                .context("temporary directory is not UTF-8")?;
            let floor = |part| {
                let root = root.to_owned();
                let url = url.clone();
                async move {
                    let run = run_child(&["floor", "--url", &url, "--part", part, "--dir", &root])
                        .await?;
                    anyhow::ensure!(
                        run.objects == n as u64,
                        "floor {part} listed {} of {n}",
                        run.objects
                    );
                    Ok(run)
                }
            };
            row.floor.0.push(floor("full").await?);
            let backup = run_child(&["backup", "--url", &url, "--root", root]).await?;
            let archived = backup.extra_u64("archive.items")?;
            anyhow::ensure!(
                archived == n as u64,
                "archive holds {archived} of {n} objects"
            );
            row.backup.0.push(backup);
            row.list_only.0.push(floor("list-only").await?);
            row.gzip_only.0.push(floor("gzip-only").await?);
        }
        let (floor, backup) = (row.floor.median().secs, row.backup.median().secs);
        let bound = row.list_only.median().secs.max(row.gzip_only.median().secs);
        println!("floor    n={n} {}", row.floor.summary());
        println!(
            "list     n={n} (LIST and head decoding only) {}",
            row.list_only.summary()
        );
        println!(
            "gzip     n={n} (gzip of the same bytes only) {}",
            row.gzip_only.summary()
        );
        // counts are far below 2^52: exact
        #[allow(clippy::cast_precision_loss)]
        let rate = n as f64 / backup;
        println!(
            "backup   n={n} {} objects_per_sec={rate:.0} ratio_to_floor={:.2} ratio_to_lower_bound={:.2}",
            row.backup.summary(),
            backup / floor,
            backup / bound
        );
        if args.sealed {
            sealed_pairs(&url, n, args.sealed_runs).await?;
        }
        if args.through_server {
            let name = format!("bench-server-{n}");
            let served = run_child(&[
                "server",
                "--url",
                &url,
                "--root",
                server_root,
                "--name",
                &name,
            ])
            .await?;
            let phase = served.extra.get("server.phase").map_or("?", String::as_str);
            anyhow::ensure!(
                phase == "Completed",
                "the backup through the server ended {phase}"
            );
            let record = server_dir.path().join("bench/backups").join(&name);
            anyhow::ensure!(
                record.join("velero-backup.json").is_file(),
                "the server stored no velero-backup.json"
            );
            println!(
                "server   n={n} items={} secs={:.3} peak_rss_mib={:.1} ratio_to_engine={:.2}",
                served.objects,
                served.secs,
                mib(served.peak_rss_kib),
                served.secs / backup
            );
            row.server = Some(served);
        }
        rows.push(row);
    }

    print_goals(&rows);
    sim.shutdown().await;
    Ok(())
}
