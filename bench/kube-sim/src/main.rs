//! Throughput of kube-sim as kube-rs sees it: creates at a fixed concurrency, paged LISTs over
//! 10k and 100k ConfigMaps, and merge patches. Run in release:
//! `cargo run --release -p bench-kube-sim`. Prints one line per measurement and a final
//! `key=value` summary line.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use kube_sim::{KubeSim, SimConfig};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "kube-sim throughput through kube-rs")]
struct Args {
    /// ConfigMaps created through the API (measured) before the first LIST.
    #[arg(long, env = "BENCH_SMALL", default_value_t = 10_000)]
    small: usize,
    /// Total ConfigMaps for the second LIST (the rest are seeded through the store directly).
    #[arg(long, env = "BENCH_LARGE", default_value_t = 100_000)]
    large: usize,
    /// Concurrent requests for creates and patches.
    #[arg(long, env = "BENCH_CONCURRENCY", default_value_t = 16)]
    concurrency: usize,
    /// LIST page size (kube-rs watcher's default).
    #[arg(long, env = "BENCH_PAGE", default_value_t = 500)]
    page: u32,
    /// Merge patches to send.
    #[arg(long, env = "BENCH_PATCHES", default_value_t = 5_000)]
    patches: usize,
    /// Full paged LISTs per size; the median is reported.
    #[arg(long, env = "BENCH_LIST_ROUNDS", default_value_t = 3)]
    list_rounds: usize,
}

fn config_map(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:06}")),
            namespace: Some("bench".into()),
            labels: Some([("app".to_string(), "bench".to_string())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_string(), format!("value-{i}"))].into()),
        ..ConfigMap::default()
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    // counts are far below 2^52, the conversion is exact
    #[allow(clippy::cast_precision_loss)]
    let n = n as f64;
    n / d.as_secs_f64()
}

async fn create_range(
    api: &Api<ConfigMap>,
    from: usize,
    to: usize,
    concurrency: usize,
) -> Result<Duration> {
    let start = Instant::now();
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(i))
                    .await
                    .with_context(|| format!("creating cm-{i:06}"))
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await?;
    Ok(start.elapsed())
}

/// One full paged LIST; returns the object count and the duration.
async fn paged_list(api: &Api<ConfigMap>, page: u32) -> Result<(usize, Duration)> {
    let start = Instant::now();
    let mut n = 0;
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(page);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let list = api.list(&lp).await.context("paged LIST")?;
        n += list.items.len();
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    Ok((n, start.elapsed()))
}

/// Median LIST rate over `rounds` full paged LISTs, checking every round sees `expect` objects.
async fn list_rate(
    api: &Api<ConfigMap>,
    page: u32,
    rounds: usize,
    expect: usize,
) -> Result<(f64, Duration)> {
    let mut results = Vec::new();
    for _ in 0..rounds.max(1) {
        let (n, d) = paged_list(api, page).await?;
        anyhow::ensure!(n == expect, "LIST returned {n} objects, expected {expect}");
        results.push(d);
    }
    results.sort();
    let median = results[results.len() / 2];
    Ok((rate(expect, median), median))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.large >= args.small, "--large must be at least --small");
    let sim = KubeSim::start(SimConfig {
        admin_listen: None,
        ..SimConfig::default()
    })
    .await
    .context("starting kube-sim")?;
    let url = sim.api_url().parse().context("kube-sim URL")?;
    let client = Client::try_from(Config::new(url)).context("building the client")?;
    sim.store()
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}))
        .context("creating namespace bench")?;
    let api: Api<ConfigMap> = Api::namespaced(client, "bench");

    let d = create_range(&api, 0, args.small, args.concurrency).await?;
    let create_rate = rate(args.small, d);
    println!(
        "create   n={} concurrency={} secs={:.3} objects_per_sec={create_rate:.0}",
        args.small,
        args.concurrency,
        d.as_secs_f64()
    );

    let (list_small, d) = list_rate(&api, args.page, args.list_rounds, args.small).await?;
    println!(
        "list     n={} page={} median_secs={:.3} objects_per_sec={list_small:.0}",
        args.small,
        args.page,
        d.as_secs_f64()
    );

    let start = Instant::now();
    let store = sim.store();
    for i in args.small..args.large {
        let obj = serde_json::to_value(config_map(i)).context("serialising a ConfigMap")?;
        let mut obj = obj;
        obj["apiVersion"] = json!("v1");
        obj["kind"] = json!("ConfigMap");
        store
            .insert(obj)
            .with_context(|| format!("seeding cm-{i:06}"))?;
    }
    let d = start.elapsed();
    let seeded = args.large - args.small;
    println!(
        "seed     n={seeded} (store, not HTTP) secs={:.3} objects_per_sec={:.0}",
        d.as_secs_f64(),
        rate(seeded, d)
    );

    let (list_large, d) = list_rate(&api, args.page, args.list_rounds, args.large).await?;
    println!(
        "list     n={} page={} median_secs={:.3} objects_per_sec={list_large:.0}",
        args.large,
        args.page,
        d.as_secs_f64()
    );

    let patches = args.patches.min(args.large);
    let start = Instant::now();
    futures::stream::iter(0..patches)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = format!("cm-{i:06}");
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"patched": "yes"}})),
                )
                .await
                .with_context(|| format!("patching {name}"))
            }
        })
        .buffer_unordered(args.concurrency)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await?;
    let d = start.elapsed();
    let patch_rate = rate(patches, d);
    println!(
        "patch    n={patches} type=merge concurrency={} secs={:.3} objects_per_sec={patch_rate:.0}",
        args.concurrency,
        d.as_secs_f64()
    );

    println!(
        "summary create_per_sec={create_rate:.0} list_{}_per_sec={list_small:.0} list_{}_per_sec={list_large:.0} merge_patch_per_sec={patch_rate:.0} concurrency={} page={}",
        args.small, args.large, args.concurrency, args.page
    );
    sim.shutdown().await;
    Ok(())
}
