//! Time arithmetic on API timestamps with Go durations (`status.expiration = start + ttl`).

use hawser_core::duration::GoDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `start + duration`, or `None` when the result is outside the range of timestamps.
pub fn add(start: Timestamp, duration: GoDuration) -> Option<Timestamp> {
    start
        .checked_add(SignedDuration::from_nanos(duration.as_nanos()))
        .ok()
}

/// `start + duration` as an API [`Time`], or `None` when out of range.
pub fn add_to_time(start: &Time, duration: GoDuration) -> Option<Time> {
    add(start.0, duration).map(Time)
}

/// True when `expiration` is set and is before `now` (Velero's garbage-collection test).
pub fn is_expired(expiration: Option<&Time>, now: Timestamp) -> bool {
    expiration.is_some_and(|e| e.0 < now)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn expiration_is_start_plus_ttl() {
        let start: Timestamp = "2024-03-01T10:00:00Z".parse().unwrap();
        let ttl = GoDuration::parse("720h0m0s").unwrap();
        assert_eq!(add(start, ttl).unwrap().to_string(), "2024-03-31T10:00:00Z");
        assert_eq!(
            add(start, GoDuration::parse("-1h").unwrap())
                .unwrap()
                .to_string(),
            "2024-03-01T09:00:00Z"
        );
        let near_end: Timestamp = "9999-12-30T00:00:00Z".parse().unwrap();
        assert_eq!(add(near_end, GoDuration::from_hours(72)), None);
        let expiration = add_to_time(&Time(start), ttl).unwrap();
        assert!(!is_expired(
            Some(&expiration),
            "2024-03-31T09:59:59Z".parse().unwrap()
        ));
        assert!(is_expired(
            Some(&expiration),
            "2024-03-31T10:00:01Z".parse().unwrap()
        ));
        assert!(!is_expired(None, "2100-01-01T00:00:00Z".parse().unwrap()));
    }
}
