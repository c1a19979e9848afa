//! What the release benchmarks share: the seeded cluster ([`seed`]), the measured worker
//! process ([`worker`]): the parent runs kube-sim and re-executes its own binary in worker mode,
//! so that the peak RSS a worker reports is its own; and `hawser server` in a worker
//! ([`server`]).

pub mod seed;
pub mod server;
pub mod worker;

/// KiB as MiB, for printing.
#[must_use]
pub fn mib(kib: u64) -> f64 {
    // KiB counts are far below 2^52: exact
    #[allow(clippy::cast_precision_loss)]
    let kib = kib as f64;
    kib / 1024.0
}

/// Appends `n<n>_<name>_secs` and `n<n>_<name>_rss_mib` of `m` to `figures`, the `key=value`
/// last line of a benchmark.
pub fn push_figures(figures: &mut Vec<String>, n: usize, name: &str, m: &worker::Measured) {
    figures.push(format!("n{n}_{name}_secs={:.3}", m.secs));
    figures.push(format!("n{n}_{name}_rss_mib={:.1}", mib(m.peak_rss_kib)));
}

/// [`push_figures`] of a run through the server, and its time over the engine's.
pub fn push_server_figures(
    figures: &mut Vec<String>,
    n: usize,
    server: &worker::Measured,
    engine_secs: f64,
) {
    push_figures(figures, n, "server", server);
    figures.push(format!(
        "n{n}_server_ratio_to_engine={:.2}",
        server.secs / engine_secs
    ));
}

/// `PASS` or `MISS`: goals are printed, never asserted.
#[must_use]
pub fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// A kube client for the kube-sim at `url`.
///
/// # Errors
/// When `url` is not a URL or the client cannot be built.
pub fn client(url: &str) -> anyhow::Result<kube::Client> {
    use anyhow::Context;
    let url = url.parse().context("kube-sim URL")?;
    kube::Client::try_from(kube::Config::new(url)).context("building the client")
}
