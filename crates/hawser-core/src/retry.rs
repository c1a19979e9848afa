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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::backoff::Backoff;

    /// On a real clock a wait ends a little after it was due: the last attempt the policy
    /// squeezes in before the deadline is still made (10 ms doubling: attempts at 0, 10, 30, 70,
    /// 150, 310 and 630 ms; the next wait would pass the last start at 900 ms, so it is
    /// shortened to end there).
    #[tokio::test]
    async fn the_attempt_squeezed_in_before_the_deadline_is_made() {
        let policy = DeadlinePolicy {
            backoff: Backoff {
                initial: Duration::from_millis(10),
                jitter: 0.0,
                ..Backoff::with_max(Duration::from_secs(5))
            },
            timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            min_request_timeout: Duration::from_millis(100),
        };
        let rng = Mutex::new(StdRng::seed_from_u64(1));
        let start = Instant::now();
        let starts = Mutex::new(Vec::new());
        let finish: Finish<(), &str> = until_deadline(
            &policy,
            &rng,
            start,
            std::future::pending(),
            |_| Verdict::Again(None),
            |_, timeout| {
                starts.lock().unwrap().push((start.elapsed(), timeout));
                async { Err("unavailable") }
            },
        )
        .await;
        assert!(matches!(finish, Finish::Deadline { .. }), "{finish:?}");
        let starts = starts.into_inner().unwrap();
        let (last, timeout) = *starts.last().unwrap();
        assert!(last >= Duration::from_millis(880), "{starts:?}");
        assert!(timeout >= Duration::from_millis(100), "{starts:?}");
        assert!(start.elapsed() < Duration::from_secs(2), "{starts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_answer_stops_and_cancelling_ends_the_wait() {
        let policy = DeadlinePolicy::default();
        let rng = Mutex::new(StdRng::seed_from_u64(1));
        let stopped: Finish<(), &str> = until_deadline(
            &policy,
            &rng,
            Instant::now(),
            std::future::pending(),
            |_| Verdict::Stop,
            |_, _| async { Err("not found") },
        )
        .await;
        assert!(
            matches!(stopped, Finish::Stopped { attempts: 1, .. }),
            "{stopped:?}"
        );
        let cancelled: Finish<(), &str> = until_deadline(
            &policy,
            &rng,
            Instant::now(),
            tokio::time::sleep(Duration::from_secs(1)),
            |_| Verdict::Again(Some(Duration::from_secs(30))),
            |_, _| async { Err("too many requests") },
        )
        .await;
        assert!(
            matches!(cancelled, Finish::Cancelled { attempts: 1, .. }),
            "{cancelled:?}"
        );
    }
}
