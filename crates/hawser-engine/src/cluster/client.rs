//! Building the `kube::Client` hawser talks through (the server, its status engine, the CLI):
//! no hidden retries, a read timeout, and the `--client-qps` limit.

use std::time::Duration;

const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// Build a client from `config` with kube-rs's own retry layer turned off and a read timeout set.
///
/// kube-rs ≥ 4 retries 429/503/504 up to 15 times behind the caller's back
/// (`Config::default_retry`); with it on, an outage would cost many hidden requests per status
/// attempt and `Retry-After` would be honoured twice. hawser's deadline policy is the only retry
/// policy, so the layer is disabled here. kube-rs sets no read timeout by default; a stalled
/// response would otherwise hold an attempt until the caller's own timeout.
///
/// # Errors
///
/// What [`kube::Client::try_from`] returns for an unusable config (e.g. a bad TLS setup).
pub fn client_without_retries(
    config: kube::Config,
    read_timeout: Duration,
) -> Result<kube::Client, kube::Error> {
    kube::Client::try_from(without_retries(config, read_timeout))
}

/// [`client_without_retries`] with a client-side request rate limit: on average `qps` requests
/// per second, `burst` of them at once (`--client-qps`, `--client-burst`).
///
/// The limit is tower's fixed-window limiter: `burst` requests per window of `burst / qps`
/// seconds, which keeps the sustained rate at `qps` and lets a quiet client send `burst`
/// requests at once. Requests beyond it wait; none is refused.
///
/// # Errors
///
/// What [`kube::client::ClientBuilder`] returns for an unusable config.
pub fn throttled_client_without_retries(
    config: kube::Config,
    read_timeout: Duration,
    qps: f64,
    burst: u32,
) -> Result<kube::Client, kube::Error> {
    // A day bounds the window so that a tiny qps cannot overflow the limiter's clock.
    let window = Duration::try_from_secs_f64(f64::from(burst.max(1)) / qps)
        .unwrap_or(MAX_WINDOW)
        .min(MAX_WINDOW);
    let builder = kube::client::ClientBuilder::try_from(without_retries(config, read_timeout))?;
    Ok(builder
        .with_layer(&tower::limit::RateLimitLayer::new(
            u64::from(burst.max(1)),
            window,
        ))
        .build())
}

fn without_retries(mut config: kube::Config, read_timeout: Duration) -> kube::Config {
    config.default_retry = false;
    config.read_timeout = Some(read_timeout);
    config
}
