//! The wall clock, injected.
//!
//! Every timestamp hawser writes (start and completion times, expirations, log lines, restart
//! reasons) comes from a [`Clock`] handed down from the server's context, so tests can fix the
//! time and no decision reads the system clock behind the caller's back. Waiting and deadlines
//! use tokio's monotonic time instead, which paused-time tests control.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;

/// A source of wall-clock time. Cloning shares the source.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    /// The system's clock.
    #[must_use]
    pub fn system() -> Self {
        Self(Arc::new(Timestamp::now))
    }

    /// A clock that always reads `at`.
    #[must_use]
    pub fn fixed(at: Timestamp) -> Self {
        Self(Arc::new(move || at))
    }

    /// A clock read through `now`.
    #[must_use]
    pub fn from_fn(now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// The current time.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_clock_reads_its_time_and_clones_share_the_source() {
        let at: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap_or_default();
        let clock = Clock::fixed(at);
        assert_eq!(clock.now(), at);
        assert_eq!(clock.clone().now(), at);
    }

    #[test]
    fn the_system_clock_moves_forward() {
        let clock = Clock::system();
        let first = clock.now();
        assert!(clock.now() >= first);
    }
}
