//! `hawser server`: runs [`hawser_server::serve`] until SIGINT or SIGTERM.

use tokio_util::sync::CancellationToken;

use super::error::{CliError, ExitStatus};
use super::global::GlobalArgs;
use hawser_server::ServerArgs;

/// Runs the server in the global namespace with the global kube config.
///
/// # Errors
/// The config cannot be loaded, or the server cannot start or stops with an error.
pub(crate) async fn run(global: &GlobalArgs, args: ServerArgs) -> Result<ExitStatus, CliError> {
    args.velero.log_not_implemented();
    // The global flags Velero's server takes too; neither changes what hawser's server does.
    for (name, value) in [
        ("features", global.features.clone()),
        (
            "colorized",
            global
                .colorized
                .map(|c| c.0.map_or_else(String::new, |b| b.to_string())),
        ),
    ] {
        if let Some(value) = value {
            hawser_server::velero_flags::log_not_implemented(name, &value);
        }
    }
    if let Some(difference) =
        hawser_server::velero_flags::csi_difference(global.features.as_deref())
    {
        tracing::warn!("{difference}");
    }
    let config = global.kube_config().await?;
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signal.cancel();
    });
    hawser_server::serve(config, global.namespace.clone(), args, shutdown)
        .await
        .map_err(|source| CliError::Server { source })?;
    Ok(ExitStatus::Success)
}

pub(super) async fn wait_for_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
