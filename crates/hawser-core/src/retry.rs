//! The one deadline retry loop of hawser's API calls, driven by a [`DeadlinePolicy`]: the
//! status engine's writes, the server's other object calls and the engines' requests all go
//! through it, each with its own classification of errors. Time is tokio's clock
//! (`tokio::time::Instant`, `sleep`), so paused-time tests control it.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::backoff::{DeadlinePolicy, Next};

/// What a failed attempt allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Trying again may help, not before the server's `Retry-After` when it sent one.
    Again(Option<Duration>),
    /// Trying again cannot help (a permanent answer).
    Stop,
}

/// How the loop ended.
#[derive(Debug)]
pub enum Finish<T, E> {
    /// An attempt succeeded.
    Done {
        /// What the attempt returned.
        value: T,
        /// Attempts made, including the successful one.
        attempts: u32,
    },
    /// A permanent answer: no more attempts.
    Stopped { error: E, attempts: u32 },
    /// The deadline left no room for another attempt.
    Deadline { error: E, attempts: u32 },
    /// `cancelled` finished while the loop waited to try again.
    Cancelled { error: E, attempts: u32 },
}

impl<T, E> Finish<T, E> {
    /// The value, or the last error however the loop ended.
    ///
    /// # Errors
    /// The last attempt's error when no attempt succeeded.
    pub fn into_result(self) -> Result<T, E> {
        match self {
            Self::Done { value, .. } => Ok(value),
            Self::Stopped { error, .. }
            | Self::Deadline { error, .. }
            | Self::Cancelled { error, .. } => Err(error),
        }
    }
}

/// Runs `op` until it succeeds, `classify` says [`Verdict::Stop`], `cancelled` finishes while
/// the loop waits, or the policy's deadline (measured from `start`) leaves no room for another
/// attempt. `op` gets the attempt number (1-based) and that attempt's timeout (the policy's
/// request timeout shortened to the time left, never below its smallest window); the first
/// attempt is always made, and so is every attempt the policy granted a wait for. Waits follow
/// the policy's backoff with a draw from `rng`, never shorter than a `Retry-After`.
pub async fn until_deadline<T, E, R, F, Fut>(
    policy: &DeadlinePolicy,
    rng: &Mutex<R>,
    start: Instant,
    cancelled: impl Future<Output = ()>,
    classify: impl Fn(&E) -> Verdict,
    mut op: F,
) -> Finish<T, E>
where
    R: Rng,
    F: FnMut(u32, Duration) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut cancelled = std::pin::pin!(cancelled);
    let mut attempts = 0u32;
    let mut failures = 0u32;
    // The first attempt is made whatever time is left; a later one only while there is room.
    let mut timeout = policy
        .attempt_timeout(start.elapsed())
        .or_else(|| policy.attempt_timeout(Duration::ZERO))
        .unwrap_or_default();
    loop {
        attempts += 1;
        let error = match op(attempts, timeout).await {
            Ok(value) => return Finish::Done { value, attempts },
            Err(e) => e,
        };
        let retry_after = match classify(&error) {
            Verdict::Stop => return Finish::Stopped { error, attempts },
            Verdict::Again(after) => after,
        };
        failures += 1;
        let next = {
            let mut rng = rng
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            policy.next(failures, start.elapsed(), retry_after, &mut *rng)
        };
        let Next::RetryAfter(wait) = next else {
            return Finish::Deadline { error, attempts };
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = &mut cancelled => return Finish::Cancelled { error, attempts },
        }
        // The policy granted this attempt before the wait; a wait that ends a little late
        // (a real clock) still leaves it its smallest window.
        timeout = policy
            .attempt_timeout(start.elapsed())
            .unwrap_or_else(|| policy.min_request_timeout.min(policy.request_timeout));
    }
}
