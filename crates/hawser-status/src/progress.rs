//! Progress writes: `status.progress` of work that is running, the one kind of status write
//! that may be lost (a newer one follows, and the final status carries the last figures).
//!
//! A progress write is one attempt, never retried. After an attempt failed for a transient
//! reason (the API unreachable, 429, 5xx, a timeout), the object's next progress write is
//! skipped until one backoff cap (`--status-patch-max-backoff`) has passed, or longer when the
//! server asked for a longer `Retry-After`: during an outage each running backup or restore
//! costs the API server at most one progress attempt per cap.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use super::engine::StatusEngine;
use super::error::{AttemptError, Class};
use super::kind::ObjectKey;
use super::update::StatusUpdate;
use super::writer::{AttemptState, Step};

/// What became of a progress write.
#[derive(Debug)]
pub enum ProgressWrite {
    /// Stored (or already there).
    Stored,
    /// Not sent: an earlier attempt for this object failed less than a cap ago.
    Paused,
    /// Sent and not stored; the reason in words.
    Failed(String),
}

/// When each object's next progress write may be sent, after a transient failure.
#[derive(Debug, Default)]
pub(crate) struct ProgressPauses(Mutex<HashMap<ObjectKey, Instant>>);

impl ProgressPauses {
    fn paused(&self, key: &ObjectKey) -> bool {
        self.0
            .lock()
            .is_ok_and(|p| p.get(key).is_some_and(|until| Instant::now() < *until))
    }

    fn set(&self, key: &ObjectKey, until: Option<Instant>) {
        if let Ok(mut p) = self.0.lock() {
            match until {
                Some(until) => p.insert(key.clone(), until),
                None => p.remove(key),
            };
        }
    }

    /// Forgets `key` (its work ended).
    pub(crate) fn clear(&self, key: &ObjectKey) {
        self.set(key, None);
    }
}

impl StatusEngine {
    /// Stores a progress status of running work with one attempt at most (see the module
    /// docs). `update` must not be final.
    pub async fn write_progress(&self, update: StatusUpdate) -> ProgressWrite {
        debug_assert!(!update.is_final(), "final statuses go through write()");
        let inner = &self.inner;
        let key = update.key().clone();
        if inner.progress_pauses.paused(&key) {
            return ProgressWrite::Paused;
        }
        let mut state = AttemptState::from_update(&update);
        let timeout = inner.config.request_timeout;
        let result = inner.attempt_once(&update, &mut state, timeout).await;
        let pause = match &result {
            Err(e) => pause_after(e, inner.config.max_backoff),
            Ok(_) => None,
        };
        inner
            .progress_pauses
            .set(&key, pause.map(|p| Instant::now() + p));
        match result {
            Ok(Step::Landed(_) | Step::AlreadyLanded(_)) => ProgressWrite::Stored,
            Ok(Step::Stale { current }) => {
                ProgressWrite::Failed(format!("the object is {current} now"))
            }
            Err(e) => ProgressWrite::Failed(e.to_string()),
        }
    }
}

/// How long progress writes of an object pause after `error`: a cap (or the server's longer
/// `Retry-After`) after a transient failure, none otherwise.
fn pause_after(error: &AttemptError, cap: std::time::Duration) -> Option<std::time::Duration> {
    match error.class() {
        Class::Transient { retry_after } => Some(retry_after.map_or(cap, |ra| ra.max(cap))),
        _ => None,
    }
}
