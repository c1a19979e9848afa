//! The measured side of a benchmark runs in a worker process: the benchmark's own binary,
//! re-executed with a subcommand. The worker prints `result objects=<n> secs=<s>
//! peak_rss_kib=<k>` (and any other `<word> key=value …` lines); the parent parses them.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};

/// What a worker printed.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    /// Objects handled by the measured work.
    pub objects: u64,
    /// Wall time of the measured work, inside the worker.
    pub secs: f64,
    /// The worker's peak RSS (`VmHWM`) at its end, in KiB.
    pub peak_rss_kib: u64,
    /// Fields of the other lines, as `<word>.<key>`.
    pub extra: BTreeMap<String, String>,
}

impl Measured {
    /// The extra field `key` (`<word>.<key>`) as a number.
    ///
    /// # Errors
    /// When the worker did not print it or it is not a number.
    pub fn extra_u64(&self, key: &str) -> Result<u64> {
        self.extra
            .get(key)
            .with_context(|| format!("the worker printed no {key}"))?
            .parse()
            .with_context(|| format!("{key} is not a number"))
    }

    /// Objects per second of the measured work.
    #[must_use]
    pub fn rate(&self) -> f64 {
        // counts are far below 2^52: exact
        #[allow(clippy::cast_precision_loss)]
        let objects = self.objects as f64;
        objects / self.secs
    }
}

/// Parses a worker's standard output.
///
/// # Errors
/// When there is no `result` line or a field is malformed.
pub fn parse(stdout: &str) -> Result<Measured> {
    let mut m = Measured::default();
    let mut seen = false;
    for line in stdout.lines() {
        let mut fields = line.split_whitespace();
        let Some(word) = fields.next() else { continue };
        let fields: Vec<(&str, &str)> = fields.filter_map(|f| f.split_once('=')).collect();
        if word == "result" {
            seen = true;
            for (k, v) in fields {
                match k {
                    "objects" => m.objects = v.parse().context("objects")?,
                    "secs" => m.secs = v.parse().context("secs")?,
                    "peak_rss_kib" => m.peak_rss_kib = v.parse().context("peak_rss_kib")?,
                    _ => {}
                }
            }
        } else {
            for (k, v) in fields {
                m.extra.insert(format!("{word}.{k}"), v.to_owned());
            }
        }
    }
    anyhow::ensure!(seen, "worker printed no result line: {stdout}");
    Ok(m)
}

/// Runs this binary with `args` and parses what it printed.
///
/// # Errors
/// When the worker cannot start, fails, or prints no result.
pub async fn run(args: &[&str]) -> Result<Measured> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let out = tokio::process::Command::new(exe)
        .args(args)
        .output()
        .await
        .context("running a worker")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "worker {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&stdout)
}

/// Peak resident set size of this process in KiB (`VmHWM`).
///
/// # Errors
/// When `/proc/self/status` cannot be read or has no `VmHWM`.
pub fn peak_rss_kib() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    line.split_whitespace()
        .nth(1)
        .context("VmHWM without a value")?
        .parse()
        .context("VmHWM is not a number")
}

/// Prints the line the parent parses: `result objects=<n> secs=<s> peak_rss_kib=<k>`, the time
/// counted from `started`.
///
/// # Errors
/// When the peak RSS cannot be read.
pub fn report(objects: u64, started: Instant) -> Result<()> {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "result objects={objects} secs={secs:.4} peak_rss_kib={}",
        peak_rss_kib()?
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line_and_the_extra_fields() {
        let m = parse(
            "noise\nresult objects=12 secs=0.5000 peak_rss_kib=2048\narchive items=11 name=x\n",
        )
        .unwrap();
        assert_eq!(m.objects, 12);
        assert!((m.secs - 0.5).abs() < 1e-9);
        assert_eq!(m.peak_rss_kib, 2048);
        assert_eq!(m.extra_u64("archive.items").ok(), Some(11));
        assert!(m.extra_u64("archive.name").is_err());
        assert!((m.rate() - 24.0).abs() < 1e-9);
    }

    #[test]
    fn a_missing_result_line_is_an_error() {
        assert!(parse("archive items=11\n").is_err());
    }
}
