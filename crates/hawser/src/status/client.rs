//! Building the `kube::Client` the status engine (and the rest of the server) talks through.

use std::time::Duration;

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
    mut config: kube::Config,
    read_timeout: Duration,
) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    config.read_timeout = Some(read_timeout);
    kube::Client::try_from(config)
}
