//! Label selectors.
//!
//! Label selectors follow the full grammar of `labelSelector`: requirements joined by commas (AND),
//! each one of `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not
//! exist), `k>1`, `k<1` (integer comparisons). Whitespace between tokens is ignored. Keys must be
//! qualified names (`[prefix/]name`) and values valid label values, as the server validates them;
//! `!=` and `notin` also match objects that lack the key.

use serde_json::{Map, Value};

use super::SelectorError;

/// The operator of one label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key)).map(label_value_str);
        match (&self.op, value) {
            (LabelOp::Exists, v) => v.is_some(),
            (LabelOp::DoesNotExist, v) => v.is_none(),
            (LabelOp::Equals | LabelOp::In, Some(v)) => self.values.contains(&v),
            (LabelOp::Equals | LabelOp::In, None) => false,
            (LabelOp::NotEquals | LabelOp::NotIn, Some(v)) => !self.values.contains(&v),
            (LabelOp::NotEquals | LabelOp::NotIn, None) => true,
            (LabelOp::GreaterThan | LabelOp::LessThan, None) => false,
            (op @ (LabelOp::GreaterThan | LabelOp::LessThan), Some(v)) => {
                let (Ok(have), Some(Ok(want))) = (
                    v.parse::<i64>(),
                    self.values.first().map(|w| w.parse::<i64>()),
                ) else {
                    return false;
                };
                if *op == LabelOp::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// Labels are strings; anything else (not valid in a stored object) is compared by its JSON text.
fn label_value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A parsed `labelSelector`: the AND of its requirements. The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a `labelSelector` query value.
    ///
    /// # Errors
    /// A syntax error, an invalid key or value, or an empty `in`/`notin` set.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let tokens = lex(s)?;
        let mut parser = Parser { tokens, pos: 0 };
        let mut requirements = Vec::new();
        if parser.peek() == &Token::End {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                Token::End => break,
                Token::Comma => {}
                other => {
                    return Err(SelectorError(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        other.text()
                    )));
                }
            }
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether an object with these `metadata.labels` (absent = no labels) is selected.
    #[must_use]
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for the selector that selects everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Ident(s) => s.clone(),
            Token::Not => "!".into(),
            Token::Eq => "=".into(),
            Token::DoubleEq => "==".into(),
            Token::NotEq => "!=".into(),
            Token::Gt => ">".into(),
            Token::Lt => "<".into(),
            Token::Open => "(".into(),
            Token::Close => ")".into(),
            Token::Comma => ",".into(),
            Token::End => "end of string".into(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '>' | '<' | '(' | ')' | ',')
}

fn lex(s: &str) -> Result<Vec<Token>, SelectorError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            ('!', Some('=')) => (Token::NotEq, 2),
            ('=', Some('=')) => (Token::DoubleEq, 2),
            ('!', _) => (Token::Not, 1),
            ('=', _) => (Token::Eq, 1),
            ('>', _) => (Token::Gt, 1),
            ('<', _) => (Token::Lt, 1),
            ('(', _) => (Token::Open, 1),
            (')', _) => (Token::Close, 1),
            (',', _) => (Token::Comma, 1),
            _ => {
                let start = i;
                let mut end = i;
                while end < chars.len() && !chars[end].is_whitespace() && !is_special(chars[end]) {
                    end += 1;
                }
                (
                    Token::Ident(chars[start..end].iter().collect()),
                    end - start,
                )
            }
        };
        out.push(tok);
        i += len;
    }
    out.push(Token::End);
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&Token::End)
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut negated = false;
        let mut tok = self.next();
        if tok == Token::Not {
            negated = true;
            tok = self.next();
        }
        let Token::Ident(key) = tok else {
            return Err(SelectorError(format!(
                "found '{}', expected: identifier",
                tok.text()
            )));
        };
        validate_key(&key)?;
        if negated {
            return Ok(Requirement {
                key,
                op: LabelOp::DoesNotExist,
                values: Vec::new(),
            });
        }
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Ok(Requirement {
                key,
                op: LabelOp::Exists,
                values: Vec::new(),
            });
        }
        let op_tok = self.next();
        let op = match &op_tok {
            Token::Eq | Token::DoubleEq => LabelOp::Equals,
            Token::NotEq => LabelOp::NotEquals,
            Token::Gt => LabelOp::GreaterThan,
            Token::Lt => LabelOp::LessThan,
            Token::Ident(w) if w == "in" => LabelOp::In,
            Token::Ident(w) if w == "notin" => LabelOp::NotIn,
            other => {
                return Err(SelectorError(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    other.text()
                )));
            }
        };
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        if values.is_empty() {
            return Err(SelectorError(format!(
                "unable to parse requirement: values: Invalid value: \"{key}\": for 'in', 'notin' operators, values set can't be empty"
            )));
        }
        for v in &values {
            if matches!(op, LabelOp::GreaterThan | LabelOp::LessThan) {
                if v.parse::<i64>().is_err() {
                    return Err(SelectorError(format!(
                        "unable to parse requirement: values[0]: Invalid value: \"{v}\": for 'Gt', 'Lt' operators, the value must be an integer"
                    )));
                }
            } else {
                validate_value(v)?;
            }
        }
        Ok(Requirement { key, op, values })
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; an empty value when the requirement ends there.
    fn exact_value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            Token::Ident(_) => match self.next() {
                Token::Ident(v) => Ok(v),
                // peek just said Ident
                other => Err(SelectorError(format!(
                    "found '{}', expected: identifier",
                    other.text()
                ))),
            },
            other => Err(SelectorError(format!(
                "found '{}', expected: identifier for exact value",
                other.text()
            ))),
        }
    }

    /// `( v1, v2, ... )`; empty elements between commas count as empty values, as the server parses them.
    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        let open = self.next();
        if open != Token::Open {
            return Err(SelectorError(format!(
                "found '{}', expected: '('",
                open.text()
            )));
        }
        let mut values = Vec::new();
        let mut after_comma = false;
        loop {
            match self.next() {
                Token::Ident(v) => {
                    values.push(v);
                    after_comma = false;
                    match self.peek() {
                        Token::Comma | Token::Close => {}
                        other => {
                            return Err(SelectorError(format!(
                                "found '{}', expected: ',' or ')'",
                                other.text()
                            )));
                        }
                    }
                }
                Token::Comma => {
                    if after_comma || values.is_empty() {
                        values.push(String::new());
                    }
                    after_comma = true;
                }
                Token::Close => {
                    if after_comma {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                other => {
                    return Err(SelectorError(format!(
                        "found '{}', expected: ',', ')' or identifier",
                        other.text()
                    )));
                }
            }
        }
    }
}

const NAME_FMT_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_FMT_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// RFC 1123 subdomain: dot-separated labels of lowercase alphanumerics and `-`, at most 253 chars.
#[must_use]
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    (f.is_ascii_lowercase() || f.is_ascii_digit())
                        && (l.is_ascii_lowercase() || l.is_ascii_digit())
                        && b.iter()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                }
                _ => false,
            }
        })
}

fn invalid_key(key: &str, why: &str) -> SelectorError {
    SelectorError(format!(
        "unable to parse requirement: key: Invalid value: \"{key}\": {why}"
    ))
}

/// A label key: `[prefix/]name`, prefix a DNS subdomain, name ≤ 63 characters.
fn validate_key(key: &str) -> Result<(), SelectorError> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err(invalid_key(key, "prefix part must be non-empty"));
            }
            if !is_dns1123_subdomain(prefix) {
                return Err(invalid_key(
                    key,
                    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                ));
            }
            *name
        }
        _ => {
            return Err(invalid_key(
                key,
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ));
        }
    };
    if name.is_empty() {
        return Err(invalid_key(key, "name part must be non-empty"));
    }
    if name.len() > 63 {
        return Err(invalid_key(
            key,
            "name part must be no more than 63 characters",
        ));
    }
    if !is_qualified_name_part(name) {
        return Err(invalid_key(key, NAME_FMT_MSG));
    }
    Ok(())
}

fn validate_value(v: &str) -> Result<(), SelectorError> {
    if v.len() > 63 {
        return Err(SelectorError(format!(
            "unable to parse requirement: values[0][{v}]: Invalid value: \"{v}\": must be no more than 63 characters"
        )));
    }
    if !v.is_empty() && !is_qualified_name_part(v) {
        return Err(SelectorError(format!(
            "unable to parse requirement: values[0][{v}]: Invalid value: \"{v}\": {VALUE_FMT_MSG}"
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("labels must be an object"),
        }
    }

    #[test]
    fn label_selector_matching_table() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5", "example.com/role": "db"}));
        // (selector, matches the labels above, matches an object without labels)
        let cases: &[(&str, bool, bool)] = &[
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app = web", true, false),
            ("app=db", false, false),
            ("app!=db", true, true),
            ("app!=web", false, true),
            ("app in (web,api)", true, false),
            ("app in ( api , web )", true, false),
            ("app in (api)", false, false),
            ("app notin (api)", true, true),
            ("app notin (web)", false, true),
            ("app", true, false),
            ("missing", false, false),
            ("!missing", true, true),
            ("!app", false, true),
            ("app=web,tier=front", true, false),
            ("app=web, tier=back", false, false),
            ("example.com/role=db", true, false),
            ("n>3", true, false),
            ("n<3", false, false),
            ("n>7", false, false),
            ("app=", false, false),
            ("app in (web,)", true, false),
        ];
        for (sel, want, want_empty) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(Some(&l)), *want, "selector {sel:?} on labels");
            assert_eq!(
                s.matches(None),
                *want_empty,
                "selector {sel:?} without labels"
            );
        }
    }

    #[test]
    fn empty_value_matches_empty_label() {
        let l = labels(json!({"flag": ""}));
        assert!(LabelSelector::parse("flag=").unwrap().matches(Some(&l)));
        assert!(
            LabelSelector::parse("flag in (,x)")
                .unwrap()
                .matches(Some(&l))
        );
    }

    #[test]
    fn is_empty_only_for_empty_selector() {
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::parse("   ").unwrap().is_empty());
        assert!(!LabelSelector::parse("a").unwrap().is_empty());
    }

    #[test]
    fn label_selector_errors_table() {
        let bad = [
            "app=web=x",
            "app in web",
            "app in ()",
            "app notin (",
            "=web",
            "!app=web",
            "app web",
            "bad key=1",
            "-app=1",
            "app=-bad",
            "a/b/c=1",
            "/name=1",
            "Upper.Case/name=1",
            "app,",
            ",app",
            "n>abc",
            "app=(x)",
        ];
        for sel in bad {
            assert!(
                LabelSelector::parse(sel).is_err(),
                "selector {sel:?} should be rejected"
            );
        }
        let long_name = "a".repeat(64);
        assert!(LabelSelector::parse(&long_name).is_err());
        assert!(LabelSelector::parse(&"a".repeat(63)).is_ok());
        let long_value = format!("k={}", "v".repeat(64));
        assert!(LabelSelector::parse(&long_value).is_err());
    }

    #[test]
    fn label_error_messages_name_the_problem() {
        let e = LabelSelector::parse("app web").unwrap_err();
        assert!(e.to_string().contains("found 'web'"), "{e}");
        let e = LabelSelector::parse("a b=c").unwrap_err();
        assert!(e.to_string().contains("found 'b'"), "{e}");
        let e = LabelSelector::parse("k in ()").unwrap_err();
        assert!(e.to_string().contains("values set can't be empty"), "{e}");
    }
}
