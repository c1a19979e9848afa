//! The workspace's import rule (README, "Workspace"): within a crate, no two files of different
//! folders import each other, directly or through others. Every crate under `crates/` is read;
//! a circle of imports whose files lie in more than one folder fails the test, which names the
//! files and the imports that cross folders.
//!
//! An import is a path in the code (test modules and comments left out) that starts at `crate`,
//! `super` or a child module of the file, resolved to the file of the longest module prefix.
//! Circles inside one folder (a module and its children, siblings) are allowed.

#![allow(clippy::expect_used)] // a panic is how a test reports failure

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's files: path relative to `src` → code.
type Files = BTreeMap<String, String>;

#[test]
fn no_import_circle_crosses_folders() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut broken = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("the crates folder is readable") {
        let src = entry.expect("a crate folder").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let files = read_sources(&src);
        checked += files.len();
        for circle in crossing_circles(&files) {
            broken.push(format!("{}: {circle}", src.display()));
        }
    }
    assert!(checked > 100, "only {checked} source files were read");
    assert!(
        broken.is_empty(),
        "import circles across folders:\n{}",
        broken.join("\n")
    );
}

/// The checker finds a circle it must find, and accepts one inside a folder.
#[test]
fn a_circle_between_two_folders_is_found_and_one_inside_a_folder_is_not() {
    let files: Files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a/mod.rs", "mod x;\npub use x::X;\n"),
        ("a/x.rs", "use crate::b::Y;\npub struct X;\n"),
        (
            "b/mod.rs",
            "#[cfg(test)]\nuse std::fmt;\nuse crate::a::X;\npub struct Y;\n#[cfg(test)]\nmod tests {\n    use crate::c::Z;\n}\n",
        ),
        ("c.rs", "use super::d;\n// use crate::a::X;\n"),
        ("d.rs", "use crate::c::Z;\nuse crate::b::Y;\n"),
    ]
    .into_iter()
    .map(|(p, t)| (p.to_owned(), t.to_owned()))
    .collect();
    let circles = crossing_circles(&files);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("a/x.rs -> b/mod.rs"), "{circles:?}");
    assert!(circles[0].contains("b/mod.rs -> a/mod.rs"), "{circles:?}");
    // The import in b's test module is not one: c and d are not in the circle.
    assert!(!circles[0].contains("c.rs"), "{circles:?}");
}

fn read_sources(src: &Path) -> Files {
    let mut files = Files::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a source folder is readable") {
            let path: PathBuf = entry.expect("a source entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(src)
                    .expect("under src")
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("a source file is readable");
                files.insert(relative, text);
            }
        }
    }
    files
}

/// Test modules in files of their own (`tests.rs`, `*_tests.rs`) are not the crate's code.
fn is_test_file(path: &str) -> bool {
    path == "tests.rs" || path.ends_with("/tests.rs") || path.ends_with("_tests.rs")
}

/// The module path of a file: `a/b.rs` and `a/b/mod.rs` → `[a, b]`; `lib.rs` → `[]`.
fn module_of(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// The code a file's imports are read from: no comment lines, nothing from the test module on
/// (`#[cfg(test)]`, more attributes, then `mod tests`; a `#[cfg(test)]` on anything else is
/// code).
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    let test_module = (0..lines.len()).find(|&i| {
        lines[i] == "#[cfg(test)]"
            && lines[i + 1..]
                .iter()
                .find(|l| !l.starts_with("#["))
                .is_some_and(|l| l.starts_with("mod tests"))
    });
    lines[..test_module.unwrap_or(lines.len())].join("\n")
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(code: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut ident = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                ident.push(n);
                chars.next();
            }
            out.push(Token::Ident(ident));
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push(Token::Colons);
        } else if c == '{' {
            out.push(Token::Open);
        } else if c == '}' {
            out.push(Token::Close);
        } else if c == ',' {
            out.push(Token::Comma);
        } else if !c.is_whitespace() {
            out.push(Token::Other);
        }
    }
    out
}

/// Every path in the tokens (`a::b::c`, and each branch of `a::{b, c::d}`), as segments.
fn paths(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if let (Some(Token::Ident(first)), Some(Token::Colons)) = (tokens.get(i), tokens.get(i + 1))
        {
            i = path_from(tokens, i + 1, vec![first.clone()], &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Continues a path at `tokens[i]` (a `::`); returns the index after it.
fn path_from(
    tokens: &[Token],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    while tokens.get(i) == Some(&Token::Colons) {
        match tokens.get(i + 1) {
            Some(Token::Ident(next)) => {
                path.push(next.clone());
                i += 2;
            }
            Some(Token::Open) => {
                i += 2;
                while i < tokens.len() && tokens[i] != Token::Close {
                    match &tokens[i] {
                        Token::Ident(branch) => {
                            let mut with = path.clone();
                            with.push(branch.clone());
                            i = path_from(tokens, i + 1, with, out);
                        }
                        _ => i += 1,
                    }
                }
                return i + 1;
            }
            _ => break,
        }
    }
    out.push(path);
    i
}

/// The circles of imports (strongly connected files) that span folders, each with the
/// imports that cross.
fn crossing_circles(files: &Files) -> Vec<String> {
    let modules: BTreeMap<Vec<String>, &str> = files
        .keys()
        .filter(|p| !is_test_file(p))
        .map(|p| (module_of(p), p.as_str()))
        .collect();
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .find_map(|n| modules.get(&path[..n]).copied())
    };
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (file, text) in files.iter().filter(|(p, _)| !is_test_file(p)) {
        let me = module_of(file);
        for path in paths(&tokens(&code_of(text))) {
            let mut absolute = match path[0].as_str() {
                "crate" => Vec::new(),
                "super" => me[..me.len().saturating_sub(1)].to_vec(),
                child if modules.contains_key(&[me.clone(), vec![child.to_owned()]].concat()) => {
                    me.clone()
                }
                _ => continue,
            };
            let start = usize::from(matches!(path[0].as_str(), "crate" | "super"));
            absolute.extend(path[start..].iter().cloned());
            if let Some(target) = resolve(&absolute).filter(|t| t != file) {
                edges.entry(file.as_str()).or_default().insert(target);
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| {
            c.iter()
                .map(|f| folder_of(f))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .map(|circle| {
            let crossing: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|to| circle.contains(*to) && folder_of(to) != folder_of(from))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            format!("{circle:?} (across folders: {})", crossing.join(", "))
        })
        .collect()
}

/// Tarjan's strongly connected components of more than one file.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct Walk<'a, 'e> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for &w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    component.insert(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for &v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}
