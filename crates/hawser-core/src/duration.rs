//! Go-style durations (`720h0m0s`, `10m`, `1.5h`, `300ms`), as Velero stores them in its API
//! objects (`metav1.Duration`) and in `velero-backup.json`.
//!
//! [`GoDuration`] is a signed count of nanoseconds, like Go's `time.Duration`. Parsing follows Go's
//! `time.ParseDuration` and formatting follows `time.Duration.String()`, so a value read from a
//! Velero object is written back unchanged in meaning, and in the canonical form Velero itself
//! writes, including Go's `float64` rounding of long fractions (`0.3333333333333333333h` is `20m`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// A signed duration with nanosecond resolution, read and written as a Go duration string.
///
/// The range is that of Go's `time.Duration`: `i64` nanoseconds (about ±292 years).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration {
    nanos: i64,
}

/// Why a string is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// The string is empty, has no number where one is expected, or has stray characters.
    #[error("invalid duration {input:?}")]
    Invalid {
        /// The rejected input.
        input: String,
    },
    /// A number is not followed by a unit (only `0` may stand alone).
    #[error("missing unit in duration {input:?}")]
    MissingUnit {
        /// The rejected input.
        input: String,
    },
    /// A unit other than `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`.
    #[error("unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unknown unit.
        unit: String,
        /// The rejected input.
        input: String,
    },
    /// The value does not fit in an `i64` count of nanoseconds.
    #[error("duration {input:?} is out of range")]
    Overflow {
        /// The rejected input.
        input: String,
    },
}

impl ParseDurationError {
    /// A stable short category for logs and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "InvalidDuration",
            Self::MissingUnit { .. } => "MissingDurationUnit",
            Self::UnknownUnit { .. } => "UnknownDurationUnit",
            Self::Overflow { .. } => "DurationOverflow",
        }
    }
}

impl GoDuration {
    /// The zero duration (`0s`).
    pub const ZERO: Self = Self { nanos: 0 };

    /// A duration of `nanos` nanoseconds.
    pub const fn from_nanos(nanos: i64) -> Self {
        Self { nanos }
    }

    /// A duration of `secs` seconds, saturating at the `i64` nanosecond range.
    pub const fn from_secs(secs: i64) -> Self {
        Self {
            nanos: secs.saturating_mul(SECOND as i64),
        }
    }

    /// A duration of `mins` minutes, saturating at the `i64` nanosecond range.
    pub const fn from_mins(mins: i64) -> Self {
        Self {
            nanos: mins.saturating_mul(MINUTE as i64),
        }
    }

    /// A duration of `hours` hours, saturating at the `i64` nanosecond range.
    pub const fn from_hours(hours: i64) -> Self {
        Self {
            nanos: hours.saturating_mul(HOUR as i64),
        }
    }

    /// The signed number of nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// True for exactly zero. Velero treats a zero duration in a spec as "use the default".
    pub const fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// True for a negative duration.
    pub const fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// The duration as a [`std::time::Duration`], or `None` when it is negative.
    pub fn to_std(self) -> Option<Duration> {
        u64::try_from(self.nanos).ok().map(Duration::from_nanos)
    }

    /// Parses a Go duration string, as Go's `time.ParseDuration` does.
    ///
    /// Accepted: an optional sign, then one or more `<number><unit>` pairs, where the number may
    /// have a fraction (`1.5h`, `.5s`, `1.s`) and the unit is one of `ns`, `us`, `µs` (U+00B5),
    /// `μs` (U+03BC), `ms`, `s`, `m`, `h`. The bare string `0` (or `+0`, `-0`) is zero.
    pub fn parse(input: &str) -> Result<Self, ParseDurationError> {
        let invalid = || ParseDurationError::Invalid {
            input: input.to_owned(),
        };
        let overflow = || ParseDurationError::Overflow {
            input: input.to_owned(),
        };

        let (negative, mut rest) = match input.as_bytes().first() {
            Some(b'-') => (true, &input[1..]),
            Some(b'+') => (false, &input[1..]),
            _ => (false, input),
        };
        if rest == "0" {
            return Ok(Self::ZERO);
        }
        if rest.is_empty() {
            return Err(invalid());
        }

        // Accumulated in u128 so that the single legal value beyond i64::MAX (|i64::MIN|) and
        // every overflow are detected without wrapping.
        let limit = u128::from(i64::MAX.unsigned_abs()) + u128::from(negative);
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let (whole, after_whole) = split_digits(rest);
            let (fraction, after_fraction) = match after_whole.strip_prefix('.') {
                Some(after_dot) => split_digits(after_dot),
                None => ("", after_whole),
            };
            if whole.is_empty() && fraction.is_empty() {
                return Err(invalid());
            }
            let unit_len = after_fraction
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(after_fraction.len());
            let (unit, next) = after_fraction.split_at(unit_len);
            if unit.is_empty() {
                return Err(ParseDurationError::MissingUnit {
                    input: input.to_owned(),
                });
            }
            let unit_nanos = unit_nanos(unit).ok_or_else(|| ParseDurationError::UnknownUnit {
                unit: unit.to_owned(),
                input: input.to_owned(),
            })?;

            let mut value: u128 = 0;
            for digit in whole.bytes() {
                value = value * 10 + u128::from(digit - b'0');
                if value > limit {
                    return Err(overflow());
                }
            }
            value *= u128::from(unit_nanos);
            if value > limit {
                return Err(overflow());
            }
            value += fraction_nanos(fraction, unit_nanos);

            total += value;
            if total > limit {
                return Err(overflow());
            }
            rest = next;
        }

        let magnitude = i128::try_from(total).map_err(|_| overflow())?;
        let signed = if negative { -magnitude } else { magnitude };
        let nanos = i64::try_from(signed).map_err(|_| overflow())?;
        Ok(Self { nanos })
    }
}

/// The nanoseconds of a fraction `0.<digits>` of `unit_nanos`, computed as Go does: the digits are
/// read until they would overflow 63 bits, then scaled in `f64` (exact for fractions of an hour
/// to the nanosecond, and rounding like Go where inputs have more digits than that).
fn fraction_nanos(digits: &str, unit_nanos: u64) -> u128 {
    const MAX: u64 = 1 << 63;
    let mut numerator: u64 = 0;
    let mut scale: f64 = 1.0;
    for digit in digits.bytes() {
        if numerator > (MAX - 1) / 10 {
            break;
        }
        let next = numerator * 10 + u64::from(digit - b'0');
        if next > MAX {
            break;
        }
        numerator = next;
        scale *= 10.0;
    }
    if numerator == 0 {
        return 0;
    }
    // Truncation toward zero is Go's float64-to-uint64 conversion; the product is at most one
    // unit (3.6e12 ns), far inside u64.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let nanos = (numerator as f64 * (unit_nanos as f64 / scale)) as u64;
    u128::from(nanos)
}

fn split_digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => NANOSECOND,
        "us" | "\u{00b5}s" | "\u{03bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

/// Writes `value / 10^precision` with the fraction's trailing zeros (and a bare point) removed.
fn write_fraction(out: &mut String, value: u64, precision: u32) {
    let divisor = 10u64.pow(precision);
    out.push_str(&(value / divisor).to_string());
    let fraction = value % divisor;
    if fraction != 0 {
        let digits = format!("{fraction:0width$}", width = precision as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

impl fmt::Display for GoDuration {
    /// Formats as Go's `time.Duration.String()`: `0s`, `300ms`, `1.5µs`, `1.5s`, `10m0s`,
    /// `720h0m0s`, `-1h30m0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let magnitude = self.nanos.unsigned_abs();
        let mut out = String::with_capacity(24);
        if self.nanos < 0 {
            out.push('-');
        }
        if magnitude < SECOND {
            if magnitude == 0 {
                return f.write_str("0s");
            } else if magnitude < MICROSECOND {
                write_fraction(&mut out, magnitude, 0);
                out.push_str("ns");
            } else if magnitude < MILLISECOND {
                write_fraction(&mut out, magnitude, 3);
                out.push_str("\u{00b5}s");
            } else {
                write_fraction(&mut out, magnitude, 6);
                out.push_str("ms");
            }
            return f.write_str(&out);
        }
        let hours = magnitude / HOUR;
        let minutes = magnitude % HOUR / MINUTE;
        let seconds_nanos = magnitude % MINUTE;
        if hours > 0 {
            out.push_str(&hours.to_string());
            out.push('h');
        }
        if hours > 0 || minutes > 0 {
            out.push_str(&minutes.to_string());
            out.push('m');
        }
        write_fraction(&mut out, seconds_nanos, 9);
        out.push('s');
        f.write_str(&out)
    }
}

impl FromStr for GoDuration {
    type Err = ParseDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl From<Duration> for GoDuration {
    /// Converts, saturating at `i64::MAX` nanoseconds.
    fn from(d: Duration) -> Self {
        Self {
            nanos: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"720h0m0s\" or \"10m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                GoDuration::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const S: i64 = SECOND as i64;
    const MS: i64 = MILLISECOND as i64;
    const US: i64 = MICROSECOND as i64;
    const M: i64 = MINUTE as i64;
    const H: i64 = HOUR as i64;

    #[test]
    fn parses_go_duration_strings() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("0s", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0s", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10),
            ("11us", 11 * US),
            ("12\u{00b5}s", 12 * US),
            ("12\u{03bc}s", 12 * US),
            ("2us", 2 * US),
            ("13ms", 13 * MS),
            ("300ms", 300 * MS),
            ("14s", 14 * S),
            ("10m", 10 * M),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("720h", 720 * H),
            ("720h0m0s", 720 * H),
            ("1h30m", H + 30 * M),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("1.5h", H + 30 * M),
            ("0.3333333333333333333h", 20 * M),
            ("52763797000ns", 52_763_797_000),
            ("0.100000000000000000000h", 6 * M),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
        ];
        for (input, nanos) in cases {
            let parsed = GoDuration::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} should parse, got {e}"));
            assert_eq!(parsed.as_nanos(), *nanos, "parse({input:?})");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        let cases: &[(&str, &str)] = &[
            ("", "InvalidDuration"),
            ("3", "MissingDurationUnit"),
            ("-", "InvalidDuration"),
            ("s", "InvalidDuration"),
            (".", "InvalidDuration"),
            ("-.", "InvalidDuration"),
            (".s", "InvalidDuration"),
            ("+.s", "InvalidDuration"),
            ("1d", "UnknownDurationUnit"),
            ("3000000h", "DurationOverflow"),
            ("9223372036854775808ns", "DurationOverflow"),
            ("9223372036854775.808us", "DurationOverflow"),
            ("9223372036854ms775us808ns", "DurationOverflow"),
            ("-9223372036854775809ns", "DurationOverflow"),
            ("1h 30m", "UnknownDurationUnit"),
            (" 1h", "InvalidDuration"),
            ("1hh", "UnknownDurationUnit"),
            ("10 m", "UnknownDurationUnit"),
        ];
        for (input, category) in cases {
            match GoDuration::parse(input) {
                Ok(d) => panic!("{input:?} should be rejected, parsed as {d}"),
                Err(e) => assert_eq!(e.category(), *category, "parse({input:?}): {e}"),
            }
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1100, "1.1\u{00b5}s"),
            (2 * US, "2\u{00b5}s"),
            (2200 * US, "2.2ms"),
            (300 * MS, "300ms"),
            (S + 500 * MS, "1.5s"),
            (3300 * MS, "3.3s"),
            (10 * M, "10m0s"),
            (4 * M + 5 * S, "4m5s"),
            (4 * M + 5001 * MS, "4m5.001s"),
            (5 * H + 6 * M + 7001 * MS, "5h6m7.001s"),
            (8 * M + 1, "8m0.000000001s"),
            (H, "1h0m0s"),
            (H + 30 * M, "1h30m0s"),
            (720 * H, "720h0m0s"),
            (-H - 30 * M, "-1h30m0s"),
            (-1, "-1ns"),
            (-300 * MS, "-300ms"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(
                GoDuration::from_nanos(*nanos).to_string(),
                *text,
                "format({nanos})"
            );
        }
    }

    #[test]
    fn format_then_parse_is_identity() {
        for nanos in [
            0,
            1,
            999,
            1_000,
            1_500,
            999_999,
            3 * S,
            61 * S,
            25 * H + 1,
            -7 * M,
            i64::MIN,
            i64::MAX,
        ] {
            let d = GoDuration::from_nanos(nanos);
            assert_eq!(GoDuration::parse(&d.to_string()), Ok(d), "{d}");
        }
    }

    #[test]
    fn serde_is_a_go_string() {
        let d: GoDuration = serde_json::from_str("\"10m\"").unwrap();
        assert_eq!(d, GoDuration::from_mins(10));
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"10m0s\"");
        assert_eq!(
            serde_json::to_string(&GoDuration::from_hours(720)).unwrap(),
            "\"720h0m0s\""
        );
        assert!(serde_json::from_str::<GoDuration>("\"ten minutes\"").is_err());
        assert!(serde_json::from_str::<GoDuration>("600").is_err());
    }

    #[test]
    fn converts_to_std() {
        assert_eq!(
            GoDuration::from_secs(90).to_std(),
            Some(Duration::from_secs(90))
        );
        assert_eq!(GoDuration::from_secs(-1).to_std(), None);
        assert_eq!(
            GoDuration::from(Duration::from_millis(1500)),
            GoDuration::from_nanos(1500 * MS)
        );
    }
}
