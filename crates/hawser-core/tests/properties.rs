//! Property tests of the parsers that read untrusted input: glob patterns (and their matcher),
//! Go durations and the backup archive reader. They never panic, never overflow the stack, and
//! agree with simple reference definitions.
//!
//! CI runs 256 cases per property with a fixed seed; `PROPTEST_CASES` and `PROPTEST_RNG_SEED`
//! override both (see docs/testing.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

mod proptest_config;

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use hawser_core::archive::{ArchiveReader, ArchiveWriter, ItemId, ReaderOptions, WriterOptions};
use hawser_core::duration::GoDuration;
use hawser_core::selection::{Glob, MAX_NESTING, MAX_PATTERN_LEN};
use proptest::prelude::*;
use proptest_config::config;
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Globs

/// A pattern as a tree, rendered to text for the compiler and matched directly by
/// [`reference_match`].
#[derive(Debug, Clone)]
enum Node {
    Literal(char),
    AnyOne,
    AnySequence,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alternatives(Vec<Vec<Node>>),
}

fn literal() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec!['a', 'b', 'c', '.', '/']),
        1 => prop::sample::select(vec!['*', '?', '[', ']', '{', '}', ',', '\\', '!', '-']),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        4 => literal().prop_map(Node::Literal),
        1 => Just(Node::AnyOne),
        1 => Just(Node::AnySequence),
        1 => (
            any::<bool>(),
            prop::collection::vec(
                (prop::sample::select(vec!['a', 'b', 'c', '.']), 0u8..3),
                1..3
            )
        )
            .prop_map(|(negated, items)| Node::Class {
                negated,
                ranges: items
                    .into_iter()
                    .map(|(lo, span)| {
                        let hi = char::from_u32(u32::from(lo) + u32::from(span)).unwrap_or(lo);
                        (lo, hi)
                    })
                    .collect(),
            }),
    ];
    leaf.prop_recursive(3, 24, 3, |inner| {
        prop::collection::vec(prop::collection::vec(inner, 0..3), 1..4).prop_map(Node::Alternatives)
    })
}

fn render(nodes: &[Node], out: &mut String) {
    for node in nodes {
        match node {
            Node::Literal(c) => {
                if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | ',' | '\\') {
                    out.push('\\');
                }
                out.push(*c);
            }
            Node::AnyOne => out.push('?'),
            Node::AnySequence => out.push('*'),
            Node::Class { negated, ranges } => {
                out.push('[');
                if *negated {
                    out.push('!');
                }
                for (lo, hi) in ranges {
                    out.push(*lo);
                    if lo != hi {
                        out.push('-');
                        out.push(*hi);
                    }
                }
                out.push(']');
            }
            Node::Alternatives(alternatives) => {
                out.push('{');
                for (i, alternative) in alternatives.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    render(alternative, out);
                }
                out.push('}');
            }
        }
    }
}

/// The definition of a match, by backtracking: fine for the short inputs generated here.
fn reference_match(nodes: &[Node], text: &[char]) -> bool {
    let Some((first, rest)) = nodes.split_first() else {
        return text.is_empty();
    };
    match first {
        Node::Literal(c) => text.first() == Some(c) && reference_match(rest, &text[1..]),
        Node::AnyOne => !text.is_empty() && reference_match(rest, &text[1..]),
        Node::Class { negated, ranges } => text.first().is_some_and(|c| {
            let inside = ranges.iter().any(|(lo, hi)| lo <= c && c <= hi);
            inside != *negated && reference_match(rest, &text[1..])
        }),
        Node::AnySequence => (0..=text.len()).any(|skip| reference_match(rest, &text[skip..])),
        Node::Alternatives(alternatives) => alternatives.iter().any(|alternative| {
            let mut joined = alternative.clone();
            joined.extend_from_slice(rest);
            reference_match(&joined, text)
        }),
    }
}

/// Text made of the characters the patterns use, so that matches are common.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', 'c', 'd', '.', '/', '-', '*', '{', ',']),
        0..10,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// Strings made mostly of the glob syntax characters, up to just over the length limit.
fn syntax_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "{", "}", ",", "[", "]", "!", "-", "*", "?", "\\", "a", "z", "{a,", "[!a-",
        ]),
        0..MAX_PATTERN_LEN / 2 + 16,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn glob_agrees_with_the_reference(
        nodes in prop::collection::vec(node(), 0..5),
        texts in prop::collection::vec(text(), 1..8),
    ) {
        let mut pattern = String::new();
        render(&nodes, &mut pattern);
        let glob = Glob::new(&pattern).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for text in texts {
            let chars: Vec<char> = text.chars().collect();
            prop_assert_eq!(
                glob.is_match(&text),
                reference_match(&nodes, &chars),
                "pattern {:?} text {:?}", pattern, text
            );
        }
    }

    #[test]
    fn any_string_compiles_or_is_refused(pattern in ".{0,1100}", text in ".{0,64}") {
        if let Ok(glob) = Glob::new(&pattern) {
            prop_assert!(pattern.len() <= MAX_PATTERN_LEN);
            let _ = glob.is_match(&text);
        }
    }

    #[test]
    fn syntax_soup_never_overflows(pattern in syntax_soup(), text in text()) {
        match Glob::new(&pattern) {
            Ok(glob) => {
                prop_assert!(pattern.len() <= MAX_PATTERN_LEN);
                let _ = glob.is_match(&text);
                let _ = glob.is_match(&"a".repeat(2000));
            }
            Err(e) => prop_assert!(e.to_string().len() < 300),
        }
    }

    #[test]
    fn nesting_up_to_the_limit_compiles(depth in 0..=MAX_NESTING, extra in 1usize..100) {
        let nested = |depth: usize| format!("{}x{}", "{a,".repeat(depth), "}".repeat(depth));
        let glob = Glob::new(&nested(depth)).unwrap();
        prop_assert!(glob.is_match("x"));
        prop_assert!(Glob::new(&nested(MAX_NESTING + extra)).is_err());
    }
}

// ---------------------------------------------------------------------------------------------
// Go durations

/// Strings close to the duration grammar.
fn duration_like() -> impl Strategy<Value = String> {
    "[-+]?([0-9]{0,21}(\\.[0-9]{0,12})?(ns|us|µs|μs|ms|s|m|h|x)?){0,5}"
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn duration_display_parses_back(nanos in any::<i64>()) {
        let d = GoDuration::from_nanos(nanos);
        let text = d.to_string();
        prop_assert_eq!(GoDuration::parse(&text), Ok(d), "{}", text);
    }

    #[test]
    fn duration_parse_never_panics(text in ".{0,64}") {
        let _ = GoDuration::parse(&text);
    }

    #[test]
    fn near_durations_parse_to_what_they_print(text in duration_like()) {
        if let Ok(d) = GoDuration::parse(&text) {
            prop_assert_eq!(GoDuration::parse(&d.to_string()), Ok(d));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The archive reader

/// Reads every item of `bytes`; a panic fails the property. The iterator must end, and a fatal
/// error must end it.
fn read_all(bytes: &[u8]) -> Result<(), TestCaseError> {
    let options = ReaderOptions {
        max_entry_bytes: 1 << 16,
        max_extension_bytes: 1 << 12,
        max_items: 10_000,
        max_total_bytes: 1 << 22,
        include_versioned_copies: true,
    };
    let mut reader = ArchiveReader::new(bytes, options);
    let Ok(items) = reader.items() else {
        return Ok(());
    };
    let mut seen = 0usize;
    for item in items {
        seen += 1;
        prop_assert!(seen < 10_000, "the reader does not end");
        if let Err(e) = item {
            let _ = (e.to_string(), e.category());
        }
    }
    Ok(())
}

fn valid_archive(items: usize) -> Vec<u8> {
    let mut writer = ArchiveWriter::new(Vec::new(), WriterOptions::default()).unwrap();
    for i in 0..items {
        let name = format!("cm-{i}");
        writer
            .write_item(
                &ItemId::namespaced("configmaps", "shop", &name),
                "v1",
                &json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "shop"}, "data": {"i": i}}),
            )
            .unwrap();
    }
    writer.finish().unwrap().0
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Edits to apply to a byte string: (position, new byte), as fractions of its length.
fn edits() -> impl Strategy<Value = Vec<(f64, u8)>> {
    prop::collection::vec((0.0f64..1.0, any::<u8>()), 1..16)
}

fn apply(mut bytes: Vec<u8>, edits: &[(f64, u8)], cut: Option<f64>) -> Vec<u8> {
    for (at, byte) in edits {
        // Truncation is intended: a position inside the buffer.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((bytes.len() as f64) * at) as usize;
        if let Some(slot) = bytes.get_mut(i) {
            *slot = *byte;
        }
    }
    if let Some(cut) = cut {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        bytes.truncate(((bytes.len() as f64) * cut) as usize);
    }
    bytes
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_are_errors_not_panics(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        read_all(&bytes)?;
        read_all(&gzip(&bytes))?;
    }

    #[test]
    fn a_mutated_archive_is_read_or_refused(
        items in 1usize..4,
        edits in edits(),
        cut in prop::option::of(0.0f64..1.0),
    ) {
        let archive = valid_archive(items);
        // Mutating the compressed stream mostly trips the gzip checks; mutating the tar inside
        // and compressing again reaches the tar headers and the item JSON.
        read_all(&apply(archive.clone(), &edits, cut))?;
        read_all(&gzip(&apply(gunzip(&archive), &edits, cut)))?;
    }
}
