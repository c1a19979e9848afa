//! `Retry-After` (RFC 9110 §10.2.3): a number of seconds, or an HTTP date.

use std::time::Duration;

use jiff::Timestamp;

/// The wait a `Retry-After` value asks for, measured from `now`; `None` when it is neither a
/// number of seconds nor an HTTP date. A date in the past asks for no wait.
#[must_use]
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    // IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) is RFC 2822's form with the `GMT` zone.
    let at = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = at.since(now).ok()?;
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_http_dates() {
        let now: Timestamp = "1994-11-06T08:49:07Z".parse().unwrap_or_default();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:48:37 GMT", now),
            Some(Duration::ZERO),
            "a date in the past"
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
