//! `-o table|json|yaml` and the table printer shared by the `get` commands.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::ValueEnum;
use serde::Serialize;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::error::CliError;

/// `-o/--output`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Aligned columns.
    #[default]
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Encodes `value` as JSON (pretty) or YAML.
pub fn encode<T: Serialize>(value: &T, format: OutputFormat) -> Result<String, CliError> {
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(value)
            .map(|mut text| {
                text.push('\n');
                text
            })
            .map_err(|err| CliError::Output { source: err.into() }),
        OutputFormat::Yaml | OutputFormat::Table => {
            serde_yaml::to_string(value).map_err(|err| CliError::Output { source: err.into() })
        }
    }
}

/// Prints the object a `create -o FORMAT` describes instead of creating it: its `get` table
/// for `table` (as Velero's CLI prints it), else the object encoded.
pub fn print_uncreated<T: Serialize>(
    object: &T,
    format: OutputFormat,
    table: impl FnOnce(&[T]) -> Table,
) -> Result<(), CliError> {
    match format {
        OutputFormat::Table => print!("{}", table(std::slice::from_ref(object))),
        OutputFormat::Json | OutputFormat::Yaml => print!("{}", encode(object, format)?),
    }
    Ok(())
}

/// A `get` table before it is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The column titles.
    pub header: Vec<&'static str>,
    /// One row per object, a cell per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of `rows` under `header`.
    #[must_use]
    pub fn new(header: &[&'static str], rows: Vec<Vec<String>>) -> Self {
        Self {
            header: header.to_vec(),
            rows,
        }
    }

    /// Velero's `--show-labels`: a LABELS column after the others, the labels of each row's
    /// object as `key=value` pairs sorted by key and joined by commas, `<none>` without labels.
    #[must_use]
    pub fn with_labels<'a>(
        mut self,
        labels: impl IntoIterator<Item = Option<&'a BTreeMap<String, String>>>,
    ) -> Self {
        self.header.push("LABELS");
        for (row, labels) in self.rows.iter_mut().zip(labels) {
            row.push(key_values(labels));
        }
        self
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&table(&self.header, &self.rows))
    }
}

/// Renders rows under a header with columns padded to the widest cell, three spaces apart.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let width = widths.get(i).copied().unwrap_or(0);
                let _ = write!(line, "{cell:<width$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A label or annotation map as `key=value` pairs sorted by key and joined by commas, as
/// Velero prints them; `<none>` when there are none.
pub fn key_values(map: Option<&BTreeMap<String, String>>) -> String {
    let pairs: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    or_none(Some(pairs.join(",")))
}

/// `Some(time)` as RFC 3339, or `<none>`/the given placeholder.
pub fn or_none(value: Option<String>) -> String {
    value
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "<none>".to_owned())
}

/// A time as Velero's CLI prints it (Go's `Time.String` in the local zone,
/// `2024-03-01 10:00:00 +0000 UTC`), or `<none>`.
pub fn when(time: Option<&Time>) -> String {
    time.map_or_else(|| "<none>".to_owned(), |t| go_time(t, &TimeZone::system()))
}

/// A time cell of a `get` table: as [`when`], `<nil>` when unset (Velero's table prints the
/// nil pointer so).
pub fn time_cell(time: Option<&Time>) -> String {
    time.map_or_else(|| "<nil>".to_owned(), |t| go_time(t, &TimeZone::system()))
}

/// Go's `Time.String` of a `metav1.Time`, which Kubernetes' client reads in the local time
/// zone: `2024-03-01 11:00:00 +0100 CET`, fractional seconds only when there are some.
fn go_time(time: &Time, zone: &TimeZone) -> String {
    time.0
        .to_zoned(zone.clone())
        .strftime("%Y-%m-%d %H:%M:%S%.f %z %Z")
        .to_string()
}

/// Velero's relative times (its `humanReadableTimeFromNow`, in the EXPIRES and LAST BACKUP
/// columns): `n/a` when unset; a time to come as Kubernetes' short duration (`29d`, `5h`,
/// `3m`, `12s`, `1y`); a time past as the same with ` ago`.
pub fn from_now(time: Option<Timestamp>, now: Timestamp) -> String {
    let Some(time) = time else {
        return "n/a".to_owned();
    };
    // Whole seconds of the exact difference, truncated, as Go's `int(d.Seconds())`: a backup
    // that expires in 30 days, seen a moment after it started, expires in 29d.
    let seconds = time.duration_since(now).as_secs();
    if seconds >= 0 {
        short_human_duration(seconds)
    } else {
        format!("{} ago", short_human_duration(-seconds))
    }
}

/// Kubernetes' `ShortHumanDuration` of a non-negative number of seconds: the largest unit it
/// fills, truncated (`59s`, `1m`, `23h`, `1d`, `364d`, `1y`).
fn short_human_duration(seconds: i64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s if s < 365 * 86_400 => format!("{}d", s / 86_400),
        s => format!("{}y", s / (365 * 86_400)),
    }
}

/// A count from a status, `0` when unset.
pub fn count(value: Option<i64>) -> String {
    value.unwrap_or(0).to_string()
}

/// A list for human output: comma-separated, or `fallback` when empty.
pub fn joined(items: Option<&[String]>, fallback: &str) -> String {
    match items {
        Some(items) if !items.is_empty() => items.join(", "),
        _ => fallback.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn show_labels_adds_a_last_column_sorted_by_key_or_none() {
        let labels: BTreeMap<String, String> = [("team", "shop"), ("app", "web")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let shown = Table::new(&["NAME"], vec![vec!["a".into()], vec!["b".into()]])
            .with_labels([Some(&labels), None])
            .to_string();
        assert_eq!(
            shown,
            "NAME   LABELS\na      app=web,team=shop\nb      <none>\n"
        );
    }

    #[test]
    fn table_pads_columns_to_widest_cell() {
        let text = table(
            &["NAME", "PHASE"],
            &[vec!["a-long-name".into(), "Available".into()]],
        );
        assert_eq!(text, "NAME          PHASE\na-long-name   Available\n");
    }

    #[test]
    fn times_print_as_go_in_the_local_zone_and_expiry_in_its_largest_unit() {
        let now: Timestamp = "2024-03-01T10:00:00Z".parse().unwrap();
        let at = |s: &str| Time(s.parse().unwrap());
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(
            go_time(&at("2024-03-01T10:00:00Z"), &TimeZone::UTC),
            "2024-03-01 10:00:00 +0000 UTC"
        );
        assert_eq!(
            go_time(&at("2024-07-01T10:00:00.25Z"), &berlin),
            "2024-07-01 12:00:00.25 +0200 CEST"
        );
        assert_eq!(when(None), "<none>");
        assert_eq!(time_cell(None), "<nil>");
        let from_now = |t: &str| from_now(Some(t.parse().unwrap()), now);
        assert_eq!(from_now("2024-03-31T10:00:00Z"), "30d");
        assert_eq!(from_now("2024-03-02T09:00:00Z"), "23h");
        assert_eq!(from_now("2024-03-02T22:00:00Z"), "1d");
        assert_eq!(from_now("2024-03-01T10:05:00Z"), "5m");
        assert_eq!(from_now("2024-03-01T10:01:30Z"), "1m");
        assert_eq!(from_now("2024-03-01T10:00:30Z"), "30s");
        assert_eq!(from_now("2024-03-01T10:00:00Z"), "0s");
        assert_eq!(from_now("2025-03-05T10:00:00Z"), "1y");
        assert_eq!(from_now("2024-03-01T09:00:00Z"), "1h ago");
        assert_eq!(from_now("2024-03-01T09:55:00Z"), "5m ago");
        assert_eq!(from_now("2024-02-01T10:00:00Z"), "29d ago");
        assert_eq!(super::from_now(None, now), "n/a");
        // A moment after a 30-day backup started: 29 whole days to go.
        let later: Timestamp = "2024-03-01T10:00:00.3Z".parse().unwrap();
        assert_eq!(
            super::from_now(Some("2024-03-31T10:00:00Z".parse().unwrap()), later),
            "29d"
        );
    }
}
