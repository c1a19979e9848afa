//! The status writes' use of hawser's one deadline retry loop
//! ([`hawser_core::retry::until_deadline`]): permanent answers stop it, conflicts and transient
//! answers are tried again. Time is tokio's clock, so paused-time tests control it; randomness
//! comes from the engine's seeded RNG.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use hawser_core::backoff::DeadlinePolicy;
use hawser_core::retry::{self, Verdict};
use rand::rngs::StdRng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::{AttemptError, Class};

/// How the loop ended.
#[derive(Debug)]
pub(crate) enum Finish<T> {
    /// An attempt succeeded.
    Done {
        /// What the attempt returned.
        value: T,
        /// Attempts made, including the successful one.
        attempts: u32,
    },
    /// A permanent answer (404, 400/403/422…): no more attempts.
    Stopped { error: AttemptError, attempts: u32 },
    /// The deadline left no room for another attempt.
    Deadline { error: AttemptError, attempts: u32 },
    /// Shutdown was signalled while waiting.
    Cancelled,
}

/// Run `op` until it succeeds, fails permanently, or the policy's deadline (measured from
/// `start`) passes. `op` gets the attempt number (1-based) and that attempt's timeout; it must
/// not outlast the timeout (the status API enforces it on every request).
pub(crate) async fn until_deadline<T, F, Fut>(
    policy: &DeadlinePolicy,
    rng: &Mutex<StdRng>,
    shutdown: &CancellationToken,
    start: Instant,
    op: F,
) -> Finish<T>
where
    F: FnMut(u32, Duration) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let classify = |error: &AttemptError| match error.class() {
        Class::Gone | Class::Rejected => Verdict::Stop,
        Class::Conflict => Verdict::Again(None),
        Class::Transient { retry_after } => Verdict::Again(retry_after),
    };
    match retry::until_deadline(policy, rng, start, shutdown.cancelled(), classify, op).await {
        retry::Finish::Done { value, attempts } => Finish::Done { value, attempts },
        retry::Finish::Stopped { error, attempts } => Finish::Stopped { error, attempts },
        retry::Finish::Deadline { error, attempts } => Finish::Deadline { error, attempts },
        retry::Finish::Cancelled { .. } => Finish::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hawser_core::backoff::Backoff;
    use rand::SeedableRng;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn policy() -> DeadlinePolicy {
        DeadlinePolicy {
            backoff: Backoff::with_max(Duration::from_secs(5)),
            timeout: Duration::from_secs(600),
            request_timeout: Duration::from_secs(10),
            min_request_timeout: Duration::from_millis(100),
        }
    }

    fn unavailable(retry_after: Option<u64>) -> AttemptError {
        AttemptError::Api {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_always_failing_write_returns_at_the_deadline() {
        let rng = Mutex::new(StdRng::seed_from_u64(1));
        let start = Instant::now();
        let f: Finish<()> = until_deadline(
            &policy(),
            &rng,
            &CancellationToken::new(),
            start,
            |_, _| async { Err(unavailable(None)) },
        )
        .await;
        let took = start.elapsed();
        match f {
            Finish::Deadline { attempts, error } => {
                // 10 ms doubling to the 5 s cap takes ~10 attempts; then ≤ 1 per 4 s.
                assert!((120..=165).contains(&attempts), "{attempts}");
                // The API's own answer is reported, not the time that ran out.
                assert_eq!(error.category(), unavailable(None).category(), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert!(took <= Duration::from_secs(600), "{took:?}");
        assert!(took >= Duration::from_secs(595), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_waited_for() {
        let rng = Mutex::new(StdRng::seed_from_u64(1));
        let start = Instant::now();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let f = until_deadline(
            &policy(),
            &rng,
            &CancellationToken::new(),
            start,
            move |n, _| {
                let s2 = s2.clone();
                async move {
                    s2.lock().map(|mut v| v.push(start.elapsed())).ok();
                    if n < 3 {
                        Err(unavailable(Some(7)))
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await;
        assert!(
            matches!(
                f,
                Finish::Done {
                    value: 3,
                    attempts: 3
                }
            ),
            "{f:?}"
        );
        let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
        assert!(
            seen[1] >= Duration::from_secs(7) && seen[2] >= Duration::from_secs(14),
            "{seen:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_answers_stop_after_one_attempt() {
        for code in [400u16, 403, 404, 422] {
            let rng = Mutex::new(StdRng::seed_from_u64(1));
            let calls = AtomicU32::new(0);
            let f: Finish<()> = until_deadline(
                &policy(),
                &rng,
                &CancellationToken::new(),
                Instant::now(),
                |_, _| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async move {
                        Err(AttemptError::Api {
                            code,
                            // What a Status body says for a missing object.
                            reason: if code == 404 { "NotFound" } else { "" }.to_owned(),
                            message: String::new(),
                            retry_after: None,
                        })
                    }
                },
            )
            .await;
            assert!(
                matches!(f, Finish::Stopped { attempts: 1, .. }),
                "{code}: {f:?}"
            );
            assert_eq!(calls.load(Ordering::SeqCst), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_wait() {
        let rng = Mutex::new(StdRng::seed_from_u64(1));
        let token = CancellationToken::new();
        let t2 = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            t2.cancel();
        });
        let start = Instant::now();
        let f: Finish<()> = until_deadline(&policy(), &rng, &token, start, |_, _| async {
            Err(unavailable(None))
        })
        .await;
        assert!(matches!(f, Finish::Cancelled), "{f:?}");
        assert!(start.elapsed() < Duration::from_secs(31));
    }
}
