//! The pure part of leader election: what a candidate does with the Lease it read, and the
//! Lease it writes back. No client, no clock: the caller passes the wall time it stamps and how
//! long it has seen the Lease unchanged (measured on its own monotonic clock).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

/// What a candidate does with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// Nobody holds it, or its holder has not renewed it for a lease duration: take it.
    Take,
    /// This candidate holds it: renew it.
    Renew,
    /// Another candidate holds it and renewed it less than a lease duration ago.
    Wait {
        /// The holder.
        holder: String,
    },
    /// This candidate was leading, and the Lease names another holder or none: it has lost it
    /// and must not take it back (someone else may already run the controllers).
    Lost {
        /// The holder found, if any.
        holder: Option<String>,
    },
}

/// The holder a Lease names; an empty identity (a released Lease) is no holder.
pub(super) fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// The plan of candidate `me` for a Lease whose spec is `spec`.
///
/// `unchanged_for` is how long this candidate has seen exactly this spec: a holder is dead when
/// it has not changed its Lease for the lease duration the Lease itself states (`fallback`
/// when it states none). Measuring on the follower's own clock, not comparing `renewTime` with
/// it, keeps clock skew between machines out of the decision (as client-go does).
pub(super) fn plan(
    spec: &LeaseSpec,
    me: &str,
    leading: bool,
    unchanged_for: Duration,
    fallback: Duration,
) -> Plan {
    match holder(spec) {
        Some(h) if h == me => Plan::Renew,
        other if leading => Plan::Lost {
            holder: other.map(str::to_owned),
        },
        None => Plan::Take,
        Some(h) => {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(fallback, Duration::from_secs);
            if unchanged_for >= duration {
                Plan::Take
            } else {
                Plan::Wait {
                    holder: h.to_owned(),
                }
            }
        }
    }
}

/// `leaseDurationSeconds` for `duration`: whole seconds, rounded up, at least 1.
pub(super) fn lease_seconds(duration: Duration) -> i32 {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// The spec that makes `me` the holder at `now`: a renewal keeps the acquire time and the
/// transition count; taking the Lease over stamps a new acquire time and counts a transition.
pub(super) fn claimed(
    current: Option<&LeaseSpec>,
    me: &str,
    now: Timestamp,
    duration: Duration,
) -> LeaseSpec {
    let current = current.cloned().unwrap_or_default();
    let renewing = holder(&current) == Some(me);
    let transitions = current.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_owned()),
        lease_duration_seconds: Some(lease_seconds(duration)),
        acquire_time: if renewing {
            current.acquire_time.clone().or(Some(MicroTime(now)))
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing {
            transitions
        } else {
            transitions.saturating_add(1)
        }),
        ..current
    }
}

/// The spec of a Lease its holder gives up at `now`: no holder, so that a follower takes it at
/// its next try instead of waiting for it to expire.
pub(super) fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

/// The Lease spec last seen and since when (this process's monotonic clock).
#[derive(Debug, Default)]
pub(super) struct Observed {
    last: Option<(LeaseSpec, Instant)>,
}

impl Observed {
    /// Notes `spec` as seen at `now`; the time only moves when the spec changed.
    pub(super) fn see(&mut self, spec: &LeaseSpec, now: Instant) {
        if self.last.as_ref().is_none_or(|(seen, _)| seen != spec) {
            self.last = Some((spec.clone(), now));
        }
    }

    /// How long the spec last seen has stayed as it is, at `now`.
    pub(super) fn unchanged_for(&self, now: Instant) -> Duration {
        self.last.as_ref().map_or(Duration::ZERO, |(_, since)| {
            now.saturating_duration_since(*since)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn held_by(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(MicroTime(at("2026-01-01T00:00:00Z"))),
            renew_time: Some(MicroTime(at("2026-01-01T00:00:10Z"))),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn plans_for_every_kind_of_lease() {
        let s = Duration::from_secs;
        let cases: [(&str, LeaseSpec, bool, Duration, Plan); 9] = [
            ("empty lease", LeaseSpec::default(), false, s(0), Plan::Take),
            (
                "released lease",
                released(&held_by("b", 15), at("2026-01-01T00:01:00Z")),
                false,
                s(0),
                Plan::Take,
            ),
            ("mine", held_by("me", 15), true, s(100), Plan::Renew),
            (
                "mine while following (a create whose answer was lost)",
                held_by("me", 15),
                false,
                s(0),
                Plan::Renew,
            ),
            (
                "held and fresh",
                held_by("b", 15),
                false,
                s(14),
                Plan::Wait { holder: "b".into() },
            ),
            (
                "held, unchanged for its own duration",
                held_by("b", 15),
                false,
                s(15),
                Plan::Take,
            ),
            (
                "the Lease's duration counts, not ours",
                held_by("b", 5),
                false,
                s(6),
                Plan::Take,
            ),
            (
                "leading, someone else holds it",
                held_by("b", 15),
                true,
                s(0),
                Plan::Lost {
                    holder: Some("b".into()),
                },
            ),
            (
                "leading, someone released it",
                LeaseSpec::default(),
                true,
                s(0),
                Plan::Lost { holder: None },
            ),
        ];
        for (what, spec, leading, unchanged, want) in cases {
            assert_eq!(plan(&spec, "me", leading, unchanged, LEASE), want, "{what}");
        }
        let no_duration = LeaseSpec {
            lease_duration_seconds: None,
            ..held_by("b", 1)
        };
        assert_eq!(
            plan(&no_duration, "me", false, s(14), LEASE),
            Plan::Wait { holder: "b".into() },
            "no duration in the Lease: ours"
        );
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let now = at("2026-01-01T00:00:20Z");
        let taken = claimed(Some(&held_by("b", 15)), "me", now, LEASE);
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        assert_eq!(taken.renew_time, Some(MicroTime(now)));
        assert_eq!(taken.lease_duration_seconds, Some(15));

        let later = at("2026-01-01T00:00:22Z");
        let renewed = claimed(Some(&taken), "me", later, LEASE);
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.acquire_time, Some(MicroTime(now)));
        assert_eq!(renewed.renew_time, Some(MicroTime(later)));

        let created = claimed(None, "me", now, LEASE);
        assert_eq!(created.lease_transitions, Some(1));

        let given_up = released(&renewed, later);
        assert_eq!(holder(&given_up), None);
        assert_eq!(given_up.lease_transitions, Some(4));
        assert_eq!(given_up.lease_duration_seconds, Some(1));
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(lease_seconds(Duration::from_millis(1)), 1);
        assert_eq!(lease_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_secs(u64::MAX)), i32::MAX);
    }

    #[test]
    fn the_observation_time_moves_only_when_the_lease_changes() {
        let start = Instant::now();
        let mut observed = Observed::default();
        assert_eq!(observed.unchanged_for(start), Duration::ZERO);
        let first = held_by("b", 15);
        observed.see(&first, start);
        observed.see(&first, start + Duration::from_secs(5));
        assert_eq!(
            observed.unchanged_for(start + Duration::from_secs(8)),
            Duration::from_secs(8)
        );
        let renewed = LeaseSpec {
            renew_time: Some(MicroTime(at("2026-01-01T00:00:12Z"))),
            ..first
        };
        observed.see(&renewed, start + Duration::from_secs(9));
        assert_eq!(
            observed.unchanged_for(start + Duration::from_secs(10)),
            Duration::from_secs(1)
        );
    }
}
