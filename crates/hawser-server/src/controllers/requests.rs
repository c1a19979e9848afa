//! The loop shared by the controllers of short-lived request objects (DownloadRequest,
//! ServerStatusRequest): every [`TICK`] the requests are listed and each is handed to the
//! controller, which answers new ones at once; every `sweep_every` (and on the first pass) the
//! pass is a sweep, in which the controller also deletes the requests whose time is over.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use serde_json::Value;
use tokio::time::Instant;

use crate::context::Context;
use crate::objects;
use crate::readiness::Watch;

/// Time between two looks at the requests: a CLI waiting for an answer waits at most this.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// One look at one request. `sweep`: this pass also deletes what is over.
pub(crate) trait Handler: Send + Sync + 'static {
    fn handle(
        &self,
        ctx: &Context,
        api: &kube::Api<DynamicObject>,
        request: &Value,
        sweep: bool,
    ) -> impl std::future::Future<Output = ()> + Send;
}

/// Runs until the server shuts down; reports whether its LIST works through `health`.
pub(crate) async fn run<H: Handler>(
    ctx: Arc<Context>,
    api: kube::Api<DynamicObject>,
    handler: H,
    sweep_every: Duration,
    health: Watch,
) {
    let mut last_sweep: Option<Instant> = None;
    loop {
        match objects::list(&ctx, &api, &ListParams::default()).await {
            Ok(requests) => {
                health.up();
                let sweep = last_sweep.is_none_or(|at| at.elapsed() >= sweep_every);
                if sweep {
                    last_sweep = Some(Instant::now());
                }
                for request in &requests {
                    if ctx.shutdown.is_cancelled() {
                        return;
                    }
                    handler.handle(&ctx, &api, request, sweep).await;
                }
            }
            Err(e) => {
                health.down();
                tracing::debug!(error = %e, "listing requests failed; trying again");
            }
        }
        tokio::select! {
            () = ctx.shutdown.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
    }
}
