//! Glob patterns with the semantics Velero's filters use (the `gobwas/glob` library compiled
//! without separators).
//!
//! The parser is written here rather than taken from a crate because no glob crate has these
//! semantics: there is no path separator (`*` matches `.` and `/` too), `{a,b}` alternation
//! nests, a class is negated with `!`, `**` is just `*`, and a `}` or `,` outside braces is a
//! literal (`globset`, for one, treats `**` as a path wildcard, refuses nested braces and
//! reads separators). Matching is left to the `regex` crate: a parsed pattern becomes an
//! anchored regular expression, which that crate matches in time linear in the text, so no
//! pattern makes matching backtrack.
//!
//! Syntax: `*` any sequence (also `**`), `?` any one character, `[abc]`, `[a-z]`, `[!abc]` one
//! character in (or not in) a class, `{alt1,alt2}` alternatives (nestable), `\x` a literal `x`.
//!
//! Patterns come from Backup and Restore specs, that is from anyone who may create one, so the
//! parser has limits: [`MAX_PATTERN_LEN`] bytes per pattern and [`MAX_NESTING`] levels of
//! braces. It keeps its open braces in a counter, never on the call stack.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use regex::{Regex, RegexBuilder};

/// The longest pattern accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// The deepest nesting of `{...}` accepted.
pub const MAX_NESTING: usize = 32;
/// The most patterns one include or exclude list may hold.
pub const MAX_PATTERNS_PER_LIST: usize = 1024;
/// How many characters of a pattern an error message quotes.
const EXCERPT_CHARS: usize = 64;
/// The compiled size the regex engine may use for one pattern; far above what a pattern within
/// [`MAX_PATTERN_LEN`] needs, so reaching it means the pattern is hostile.
const COMPILED_SIZE_LIMIT: usize = 4 << 20;

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub struct Glob {
    source: String,
    regex: Regex,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Glob {}

/// Why a pattern does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob pattern {}: {reason}", excerpt(pattern))]
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

/// `text` quoted and escaped for a message, cut after a few dozen characters (with its length
/// in bytes then), so that a hostile value never floods a status or a log line.
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &text[..cut], text.len()),
    }
}

impl Glob {
    /// Compiles `pattern`.
    ///
    /// # Errors
    /// [`GlobError`] when the pattern is malformed or exceeds [`MAX_PATTERN_LEN`] or
    /// [`MAX_NESTING`].
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        Self::compile(pattern, None)
    }

    /// Compiles `pattern` with `separator` as gobwas/glob's separator: `*` and `?` do not
    /// match it, `**` does (Velero's resource-modifier `groupResource` uses `.`).
    ///
    /// # Errors
    /// As [`Glob::new`].
    pub fn with_separator(pattern: &str, separator: char) -> Result<Self, GlobError> {
        Self::compile(pattern, Some(separator))
    }

    fn compile(pattern: &str, separator: Option<char>) -> Result<Self, GlobError> {
        let fail = |reason| GlobError {
            pattern: pattern.to_string(),
            reason,
        };
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(fail("longer than 1024 bytes"));
        }
        let expression = translate(pattern, separator).map_err(fail)?;
        let regex = RegexBuilder::new(&expression)
            .size_limit(COMPILED_SIZE_LIMIT)
            .nest_limit(u32::try_from(MAX_NESTING * 2 + 8).unwrap_or(u32::MAX))
            .build()
            .map_err(|_| fail("too complex to compile"))?;
        Ok(Self {
            source: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `text` matches the pattern.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

/// Whether `s` contains a character that makes it a pattern rather than a plain name
/// (Velero's test for namespace patterns: `*`, `?` or `[`).
pub fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Appends `c` to a regular expression as a literal, in a form that needs no escaping rules.
fn push_literal(out: &mut String, c: char) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\\x{{{:x}}}", u32::from(c));
}

/// Translates a glob into an anchored regular expression, in one pass over the characters;
/// open braces are counted, not recursed into. With a `separator`, a single `*` or `?` stops
/// at it and `**` crosses it.
fn translate(pattern: &str, separator: Option<char>) -> Result<String, &'static str> {
    let mut out = String::with_capacity(pattern.len() * 4 + 16);
    out.push_str("(?s)\\A");
    let mut chars = pattern.chars().peekable();
    let mut depth = 0usize;
    let not_separator = |out: &mut String| match separator {
        Some(sep) => {
            out.push_str("[^");
            push_literal(out, sep);
            out.push(']');
        }
        None => out.push('.'),
    };
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                let mut stars = 1;
                while chars.next_if_eq(&'*').is_some() {
                    stars += 1;
                }
                if stars > 1 || separator.is_none() {
                    out.push_str(".*");
                } else {
                    not_separator(&mut out);
                    out.push('*');
                }
            }
            '?' => not_separator(&mut out),
            '\\' => push_literal(&mut out, chars.next().ok_or("trailing escape character")?),
            '[' => translate_class(&mut chars, &mut out)?,
            '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err("'{...}' nested more than 32 deep");
                }
                out.push_str("(?:");
            }
            ',' if depth > 0 => out.push('|'),
            '}' if depth > 0 => {
                depth -= 1;
                out.push(')');
            }
            _ => push_literal(&mut out, c),
        }
    }
    if depth > 0 {
        return Err("unclosed '{'");
    }
    out.push_str("\\z");
    Ok(out)
}

/// Translates a class whose `[` was just read.
fn translate_class(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
) -> Result<(), &'static str> {
    let negated = chars.next_if_eq(&'!').is_some();
    let mut ranges: Vec<(char, char)> = Vec::new();
    loop {
        let c = chars.next().ok_or("unclosed '['")?;
        match c {
            ']' => break,
            '\\' => {
                let lit = chars.next().ok_or("unclosed '['")?;
                ranges.push((lit, lit));
            }
            _ => {
                // A '-' followed by ']' is a literal '-', not a range.
                let mut ahead = chars.clone();
                if ahead.next() == Some('-')
                    && let Some(hi) = ahead.next().filter(|n| *n != ']')
                {
                    if hi < c {
                        return Err("invalid range in '[...]'");
                    }
                    chars.next();
                    chars.next();
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
    out.push('[');
    if negated {
        out.push('^');
    }
    for (lo, hi) in ranges {
        push_literal(out, lo);
        out.push('-');
        push_literal(out, hi);
    }
    out.push(']');
    Ok(())
}

/// A set of patterns as Velero's include or exclude lists hold them: deduplicated, sorted, and
/// matched in order. Each pattern is compiled once, when it is added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobSet {
    // `None` for a pattern that does not compile.
    items: BTreeMap<String, Option<Glob>>,
}

impl GlobSet {
    /// A set holding `items`.
    pub fn from_items<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Self {
        let mut set = Self::default();
        for item in items {
            set.insert(item);
        }
        set
    }

    /// Adds one pattern.
    pub fn insert(&mut self, item: impl Into<String>) {
        if let std::collections::btree_map::Entry::Vacant(entry) = self.items.entry(item.into()) {
            let glob = Glob::new(entry.key()).ok();
            entry.insert(glob);
        }
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
        self.items.contains_key(item)
    }

    /// The patterns, sorted.
    pub fn items(&self) -> impl Iterator<Item = &str> {
        self.items.keys().map(String::as_str)
    }

    /// Whether any pattern matches `text`. Patterns are tried in sorted order; the first one that
    /// does not compile ends the search with `false`, as in Velero. Validation refuses such
    /// patterns (see `selection::validate`), so a validated filter never gets here with one.
    pub fn matches(&self, text: &str) -> bool {
        for glob in self.items.values() {
            match glob {
                Some(glob) if glob.is_match(text) => return true,
                Some(_) => {}
                None => return false,
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

    #[test]
    fn a_brace_bomb_is_an_error_not_a_crash() {
        let bomb = "{".repeat(100_000);
        let err = Glob::new(&bomb).unwrap_err();
        assert_eq!(err.reason, "longer than 1024 bytes");
        let text = err.to_string();
        assert!(text.len() < 200, "the message quotes an excerpt: {text}");
        assert!(text.contains("(100000 bytes)"), "{text}");
    }

    #[test]
    fn nesting_is_limited() {
        let nested = |depth: usize| format!("{}x{}", "{a,".repeat(depth), "}".repeat(depth));
        let glob = Glob::new(&nested(MAX_NESTING)).unwrap();
        assert!(glob.is_match("a") && glob.is_match("x") && !glob.is_match("ax"));
        let err = Glob::new(&nested(MAX_NESTING + 1)).unwrap_err();
        assert_eq!(err.reason, "'{...}' nested more than 32 deep");
        // Within the length limit, unbalanced braces are an error at any depth.
        assert!(Glob::new(&"{".repeat(MAX_PATTERN_LEN)).is_err());
    }

    #[test]
    fn matching_does_not_backtrack() {
        // A backtracking matcher takes exponential time on this pair.
        let pattern = format!("{}b", "*a".repeat(40));
        let glob = Glob::new(&pattern).unwrap();
        let text = "a".repeat(4000);
        let started = std::time::Instant::now();
        assert!(!glob.is_match(&text));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let alternatives = format!("{}{}", "{a,a}".repeat(100), "b");
        let glob = Glob::new(&alternatives).unwrap();
        assert!(!glob.is_match(&"a".repeat(100)));
    }

    #[test]
    fn braces_and_commas_outside_alternatives_are_literals() {
        assert!(Glob::new("a}b").unwrap().is_match("a}b"));
        assert!(Glob::new("a,b").unwrap().is_match("a,b"));
        assert!(Glob::new("{a,}x").unwrap().is_match("x"));
        assert!(Glob::new("[a-]").unwrap().is_match("-"));
        assert!(Glob::new("[!]x]").is_err());
    }

    #[test]
    fn each_pattern_is_compiled_once() {
        let set = GlobSet::from_items(["kube-*", "web"]);
        assert!(set.items.values().all(Option::is_some));
        assert!(set.matches("kube-system") && set.matches("web") && !set.matches("db"));
    }
}
