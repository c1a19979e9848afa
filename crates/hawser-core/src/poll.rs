//! [`poll_until`]: the one way hawser waits for a condition with a time limit.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Calls `check` until it returns `Some`, every `interval`, for at most `limit` (measured on
/// tokio's clock, so paused-time tests control it). `check` runs at least once, and once more
/// at or after the limit; `None` means the limit passed first. A check that must stop early
/// (an error) returns `Some` of its own error.
pub async fn poll_until<T, F, Fut>(limit: Duration, interval: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_what_the_check_finds_or_none_after_the_limit() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let found = poll_until(Duration::from_secs(10), Duration::from_secs(1), || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(found, Some(3));
        assert_eq!(start.elapsed(), Duration::from_secs(2));

        let calls = Cell::new(0);
        let start = Instant::now();
        let never = poll_until(Duration::from_millis(2500), Duration::from_secs(1), || {
            calls.set(calls.get() + 1);
            async { None::<()> }
        })
        .await;
        assert_eq!(never, None);
        // At 0, 1, 2 and at the limit itself.
        assert_eq!(calls.get(), 4);
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
    }
}
