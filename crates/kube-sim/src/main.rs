//! The `kube-sim` binary: a loopback Kubernetes API server with an admin (fault) listener.
//!
//! Prints `api: http://HOST:PORT` and `admin: http://HOST:PORT` as its first two lines. With
//! `--upstream-kubeconfig` it proxies to a real API server instead of serving from memory.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kube_sim::{KubeSim, SimConfig, Upstream};

#[derive(Debug, Parser)]
#[command(
    name = "kube-sim",
    about = "A loopback Kubernetes API server with fault injection"
)]
struct Args {
    /// API listen address (port 0 picks a free port).
    #[arg(long, env = "KUBE_SIM_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Admin (fault injection and request log) listen address.
    #[arg(long, env = "KUBE_SIM_ADMIN_LISTEN", default_value = "127.0.0.1:0")]
    admin_listen: SocketAddr,
    /// Write a kubeconfig pointing at the API listener here.
    #[arg(long, env = "KUBE_SIM_KUBECONFIG_OUT")]
    kubeconfig_out: Option<PathBuf>,
    /// Multi-document YAML files of objects to load at start (CRDs first).
    #[arg(long, conflicts_with = "upstream_kubeconfig")]
    load: Vec<PathBuf>,
    /// Proxy mode: forward every API request to the cluster of this kubeconfig's current context
    /// (with its credentials), applying faults and logging as usual.
    #[arg(long, env = "KUBE_SIM_UPSTREAM_KUBECONFIG")]
    upstream_kubeconfig: Option<PathBuf>,
    /// Change events kept for watch resumption.
    #[arg(long, env = "KUBE_SIM_WATCH_HISTORY", default_value_t = 100_000)]
    watch_history: usize,
    /// Delete objects whose ownerReferences all name missing uids (garbage collector).
    #[arg(long, env = "KUBE_SIM_GC")]
    gc: bool,
    /// Seconds between watch BOOKMARK events.
    #[arg(long, env = "KUBE_SIM_BOOKMARK_INTERVAL", default_value_t = 60.0)]
    bookmark_interval: f64,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let upstream = match &args.upstream_kubeconfig {
        Some(path) => match Upstream::from_kubeconfig(path) {
            Ok(u) => Some(u),
            Err(e) => {
                eprintln!("kube-sim: --upstream-kubeconfig: {}", error_chain(&e));
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let config = SimConfig {
        listen: args.listen,
        admin_listen: Some(args.admin_listen),
        watch_history: args.watch_history,
        bookmark_interval: Duration::from_secs_f64(args.bookmark_interval.max(0.01)),
        garbage_collection: args.gc,
        upstream,
        ..SimConfig::default()
    };
    let sim = match KubeSim::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kube-sim: cannot start: {}", error_chain(&e));
            return ExitCode::from(1);
        }
    };
    for path in &args.load {
        if let Err(e) = sim.store().load_file(path) {
            eprintln!("kube-sim: loading {}: {}", path.display(), error_chain(&e));
            return ExitCode::from(1);
        }
    }
    if let Some(p) = &args.kubeconfig_out
        && let Err(e) = sim.write_kubeconfig(p)
    {
        eprintln!("kube-sim: {}", error_chain(&e));
        return ExitCode::from(1);
    }
    let mut out = std::io::stdout().lock();
    let admin = sim.admin_url().unwrap_or_default();
    if writeln!(out, "api: {}\nadmin: {admin}", sim.api_url())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::from(1);
    }
    drop(out);
    wait_for_signal().await;
    sim.shutdown().await;
    ExitCode::SUCCESS
}

/// Ctrl-C or SIGTERM.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
