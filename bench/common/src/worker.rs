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

/// The measurements of several rounds of the same work.
#[derive(Debug, Default, Clone)]
pub struct Runs(pub Vec<Measured>);

impl Runs {
    /// The round with the median wall time (the upper one of an even count).
    ///
    /// # Panics
    /// When there was no round.
    #[must_use]
    pub fn median(&self) -> &Measured {
        let mut sorted: Vec<&Measured> = self.0.iter().collect();
        sorted.sort_by(|a, b| a.secs.total_cmp(&b.secs));
        sorted[sorted.len() / 2]
    }

    /// The fastest and the slowest round's wall time.
    #[must_use]
    pub fn spread(&self) -> (f64, f64) {
        self.0.iter().fold((f64::INFINITY, 0.0), |(lo, hi), m| {
            (lo.min(m.secs), hi.max(m.secs))
        })
    }

    /// The highest peak RSS of any round, in KiB.
    #[must_use]
    pub fn peak_rss_kib(&self) -> u64 {
        self.0.iter().map(|m| m.peak_rss_kib).max().unwrap_or(0)
    }

    /// `median_secs=… min_secs=… max_secs=… rounds=… peak_rss_mib=…`, for printing.
    #[must_use]
    pub fn summary(&self) -> String {
        let (lo, hi) = self.spread();
        format!(
            "median_secs={:.3} min_secs={lo:.3} max_secs={hi:.3} rounds={} peak_rss_mib={:.1}",
            self.median().secs,
            self.0.len(),
            crate::mib(self.peak_rss_kib())
        )
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
    fn rounds_give_their_median_spread_and_highest_peak() {
        let run = |secs, peak_rss_kib| Measured {
            secs,
            peak_rss_kib,
            ..Measured::default()
        };
        let runs = Runs(vec![run(3.0, 10), run(1.0, 30), run(2.0, 20)]);
        assert!((runs.median().secs - 2.0).abs() < 1e-9);
        assert_eq!(runs.spread(), (1.0, 3.0));
        assert_eq!(runs.peak_rss_kib(), 30);
        assert_eq!(
            runs.summary(),
            "median_secs=2.000 min_secs=1.000 max_secs=3.000 rounds=3 peak_rss_mib=0.0"
        );
    }

    #[test]
    fn a_missing_result_line_is_an_error() {
        assert!(parse("archive items=11\n").is_err());
    }
}
