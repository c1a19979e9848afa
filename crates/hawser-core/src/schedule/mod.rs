//! Velero's Schedule semantics: parsing `spec.schedule`, finding when a Schedule is next due, and
//! the name Velero gives the Backups a Schedule creates. Everything here is pure: the caller passes
//! the instant to search from.
//!
//! Velero parses `spec.schedule` with robfig/cron v3's `ParseStandard` and asks `Next(lastBackup)`
//! (velero-compat §1.4, §2.4). [`Cron`] follows that parser and that `Next`:
//!
//! * five whitespace-separated fields, `minute hour day-of-month month day-of-week`, each a
//!   comma-separated list of `*`, `?` (a synonym of `*`, in any field), `a`, `a-b`, `*/n`,
//!   `a-b/n` and `a/n` (`a` to the maximum, step `n`); months `JAN`–`DEC` and days `SUN`–`SAT`
//!   by name in any case; day-of-week `0`–`6`, Sunday `0` (robfig rejects `7`, and so does this);
//! * when day-of-month or day-of-week contains `*` or `?` (with no step above 1, as robfig marks
//!   them) a day must match both fields; when both are restricted it may match either;
//! * descriptors `@yearly` `@annually` `@monthly` `@weekly` (Sunday) `@daily` `@midnight`
//!   `@hourly`, and `@every <Go duration>`: the next run is `after` rounded down to the second
//!   plus the duration, itself truncated to whole seconds and at least one second;
//! * a `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix naming the IANA zone the fields are read in
//!   (case-sensitive, as Go reads it from the file system). Without one, and for `Local` or an
//!   empty name, the fields are read in UTC: robfig uses the server's local zone, and Velero's
//!   server runs in UTC;
//! * [`Cron::next_after`] is the earliest instant strictly after its argument whose wall-clock
//!   time matches, looked for no further than robfig looks (to the end of the fifth year after),
//!   so `0 0 30 2 *` has none.
//!
//! Daylight saving, as robfig's own tests pin it down: a wall-clock time that a spring-forward gap
//! skips does not run that day (`30 2 * * *` in `America/New_York` skips the second Sunday of
//! March), and one that a fall-back overlap repeats runs at both instants (`30 1 * * *` runs twice
//! on the first Sunday of November). robfig's search steps through absolute hours and corrects
//! only whole-hour shifts away from midnight, so in zones whose clocks change at midnight or by
//! part of an hour (Havana, Tehran, Lord Howe, Chatham, ...) it sometimes skips a matching time,
//! returns one that does not match, or never returns; here the rule above holds in every zone.
//!
//! Where robfig accepts an expression that cannot mean what was written, this parser refuses it:
//! a field with no value (`,`), which robfig parses into a schedule that never fires (and Velero
//! then treats as always due), and `*-5`, which robfig reads as `*`. A `CRON_TZ=` prefix with
//! nothing after it is an error rather than a panic.
//!
//! The parser is written here rather than taken from a crate: `cron` and `croner` are built on
//! `chrono`, while hawser's time is `jiff`, whose time zone database gives `CRON_TZ` (gaps and
//! overlaps included) without a second date-time library. The workspace builds jiff with
//! `tzdb-bundle-always`, so the database is in the binary and `CRON_TZ` works in an image
//! without `/usr/share/zoneinfo`.

mod cron;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::duration::{GoDuration, ParseDurationError};

/// A parsed Schedule expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Cron {
    spec: Spec,
}

#[derive(Debug, Clone, PartialEq)]
enum Spec {
    /// Five fields (or a descriptor that stands for five fields) in a time zone.
    Fields(cron::Fields),
    /// `@every`: a fixed delay, whole seconds and at least one.
    Every(SignedDuration),
}

/// One of the five fields of a cron expression, as named in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    /// The first field, 0–59.
    Minute,
    /// The second field, 0–23.
    Hour,
    /// The third field, 1–31.
    DayOfMonth,
    /// The fourth field, 1–12 or `JAN`–`DEC`.
    Month,
    /// The fifth field, 0–6 (Sunday 0) or `SUN`–`SAT`.
    DayOfWeek,
}

impl std::fmt::Display for CronField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::DayOfMonth => "day-of-month",
            Self::Month => "month",
            Self::DayOfWeek => "day-of-week",
        })
    }
}

/// Why the time zone database has no zone of the given name (jiff's explanation, kept as text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TimeZoneLookupError(String);

/// Why an expression is invalid. Display gives a message quoting the expression and, for a bad
/// field, naming the field and the offending item; the cause, if any, is the `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    expression: String,
    kind: CronErrorKind,
}

/// What is wrong with an expression (the part of a [`CronError`] message after the expression).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronErrorKind {
    /// The expression is the empty string.
    #[error("the schedule must be a non-empty cron expression")]
    Empty,
    /// Not five fields, and not a descriptor.
    #[error(
        "expected 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as \
         @daily, found {found}"
    )]
    FieldCount {
        /// How many whitespace-separated fields there are.
        found: usize,
    },
    /// A `CRON_TZ=`/`TZ=` prefix with no space (and so no schedule) after the zone.
    #[error("the time zone must be followed by a space and the schedule")]
    MissingSchedule,
    /// The zone named by `CRON_TZ=`/`TZ=` is not in the time zone database.
    #[error("unknown time zone {zone:?}")]
    UnknownTimeZone {
        /// The zone name as written.
        zone: String,
        /// What the lookup said.
        #[source]
        source: TimeZoneLookupError,
    },
    /// `@` followed by something other than a known descriptor.
    #[error(
        "unknown descriptor {descriptor:?} (expected @yearly, @annually, @monthly, @weekly, \
         @daily, @midnight, @hourly or @every <duration>)"
    )]
    UnknownDescriptor {
        /// The descriptor as written.
        descriptor: String,
    },
    /// `@every` followed by something that is not a Go duration.
    #[error("the duration after @every is not a Go duration such as 6h or 1h30m")]
    EveryDuration {
        /// Why the duration does not parse.
        #[source]
        source: ParseDurationError,
    },
    /// A field made only of commas.
    #[error("the {field} field {text:?} has no value")]
    NoValues {
        /// The field.
        field: CronField,
        /// The field as written.
        text: String,
    },
    /// A value or step that is not a number (or a name the field accepts).
    #[error("in the {field} field, {token:?} is not {}", field.expected())]
    NotANumber {
        /// The field.
        field: CronField,
        /// The text that should have been a number or a name.
        token: String,
    },
    /// A value outside the field's range.
    #[error("in the {field} field, {item:?} has {value}, outside {}", field.range())]
    OutOfRange {
        /// The field.
        field: CronField,
        /// The comma-separated item holding the value.
        item: String,
        /// The value.
        value: u64,
    },
    /// A range `a-b` with `a` after `b`.
    #[error("in the {field} field, the range {item:?} starts after it ends")]
    ReversedRange {
        /// The field.
        field: CronField,
        /// The comma-separated item holding the range.
        item: String,
    },
    /// A step of 0.
    #[error("in the {field} field, the step of {item:?} is 0; it must be at least 1")]
    ZeroStep {
        /// The field.
        field: CronField,
        /// The comma-separated item holding the step.
        item: String,
    },
    /// An item that is none of `*`, `?`, `a`, `a-b`, each with an optional `/step`.
    #[error("in the {field} field, {item:?} is not of the form *, a, a-b, */n, a/n or a-b/n")]
    Malformed {
        /// The field.
        field: CronField,
        /// The comma-separated item.
        item: String,
    },
}

impl CronErrorKind {
    /// A stable short category for Events and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Empty => "EmptySchedule",
            Self::FieldCount { .. } => "WrongFieldCount",
            Self::MissingSchedule => "MissingSchedule",
            Self::UnknownTimeZone { .. } => "UnknownTimeZone",
            Self::UnknownDescriptor { .. } => "UnknownDescriptor",
            Self::EveryDuration { .. } => "InvalidEveryDuration",
            Self::NoValues { .. } => "EmptyField",
            Self::NotANumber { .. } => "InvalidNumber",
            Self::OutOfRange { .. } => "ValueOutOfRange",
            Self::ReversedRange { .. } => "ReversedRange",
            Self::ZeroStep { .. } => "ZeroStep",
            Self::Malformed { .. } => "MalformedRange",
        }
    }
}

impl CronError {
    /// The rejected expression, as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// What is wrong with it.
    pub fn kind(&self) -> &CronErrorKind {
        &self.kind
    }

    /// A stable short category for Events and metrics.
    pub fn category(&self) -> &'static str {
        self.kind.category()
    }
}

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid schedule {:?}: {}", self.expression, self.kind)
    }
}

impl std::error::Error for CronError {
    /// The kind is part of this error's own message, so its cause is this error's cause.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.kind.source()
    }
}

impl Cron {
    /// Parses `spec.schedule` as robfig/cron v3's `ParseStandard` does (see the module docs).
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        parse_spec(expr)
            .map(|spec| Cron { spec })
            .map_err(|kind| CronError {
                expression: expr.to_owned(),
                kind,
            })
    }

    /// The first run time strictly after `after` (None if there is none, e.g. Feb 30).
    ///
    /// Velero's Schedule is due when `now > next_after(max(lastBackup or creation, lastSkipped))`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.spec {
            Spec::Fields(fields) => fields.next_after(after),
            Spec::Every(delay) => cron::floor_second(after)?.checked_add(*delay).ok(),
        }
    }
}

fn parse_spec(expr: &str) -> Result<Spec, CronErrorKind> {
    if expr.is_empty() {
        return Err(CronErrorKind::Empty);
    }
    // robfig trims the rest only when a zone prefix was present; `@daily ` without one is an
    // unknown descriptor there, and here.
    let (tz, spec) = match expr
        .strip_prefix("TZ=")
        .or_else(|| expr.strip_prefix("CRON_TZ="))
    {
        Some(rest) => {
            let (zone, spec) = rest.split_once(' ').ok_or(CronErrorKind::MissingSchedule)?;
            (time_zone(zone)?, spec.trim())
        }
        None => (TimeZone::UTC, expr),
    };
    if let Some(descriptor) = spec.strip_prefix('@') {
        return descriptor_spec(descriptor, tz);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let found = fields.len();
    let fields: [&str; 5] = fields
        .try_into()
        .map_err(|_| CronErrorKind::FieldCount { found })?;
    Ok(Spec::Fields(cron::Fields::parse(fields, tz)?))
}

/// The descriptor after `@`, as robfig's `parseDescriptor` (exact spelling, case-sensitive).
fn descriptor_spec(descriptor: &str, tz: TimeZone) -> Result<Spec, CronErrorKind> {
    let fields = match descriptor {
        "yearly" | "annually" => ["0", "0", "1", "1", "*"],
        "monthly" => ["0", "0", "1", "*", "*"],
        "weekly" => ["0", "0", "*", "*", "0"],
        "daily" | "midnight" => ["0", "0", "*", "*", "*"],
        "hourly" => ["0", "*", "*", "*", "*"],
        _ => {
            let Some(duration) = descriptor.strip_prefix("every ") else {
                return Err(CronErrorKind::UnknownDescriptor {
                    descriptor: format!("@{descriptor}"),
                });
            };
            let duration = GoDuration::parse(duration)
                .map_err(|source| CronErrorKind::EveryDuration { source })?;
            return Ok(Spec::Every(every_delay(duration)));
        }
    };
    Ok(Spec::Fields(cron::Fields::parse(fields, tz)?))
}

/// robfig's `Every`: under a second becomes one second, and the rest is truncated to whole
/// seconds.
fn every_delay(duration: GoDuration) -> SignedDuration {
    const SECOND: i64 = 1_000_000_000;
    let nanos = duration.as_nanos().max(SECOND);
    SignedDuration::from_secs(nanos / SECOND)
}

/// The zone of a `CRON_TZ=`/`TZ=` prefix. Names are case-sensitive, as Go's `LoadLocation` reads
/// them from the file system; `UTC`, `Local` and the empty name are UTC (see the module docs).
fn time_zone(zone: &str) -> Result<TimeZone, CronErrorKind> {
    if matches!(zone, "" | "UTC" | "Local") {
        return Ok(TimeZone::UTC);
    }
    let unknown = |reason: String| CronErrorKind::UnknownTimeZone {
        zone: zone.to_owned(),
        source: TimeZoneLookupError(reason),
    };
    let tz = TimeZone::get(zone).map_err(|e| unknown(e.to_string()))?;
    match tz.iana_name() {
        Some(name) if name == zone => Ok(tz),
        Some(name) => Err(unknown(format!(
            "zone names are case-sensitive; the database spells it {name:?}"
        ))),
        None => Err(unknown("the database entry has no IANA name".to_owned())),
    }
}

/// The name Velero gives a schedule's backup: `<schedule>-<UTC yyyyMMddHHmmss>`.
pub fn backup_name(schedule: &str, at: Timestamp) -> String {
    let t = TimeZone::UTC.to_datetime(at);
    format!(
        "{schedule}-{:04}{:02}{:02}{:02}{:02}{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests;
