//! Label selectors written on the command line (`-l app=web,tier!=db`, `--or-selector "a=b or
//! c=d"`), turned into `metav1.LabelSelector` as `metav1.ParseToLabelSelector` does, and printed
//! back for tables.
//!
//! Grammar (comma-separated requirements, all required): `key=value`, `key==value`,
//! `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key` (exists), `!key` (does not exist).
//! `=`/`==` become `matchLabels`; everything else becomes `matchExpressions`. The `<`/`>`
//! operators of the list-request grammar have no `LabelSelector` form and are refused.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::error::CliError;

/// Parses one selector; the error says which requirement is wrong and why.
pub fn parse_selector(text: &str) -> Result<LabelSelector, String> {
    let mut match_labels = BTreeMap::new();
    let mut match_expressions = Vec::new();
    for term in split_terms(text)? {
        let term = term.trim();
        if term.is_empty() {
            return Err(format!("{text:?} has an empty requirement"));
        }
        match parse_term(term)? {
            Term::Equals(key, value) => {
                match_labels.insert(key, value);
            }
            Term::Expression(requirement) => match_expressions.push(requirement),
        }
    }
    Ok(LabelSelector {
        match_labels: (!match_labels.is_empty()).then_some(match_labels),
        match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
    })
}

/// `-l/--selector` of `delete` and `pause`, checked with the grammar of [`parse_selector`]
/// (Velero parses theirs as a spec's selector) before any request: what `create` refuses is
/// refused with the same message (exit 2). An empty selector is refused too (Velero's would
/// select everything to delete).
pub fn checked_selector(text: &str) -> Result<&str, CliError> {
    parse_selector(text)
        .map(|_| text)
        .map_err(|why| CliError::usage("--selector", why))
}

/// `-l/--selector` of `get` and `describe`, checked before any request with Kubernetes' list
/// grammar (Velero's `get` and `describe` take it so): [`parse_selector`]'s terms, and
/// `key<N` / `key>N` with an integer `N`. A term either grammar refuses gets the message
/// `create` gives. Empty selects everything (`None`).
pub fn checked_list_selector(text: &str) -> Result<Option<&str>, CliError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let refused = |why| CliError::usage("--selector", why);
    for term in split_terms(text).map_err(refused)? {
        let term = term.trim();
        let compared = (!term.contains('('))
            .then(|| term.split_once('<').or_else(|| term.split_once('>')))
            .flatten();
        match compared {
            Some((key, value)) => {
                check_key(key.trim(), term).map_err(refused)?;
                if value.trim().parse::<i64>().is_err() {
                    return Err(refused(format!(
                        "{term:?}: the value of < and > must be an integer"
                    )));
                }
            }
            None if term.is_empty() => {
                return Err(refused(format!("{text:?} has an empty requirement")));
            }
            None => {
                parse_term(term).map_err(refused)?;
            }
        }
    }
    Ok(Some(text))
}

/// Parses `--or-selector`: selectors separated by ` or `.
pub fn parse_or_selectors(text: &str) -> Result<Vec<LabelSelector>, String> {
    text.split(" or ").map(parse_selector).collect()
}

/// The selector in the command-line grammar; `<none>` for an empty one.
pub fn format_selector(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for requirement in selector.match_expressions.iter().flatten() {
        let values = requirement.values.clone().unwrap_or_default().join(",");
        parts.push(match requirement.operator.as_str() {
            // `key!=` (no value) has no `notin (...)` form that parses back.
            "NotIn" if values.is_empty() => format!("{}!=", requirement.key),
            "In" => format!("{} in ({values})", requirement.key),
            "NotIn" => format!("{} notin ({values})", requirement.key),
            "Exists" => requirement.key.clone(),
            "DoesNotExist" => format!("!{}", requirement.key),
            other => format!("{} {other} ({values})", requirement.key),
        });
    }
    if parts.is_empty() {
        "<none>".to_owned()
    } else {
        parts.join(",")
    }
}

/// The SELECTOR column of `get`: the label selector, or the or-selectors joined by ` or `.
pub fn selector_column(
    selector: Option<&LabelSelector>,
    or_selectors: Option<&[LabelSelector]>,
) -> String {
    match (selector, or_selectors) {
        (Some(selector), _) => format_selector(selector),
        (None, Some(list)) if !list.is_empty() => list
            .iter()
            .map(format_selector)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "<none>".to_owned(),
    }
}

enum Term {
    Equals(String, String),
    Expression(LabelSelectorRequirement),
}

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err(format!("{text:?} has nested parentheses")),
            ')' if depth == 1 => depth = 0,
            ')' => return Err(format!("{text:?} has an unmatched ')'")),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("{text:?} has an unclosed '('"));
    }
    terms.push(&text[start..]);
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Term, String> {
    if let Some(open) = term.find('(') {
        let head: Vec<&str> = term[..open].split_whitespace().collect();
        let close = term
            .rfind(')')
            .ok_or_else(|| format!("{term:?} has an unclosed '('"))?;
        if !term[close + 1..].trim().is_empty() {
            return Err(format!("{term:?} has text after ')'"));
        }
        let operator = match head.as_slice() {
            [_, "in"] => "In",
            [_, "notin"] => "NotIn",
            _ => {
                return Err(format!(
                    "{term:?} is not `key in (...)` or `key notin (...)`"
                ));
            }
        };
        let key = check_key(head[0], term)?;
        let values: Vec<String> = term[open + 1..close]
            .split(',')
            .map(|v| check_value(v.trim(), term))
            .collect::<Result<_, _>>()?;
        if values.iter().all(String::is_empty) {
            return Err(format!("{term:?} needs at least one value"));
        }
        return Ok(Term::Expression(requirement(key, operator, Some(values))));
    }
    if let Some((key, value)) = term.split_once("!=") {
        let key = check_key(key.trim(), term)?;
        let value = check_value(value.trim(), term)?;
        return Ok(Term::Expression(requirement(
            key,
            "NotIn",
            Some(vec![value]),
        )));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        let key = check_key(key.trim(), term)?;
        let value = check_value(value.trim(), term)?;
        return Ok(Term::Equals(key, value));
    }
    if term.contains('<') || term.contains('>') {
        return Err(format!(
            "{term:?}: the < and > operators cannot be used in a label selector of a spec"
        ));
    }
    if let Some(key) = term.strip_prefix('!') {
        let key = check_key(key.trim(), term)?;
        return Ok(Term::Expression(requirement(key, "DoesNotExist", None)));
    }
    let key = check_key(term, term)?;
    Ok(Term::Expression(requirement(key, "Exists", None)))
}

fn requirement(
    key: String,
    operator: &str,
    values: Option<Vec<String>>,
) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key,
        operator: operator.to_owned(),
        values,
    }
}

fn check_key(key: &str, term: &str) -> Result<String, String> {
    let valid = !key.is_empty()
        && key.len() <= 316
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_owned())
    } else {
        Err(format!("{term:?} has an invalid label key {key:?}"))
    }
}

fn check_value(value: &str, term: &str) -> Result<String, String> {
    let valid = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(value.to_owned())
    } else {
        Err(format!("{term:?} has an invalid label value {value:?}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn equality_terms_become_match_labels_and_the_rest_expressions() {
        let selector =
            parse_selector("app=web, tier==front,env!=prod,zone in (a, b),gpu,!legacy").unwrap();
        let labels = selector.match_labels.clone().unwrap();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["app"], "web");
        assert_eq!(labels["tier"], "front");
        let expressions = selector.match_expressions.clone().unwrap();
        let summary: Vec<(String, String, Option<Vec<String>>)> = expressions
            .into_iter()
            .map(|r| (r.key, r.operator, r.values))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("env".into(), "NotIn".into(), Some(vec!["prod".into()])),
                (
                    "zone".into(),
                    "In".into(),
                    Some(vec!["a".into(), "b".into()])
                ),
                ("gpu".into(), "Exists".into(), None),
                ("legacy".into(), "DoesNotExist".into(), None),
            ]
        );
        assert_eq!(
            format_selector(&selector),
            "app=web,tier=front,env notin (prod),zone in (a,b),gpu,!legacy"
        );
    }

    #[test]
    fn or_selectors_split_on_or() {
        let selectors = parse_or_selectors("a=b or c=d").unwrap();
        assert_eq!(selectors.len(), 2);
        assert_eq!(selectors[1].match_labels.clone().unwrap()["c"], "d");
        assert_eq!(selector_column(None, Some(&selectors)), "a=b or c=d");
        assert_eq!(selector_column(None, None), "<none>");
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_term() {
        for bad in [
            "",
            "a=b,",
            "a in (x",
            "a in x)",
            "a foo (x)",
            "a in ()",
            "a>3",
            "a b=c",
            "=v",
            "a=b c",
            "a in (x) y",
        ] {
            assert!(parse_selector(bad).is_err(), "{bad:?} was accepted");
        }
        let err = parse_selector("app=web,a b").unwrap_err();
        assert!(err.contains("\"a b\""), "{err}");
    }
}
