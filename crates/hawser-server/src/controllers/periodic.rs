//! The one loop of the controllers that look at their objects every so often (the storage and
//! snapshot locations, deletion and download requests, schedules, backup sync, garbage
//! collection, restores being deleted): a pass, then a wait, until the term ends.
//!
//! A pass is a LIST ([`Pass::list`]), then the work on what it listed ([`Pass::handle`]). The
//! controller's readiness is up as soon as a LIST answers (the work may take long: a storage
//! location that does not answer holds up no `/readyz`), down when one fails. A failed LIST
//! logs a warning when the controller starts failing (a debug line on each further failure, an
//! info line once it lists again) and is tried again after [`Pass::retry_after`]. `handle`
//! checks `ctx.shutdown` between objects itself: the runner never cancels one halfway through
//! a write.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::context::Context;
use crate::readiness::Watch;

/// One controller's look at its objects, with the state it keeps between looks.
pub(crate) trait Pass: Send + 'static {
    /// What a LIST gives the work of the pass.
    type Listed: Send;

    /// What a pass lists, for the log ("storage locations").
    const LISTS: &'static str;

    /// The LIST (or LISTs) of a pass.
    fn list(
        &mut self,
        ctx: &Context,
    ) -> impl Future<Output = Result<Self::Listed, kube::Error>> + Send;

    /// The work on what was listed; the time until the next pass.
    fn handle(
        &mut self,
        ctx: &Context,
        listed: Self::Listed,
    ) -> impl Future<Output = Duration> + Send;

    /// The time until the next look after a pass that could not list.
    fn retry_after(&self, ctx: &Context) -> Duration;
}

/// Runs `controller` until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run<P: Pass>(ctx: Arc<Context>, mut controller: P, health: Watch) {
    let mut failing = false;
    loop {
        let wait = match controller.list(&ctx).await {
            Ok(listed) => {
                health.up();
                if std::mem::take(&mut failing) {
                    tracing::info!(lists = P::LISTS, "listing works again");
                }
                controller.handle(&ctx, listed).await
            }
            Err(e) => {
                health.down();
                if std::mem::replace(&mut failing, true) {
                    tracing::debug!(lists = P::LISTS, error = %e, "listing failed again; trying again");
                } else {
                    tracing::warn!(lists = P::LISTS, error = %e, "listing failed; trying again until it works");
                }
                controller.retry_after(&ctx)
            }
        };
        tokio::select! {
            () = ctx.shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}
