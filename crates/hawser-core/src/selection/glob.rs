//! Glob patterns with the semantics Velero's filters use (the `gobwas/glob` library compiled
//! without separators).
//!
//! Hand-written rather than taken from a crate because the semantics differ from shell and path
//! globs in ways users notice: there is no path separator (`*` matches `.` and `/` too), `{a,b}`
//! alternation is part of the syntax, a class is negated with `!`, and a pattern that does not
//! compile makes the whole include/exclude list match nothing (Velero stops at the first such
//! pattern, see [`GlobSet::matches`]).
//!
//! Syntax: `*` any sequence (also `**`), `?` any one character, `[abc]`, `[a-z]`, `[!abc]` one
//! character in (or not in) a class, `{alt1,alt2}` alternatives (nestable), `\x` a literal `x`.

use std::collections::BTreeSet;

/// A compiled glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyOne,
    AnySequence,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alternatives(Vec<Vec<Token>>),
}

/// Why a pattern does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob pattern {pattern:?}: {reason}")]
pub struct GlobError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl GlobError {
    /// Stable short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        "InvalidGlob"
    }
}

impl Glob {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut pos = 0;
        let fail = |reason| GlobError {
            pattern: pattern.to_string(),
            reason,
        };
        let tokens = parse_sequence(&chars, &mut pos, false).map_err(fail)?;
        if pos != chars.len() {
            return Err(fail("unexpected '}'"));
        }
        Ok(Self { tokens })
    }

    /// Whether the whole of `text` matches the pattern.
    pub fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        match_tokens(&self.tokens, &chars)
    }
}

/// Whether `s` contains a character that makes it a pattern rather than a plain name
/// (Velero's test for namespace patterns: `*`, `?` or `[`).
pub fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn parse_sequence(
    chars: &[char],
    pos: &mut usize,
    in_alt: bool,
) -> Result<Vec<Token>, &'static str> {
    let mut out = Vec::new();
    while *pos < chars.len() {
        let c = chars[*pos];
        match c {
            '}' | ',' if in_alt => return Ok(out),
            '*' => {
                *pos += 1;
                if out.last() != Some(&Token::AnySequence) {
                    out.push(Token::AnySequence);
                }
            }
            '?' => {
                *pos += 1;
                out.push(Token::AnyOne);
            }
            '\\' => {
                let next = chars.get(*pos + 1).ok_or("trailing escape character")?;
                out.push(Token::Literal(*next));
                *pos += 2;
            }
            '[' => {
                *pos += 1;
                out.push(parse_class(chars, pos)?);
            }
            '{' => {
                *pos += 1;
                let mut alternatives = Vec::new();
                loop {
                    alternatives.push(parse_sequence(chars, pos, true)?);
                    match chars.get(*pos) {
                        Some(',') => *pos += 1,
                        Some('}') => {
                            *pos += 1;
                            break;
                        }
                        _ => return Err("unclosed '{'"),
                    }
                }
                out.push(Token::Alternatives(alternatives));
            }
            _ => {
                *pos += 1;
                out.push(Token::Literal(c));
            }
        }
    }
    Ok(out)
}

fn parse_class(chars: &[char], pos: &mut usize) -> Result<Token, &'static str> {
    let negated = chars.get(*pos) == Some(&'!');
    if negated {
        *pos += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let c = *chars.get(*pos).ok_or("unclosed '['")?;
        *pos += 1;
        match c {
            ']' => break,
            '\\' => {
                let lit = *chars.get(*pos).ok_or("unclosed '['")?;
                *pos += 1;
                ranges.push((lit, lit));
            }
            _ => {
                if chars.get(*pos) == Some(&'-') && chars.get(*pos + 1).is_some_and(|n| *n != ']') {
                    let hi = chars[*pos + 1];
                    if hi < c {
                        return Err("invalid range in '[...]'");
                    }
                    *pos += 2;
                    ranges.push((c, hi));
                } else {
                    ranges.push((c, c));
                }
            }
        }
    }
    if ranges.is_empty() {
        return Err("empty '[]'");
    }
    Ok(Token::Class { negated, ranges })
}

fn match_tokens(tokens: &[Token], text: &[char]) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return text.is_empty();
    };
    match first {
        Token::Literal(c) => text.first() == Some(c) && match_tokens(rest, &text[1..]),
        Token::AnyOne => !text.is_empty() && match_tokens(rest, &text[1..]),
        Token::Class { negated, ranges } => match text.first() {
            Some(c) => {
                let inside = ranges.iter().any(|(lo, hi)| lo <= c && c <= hi);
                inside != *negated && match_tokens(rest, &text[1..])
            }
            None => false,
        },
        Token::AnySequence => (0..=text.len()).any(|skip| match_tokens(rest, &text[skip..])),
        Token::Alternatives(alternatives) => alternatives.iter().any(|alt| {
            let mut joined = alt.clone();
            joined.extend_from_slice(rest);
            match_tokens(&joined, text)
        }),
    }
}

/// A set of patterns as Velero's include or exclude lists hold them: deduplicated, sorted, and
/// matched in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobSet {
    items: BTreeSet<String>,
}

impl GlobSet {
    /// A set holding `items`.
    pub fn from_items<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Self {
        Self {
            items: items.into_iter().map(Into::into).collect(),
        }
    }

    /// Adds one pattern.
    pub fn insert(&mut self, item: impl Into<String>) {
        self.items.insert(item.into());
    }

    /// Number of distinct patterns.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the set holds exactly this string (no pattern matching).
    pub fn has(&self, item: &str) -> bool {
        self.items.contains(item)
    }

    /// The patterns, sorted.
    pub fn items(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(String::as_str)
    }

    /// Whether any pattern matches `text`. Patterns are tried in sorted order; the first one that
    /// does not compile ends the search with `false`, as in Velero.
    pub fn matches(&self, text: &str) -> bool {
        for item in &self.items {
            match Glob::new(item) {
                Ok(glob) if glob.is_match(text) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn glob_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "anything.at/all", true),
            ("*", "", true),
            ("kube-*", "kube-system", true),
            ("kube-*", "kube", false),
            ("*.apps", "deployments.apps", true),
            ("*.apps", "deployments.apps.k8s.io", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("ns-[0-9]", "ns-7", true),
            ("ns-[0-9]", "ns-x", false),
            ("ns-[!0-9]", "ns-x", true),
            ("ns-[!0-9]", "ns-7", false),
            ("{prod,stage}-*", "stage-web", true),
            ("{prod,stage}-*", "dev-web", false),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("a**b", "a.x.b", true),
            ("plain", "plain", true),
            ("plain", "plainer", false),
        ];
        for (pattern, text, want) in cases {
            let glob = Glob::new(pattern).unwrap();
            assert_eq!(glob.is_match(text), *want, "{pattern} vs {text}");
        }
    }

    #[test]
    fn invalid_patterns_do_not_compile() {
        for pattern in ["[abc", "{a,b", "a\\", "[]", "[z-a]"] {
            assert!(Glob::new(pattern).is_err(), "{pattern} should not compile");
        }
    }

    #[test]
    fn an_invalid_pattern_stops_the_set_from_matching() {
        // Sorted order: "[bad" < "web" — the invalid pattern is tried first.
        let set = GlobSet::from_items(["web", "[bad"]);
        assert!(!set.matches("web"));
        let set = GlobSet::from_items(["web"]);
        assert!(set.matches("web"));
    }
}
