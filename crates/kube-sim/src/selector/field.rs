//! Field selectors.
//!
//! Field selectors are terms `path=value`, `path==value` or `path!=value` joined by commas, with
//! `\,`, `\=` and `\\` as escapes. Paths are dotted (`metadata.name`); a missing field compares as
//! the empty string. Which paths a resource supports is the caller's decision ([`FieldSelector::fields`]).

use serde_json::Value;

use super::SelectorError;

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    negated: bool,
    value: String,
}

/// A parsed `fieldSelector`: the AND of `field=value` / `field!=value` terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses a `fieldSelector` query value; the empty string selects everything.
    ///
    /// # Errors
    /// A term without an operator.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = Vec::new();
        if s.is_empty() {
            return Ok(FieldSelector { terms });
        }
        for term in split_unescaped_commas(s) {
            let Some((lhs, negated, rhs)) = split_term(&term) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            terms.push(FieldTerm {
                field: lhs,
                negated,
                value: unescape(&rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// The field paths the selector uses, in order (duplicates kept), for the caller to check support.
    #[must_use]
    pub fn fields(&self) -> Vec<String> {
        self.terms.iter().map(|t| t.field.clone()).collect()
    }

    /// Whether the object is selected. Dotted paths are looked up in the object; a missing field
    /// is the empty string, numbers and booleans compare by their text.
    #[must_use]
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let have = lookup_field(obj, &t.field);
            (have == t.value) != t.negated
        })
    }

    /// True for the selector that selects everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

fn lookup_field(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(_) | Value::Number(_) => cur.to_string(),
        Value::Array(_) | Value::Object(_) => cur.to_string(),
    }
}

/// Splits on commas not preceded by a backslash escape; the escapes stay in place.
fn split_unescaped_commas(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Finds the first unescaped `!=`, `==` or `=` and splits around it: (field, negated, raw value).
fn split_term(term: &str) -> Option<(String, bool, String)> {
    let b = term.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'!' if b.get(i + 1) == Some(&b'=') => {
                return Some((term[..i].to_string(), true, term[i + 2..].to_string()));
            }
            b'=' if b.get(i + 1) == Some(&b'=') => {
                return Some((term[..i].to_string(), false, term[i + 2..].to_string()));
            }
            b'=' => return Some((term[..i].to_string(), false, term[i + 1..].to_string())),
            _ => i += 1,
        }
    }
    None
}

fn unescape(s: &str) -> Result<String, SelectorError> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => {
                    return Err(SelectorError(format!(
                        "invalid field selector: invalid escape sequence: \\{n}"
                    )));
                }
                None => {
                    return Err(SelectorError(
                        "invalid field selector: unterminated escape sequence".into(),
                    ));
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_selector_table() {
        let obj = json!({
            "metadata": {"name": "cm1", "namespace": "ns1"},
            "spec": {"replicas": 3, "paused": false},
        });
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("metadata.name=cm1", true),
            ("metadata.name==cm1", true),
            ("metadata.name!=cm1", false),
            ("metadata.name=other", false),
            ("metadata.name=cm1,metadata.namespace=ns1", true),
            ("metadata.name=cm1,metadata.namespace!=ns1", false),
            ("status.phase=", true),
            ("status.phase!=", false),
            ("spec.replicas=3", true),
            ("spec.paused=false", true),
        ];
        for (sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&obj), *want, "field selector {sel:?}");
        }
    }

    #[test]
    fn field_selector_fields_and_escapes() {
        let s = FieldSelector::parse("metadata.name=a\\,b,metadata.namespace!=x").unwrap();
        assert_eq!(
            s.fields(),
            vec![
                "metadata.name".to_string(),
                "metadata.namespace".to_string()
            ]
        );
        assert!(s.matches(&json!({"metadata": {"name": "a,b", "namespace": "y"}})));
        assert!(!s.matches(&json!({"metadata": {"name": "a", "namespace": "y"}})));
        let eq = FieldSelector::parse("metadata.name=a\\=b").unwrap();
        assert!(eq.matches(&json!({"metadata": {"name": "a=b"}})));
    }

    #[test]
    fn field_selector_errors() {
        for sel in ["metadata.name", "metadata.name=a,foo", "x=\\q", "x=a\\"] {
            assert!(
                FieldSelector::parse(sel).is_err(),
                "{sel:?} should be rejected"
            );
        }
        let e = FieldSelector::parse("metadata.name").unwrap_err();
        assert!(
            e.to_string().contains("can't understand 'metadata.name'"),
            "{e}"
        );
    }
}
