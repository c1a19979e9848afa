//! The server under test as a process: started with the run's settings, its process tree's
//! peak proportional set size (PSS) sampled, its log's error lines read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::{Args, Cluster, Contender, Which};

/// The server process, with a sampler of its process tree's memory: the sum of each process's
/// PSS (a page shared by N processes counts 1/N in each), so that Velero's plugin processes
/// count without their shared pages counted twice.
pub(crate) struct Running {
    child: tokio::process::Child,
    peak_kib: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(crate) fn start(
        contender: Contender,
        args: &Args,
        c: &Cluster,
        log: &Path,
    ) -> Result<Running> {
        let which = contender.which;
        let kubeconfig = c.kubeconfig();
        let qps = args.client_qps.to_string();
        let burst = args.client_burst.to_string();
        let mut common: Vec<String> = [
            "--kubeconfig",
            kubeconfig.to_str().context("UTF-8 path")?,
            "--namespace",
            "velero",
            "--resource-timeout",
            &args.resource_timeout,
            "--client-qps",
            &qps,
            "--client-burst",
            &burst,
            "--metrics-address",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let mut command = match which {
            Which::Hawser => {
                let mut cmd = tokio::process::Command::new(hawser_binary(args)?);
                // The location's s3Url is moto's: trusted with the location's credentials.
                cmd.arg("server")
                    .arg("--leader-elect=false")
                    .arg("--trusted-endpoint")
                    .arg(&args.s3);
                cmd
            }
            Which::Velero => {
                let velero_dir = args
                    .velero_dir
                    .as_deref()
                    .context("--velero-dir names Velero's binaries")?;
                let plugins = c.dir.path().join("plugins");
                std::fs::create_dir_all(&plugins)?;
                let plugin = plugins.join("velero-plugin-for-aws");
                if !plugin.exists() {
                    std::fs::copy(velero_dir.join("velero-plugin-for-aws"), &plugin)?;
                }
                let mut cmd = tokio::process::Command::new(velero_dir.join("velero"));
                cmd.arg("server").arg("--plugin-dir").arg(&plugins);
                common.extend([
                    "--profiler-address".into(),
                    "127.0.0.1:0".into(),
                    "--item-block-worker-count".into(),
                    contender.item_block_workers.to_string(),
                ]);
                cmd
            }
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let child = command
            .args(&common)
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_REGION", "us-east-1")
            .env_remove("VELERO_NAMESPACE")
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", contender.name()))?;
        let pid = child.id().context("no pid")?;
        let peak_kib = Arc::new(AtomicU64::new(0));
        let peak = peak_kib.clone();
        let sampler = tokio::spawn(async move {
            loop {
                peak.fetch_max(tree_pss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Ok(Running {
            child,
            peak_kib,
            sampler,
        })
    }

    /// The peak since the last call.
    pub(crate) fn take_peak(&self) -> u64 {
        self.peak_kib.swap(0, Ordering::Relaxed)
    }

    pub(crate) async fn stop(mut self) {
        self.sampler.abort();
        let _ = self.child.kill().await;
    }
}

/// The server log's error lines (the log is removed with the cluster's directory).
pub(crate) fn error_lines(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("level=error") || l.contains("ERROR"))
        .take(20)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The server log's last lines.
pub(crate) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn hawser_binary(args: &Args) -> Result<PathBuf> {
    match &args.hawser {
        Some(p) => Ok(p.clone()),
        None => Ok(std::env::current_exe()?
            .parent()
            .context("no directory")?
            .join("hawser")),
    }
}

/// PSS in KiB of `pid` and every process below it.
fn tree_pss_kib(pid: u32) -> u64 {
    let mut parent_of: HashMap<u32, u32> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            // pid (comm) state ppid ...; comm may hold spaces and parentheses.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r)
                && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|v| v.parse().ok())
            {
                parent_of.insert(p, ppid);
            }
        }
    }
    let in_tree = |mut p: u32| {
        for _ in 0..64 {
            if p == pid {
                return true;
            }
            match parent_of.get(&p) {
                Some(&pp) if pp != 0 => p = pp,
                _ => return false,
            }
        }
        false
    };
    parent_of
        .keys()
        .filter(|p| in_tree(**p))
        .map(|p| {
            std::fs::read_to_string(format!("/proc/{p}/smaps_rollup"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("Pss:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                })
                .unwrap_or(0)
        })
        .sum()
}
