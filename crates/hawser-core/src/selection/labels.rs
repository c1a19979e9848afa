//! Label selectors, mirroring `metav1.LabelSelector`: `matchLabels` and `matchExpressions`
//! (`In`, `NotIn`, `Exists`, `DoesNotExist`), with the conversion rules of
//! `metav1.LabelSelectorAsSelector` and the string form of `labels.Selector.String()` that a LIST
//! request carries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `metav1.LabelSelector`. An empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Exact `key=value` pairs, all required.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements, all required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In`/`NotIn`; must be empty for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Equals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A selector that passed validation and can be matched against labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledSelector {
    // Sorted by key, as `labels.Selector` keeps them.
    requirements: Vec<(String, Op)>,
}

impl LabelSelector {
    /// A selector requiring exactly these labels.
    pub fn matching<I: IntoIterator<Item = (K, V)>, K: Into<String>, V: Into<String>>(
        labels: I,
    ) -> Self {
        Self {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// Adds a requirement (builder style).
    #[must_use]
    pub fn with_expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        self.match_expressions.push(LabelSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
        });
        self
    }

    /// Validates and compiles the selector, as `LabelSelectorAsSelector` does. The error text
    /// names the offending requirement.
    pub fn compile(&self) -> Result<CompiledSelector, String> {
        let mut requirements = Vec::new();
        for (key, value) in &self.match_labels {
            validate_key(key)?;
            validate_value(value)?;
            requirements.push((key.clone(), Op::Equals(value.clone())));
        }
        for expr in &self.match_expressions {
            validate_key(&expr.key)?;
            let op = match expr.operator.as_str() {
                "In" | "NotIn" => {
                    if expr.values.is_empty() {
                        return Err(format!(
                            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty (key {:?})",
                            expr.key
                        ));
                    }
                    for value in &expr.values {
                        validate_value(value)?;
                    }
                    let mut values = expr.values.clone();
                    values.sort();
                    values.dedup();
                    if expr.operator == "In" {
                        Op::In(values)
                    } else {
                        Op::NotIn(values)
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !expr.values.is_empty() {
                        return Err(format!(
                            "values: Invalid value: {:?}: values set must be empty for exists and does not exist (key {:?})",
                            expr.values, expr.key
                        ));
                    }
                    if expr.operator == "Exists" {
                        Op::Exists
                    } else {
                        Op::DoesNotExist
                    }
                }
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push((expr.key.clone(), op));
        }
        requirements.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(CompiledSelector { requirements })
    }
}

impl CompiledSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let value = labels.get(key);
            match op {
                Op::Equals(want) => value == Some(want),
                Op::In(values) => value.is_some_and(|v| values.contains(v)),
                Op::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        })
    }

    /// Whether the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The `labelSelector` query parameter form, e.g. `app=web,tier in (a,b),!legacy`; empty for
    /// an empty selector.
    pub fn to_query(&self) -> String {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|(key, op)| match op {
                Op::Equals(v) => format!("{key}={v}"),
                Op::In(vs) => format!("{key} in ({})", vs.join(",")),
                Op::NotIn(vs) => format!("{key} notin ({})", vs.join(",")),
                Op::Exists => key.clone(),
                Op::DoesNotExist => format!("!{key}"),
            })
            .collect();
        parts.join(",")
    }
}

/// The labels of a Kubernetes object (`metadata.labels`), ignoring non-string values.
pub fn object_labels(obj: &serde_json::Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(serde_json::Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(crate::label::is_dns_subdomain);
    if prefix_ok && is_name_part(name) {
        Ok(())
    } else {
        Err(format!(
            "key: Invalid value: {key:?}: not a valid label key"
        ))
    }
}

fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_name_part(value) {
        Ok(())
    } else {
        Err(format!(
            "values[0]: Invalid value: {value:?}: not a valid label value"
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn operators() {
        let sel = LabelSelector::matching([("app", "web")])
            .with_expression("tier", "In", &["front", "edge"])
            .with_expression("legacy", "DoesNotExist", &[])
            .with_expression("team", "Exists", &[])
            .with_expression("env", "NotIn", &["dev"])
            .compile()
            .unwrap();
        let good = labels(&[("app", "web"), ("tier", "edge"), ("team", "a")]);
        assert!(sel.matches(&good));
        let mut bad = good.clone();
        bad.insert("legacy".into(), "x".into());
        assert!(!sel.matches(&bad));
        let mut bad = good.clone();
        bad.insert("env".into(), "dev".into());
        assert!(!sel.matches(&bad));
        let mut ok = good.clone();
        ok.insert("env".into(), "prod".into());
        assert!(sel.matches(&ok));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "back"), ("team", "a")])));
        assert_eq!(
            sel.to_query(),
            "app=web,env notin (dev),!legacy,team,tier in (edge,front)"
        );
    }

    #[test]
    fn invalid_selectors_are_rejected() {
        assert!(
            LabelSelector::default()
                .with_expression("a", "In", &[])
                .compile()
                .is_err()
        );
        assert!(
            LabelSelector::default()
                .with_expression("a", "Exists", &["x"])
                .compile()
                .is_err()
        );
        assert!(
            LabelSelector::default()
                .with_expression("a", "Matches", &["x"])
                .compile()
                .is_err()
        );
        assert!(
            LabelSelector::matching([("bad key!", "x")])
                .compile()
                .is_err()
        );
        assert!(
            LabelSelector::matching([("k", "bad value!")])
                .compile()
                .is_err()
        );
        assert!(
            LabelSelector::matching([("example.com/k", "")])
                .compile()
                .is_ok()
        );
    }
}
