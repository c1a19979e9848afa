//! `-o table|json|yaml` and the table printer shared by the `get` commands.

use std::fmt::Write as _;

use clap::ValueEnum;
use serde::Serialize;

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

/// `Some(time)` as RFC 3339, or `<none>`/the given placeholder.
pub fn or_none(value: Option<String>) -> String {
    value
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "<none>".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_columns_to_widest_cell() {
        let text = table(
            &["NAME", "PHASE"],
            &[vec!["a-long-name".into(), "Available".into()]],
        );
        assert_eq!(text, "NAME          PHASE\na-long-name   Available\n");
    }
}
