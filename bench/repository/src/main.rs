//! `bench-repository`: backup and restore of a data set into a kopia repository in a local
//! directory, by `hawser-kopia` and by kopia's CLI (`--kopia`, built by
//! `scripts/build-kopia.sh`), against a floor that does the least work of a backup: read every
//! byte, hash it with keyed BLAKE2b and encrypt it with AES-256-GCM, in 4 MiB pieces, writing
//! nothing. Each measurement runs in a worker process (its peak RSS is its own; kopia's is
//! sampled from `/proc` while it runs); rounds are interleaved (floor, hawser, kopia, …) and
//! medians reported.
//!
//! Data sets: `big` (one file), `mixed` (files from 4 KiB to 8 MiB), `small` (many 1–4 KiB
//! files), of random bytes. See docs/bench-repository.md.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result};
use bench_common::worker::{self, Measured, Runs};
use clap::Parser;

#[derive(Parser, Debug)]
struct Args {
    #[command(subcommand)]
    worker: Option<Worker>,
    /// Data sets: big, mixed, small.
    #[arg(long, value_delimiter = ',', default_value = "big,mixed,small")]
    sets: Vec<String>,
    /// Size of the `big` file, MiB.
    #[arg(long, default_value_t = 512)]
    big_mib: u64,
    /// Total size of the `mixed` set, MiB.
    #[arg(long, default_value_t = 256)]
    mixed_mib: u64,
    /// Files of the `small` set.
    #[arg(long, default_value_t = 20_000)]
    small_files: u64,
    /// Rounds of each measurement.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// kopia's CLI, measured beside hawser when given.
    #[arg(long)]
    kopia: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum Worker {
    Floor {
        data: PathBuf,
    },
    Backup {
        data: PathBuf,
        repo: PathBuf,
    },
    Restore {
        repo: PathBuf,
        target: PathBuf,
    },
    Kopia {
        kopia: PathBuf,
        config: PathBuf,
        args: Vec<String>,
    },
}

const PASSWORD: &str = "bench-password";

fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// Writes data set `set` under `dir`; returns its bytes and files.
fn generate(set: &str, dir: &Path, args: &Args) -> Result<(u64, u64)> {
    std::fs::create_dir_all(dir)?;
    let mut total = (0u64, 0u64);
    let mut write = |path: PathBuf, len: usize, seed: u64| -> Result<()> {
        std::fs::create_dir_all(path.parent().context("a parent")?)?;
        std::fs::write(&path, noise(len, seed))?;
        total.0 += len as u64;
        total.1 += 1;
        Ok(())
    };
    match set {
        "big" => write(dir.join("big.bin"), usize::try_from(args.big_mib << 20)?, 1)?,
        "mixed" => {
            let mut left = args.mixed_mib << 20;
            let mut i = 0u64;
            while left > 0 {
                // 4 KiB, 64 KiB, 1 MiB, 8 MiB in turn.
                let len =
                    [4u64 << 10, 64 << 10, 1 << 20, 8 << 20][usize::try_from(i % 4)?].min(left);
                write(
                    dir.join(format!("d{}/f{i}", i % 16)),
                    usize::try_from(len)?,
                    i + 7,
                )?;
                left -= len;
                i += 1;
            }
        }
        "small" => {
            for i in 0..args.small_files {
                let len = 1024 + usize::try_from(i % 3072)?;
                write(dir.join(format!("d{}/f{i}", i % 100)), len, i + 11)?;
            }
        }
        other => anyhow::bail!("unknown data set {other}"),
    }
    Ok(total)
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The floor: read, hash and encrypt every byte in 4 MiB pieces.
fn floor(data: &Path) -> Result<()> {
    use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
    let started = Instant::now();
    let key = LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &[7u8; 32]).map_err(|_| anyhow::anyhow!("key"))?,
    );
    let mut buffer = vec![0u8; 4 << 20];
    let mut bytes = 0u64;
    for path in files_under(data)? {
        let mut file = std::fs::File::open(&path)?;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            let hash = blake2b_simd::Params::new()
                .hash_length(32)
                .key(&[9u8; 32])
                .hash(&buffer[..n]);
            let hash = hash.as_bytes();
            let mut sealed = buffer[..n].to_vec();
            key.seal_in_place_append_tag(
                Nonce::try_assume_unique_for_key(&hash[..12])
                    .map_err(|_| anyhow::anyhow!("nonce"))?,
                Aad::from(&hash[..16]),
                &mut sealed,
            )
            .map_err(|_| anyhow::anyhow!("seal"))?;
            bytes += n as u64;
        }
    }
    worker::report(bytes, started)
}

fn blobs(repo: &Path) -> Result<hawser_kopia::Blobs> {
    std::fs::create_dir_all(repo)?;
    let spec = hawser_store::LocationSpec::new("filesystem", "bench")
        .with_config("root", repo.display().to_string());
    let location = hawser_store::Location::new(&spec)?;
    Ok(hawser_kopia::Blobs::new(location, "kopia/bench"))
}

async fn backup(data: &Path, repo: &Path) -> Result<()> {
    let started = Instant::now();
    let mut repository = hawser_kopia::Repository::create(blobs(repo)?, PASSWORD).await?;
    let source = hawser_kopia::SourceInfo {
        host: "default".to_owned(),
        user: "default".to_owned(),
        path: data.display().to_string(),
    };
    repository
        .write_snapshot(data, &source, &Default::default())
        .await?;
    let bytes: u64 = files_under(data)?
        .iter()
        .map(|p| p.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    worker::report(bytes, started)
}

async fn restore(repo: &Path, target: &Path) -> Result<()> {
    let started = Instant::now();
    let repository = hawser_kopia::Repository::open(blobs(repo)?, PASSWORD).await?;
    let snapshot = repository.snapshots().await?.pop().context("no snapshot")?;
    let stats = repository
        .restore(&snapshot, target, hawser_kopia::RestoreOptions::default())
        .await?;
    worker::report(stats.bytes, started)
}

/// Runs kopia with `args`; its wall time and peak RSS (sampled from `/proc` every 5 ms).
fn kopia(kopia: &Path, config: &Path, args: &[String]) -> Result<()> {
    let started = Instant::now();
    let mut child = std::process::Command::new(kopia)
        .args(args)
        .env("KOPIA_PASSWORD", PASSWORD)
        .env("KOPIA_CONFIG_PATH", config)
        // Its cache beside its configuration, removed with the run's directory.
        .env("KOPIA_CACHE_DIRECTORY", config.with_extension("cache"))
        .env("KOPIA_CHECK_FOR_UPDATES", "false")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:"))
        {
            peak = peak.max(
                line.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0),
            );
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    anyhow::ensure!(status.success(), "kopia {args:?} failed");
    println!(
        "result objects=0 secs={:.4} peak_rss_kib={peak}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn rate(bytes: u64, m: &Measured) -> f64 {
    bench_common::mib(bytes / 1024) / m.secs
}

async fn run_worker(w: Worker) -> Result<()> {
    match w {
        Worker::Floor { data } => floor(&data),
        Worker::Backup { data, repo } => backup(&data, &repo).await,
        Worker::Restore { repo, target } => restore(&repo, &target).await,
        Worker::Kopia {
            kopia: k,
            config,
            args,
        } => kopia(&k, &config, &args),
    }
}

async fn measure(args: &[String]) -> Result<Measured> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    worker::run(&args).await
}

fn line(name: &str, bytes: u64, files: u64, runs: &Runs, floor: Option<&Runs>) -> String {
    let m = runs.median();
    let files_per_s = files as f64 / m.secs;
    let ratio = floor.map_or(String::new(), |f| {
        format!(" floor_ratio={:.2}", m.secs / f.median().secs)
    });
    format!(
        "{name:<16} MB/s={:8.1} files/s={files_per_s:9.0} {}{ratio}",
        rate(bytes, m),
        runs.summary()
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(w) = args.worker {
        return run_worker(w).await;
    }
    let work = tempfile::tempdir()?;
    let s = |p: &Path| p.display().to_string();
    for set in &args.sets {
        let data = work.path().join(format!("data-{set}"));
        let (bytes, files) = generate(set, &data, &args)?;
        println!("set {set}: {} MiB in {files} files", bytes >> 20);
        let (mut fl, mut hb, mut hr, mut kb, mut kr) = (
            Runs::default(),
            Runs::default(),
            Runs::default(),
            Runs::default(),
            Runs::default(),
        );
        for round in 0..args.rounds {
            fl.0.push(measure(&["floor".into(), s(&data)]).await?);
            let repo = work.path().join(format!("repo-{set}-{round}"));
            hb.0.push(measure(&["backup".into(), s(&data), s(&repo)]).await?);
            let target = work.path().join(format!("restored-{set}-{round}"));
            hr.0.push(measure(&["restore".into(), s(&repo), s(&target)]).await?);
            std::fs::remove_dir_all(&target)?;
            std::fs::remove_dir_all(&repo)?;
            if let Some(k) = &args.kopia {
                let config = work.path().join(format!("kopia-{set}-{round}.config"));
                let krepo = work.path().join(format!("krepo-{set}-{round}"));
                let kopia_run = |kargs: Vec<String>| {
                    let mut all = vec!["kopia".into(), s(k), s(&config), "--".into()];
                    all.extend(kargs);
                    all
                };
                measure(&kopia_run(vec![
                    "repository".into(),
                    "create".into(),
                    "filesystem".into(),
                    "--path".into(),
                    s(&krepo),
                ]))
                .await?;
                kb.0.push(
                    measure(&kopia_run(vec![
                        "snapshot".into(),
                        "create".into(),
                        s(&data),
                    ]))
                    .await?,
                );
                let target = work.path().join(format!("krestored-{set}-{round}"));
                let listed = std::process::Command::new(k)
                    .args(["snapshot", "list", "--json", &s(&data)])
                    .env("KOPIA_PASSWORD", PASSWORD)
                    .env("KOPIA_CONFIG_PATH", &config)
                    .env("KOPIA_CACHE_DIRECTORY", config.with_extension("cache"))
                    .env("KOPIA_CHECK_FOR_UPDATES", "false")
                    .output()?;
                let listed: serde_json::Value = serde_json::from_slice(&listed.stdout)?;
                let id = listed[0]["id"]
                    .as_str()
                    .context("kopia listed no snapshot")?
                    .to_owned();
                kr.0.push(measure(&kopia_run(vec!["restore".into(), id, s(&target)])).await?);
                std::fs::remove_dir_all(&target)?;
                std::fs::remove_dir_all(&krepo)?;
            }
        }
        println!("{}", line("floor", bytes, files, &fl, None));
        println!("{}", line("hawser backup", bytes, files, &hb, Some(&fl)));
        if args.kopia.is_some() {
            println!("{}", line("kopia backup", bytes, files, &kb, Some(&fl)));
        }
        println!("{}", line("hawser restore", bytes, files, &hr, None));
        if args.kopia.is_some() {
            println!("{}", line("kopia restore", bytes, files, &kr, None));
        }
        std::fs::remove_dir_all(&data)?;
    }
    Ok(())
}
