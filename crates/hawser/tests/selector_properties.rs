//! Property tests of the command-line label-selector parser: any text is parsed or refused
//! without a panic, and the printed form of a selector parses back to the same selector.
//!
//! CI runs 256 cases per property with a fixed seed; `PROPTEST_CASES` and `PROPTEST_RNG_SEED`
//! override both (see docs/testing.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

#[path = "../../hawser-core/tests/proptest_config/mod.rs"]
mod proptest_config;

use std::collections::BTreeMap;

use hawser::cli::label_selector::{format_selector, parse_or_selectors, parse_selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use proptest::prelude::*;
use proptest_config::config;

fn key() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9._-]{0,12}[a-z0-9])?(/[a-zA-Z0-9._-]{1,12})?"
}

fn value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,16}"
}

fn requirement() -> impl Strategy<Value = LabelSelectorRequirement> {
    let values = prop::collection::vec(value(), 1..4);
    (
        key(),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]),
        values,
    )
        .prop_map(|(key, operator, values)| LabelSelectorRequirement {
            key,
            operator: operator.to_owned(),
            values: matches!(operator, "In" | "NotIn").then_some(values),
        })
}

/// Selectors in the form the parser produces: absent rather than empty collections, and at
/// least one requirement (an empty selector prints as `<none>`).
fn selector() -> impl Strategy<Value = LabelSelector> {
    (
        prop::collection::btree_map(key(), "[A-Za-z0-9._-]{0,16}", 0..4),
        prop::collection::vec(requirement(), 0..4),
    )
        .prop_filter("not empty", |(labels, expressions)| {
            !labels.is_empty() || !expressions.is_empty()
        })
        .prop_map(
            |(labels, expressions): (BTreeMap<String, String>, _)| LabelSelector {
                match_labels: (!labels.is_empty()).then_some(labels),
                match_expressions: (!expressions.is_empty()).then_some(expressions),
            },
        )
}

/// Text close to the grammar, so that the parser's branches are reached.
fn selector_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a", "b/c", "=", "==", "!=", "!", ",", " ", "(", ")", " in ", " notin ", "<", ">",
            " or ", "x.y", "-", "é",
        ]),
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn printed_selectors_parse_back(selector in selector()) {
        let text = format_selector(&selector);
        prop_assert_eq!(parse_selector(&text), Ok(selector), "{}", text);
    }

    #[test]
    fn any_text_is_parsed_or_refused(text in ".{0,80}") {
        let _ = parse_selector(&text);
        let _ = parse_or_selectors(&text);
    }

    #[test]
    fn near_selectors_are_parsed_or_refused(text in selector_like()) {
        if let Ok(selector) = parse_selector(&text)
            && (selector.match_labels.is_some() || selector.match_expressions.is_some())
        {
            // What was accepted prints to a form that parses to the same selector.
            let printed = format_selector(&selector);
            prop_assert_eq!(parse_selector(&printed), Ok(selector), "{} -> {}", text, printed);
        }
    }
}

#[test]
fn a_not_equal_without_a_value_prints_back() {
    let selector = parse_selector("a!=").unwrap();
    assert_eq!(format_selector(&selector), "a!=");
}
