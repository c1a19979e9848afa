//! The work queue of the backup and restore controllers: which objects are waiting to start,
//! and running each of them once, at most `concurrency` at a time.
//!
//! Objects arrive from a watch (kube-runtime's watcher, which re-lists after every break, so an
//! API outage loses nothing) and from a LIST every `--status-resync-period` (which takes up again
//! an object whose claim could not be written, e.g. during an outage). An object is waiting while
//! its phase is unset or `New` (Backups also `Queued` and `ReadyToStart`, the phases a Velero
//! queue leaves behind); objects being deleted are left alone. Each waiting object is handled by
//! one task; an object already taken is not taken again until its task ends.
//!
//! Objects are read as untyped JSON, so that one malformed object cannot stop the watch of the
//! others; the handler parses it and reports a malformed one on the object itself.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use hawser_api::phase::Phase;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::Semaphore;

use crate::context::Context;
use crate::readiness::Watch;
use crate::status::Kind;

struct Queue<H> {
    ctx: Arc<Context>,
    kind: Kind,
    permits: Arc<Semaphore>,
    taken: Arc<Mutex<HashSet<String>>>,
    handle: H,
}

impl<H, F> Queue<H>
where
    H: Fn(Arc<Context>, DynamicObject) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    fn offer(&self, object: DynamicObject) {
        let Some(name) = object.metadata.name.clone() else {
            return;
        };
        if object.metadata.deletion_timestamp.is_some()
            || !Phase::of(self.kind, &object.data).is_waiting()
        {
            return;
        }
        let fresh = self
            .taken
            .lock()
            .is_ok_and(|mut taken| taken.insert(name.clone()));
        if !fresh {
            return;
        }
        let (permits, taken, handle, ctx) = (
            self.permits.clone(),
            self.taken.clone(),
            self.handle.clone(),
            self.ctx.clone(),
        );
        tokio::spawn(async move {
            if let Ok(_permit) = permits.acquire_owned().await {
                handle(ctx, object).await;
            }
            if let Ok(mut taken) = taken.lock() {
                taken.remove(&name);
            }
        });
    }
}

/// Runs the queue of `kind` until the server shuts down; `handle` runs one waiting object.
pub(crate) async fn run<H, F>(
    ctx: Arc<Context>,
    kind: Kind,
    concurrency: usize,
    handle: H,
    health: Watch,
) where
    H: Fn(Arc<Context>, DynamicObject) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.api_resource());
    let queue = Queue {
        ctx: ctx.clone(),
        kind,
        permits: Arc::new(Semaphore::new(concurrency.max(1))),
        taken: Arc::default(),
        handle,
    };
    let events = watcher::watcher(api.clone(), watcher::Config::default()).default_backoff();
    let mut events = std::pin::pin!(events);
    let mut sweep = tokio::time::interval(ctx.settings.status.resync_period);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = ctx.shutdown.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(Event::Apply(o) | Event::InitApply(o))) => {
                    health.up();
                    queue.offer(o);
                }
                Some(Ok(Event::Init)) => {}
                Some(Ok(Event::InitDone | Event::Delete(_))) => health.up(),
                Some(Err(e)) => {
                    health.down();
                    tracing::warn!(%kind, error = %e, "watching failed; the watch starts again after a backoff");
                }
                None => return,
            },
            _ = sweep.tick() => match api.list(&ListParams::default()).await {
                Ok(list) => {
                    match kind {
                        Kind::Backup => ctx.metrics.backup_count(list.items.len()),
                        Kind::Restore => ctx.metrics.restore_count(list.items.len()),
                    }
                    for o in list.items {
                        queue.offer(o);
                    }
                }
                Err(e) => tracing::debug!(%kind, error = %e, "periodic list failed; the next one tries again"),
            },
        }
    }
}
