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
