#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn next(expr: &str, after: &str) -> Option<Timestamp> {
    Cron::parse(expr)
        .unwrap_or_else(|e| panic!("{expr:?} should parse: {e}"))
        .next_after(ts(after))
}

/// A Friday in a leap year, with a fraction of a second.
const AFTER: &str = "2024-03-01T12:34:56.5Z";

#[test]
fn valid_expressions_and_their_next_run() {
    // Every expected value was checked against robfig/cron v3.0.1's ParseStandard + Next.
    let cases: &[(&str, &str)] = &[
        ("* * * * *", "2024-03-01T12:35:00Z"),
        ("*/15 * * * *", "2024-03-01T12:45:00Z"),
        ("5/15 * * * *", "2024-03-01T12:35:00Z"),
        ("10-40/10 * * * *", "2024-03-01T12:40:00Z"),
        ("0 */6 * * *", "2024-03-01T18:00:00Z"),
        ("30 8 * * MON-FRI", "2024-03-04T08:30:00Z"),
        ("0 0 1,15 * *", "2024-03-15T00:00:00Z"),
        ("0 12 * jan,JUL *", "2024-07-01T12:00:00Z"),
        ("0 0 ? * sun", "2024-03-03T00:00:00Z"),
        ("0 22 * * 1-5", "2024-03-01T22:00:00Z"),
        ("15 14 1 * *", "2024-03-01T14:15:00Z"),
        ("+5 * * * *", "2024-03-01T13:05:00Z"),
        ("1,,2 * * * *", "2024-03-01T13:01:00Z"),
        ("0 0 * * SUN-SAT", "2024-03-02T00:00:00Z"),
        ("0\t0  *   * 6", "2024-03-02T00:00:00Z"),
        ("  0 0 * * 6  ", "2024-03-02T00:00:00Z"),
        ("@yearly", "2025-01-01T00:00:00Z"),
        ("@annually", "2025-01-01T00:00:00Z"),
        ("@monthly", "2024-04-01T00:00:00Z"),
        ("@weekly", "2024-03-03T00:00:00Z"),
        ("@daily", "2024-03-02T00:00:00Z"),
        ("@midnight", "2024-03-02T00:00:00Z"),
        ("@hourly", "2024-03-01T13:00:00Z"),
        ("@every 2s", "2024-03-01T12:34:58Z"),
        ("@every 6h", "2024-03-01T18:34:56Z"),
        ("@every 1h30m", "2024-03-01T14:04:56Z"),
        ("@every 500ms", "2024-03-01T12:34:57Z"),
        ("@every 1.5s", "2024-03-01T12:34:57Z"),
        ("@every -1h", "2024-03-01T12:34:57Z"),
        ("CRON_TZ=Asia/Tokyo 0 9 * * *", "2024-03-02T00:00:00Z"),
        ("TZ=America/New_York 0 0 * * *", "2024-03-02T05:00:00Z"),
        ("CRON_TZ=Asia/Kolkata 30 18 * * *", "2024-03-01T13:00:00Z"),
        ("CRON_TZ=UTC 0 13 * * *", "2024-03-01T13:00:00Z"),
        ("CRON_TZ= 0 13 * * *", "2024-03-01T13:00:00Z"),
        ("CRON_TZ=Local 0 13 * * *", "2024-03-01T13:00:00Z"),
        (
            "CRON_TZ=America/New_York   @daily  ",
            "2024-03-02T05:00:00Z",
        ),
        ("CRON_TZ=America/New_York @every 2s", "2024-03-01T12:34:58Z"),
    ];
    for (expr, want) in cases {
        assert_eq!(next(expr, AFTER), Some(ts(want)), "next run of {expr:?}");
    }
}

#[test]
fn invalid_expressions_are_rejected_naming_the_field() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "EmptySchedule", "must be a non-empty cron expression"),
        ("   ", "WrongFieldCount", "found 0"),
        ("* * * *", "WrongFieldCount", "found 4"),
        ("0 * * * * *", "WrongFieldCount", "found 6"),
        (
            "60 * * * *",
            "ValueOutOfRange",
            "minute field, \"60\" has 60, outside 0-59",
        ),
        ("0 24 * * *", "ValueOutOfRange", "hour field"),
        ("0 0 0 * *", "ValueOutOfRange", "day-of-month field"),
        ("0 0 32 * *", "ValueOutOfRange", "day-of-month field"),
        ("0 0 * 13 *", "ValueOutOfRange", "month field"),
        (
            "0 0 * * 7",
            "ValueOutOfRange",
            "day-of-week field, \"7\" has 7",
        ),
        ("0 0 * * 0-7", "ValueOutOfRange", "day-of-week field"),
        (
            "0 0 , * *",
            "EmptyField",
            "day-of-month field \",\" has no value",
        ),
        (
            "*/0 * * * *",
            "ZeroStep",
            "minute field, the step of \"*/0\" is 0",
        ),
        (
            "30-10 * * * *",
            "ReversedRange",
            "minute field, the range \"30-10\"",
        ),
        ("0 0 * * sat-sun", "ReversedRange", "day-of-week field"),
        (
            "0 0 * january *",
            "InvalidNumber",
            "month field, \"january\" is not",
        ),
        (
            "0 0 * * monday",
            "InvalidNumber",
            "day-of-week field, \"monday\" is not",
        ),
        ("x * * * *", "InvalidNumber", "minute field, \"x\" is not"),
        (
            "-5 * * * *",
            "MalformedRange",
            "minute field, \"-5\" is not of the form",
        ),
        ("*-5 * * * *", "MalformedRange", "minute field, \"*-5\""),
        ("1-2-3 * * * *", "MalformedRange", "minute field"),
        ("*/2/3 * * * *", "MalformedRange", "minute field"),
        ("@reboot", "UnknownDescriptor", "\"@reboot\""),
        ("@Daily", "UnknownDescriptor", "\"@Daily\""),
        ("@daily ", "UnknownDescriptor", "\"@daily \""),
        (" @daily", "WrongFieldCount", "found 1"),
        ("@every", "UnknownDescriptor", "\"@every\""),
        ("@every 1d", "InvalidEveryDuration", "@every"),
        ("@every  6h", "InvalidEveryDuration", "@every"),
        (
            "CRON_TZ=America/New_York",
            "MissingSchedule",
            "followed by a space",
        ),
        (
            "CRON_TZ=Nowhere/City * * * * *",
            "UnknownTimeZone",
            "\"Nowhere/City\"",
        ),
        (
            "TZ=america/new_york * * * * *",
            "UnknownTimeZone",
            "\"america/new_york\"",
        ),
        ("CRON_TZ=utc * * * * *", "UnknownTimeZone", "\"utc\""),
        ("cron_tz=UTC * * * * *", "WrongFieldCount", "found 6"),
    ];
    for (expr, category, text) in cases {
        let err = Cron::parse(expr).expect_err(expr);
        let message = err.to_string();
        assert_eq!(err.category(), *category, "{expr:?}: {message}");
        assert!(
            message.starts_with(&format!("invalid schedule {expr:?}: ")),
            "{expr:?}: {message}"
        );
        assert!(message.contains(text), "{expr:?}: {message}");
    }
}

#[test]
fn error_messages_read_whole() {
    let message = |expr| Cron::parse(expr).unwrap_err().to_string();
    assert_eq!(
        message("0 0 * * 7"),
        "invalid schedule \"0 0 * * 7\": in the day-of-week field, \"7\" has 7, outside 0-6 \
         (Sunday is 0)"
    );
    assert_eq!(
        message("0 0 * jam *"),
        "invalid schedule \"0 0 * jam *\": in the month field, \"jam\" is not a number or a \
         month name (JAN-DEC)"
    );
}

#[test]
fn causes_are_kept_as_sources() {
    use std::error::Error as _;
    let every = Cron::parse("@every 1d").unwrap_err();
    assert_eq!(
        every.source().map(ToString::to_string).as_deref(),
        Some("unknown unit \"d\" in duration \"1d\"")
    );
    let zone = Cron::parse("TZ=America/new_york * * * * *").unwrap_err();
    assert!(
        zone.source()
            .is_some_and(|s| s.to_string().contains("\"America/New_York\"")),
        "{zone:?}"
    );
}

#[test]
fn every_two_seconds_runs_on_whole_seconds() {
    let cron = Cron::parse("@every 2s").unwrap();
    let mut at = ts("2024-03-01T12:00:00.7Z");
    let mut runs = Vec::new();
    for _ in 0..3 {
        at = cron.next_after(at).unwrap();
        runs.push(at.to_string());
    }
    assert_eq!(
        runs,
        [
            "2024-03-01T12:00:02Z",
            "2024-03-01T12:00:04Z",
            "2024-03-01T12:00:06Z"
        ]
    );
    assert_eq!(Cron::parse("@every 2s"), Cron::parse("@every 2.9s"));
    assert_ne!(Cron::parse("@every 2s"), Cron::parse("@every 3s"));
}

#[test]
fn descriptors_are_their_five_field_forms() {
    let cases = [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 jan ?"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * sun"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 ? * ?"),
        ("@hourly", "0 * * * *"),
    ];
    for (descriptor, fields) in cases {
        assert_eq!(Cron::parse(descriptor), Cron::parse(fields), "{descriptor}");
    }
    assert_ne!(
        Cron::parse("@daily"),
        Cron::parse("CRON_TZ=Asia/Tokyo @daily")
    );
}

#[test]
fn a_run_time_is_not_its_own_next_run() {
    assert_eq!(
        next("0 * * * *", "2024-03-01T13:00:00Z"),
        Some(ts("2024-03-01T14:00:00Z"))
    );
    assert_eq!(
        next("0 * * * *", "2024-03-01T12:59:59.999999999Z"),
        Some(ts("2024-03-01T13:00:00Z"))
    );
}

#[test]
fn backup_name_is_the_schedule_and_utc_seconds() {
    assert_eq!(
        backup_name("daily", ts("2024-03-05T07:08:09.987Z")),
        "daily-20240305070809"
    );
    assert_eq!(
        backup_name("nightly-ns1", ts("2024-12-31T23:59:59+01:00")),
        "nightly-ns1-20241231225959"
    );
}
