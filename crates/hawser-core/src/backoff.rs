//! Backoff and deadline arithmetic for status writes (and anything else that retries).
//!
//! Everything here is pure: time is passed in as plain [`Duration`]s measured from the first
//! attempt, randomness comes from an injected [`Rng`], and the functions only *decide* how long to
//! wait. The async loop that sleeps and makes the attempts is [`crate::retry::until_deadline`].
//!
//! Two policies are modelled:
//!
//! * [`DeadlinePolicy`] — hawser's policy: capped exponential backoff with jitter, honouring
//!   `Retry-After`, bounded by a *deadline* (`--resource-timeout`) rather than by a step count, with
//!   a per-attempt request timeout that never outlasts the time left. The whole retry loop therefore
//!   ends no later than the deadline (plus scheduling noise), which is within the documented bound
//!   of "timeout + one request timeout".
//! * [`VeleroBackoff`] — an exact model of the helper Velero uses for the same job
//!   (client-go `wait.Backoff{Duration: 10ms, Factor: 5, Jitter: 0.1, Cap: timeout}` run by
//!   `retry.OnError`), kept so tests and benchmarks can compare the two.
//!
//! # Jitter
//!
//! hawser's jitter is *downward proportional*: a nominal delay `d` becomes a uniform value in
//! `[d·(1 − j), d]` (default `j = 0.2`). Jitter never lengthens a wait, so a wait never exceeds the
//! cap (`--status-patch-max-backoff`): once the API server is reachable again, the next attempt is
//! at most one cap away. The price is a slightly higher attempt rate at the cap: at most one attempt
//! per `cap·(1 − j)`, on average one per `cap·(1 − j/2)`.

use std::time::Duration;

use rand::Rng;

/// Velero's default `--resource-timeout`.
pub const DEFAULT_RESOURCE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default `--status-patch-max-backoff`: the longest wait between two attempts.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Default wait after the first failed attempt.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(10);
/// Default per-attempt request timeout.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default downward jitter fraction.
pub const DEFAULT_JITTER: f64 = 0.2;

/// Capped exponential backoff with downward proportional jitter (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Wait after the first failed attempt.
    pub initial: Duration,
    /// Growth factor between consecutive waits.
    pub factor: u32,
    /// The cap: no wait is longer than this (except when `Retry-After` asks for more).
    pub max: Duration,
    /// Jitter fraction `j` in `[0, 1]`: a nominal wait `d` becomes uniform in `[d·(1 − j), d]`.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL_BACKOFF,
            factor: 2,
            max: DEFAULT_MAX_BACKOFF,
            jitter: DEFAULT_JITTER,
        }
    }
}

impl Backoff {
    /// A backoff with the given cap and the default start, factor and jitter.
    #[must_use]
    pub fn with_max(max: Duration) -> Self {
        Self {
            max,
            ..Self::default()
        }
    }

    /// The nominal (un-jittered) wait after the `failures`-th consecutive failure (1-based):
    /// `min(max, initial · factor^(failures − 1))`. Zero failures means no wait.
    #[must_use]
    pub fn nominal(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let mut d = self.initial.min(self.max);
        for _ in 1..failures {
            if d >= self.max {
                break;
            }
            d = d.saturating_mul(self.factor.max(1)).min(self.max);
            if self.factor <= 1 {
                break;
            }
        }
        d
    }

    /// The jittered wait after the `failures`-th consecutive failure.
    #[must_use]
    pub fn delay<R: Rng + ?Sized>(&self, failures: u32, rng: &mut R) -> Duration {
        jitter_down(self.nominal(failures), self.jitter, rng)
    }

    /// The jittered wait at the cap, used by the background re-driver once the deadline is past,
    /// and stretched to `retry_after` when the server asked for a longer pause.
    #[must_use]
    pub fn steady_delay<R: Rng + ?Sized>(
        &self,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let d = jitter_down(self.max, self.jitter, rng);
        retry_after.map_or(d, |ra| d.max(ra))
    }
}

/// `d` scaled by a uniform factor in `[1 − j, 1]`; `j` is clamped to `[0, 1]`.
fn jitter_down<R: Rng + ?Sized>(d: Duration, jitter: f64, rng: &mut R) -> Duration {
    let j = if jitter.is_finite() {
        jitter.clamp(0.0, 1.0)
    } else {
        0.0
    };
    if j == 0.0 || d.is_zero() {
        return d;
    }
    let u: f64 = rng.random();
    d.mul_f64(1.0 - j * u)
}

/// hawser's deadline policy for one pending write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeadlinePolicy {
    /// Waits between attempts.
    pub backoff: Backoff,
    /// `--resource-timeout`: attempts are made until this much time has passed since the first.
    pub timeout: Duration,
    /// Longest time a single attempt may take.
    pub request_timeout: Duration,
    /// An attempt is only started when at least this much time (or the full request timeout, if
    /// shorter) is left before the deadline; otherwise the loop ends at once instead of making an
    /// attempt that cannot finish.
    pub min_request_timeout: Duration,
}

impl Default for DeadlinePolicy {
    fn default() -> Self {
        Self {
            backoff: Backoff::default(),
            timeout: DEFAULT_RESOURCE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            min_request_timeout: Duration::from_millis(100),
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait this long, then make the next attempt.
    RetryAfter(Duration),
    /// The deadline leaves no room for another attempt: stop now.
    Deadline,
}

impl DeadlinePolicy {
    /// The smallest window worth starting an attempt in.
    fn window(&self) -> Duration {
        self.min_request_timeout.min(self.request_timeout)
    }

    /// The timeout for an attempt that starts `elapsed` after the first attempt started: the
    /// request timeout, shortened to the time left. `None` when too little time is left.
    #[must_use]
    pub fn attempt_timeout(&self, elapsed: Duration) -> Option<Duration> {
        let left = self.timeout.checked_sub(elapsed)?;
        if elapsed > Duration::ZERO && left < self.window() {
            return None;
        }
        // The first attempt is always made, even with a zero timeout budget.
        Some(self.request_timeout.min(left.max(self.window())))
    }

    /// Decide what follows the `failures`-th consecutive failed attempt (1-based), observed
    /// `elapsed` after the first attempt started. `retry_after` is the server's `Retry-After`: the
    /// next attempt is never earlier than that. When the backoff wait would start the next attempt
    /// too close to the deadline, the wait is shortened so that one last attempt still fits (unless
    /// `Retry-After` forbids it).
    #[must_use]
    pub fn next<R: Rng + ?Sized>(
        &self,
        failures: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Next {
        let Some(last_start) = self.timeout.checked_sub(self.window()) else {
            return Next::Deadline;
        };
        let floor = retry_after.unwrap_or(Duration::ZERO);
        let wait = self.backoff.delay(failures, rng).max(floor);
        let start = elapsed.saturating_add(wait);
        if start <= last_start {
            return Next::RetryAfter(wait);
        }
        // Squeeze in a final attempt at the last moment that still leaves it a window.
        match last_start.checked_sub(elapsed) {
            Some(shortened) if shortened >= floor && !shortened.is_zero() => {
                Next::RetryAfter(shortened)
            }
            _ => Next::Deadline,
        }
    }
}

/// Velero's status-patch retry helper, modelled exactly (velero-compat §2.6): client-go
/// `wait.Backoff{Steps: MaxInt, Duration: 10ms, Factor: 5.0, Jitter: 0.1, Cap: timeout}` driven by
/// `retry.OnError` / `wait.ExponentialBackoff`.
///
/// The loop is `while steps > 0 { attempt; success → return; if steps == 1 break; sleep(step()) }`
/// and `step()` returns the current duration (+ up to 10 % jitter), multiplies it by the factor,
/// and, when the product exceeds the cap, sets the duration to the cap **and `steps` to 0** — so the
/// sleep during which that happens is the last thing the helper does: no attempt follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct VeleroBackoff {
    duration: Duration,
    factor: f64,
    jitter: f64,
    cap: Duration,
    steps: u64,
}

/// What Velero's helper does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VeleroNext {
    /// Sleep this long, then attempt again.
    RetryAfter(Duration),
    /// Sleep this long, then return the last error without another attempt.
    GiveUpAfter(Duration),
}

impl VeleroBackoff {
    /// The helper as Velero builds it for `--resource-timeout = timeout` (`CapBackoff`).
    #[must_use]
    pub fn for_timeout(timeout: Duration) -> Self {
        Self {
            duration: Duration::from_millis(10),
            factor: 5.0,
            jitter: 0.1,
            cap: timeout,
            steps: u64::MAX,
        }
    }

    /// The same helper with jitter turned off, for nominal schedules.
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.jitter = 0.0;
        self
    }

    /// client-go `Backoff.Step()`.
    fn step<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let current = self.duration;
        if self.steps == 0 {
            return self.jittered(current, rng);
        }
        self.steps -= 1;
        if self.factor != 0.0 {
            self.duration = scale_nanos(current, self.factor);
            if !self.cap.is_zero() && self.duration > self.cap {
                self.duration = self.cap;
                self.steps = 0;
            }
        }
        self.jittered(current, rng)
    }

    /// client-go `wait.Jitter`: `d + rand[0,1)·jitter·d`.
    fn jittered<R: Rng + ?Sized>(&self, d: Duration, rng: &mut R) -> Duration {
        if self.jitter <= 0.0 {
            return d;
        }
        let u: f64 = rng.random();
        d + scale_nanos(d, u * self.jitter)
    }

    /// After a failed attempt: how long the helper sleeps, and whether another attempt follows.
    /// `None` means the helper returns at once (only when `steps` was 1, which Velero's
    /// `Steps: MaxInt` never reaches in practice).
    pub fn after_failure<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Option<VeleroNext> {
        if self.steps <= 1 {
            return None;
        }
        let sleep = self.step(rng);
        Some(if self.steps == 0 {
            VeleroNext::GiveUpAfter(sleep)
        } else {
            VeleroNext::RetryAfter(sleep)
        })
    }
}

/// Go's `time.Duration(float64(d) * f)`: integer nanoseconds scaled and truncated, so the model
/// reproduces client-go's durations to the nanosecond.
fn scale_nanos(d: Duration, f: f64) -> Duration {
    // Durations here are far below 2^53 ns (104 days), where f64 is exact; `as` saturates.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let nanos = (d.as_nanos() as f64 * f) as u64;
    Duration::from_nanos(nanos)
}

/// The schedule of an always-failing write under Velero's helper.
#[derive(Debug, Clone, PartialEq)]
pub struct VeleroSchedule {
    /// Start time of every attempt, relative to the first.
    pub attempt_starts: Vec<Duration>,
    /// When the helper returns its last error.
    pub returns_after: Duration,
}

/// Run Velero's helper against a write that always fails (and takes no time), up to `limit`
/// attempts (the `Cap == 0` case never gives up).
#[must_use]
pub fn velero_schedule<R: Rng + ?Sized>(
    timeout: Duration,
    jitter: bool,
    limit: usize,
    rng: &mut R,
) -> VeleroSchedule {
    let mut helper = VeleroBackoff::for_timeout(timeout);
    if !jitter {
        helper = helper.without_jitter();
    }
    let mut t = Duration::ZERO;
    let mut attempt_starts = vec![t];
    while attempt_starts.len() < limit {
        match helper.after_failure(rng) {
            Some(VeleroNext::RetryAfter(sleep)) => {
                t += sleep;
                attempt_starts.push(t);
            }
            Some(VeleroNext::GiveUpAfter(sleep)) => {
                t += sleep;
                break;
            }
            None => break,
        }
    }
    VeleroSchedule {
        attempt_starts,
        returns_after: t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn no_jitter(max: Duration) -> Backoff {
        Backoff {
            jitter: 0.0,
            ..Backoff::with_max(max)
        }
    }

    #[test]
    fn nominal_waits_double_from_ten_milliseconds_up_to_the_cap() {
        let b = no_jitter(secs(5));
        let table = [
            (0, ms(0)),
            (1, ms(10)),
            (2, ms(20)),
            (3, ms(40)),
            (8, ms(1280)),
            (9, ms(2560)),
            (10, secs(5)),
            (11, secs(5)),
            (1000, secs(5)),
        ];
        for (failures, want) in table {
            assert_eq!(b.nominal(failures), want, "after {failures} failures");
        }
    }

    #[test]
    fn a_cap_below_the_start_caps_the_first_wait() {
        assert_eq!(no_jitter(ms(3)).nominal(1), ms(3));
        assert_eq!(no_jitter(ms(3)).nominal(7), ms(3));
    }

    #[test]
    fn jitter_only_shortens_and_stays_within_twenty_percent() {
        let b = Backoff::with_max(secs(5));
        let mut rng = StdRng::seed_from_u64(7);
        let mut min = Duration::MAX;
        let mut max = Duration::ZERO;
        for _ in 0..10_000 {
            let d = b.delay(50, &mut rng);
            min = min.min(d);
            max = max.max(d);
        }
        assert!(max <= secs(5), "{max:?}");
        assert!(min >= ms(4000), "{min:?}");
        // The range is actually used (jitter is not a no-op).
        assert!(max - min > ms(900), "{min:?}..{max:?}");
    }

    #[test]
    fn steady_delay_is_at_most_the_cap_unless_retry_after_says_more() {
        let b = Backoff::with_max(ms(500));
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..1000 {
            let d = b.steady_delay(None, &mut rng);
            assert!(d <= ms(500) && d >= ms(400), "{d:?}");
        }
        assert_eq!(b.steady_delay(Some(secs(3)), &mut rng), secs(3));
        assert!(b.steady_delay(Some(ms(1)), &mut rng) >= ms(400));
    }

    fn policy(timeout: Duration, max: Duration, request_timeout: Duration) -> DeadlinePolicy {
        DeadlinePolicy {
            backoff: no_jitter(max),
            timeout,
            request_timeout,
            min_request_timeout: ms(100),
        }
    }

    #[test]
    fn attempt_timeout_never_outlasts_the_deadline() {
        let p = policy(secs(10), secs(5), secs(3));
        let table = [
            (ms(0), Some(secs(3))),
            (secs(5), Some(secs(3))),
            (secs(8), Some(secs(2))),
            (ms(9_850), Some(ms(150))),
            (ms(9_950), None),
            (secs(10), None),
            (secs(11), None),
        ];
        for (elapsed, want) in table {
            assert_eq!(p.attempt_timeout(elapsed), want, "at {elapsed:?}");
        }
    }

    #[test]
    fn the_first_attempt_is_always_made() {
        let p = policy(Duration::ZERO, secs(5), secs(3));
        assert_eq!(p.attempt_timeout(Duration::ZERO), Some(ms(100)));
    }

    #[test]
    fn next_follows_the_backoff_then_squeezes_a_last_attempt_before_the_deadline() {
        let p = policy(secs(10), secs(5), secs(3));
        let mut rng = StdRng::seed_from_u64(0);
        let table = [
            // (failures, elapsed, retry_after, want)
            (1, ms(0), None, Next::RetryAfter(ms(10))),
            (4, ms(200), None, Next::RetryAfter(ms(80))),
            (20, secs(1), None, Next::RetryAfter(secs(5))),
            // Waiting 5 s from 6 s would pass the last start (9.9 s): shortened to 3.9 s.
            (20, secs(6), None, Next::RetryAfter(ms(3_900))),
            // Retry-After is honoured: longer than the backoff.
            (1, ms(0), Some(secs(2)), Next::RetryAfter(secs(2))),
            // Retry-After pushes the next attempt past the deadline: stop.
            (1, secs(9), Some(secs(2)), Next::Deadline),
            // Nothing left.
            (20, ms(9_900), None, Next::Deadline),
            (20, secs(12), None, Next::Deadline),
        ];
        for (failures, elapsed, ra, want) in table {
            assert_eq!(
                p.next(failures, elapsed, ra, &mut rng),
                want,
                "{failures} failures at {elapsed:?}, retry-after {ra:?}"
            );
        }
    }

    /// Simulates a write that always fails after `attempt_cost`, and checks the deadline rule:
    /// total time ≤ timeout (hence ≤ timeout + one request timeout), and attempts up to near the end.
    #[test]
    fn an_always_failing_write_ends_at_the_deadline_not_before() {
        let mut rng = StdRng::seed_from_u64(3);
        for (timeout, max, req, cost) in [
            (secs(600), secs(5), secs(10), ms(0)),
            (secs(600), secs(5), secs(10), secs(10)),
            (secs(60), secs(5), secs(10), ms(30)),
            (secs(2), ms(500), secs(1), ms(1)),
        ] {
            let p = DeadlinePolicy {
                backoff: Backoff::with_max(max),
                timeout,
                request_timeout: req,
                min_request_timeout: ms(100),
            };
            let mut t = Duration::ZERO;
            let mut failures = 0;
            let mut last_start = t;
            while let Some(limit) = p.attempt_timeout(t) {
                last_start = t;
                t += cost.min(limit);
                failures += 1;
                match p.next(failures, t, None, &mut rng) {
                    Next::RetryAfter(w) => t += w,
                    Next::Deadline => break,
                }
            }
            assert!(t <= timeout + req, "{timeout:?}: ended at {t:?}");
            assert!(
                t <= timeout,
                "{timeout:?}: ended at {t:?} (after the deadline)"
            );
            // The last attempt starts within one cap (plus one attempt) of the deadline.
            assert!(
                timeout - last_start <= max + cost + ms(100),
                "{timeout:?}: last attempt at {last_start:?}"
            );
        }
    }

    #[test]
    fn velero_schedule_for_ten_minutes_matches_the_reference_table() {
        let mut rng = StdRng::seed_from_u64(0);
        let s = velero_schedule(secs(600), false, 1000, &mut rng);
        let starts: Vec<u128> = s.attempt_starts.iter().map(Duration::as_micros).collect();
        assert_eq!(
            starts,
            [0, 10_000, 60_000, 310_000, 1_560_000, 7_810_000, 39_060_000]
        );
        assert_eq!(s.returns_after, Duration::from_micros(195_310_000));
    }

    #[test]
    fn velero_schedule_for_one_minute_matches_the_reference_table() {
        let mut rng = StdRng::seed_from_u64(0);
        let s = velero_schedule(secs(60), false, 1000, &mut rng);
        assert_eq!(s.attempt_starts.len(), 6);
        assert_eq!(
            *s.attempt_starts.last().unwrap_or(&Duration::MAX),
            Duration::from_micros(7_810_000)
        );
        assert_eq!(s.returns_after, Duration::from_micros(39_060_000));
    }

    #[test]
    fn velero_schedule_with_jitter_stays_within_ten_percent() {
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..200 {
            let s = velero_schedule(secs(600), true, 1000, &mut rng);
            assert_eq!(s.attempt_starts.len(), 7);
            assert!(s.returns_after >= Duration::from_micros(195_310_000));
            assert!(
                s.returns_after <= Duration::from_micros(214_841_000),
                "{:?}",
                s.returns_after
            );
        }
    }

    #[test]
    fn velero_gives_up_on_the_step_that_would_exceed_the_cap() {
        // General rule: k = smallest integer with 10 ms·5^k > cap gives k attempts and a return at
        // 10 ms·(5^k − 1)/4.
        let mut rng = StdRng::seed_from_u64(0);
        for (cap, attempts, returns_ms) in [
            (ms(5), 1, 10),
            (ms(40), 1, 10),
            (ms(50), 2, 60),
            (secs(156), 6, 39_060),
            (ms(156_250), 7, 195_310),
            (ms(781_249), 7, 195_310),
            (ms(781_250), 8, 976_560),
        ] {
            let s = velero_schedule(cap, false, 1000, &mut rng);
            assert_eq!(s.attempt_starts.len(), attempts, "cap {cap:?}");
            assert_eq!(s.returns_after, ms(returns_ms), "cap {cap:?}");
        }
    }

    #[test]
    fn velero_with_a_zero_cap_never_gives_up() {
        let mut rng = StdRng::seed_from_u64(0);
        let s = velero_schedule(Duration::ZERO, false, 12, &mut rng);
        assert_eq!(s.attempt_starts.len(), 12);
        assert_eq!(s.attempt_starts[11], Duration::from_micros(122_070_310_000));
    }
}
