//! The five-field part of a Schedule expression: each field parsed into a bit set as robfig/cron
//! v3's `getField` does, and the search for the next wall-clock time those sets match.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};

use super::{CronErrorKind, CronField};

const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// robfig searches at most this many years past the year of the first candidate second.
const YEAR_LIMIT: i16 = 5;

/// The five fields as bit sets (bit `v` set when value `v` matches), plus the zone they are read
/// in. Only day-of-month and day-of-week keep robfig's "star" mark, the only place it matters.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// Day-of-month contains `*` or `?` (with no step above 1).
    dom_star: bool,
    /// Day-of-week contains `*` or `?` (with no step above 1).
    dow_star: bool,
    tz: TimeZone,
}

impl CronField {
    fn bounds(self) -> (u8, u8) {
        match self {
            Self::Minute => (0, 59),
            Self::Hour => (0, 23),
            Self::DayOfMonth => (1, 31),
            Self::Month => (1, 12),
            Self::DayOfWeek => (0, 6),
        }
    }

    /// Names accepted in place of numbers; the first name stands for the minimum.
    fn names(self) -> &'static [&'static str] {
        match self {
            Self::Month => &MONTH_NAMES,
            Self::DayOfWeek => &DAY_NAMES,
            Self::Minute | Self::Hour | Self::DayOfMonth => &[],
        }
    }

    /// What a value of the field may be, for error messages.
    pub(super) fn expected(self) -> &'static str {
        match self {
            Self::Month => "a number or a month name (JAN-DEC)",
            Self::DayOfWeek => "a number or a day name (SUN-SAT)",
            Self::Minute | Self::Hour | Self::DayOfMonth => "a non-negative number",
        }
    }

    /// The field's range, for error messages.
    pub(super) fn range(self) -> String {
        let (min, max) = self.bounds();
        let sunday = if self == Self::DayOfWeek {
            " (Sunday is 0)"
        } else {
            ""
        };
        format!("{min}-{max}{sunday}")
    }
}

impl Fields {
    /// Parses the five whitespace-separated fields `[minute, hour, dom, month, dow]`.
    pub(super) fn parse(fields: [&str; 5], tz: TimeZone) -> Result<Self, CronErrorKind> {
        let [minute, hour, dom, month, dow] = fields;
        let minute = parse_field(CronField::Minute, minute)?;
        let hour = parse_field(CronField::Hour, hour)?;
        let dom = parse_field(CronField::DayOfMonth, dom)?;
        let month = parse_field(CronField::Month, month)?;
        let dow = parse_field(CronField::DayOfWeek, dow)?;
        Ok(Self {
            minute: minute.0,
            hour: hour.0,
            dom: dom.0,
            month: month.0,
            dow: dow.0,
            dom_star: dom.1,
            dow_star: dow.1,
            tz,
        })
    }

    /// robfig's `dayMatches`: when either day field is unrestricted both must match, otherwise
    /// either may.
    fn day_matches(&self, day: Date) -> bool {
        if !has(self.month, day.month()) {
            return false;
        }
        let dom = has(self.dom, day.day());
        let dow = has(self.dow, day.weekday().to_sunday_zero_offset());
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The wall-clock times of `day` that match, ascending: none when the day does not match,
    /// and none from hours that [end at or before](ends_at_or_before) `after`.
    fn times_on(&self, day: Date, after: Timestamp) -> impl Iterator<Item = DateTime> + '_ {
        let hours =
            if self.day_matches(day) && !ends_at_or_before(&self.tz, day.at(23, 59, 0, 0), after) {
                self.hour
            } else {
                0
            };
        values(hours, 23)
            .filter(move |&hour| !ends_at_or_before(&self.tz, day.at(hour, 59, 0, 0), after))
            .flat_map(move |hour| {
                values(self.minute, 59).map(move |minute| day.at(hour, minute, 0, 0))
            })
    }

    /// The earliest instant strictly after `after` whose wall-clock time in the zone matches
    /// every field (at second 0), searched up to robfig's five-year limit.
    ///
    /// Wall-clock times a daylight-saving gap skips never match; one an overlap repeats matches
    /// at both of its instants. The scan walks civil days from the day before `after`'s, and
    /// stops at the first match that is *unambiguous*: no civil time after an unambiguous one can
    /// map to an earlier instant. A match inside an overlap is kept while the rest of that day and
    /// the next are scanned, since the overlap's other instants may interleave with them.
    pub(super) fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        // robfig starts from the next whole second and gives up past that second's year + 5.
        let first = floor_second(after)?
            .checked_add(jiff::SignedDuration::from_secs(1))
            .ok()?;
        let last_year = self.tz.to_datetime(first).year().checked_add(YEAR_LIMIT)?;

        let mut day = self.tz.to_datetime(after).date().yesterday().ok()?;
        let mut best: Option<Timestamp> = None;
        let mut last_day: Option<Date> = None;
        while day.year() <= last_year && last_day.is_none_or(|last| day <= last) {
            for civil in self.times_on(day, after) {
                match self.tz.to_ambiguous_timestamp(civil).offset() {
                    AmbiguousOffset::Unambiguous { offset } => {
                        let at = offset.to_timestamp(civil).ok()?;
                        if at > after {
                            return Some(best.map_or(at, |b| b.min(at)));
                        }
                    }
                    AmbiguousOffset::Fold {
                        before,
                        after: later,
                    } => {
                        for offset in [before, later] {
                            let at = offset.to_timestamp(civil).ok()?;
                            if at > after && best.is_none_or(|b| at < b) {
                                best = Some(at);
                                last_day = last_day.or_else(|| day.tomorrow().ok());
                            }
                        }
                    }
                    AmbiguousOffset::Gap { .. } => {}
                }
            }
            match day.tomorrow() {
                Ok(next) => day = next,
                Err(_) => break,
            }
        }
        best
    }
}

/// True when `civil` names exactly one instant and it is not after `after`. Then no civil time
/// at or before `civil` can name an instant after `after` either, so the caller may skip them.
fn ends_at_or_before(tz: &TimeZone, civil: DateTime, after: Timestamp) -> bool {
    match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } => {
            offset.to_timestamp(civil).is_ok_and(|at| at <= after)
        }
        AmbiguousOffset::Gap { .. } | AmbiguousOffset::Fold { .. } => false,
    }
}

/// `at` rounded down to a whole second (also before 1970, where jiff's sub-second part is
/// negative).
pub(super) fn floor_second(at: Timestamp) -> Option<Timestamp> {
    let second = at.as_second();
    let second = if at.subsec_nanosecond() < 0 {
        second.checked_sub(1)?
    } else {
        second
    };
    Timestamp::from_second(second).ok()
}

fn has(bits: u64, value: i8) -> bool {
    u32::try_from(value).is_ok_and(|v| v < 64 && bits >> v & 1 == 1)
}

/// The values in `0..=max` present in `bits`, ascending.
fn values(bits: u64, max: i8) -> impl Iterator<Item = i8> {
    (0..=max).filter(move |&v| has(bits, v))
}

/// robfig's `getField`: a comma-separated list of items whose bit sets are OR-ed. Empty items
/// (`1,,2`) are skipped as robfig skips them; a field with no item at all is an error here.
fn parse_field(field: CronField, text: &str) -> Result<(u64, bool), CronErrorKind> {
    let mut bits = 0;
    let mut star = false;
    let mut any = false;
    for item in text.split(',').filter(|item| !item.is_empty()) {
        let (item_bits, item_star) = parse_item(field, item)?;
        bits |= item_bits;
        star |= item_star;
        any = true;
    }
    if !any {
        return Err(CronErrorKind::NoValues {
            field,
            text: text.to_owned(),
        });
    }
    Ok((bits, star))
}

/// robfig's `getRange`: `*`, `?`, `a`, `a-b`, each optionally followed by `/step`. `a/step`
/// means `a-max/step`; `*` keeps its star mark unless the step is above 1.
fn parse_item(field: CronField, item: &str) -> Result<(u64, bool), CronErrorKind> {
    let malformed = || CronErrorKind::Malformed {
        field,
        item: item.to_owned(),
    };
    let number = |token: &str| parse_number(field, token);
    let (min, max) = field.bounds();

    let (range, step) = match item.split_once('/') {
        Some((_, step)) if step.is_empty() || step.contains('/') => return Err(malformed()),
        Some((range, step)) => (range, Some(step)),
        None => (item, None),
    };
    let (start, mut end, mut star, single) = match range.split_once('-') {
        _ if range.is_empty() => return Err(malformed()),
        _ if range == "*" || range == "?" => (u64::from(min), u64::from(max), true, true),
        // robfig reads `*-5` as `*`, ignoring the rest; here it is an error.
        Some((low, high)) if matches!(low, "" | "*" | "?") || high.is_empty() => {
            return Err(malformed());
        }
        Some((_, high)) if high.contains('-') => return Err(malformed()),
        Some((low, high)) => (number(low)?, number(high)?, false, false),
        None => {
            let value = number(range)?;
            (value, value, false, true)
        }
    };
    let step = match step {
        None => 1,
        Some(step) => {
            let step = parse_int(step).ok_or_else(|| CronErrorKind::NotANumber {
                field,
                token: step.to_owned(),
            })?;
            if single {
                end = u64::from(max);
            }
            if step > 1 {
                star = false;
            }
            step
        }
    };

    let out_of_range = |value| CronErrorKind::OutOfRange {
        field,
        item: item.to_owned(),
        value,
    };
    if start < u64::from(min) {
        return Err(out_of_range(start));
    }
    if end > u64::from(max) {
        return Err(out_of_range(end));
    }
    if start > end {
        return Err(CronErrorKind::ReversedRange {
            field,
            item: item.to_owned(),
        });
    }
    if step == 0 {
        return Err(CronErrorKind::ZeroStep {
            field,
            item: item.to_owned(),
        });
    }
    let step = usize::try_from(step).unwrap_or(usize::MAX);
    let bits = (start..=end)
        .step_by(step)
        .fold(0u64, |bits, v| bits | 1 << v);
    Ok((bits, star))
}

/// robfig's `parseIntOrName`: a (case-insensitive) name of the field, else a number.
fn parse_number(field: CronField, token: &str) -> Result<u64, CronErrorKind> {
    let (min, _) = field.bounds();
    if let Some(index) = field
        .names()
        .iter()
        .position(|name| name.eq_ignore_ascii_case(token))
    {
        // At most 12 names, so the index always fits.
        return Ok(u64::from(min).saturating_add(u64::try_from(index).unwrap_or(u64::MAX)));
    }
    parse_int(token).ok_or_else(|| CronErrorKind::NotANumber {
        field,
        token: token.to_owned(),
    })
}

/// Go's `strconv.Atoi` (optional sign, decimal digits, fits in 64 bits), refusing negatives as
/// robfig's `mustParseInt` does. Rust's `i64::from_str` accepts the same syntax.
fn parse_int(token: &str) -> Option<u64> {
    token
        .parse::<i64>()
        .ok()
        .and_then(|n| u64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::schedule::Cron;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Runs `expr` from each `after` and checks the next run; `None` means no run.
    fn assert_runs(expr: &str, cases: &[(&str, Option<&str>)]) {
        let cron = Cron::parse(expr).unwrap();
        for (after, want) in cases {
            assert_eq!(
                cron.next_after(ts(after)),
                want.map(ts),
                "next run of {expr:?} after {after}"
            );
        }
    }

    fn bits(field: CronField, text: &str) -> Result<(u64, bool), String> {
        parse_field(field, text).map_err(|e| e.category().to_owned())
    }

    fn set(values: &[u8]) -> u64 {
        values.iter().fold(0, |bits, v| bits | 1 << v)
    }

    #[test]
    fn fields_become_robfig_bit_sets() {
        use CronField::*;
        let cases: &[(CronField, &str, u64, bool)] = &[
            (Minute, "*", set(&(0..=59).collect::<Vec<_>>()), true),
            (Minute, "?", set(&(0..=59).collect::<Vec<_>>()), true),
            (Minute, "*/1", set(&(0..=59).collect::<Vec<_>>()), true),
            (Minute, "*/20", set(&[0, 20, 40]), false),
            (Minute, "5/20", set(&[5, 25, 45]), false),
            (Minute, "10-30/10", set(&[10, 20, 30]), false),
            (Minute, "1,,3,", set(&[1, 3]), false),
            (Minute, "+7", set(&[7]), false),
            (Minute, "007", set(&[7]), false),
            (Minute, "*/100", set(&[0]), false),
            (Hour, "22-23,0-1", set(&[22, 23, 0, 1]), false),
            (DayOfMonth, "*/10", set(&[1, 11, 21, 31]), false),
            (DayOfMonth, "?", set(&(1..=31).collect::<Vec<_>>()), true),
            (Month, "jan,JUL,Dec", set(&[1, 7, 12]), false),
            (Month, "feb/3", set(&[2, 5, 8, 11]), false),
            (Month, "MAR-may", set(&[3, 4, 5]), false),
            (DayOfWeek, "MON-FRI", set(&[1, 2, 3, 4, 5]), false),
            (DayOfWeek, "sun,6", set(&[0, 6]), false),
            (DayOfWeek, "*,1", set(&[0, 1, 2, 3, 4, 5, 6]), true),
        ];
        for (field, text, want, star) in cases {
            assert_eq!(bits(*field, text), Ok((*want, *star)), "{field} {text:?}");
        }
    }

    #[test]
    fn bad_items_are_rejected_by_kind() {
        use CronField::*;
        let cases: &[(CronField, &str, &str)] = &[
            (Minute, "60", "ValueOutOfRange"),
            (Minute, "0-60", "ValueOutOfRange"),
            (Hour, "24", "ValueOutOfRange"),
            (DayOfMonth, "0", "ValueOutOfRange"),
            (DayOfMonth, "32", "ValueOutOfRange"),
            (Month, "13", "ValueOutOfRange"),
            (DayOfWeek, "7", "ValueOutOfRange"),
            (DayOfWeek, "sun-7", "ValueOutOfRange"),
            (Minute, "30-10", "ReversedRange"),
            (DayOfWeek, "FRI-MON", "ReversedRange"),
            (Minute, "*/0", "ZeroStep"),
            (Minute, "5/0", "ZeroStep"),
            (Minute, "*/-1", "InvalidNumber"),
            (Minute, "x", "InvalidNumber"),
            (Minute, "-1", "MalformedRange"),
            (Minute, "1-", "MalformedRange"),
            (Minute, "*/", "MalformedRange"),
            (Minute, "/5", "MalformedRange"),
            (Minute, "99999999999999999999", "InvalidNumber"),
            (Month, "january", "InvalidNumber"),
            (Hour, "mon", "InvalidNumber"),
            (Minute, "1-2-3", "MalformedRange"),
            (Minute, "*/2/3", "MalformedRange"),
            (Minute, "*-5", "MalformedRange"),
            (Minute, ",", "EmptyField"),
            (Minute, ",,", "EmptyField"),
        ];
        for (field, text, category) in cases {
            assert_eq!(
                bits(*field, text),
                Err((*category).to_owned()),
                "{field} {text:?}"
            );
        }
    }

    #[test]
    fn floor_second_rounds_down_on_both_sides_of_1970() {
        let at = |s, ns| Timestamp::new(s, ns).ok();
        assert_eq!(at(5, 900).and_then(floor_second), at(5, 0));
        assert_eq!(at(-5, -900).and_then(floor_second), at(-6, 0));
        assert_eq!(at(-5, 0).and_then(floor_second), at(-5, 0));
    }

    // The DST rules are robfig's (its spec_test.go pins both), and these expectations were
    // checked against robfig/cron v3.0.1 except where a comment says robfig differs.
    #[test]
    fn a_time_skipped_by_spring_forward_does_not_run_that_day() {
        // 2024-03-10 in New York: 02:00 EST jumps to 03:00 EDT.
        assert_runs(
            "CRON_TZ=America/New_York 30 2 * * *",
            &[
                ("2024-03-09T08:00:00Z", Some("2024-03-11T06:30:00Z")),
                ("2024-03-08T08:00:00Z", Some("2024-03-09T07:30:00Z")),
            ],
        );
        assert_runs(
            "TZ=America/New_York 0 * * * *",
            &[
                ("2024-03-10T06:00:00Z", Some("2024-03-10T07:00:00Z")),
                ("2024-03-10T05:59:00Z", Some("2024-03-10T06:00:00Z")),
            ],
        );
        // Sao Paulo 2018-11-04: midnight itself did not exist (robfig issue 157).
        assert_runs(
            "TZ=America/Sao_Paulo 0 9 10 * ?",
            &[("2018-10-17T09:00:00Z", Some("2018-11-10T11:00:00Z"))],
        );
        assert_runs(
            "TZ=America/Sao_Paulo 30 0 * * *",
            &[("2018-11-03T12:00:00Z", Some("2018-11-05T02:30:00Z"))],
        );
    }

    #[test]
    fn a_time_repeated_by_fall_back_runs_at_both_instants() {
        // 2024-11-03 in New York: 02:00 EDT falls back to 01:00 EST, so 01:30 happens twice.
        assert_runs(
            "CRON_TZ=America/New_York 30 1 * * *",
            &[
                ("2024-11-03T04:00:00Z", Some("2024-11-03T05:30:00Z")),
                ("2024-11-03T05:30:00Z", Some("2024-11-03T06:30:00Z")),
                ("2024-11-03T06:30:00Z", Some("2024-11-04T06:30:00Z")),
            ],
        );
        // After the first 01:45, the second 01:00 comes before the second 01:30.
        assert_runs(
            "CRON_TZ=America/New_York 0,30 1 * * *",
            &[("2024-11-03T05:45:00Z", Some("2024-11-03T06:00:00Z"))],
        );
        // St John's, 2009-11-01: 00:01 NDT fell back to 23:01 NST on the previous day, so 23:30
        // on 31 October happened twice. (robfig misses the second one: its day loop steps to
        // 1 November first.)
        assert_runs(
            "TZ=America/St_Johns 30 23 * * *",
            &[
                ("2009-11-01T01:00:00Z", Some("2009-11-01T02:00:00Z")),
                ("2009-11-01T02:00:00Z", Some("2009-11-01T03:00:00Z")),
                ("2009-11-01T02:30:30Z", Some("2009-11-01T03:00:00Z")),
            ],
        );
        // There the overlap's instants of 31 October and 1 November interleave.
        assert_runs(
            "TZ=America/St_Johns 0,30 0,23 * * *",
            &[
                ("2009-11-01T02:00:00Z", Some("2009-11-01T02:30:00Z")),
                ("2009-11-01T02:30:00Z", Some("2009-11-01T03:00:00Z")),
                ("2009-11-01T03:00:00Z", Some("2009-11-01T03:30:00Z")),
            ],
        );
        // 2024-10-27 in Berlin: 03:00 CEST falls back to 02:00 CET.
        assert_runs(
            "TZ=Europe/Berlin 30 2 * * *",
            &[
                ("2024-10-26T12:00:00Z", Some("2024-10-27T00:30:00Z")),
                ("2024-10-27T00:30:00Z", Some("2024-10-27T01:30:00Z")),
                ("2024-10-27T01:30:00Z", Some("2024-10-28T01:30:00Z")),
            ],
        );
    }

    #[test]
    fn sub_hour_gaps_skip_only_the_missing_minutes() {
        // Chatham Islands, 2024-09-29: 02:45 +12:45 jumps to 03:45 +13:45. robfig skips the whole
        // 03:xx hour that day; the wall-clock rule runs at 03:45, the first 03:xx that exists.
        assert_runs(
            "CRON_TZ=Pacific/Chatham * 3 29 9 *",
            &[("2024-09-25T00:00:00Z", Some("2024-09-28T14:00:00Z"))],
        );
    }

    #[test]
    fn either_day_field_unrestricted_means_both_must_match() {
        let after = "2024-03-01T00:00:00Z"; // a Friday
        assert_runs("0 0 13 * *", &[(after, Some("2024-03-13T00:00:00Z"))]);
        assert_runs("0 0 * * FRI", &[(after, Some("2024-03-08T00:00:00Z"))]);
        assert_runs("0 0 ? * 5", &[(after, Some("2024-03-08T00:00:00Z"))]);
        // `*/1` keeps robfig's star mark: Sundays only.
        assert_runs(
            "0 0 */1 * SUN",
            &[("2024-09-09T00:00:00Z", Some("2024-09-15T00:00:00Z"))],
        );
        assert_runs(
            "0 0 *,11 * SUN",
            &[("2024-09-09T00:00:00Z", Some("2024-09-15T00:00:00Z"))],
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either_may_match() {
        // The 13th (a Wednesday) comes before the next Friday, the 15th.
        assert_runs(
            "0 0 13 * FRI",
            &[
                ("2024-03-09T00:00:00Z", Some("2024-03-13T00:00:00Z")),
                ("2024-03-13T00:00:00Z", Some("2024-03-15T00:00:00Z")),
            ],
        );
        // A step above 1 is a restriction, and so is `1-31`, though both cover every day.
        assert_runs(
            "0 0 */10 * SUN",
            &[("2024-09-09T00:00:00Z", Some("2024-09-11T00:00:00Z"))],
        );
        assert_runs(
            "0 0 1-31 * SUN",
            &[("2024-09-09T00:00:00Z", Some("2024-09-10T00:00:00Z"))],
        );
    }

    #[test]
    fn february_29_runs_in_leap_years_only() {
        assert_runs(
            "0 0 29 2 *",
            &[
                ("2023-03-01T00:00:00Z", Some("2024-02-29T00:00:00Z")),
                ("2024-02-28T12:00:00Z", Some("2024-02-29T00:00:00Z")),
                ("2024-02-29T00:00:00Z", Some("2028-02-29T00:00:00Z")),
                // 2100 is not a leap year.
                ("2095-03-01T00:00:00Z", Some("2096-02-29T00:00:00Z")),
            ],
        );
        assert_runs(
            "0 12 28-31 2 *",
            &[("2024-02-28T12:00:00Z", Some("2024-02-29T12:00:00Z"))],
        );
    }

    #[test]
    fn dates_that_never_come_have_no_next_run() {
        assert_runs("0 0 30 2 *", &[("2024-03-01T12:00:00Z", None)]);
        assert_runs("0 0 31 4,6,9,11 *", &[("2024-03-01T12:00:00Z", None)]);
        // robfig looks no further than five years ahead: after 2096 the next Feb 29 is in 2104.
        assert_runs("0 0 29 2 *", &[("2096-03-01T00:00:00Z", None)]);
    }
}
