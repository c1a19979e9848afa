//! What the controllers of short-lived request objects (DownloadRequest, ServerStatusRequest)
//! share: every [`TICK`] the requests are listed ([`periodic`]) and each is handed to the
//! controller, which answers new ones at once; every `sweep_every` (and on the first pass) the
//! pass is a sweep, in which the controller also deletes the requests whose time is over.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use serde_json::Value;
use tokio::time::Instant;

use super::periodic::{self, Pass};
use crate::context::Context;
use crate::objects;
use crate::readiness::Watch;

/// Time between two looks at the requests: a CLI waiting for an answer waits at most this.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// One look at one request. `sweep`: this pass also deletes what is over.
pub(crate) trait Handler: Send + Sync + 'static {
    /// What the requests are, for the log ("download requests").
    const LISTS: &'static str;

    fn handle(
        &self,
        ctx: &Context,
        api: &kube::Api<DynamicObject>,
        request: &Value,
        sweep: bool,
    ) -> impl std::future::Future<Output = ()> + Send;
}

/// Runs until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run<H: Handler>(
    ctx: Arc<Context>,
    api: kube::Api<DynamicObject>,
    handler: H,
    sweep_every: Duration,
    health: Watch,
) {
    let requests = Requests {
        api,
        handler,
        sweep_every,
        last_sweep: None,
    };
    periodic::run(ctx, requests, health).await;
}

struct Requests<H> {
    api: kube::Api<DynamicObject>,
    handler: H,
    sweep_every: Duration,
    last_sweep: Option<Instant>,
}

impl<H: Handler> Pass for Requests<H> {
    const LISTS: &'static str = H::LISTS;

    type Listed = Vec<Value>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<Value>, kube::Error> {
        objects::list(ctx, &self.api, &ListParams::default()).await
    }

    async fn handle(&mut self, ctx: &Context, requests: Vec<Value>) -> Duration {
        let sweep = self
            .last_sweep
            .is_none_or(|at| at.elapsed() >= self.sweep_every);
        if sweep {
            self.last_sweep = Some(Instant::now());
        }
        for request in &requests {
            if ctx.shutdown.is_cancelled() {
                break;
            }
            self.handler.handle(ctx, &self.api, request, sweep).await;
        }
        TICK
    }

    fn retry_after(&self, _: &Context) -> Duration {
        TICK
    }
}
