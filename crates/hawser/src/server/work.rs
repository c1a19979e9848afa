//! What the backup and restore workers share: bounded-rate progress reports and the logging of
//! a final status write.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::context::Context;
use crate::status::{Landing, ObjectKey, StatusUpdate, WriteError};

/// Shortest time between two `status.progress` writes of one object.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Longest a progress write may take; a late progress report is skipped, never queued.
const PROGRESS_WRITE_BUDGET: Duration = Duration::from_secs(10);

/// Writes `status.progress` (as `to_json` renders it, with the phase `InProgress`) when it
/// changed, at most every [`PROGRESS_INTERVAL`], until aborted or the sender is dropped.
pub(crate) async fn report_progress<P>(
    ctx: Arc<Context>,
    key: ObjectKey,
    mut rx: watch::Receiver<P>,
    to_json: fn(&P) -> Value,
) where
    P: Clone + PartialEq + Default + Send + Sync + 'static,
{
    let mut last = P::default();
    loop {
        tokio::time::sleep(PROGRESS_INTERVAL).await;
        if rx.changed().await.is_err() {
            return;
        }
        let now = rx.borrow_and_update().clone();
        if now == last {
            continue;
        }
        let update = StatusUpdate::new(key.clone(), "InProgress").field("progress", to_json(&now));
        match tokio::time::timeout(PROGRESS_WRITE_BUDGET, ctx.engine.write(update)).await {
            Ok(Ok(_)) => last = now,
            Ok(Err(e)) => tracing::debug!(object = %key, error = %e, "progress not stored"),
            Err(_) => tracing::debug!(object = %key, "progress not stored in time; skipped"),
        }
    }
}

/// Logs the result of a final status write; true when it landed or the re-driver holds it.
pub(crate) fn report_final(result: Result<Landing, WriteError>, key: &ObjectKey) -> bool {
    match result {
        Ok(landing) => {
            tracing::info!(object = %key, attempts = landing.attempts, "final status stored");
            true
        }
        Err(e) if e.is_pending() => {
            tracing::warn!(object = %key, "final status not stored yet; the re-driver keeps trying");
            true
        }
        Err(e) => {
            tracing::warn!(object = %key, category = e.category(), error = %e, "final status not stored");
            false
        }
    }
}

/// The final status fields of a record (its `status` without `phase`).
pub(crate) fn record_status(record: Option<&Value>) -> serde_json::Map<String, Value> {
    record
        .and_then(|r| r.get("status"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}
