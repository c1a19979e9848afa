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

use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::readiness::Watch;

/// What the runner needs of the context its controllers share: when the term ends.
pub(crate) trait Term: Send + Sync + 'static {
    /// Fires when the term ends.
    fn ended(&self) -> &CancellationToken;
}

impl Term for Context {
    fn ended(&self) -> &CancellationToken {
        &self.shutdown
    }
}

/// One controller's look at its objects, with the state it keeps between looks.
pub(crate) trait Pass<C: Term = Context>: Send + 'static {
    /// What a LIST gives the work of the pass.
    type Listed: Send;

    /// What a pass lists, for the log ("storage locations").
    const LISTS: &'static str;

    /// The LIST (or LISTs) of a pass.
    fn list(&mut self, ctx: &C) -> impl Future<Output = Result<Self::Listed, kube::Error>> + Send;

    /// The work on what was listed; the time until the next pass.
    fn handle(&mut self, ctx: &C, listed: Self::Listed) -> impl Future<Output = Duration> + Send;

    /// The time until the next look after a pass that could not list.
    fn retry_after(&self, ctx: &C) -> Duration;
}

/// Runs `controller` until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run<C: Term, P: Pass<C>>(ctx: Arc<C>, mut controller: P, health: Watch) {
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
            () = ctx.ended().cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use tokio::time::Instant;

    use super::*;
    use crate::readiness::Readiness;

    struct Ctx(CancellationToken);

    impl Term for Ctx {
        fn ended(&self) -> &CancellationToken {
            &self.0
        }
    }

    /// What the fake controller saw: each call, when (since the start), and whether
    /// `/readyz` was ready at that moment.
    type Seen = Arc<Mutex<Vec<(String, Duration, bool)>>>;

    /// Lists what its script says (`None`: the LIST fails); ends the term when the script is
    /// over.
    struct Scripted {
        script: VecDeque<Option<u32>>,
        readiness: Readiness,
        start: Instant,
        seen: Seen,
    }

    impl Scripted {
        fn note(&self, what: String) {
            let ready = self.readiness.check().is_ok();
            self.seen
                .lock()
                .unwrap()
                .push((what, self.start.elapsed(), ready));
        }
    }

    impl Pass<Ctx> for Scripted {
        type Listed = u32;

        const LISTS: &'static str = "scripted objects";

        async fn list(&mut self, ctx: &Ctx) -> Result<u32, kube::Error> {
            self.note("list".to_owned());
            match self.script.pop_front() {
                Some(Some(n)) => Ok(n),
                Some(None) => Err(kube::Error::ReadEvents(std::io::Error::other("refused"))),
                None => {
                    ctx.0.cancel();
                    Err(kube::Error::ReadEvents(std::io::Error::other("over")))
                }
            }
        }

        async fn handle(&mut self, _: &Ctx, listed: u32) -> Duration {
            self.note(format!("handle {listed}"));
            Duration::from_secs(10)
        }

        fn retry_after(&self, _: &Ctx) -> Duration {
            Duration::from_secs(1)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ready_once_a_list_answers_failed_lists_retried_and_the_end_of_the_term_stops_it() {
        let readiness = Readiness::default();
        let health = readiness.watch("scripted");
        readiness.leading();
        let seen = Seen::default();
        let scripted = Scripted {
            script: [None, None, Some(3), Some(4), None].into(),
            readiness: readiness.clone(),
            start: Instant::now(),
            seen: seen.clone(),
        };
        let ctx = Arc::new(Ctx(CancellationToken::new()));
        tokio::time::timeout(Duration::from_secs(60), run(ctx.clone(), scripted, health))
            .await
            .unwrap();
        let secs = |s: u64| Duration::from_secs(s);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                ("list".to_owned(), secs(0), false),
                ("list".to_owned(), secs(1), false),
                ("list".to_owned(), secs(2), false),
                ("handle 3".to_owned(), secs(2), true),
                ("list".to_owned(), secs(12), true),
                ("handle 4".to_owned(), secs(12), true),
                ("list".to_owned(), secs(22), true),
                ("list".to_owned(), secs(23), false),
            ]
        );
        assert!(ctx.0.is_cancelled());
    }
}
