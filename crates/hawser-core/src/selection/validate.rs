//! Validation of a backup's filters, with Velero's messages and order
//! (`prepareBackupRequest` and `pkg/util/collections`).

use std::collections::BTreeSet;

use super::glob::{Glob, MAX_PATTERNS_PER_LIST, excerpt};
use super::{BackupFilters, IncludeExcludePolicy, LabelSelector};

/// The message for mixing old and new resource filters (verbatim, with its line breaks).
pub const MIXED_FILTERS_MESSAGE: &str = "include-resources, exclude-resources and include-cluster-resources are old filter parameters.\n\
include-cluster-scoped-resources, exclude-cluster-scoped-resources, include-namespace-scoped-resources and exclude-namespace-scoped-resources are new filter parameters.\n\
They cannot be used together";

/// The message for an include/exclude resource policy combined with old-style filters.
pub const POLICY_WITH_OLD_FILTERS_MESSAGE: &str = "include-resources, exclude-resources and include-cluster-resources are old filter parameters.\n\
They cannot be used with include-exclude policies.";

/// The message for setting both `labelSelector` and `orLabelSelectors`.
pub const BOTH_SELECTORS_MESSAGE: &str = "encountered labelSelector as well as orLabelSelectors in backup spec, only one can be specified";

/// All validation errors of `filters`, in the order Velero reports them; empty when valid.
pub fn validate(filters: &BackupFilters) -> Vec<String> {
    let mut errs = Vec::new();
    if filters.uses_old_filters() && filters.uses_new_filters() {
        errs.push(MIXED_FILTERS_MESSAGE.to_string());
    }
    if filters.uses_old_filters() {
        for e in includes_excludes(&filters.included_resources, &filters.excluded_resources) {
            errs.push(format!("Invalid included/excluded resource lists: {e}"));
        }
    } else {
        for e in scoped(
            &filters.included_cluster_scoped_resources,
            &filters.excluded_cluster_scoped_resources,
        ) {
            errs.push(format!(
                "Invalid cluster-scoped included/excluded resource lists: {e}"
            ));
        }
        for e in scoped(
            &filters.included_namespace_scoped_resources,
            &filters.excluded_namespace_scoped_resources,
        ) {
            errs.push(format!(
                "Invalid namespace-scoped included/excluded resource lists: {e}"
            ));
        }
    }
    // Every list is compiled, whichever style is in use, so that no invalid pattern is ever
    // kept; the engines use the same compiler.
    let lists = [
        ("includedResources", &filters.included_resources),
        ("excludedResources", &filters.excluded_resources),
        (
            "includedClusterScopedResources",
            &filters.included_cluster_scoped_resources,
        ),
        (
            "excludedClusterScopedResources",
            &filters.excluded_cluster_scoped_resources,
        ),
        (
            "includedNamespaceScopedResources",
            &filters.included_namespace_scoped_resources,
        ),
        (
            "excludedNamespaceScopedResources",
            &filters.excluded_namespace_scoped_resources,
        ),
    ];
    for (field, items) in lists {
        for e in patterns(field, items) {
            errs.push(format!("Invalid included/excluded resource lists: {e}"));
        }
    }
    errs.extend(namespaces_and_selectors(
        &filters.included_namespaces,
        &filters.excluded_namespaces,
        filters.label_selector.as_ref(),
        filters.or_label_selectors.as_deref(),
        BOTH_SELECTORS_MESSAGE,
    ));
    errs
}

/// The patterns of a resource policy's include/exclude lists, compiled as the spec's are.
pub(crate) fn policy_patterns(policy: &IncludeExcludePolicy) -> Vec<String> {
    let lists = [
        (
            "includedClusterScopedResources",
            &policy.included_cluster_scoped_resources,
        ),
        (
            "excludedClusterScopedResources",
            &policy.excluded_cluster_scoped_resources,
        ),
        (
            "includedNamespaceScopedResources",
            &policy.included_namespace_scoped_resources,
        ),
        (
            "excludedNamespaceScopedResources",
            &policy.excluded_namespace_scoped_resources,
        ),
    ];
    lists
        .into_iter()
        .flat_map(|(field, items)| patterns(field, items))
        .map(|e| format!("Invalid resource policy: {e}"))
        .collect()
}

/// How many invalid patterns of one list are named before the rest are only counted.
const NAMED_INVALID_PATTERNS: usize = 5;

/// Compiles every pattern of the list `field` with the compiler the filters use: the messages
/// for a list longer than [`MAX_PATTERNS_PER_LIST`] and for each pattern that does not compile
/// (quoted as an excerpt), empty when all compile. An invalid pattern is a validation error
/// here, where Velero would keep it and let it make the whole list match nothing.
pub(crate) fn patterns(field: &str, items: &[String]) -> Vec<String> {
    if items.len() > MAX_PATTERNS_PER_LIST {
        return vec![format!(
            "{field} holds {} patterns, more than the {MAX_PATTERNS_PER_LIST} allowed",
            items.len()
        )];
    }
    let invalid: Vec<String> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| Glob::new(item).err().map(|e| format!("{field}[{i}]: {e}")))
        .collect();
    let more = invalid.len().saturating_sub(NAMED_INVALID_PATTERNS);
    let mut errs: Vec<String> = invalid.into_iter().take(NAMED_INVALID_PATTERNS).collect();
    if more > 0 {
        errs.push(format!("{field}: {more} more invalid patterns"));
    }
    errs
}

/// An item echoed in one of Velero's messages: as written when it is short and printable, as
/// an [`excerpt`] otherwise.
pub(crate) fn echo(item: &str) -> String {
    if item.len() <= 64 && !item.chars().any(char::is_control) {
        item.to_string()
    } else {
        excerpt(item)
    }
}

/// The namespace lists and the label selectors, which Velero checks the same way for backups and
/// restores; `both_selectors` is the message for setting both selector kinds.
pub(crate) fn namespaces_and_selectors(
    included_namespaces: &[String],
    excluded_namespaces: &[String],
    label_selector: Option<&LabelSelector>,
    or_label_selectors: Option<&[LabelSelector]>,
    both_selectors: &str,
) -> Vec<String> {
    let mut errs = Vec::new();
    let star = ["*".to_string()];
    let included = if included_namespaces.is_empty() {
        &star[..]
    } else {
        included_namespaces
    };
    for e in namespaces(included, excluded_namespaces) {
        errs.push(format!("Invalid included/excluded namespace lists: {e}"));
    }
    if label_selector.is_some() && or_label_selectors.is_some() {
        errs.push(both_selectors.to_string());
    }
    if let Some(selector) = label_selector
        && let Err(e) = selector.compile()
    {
        errs.push(format!("invalid labelSelector: {e}"));
    }
    for (i, selector) in or_label_selectors.into_iter().flatten().enumerate() {
        if let Err(e) = selector.compile() {
            errs.push(format!("invalid orLabelSelectors[{i}]: {e}"));
        }
    }
    errs
}

fn sorted(items: &[String]) -> BTreeSet<&str> {
    items.iter().map(String::as_str).collect()
}

/// `ValidateIncludesExcludes`: the old resource lists and the namespace lists.
pub(crate) fn includes_excludes(includes: &[String], excludes: &[String]) -> Vec<String> {
    let (inc, exc) = (sorted(includes), sorted(excludes));
    let mut errs = Vec::new();
    if inc.len() > 1 && inc.contains("*") {
        errs.push(
            "includes list must either contain '*' only, or a non-empty list of items".to_string(),
        );
    }
    if exc.contains("*") {
        errs.push("excludes list cannot contain '*'".to_string());
    }
    for item in &exc {
        if inc.contains(item) {
            errs.push(format!(
                "excludes list cannot contain an item in the includes list: {}",
                echo(item)
            ));
        }
    }
    errs
}

/// `ValidateScopedIncludesExcludes`: the four scoped lists, by pairs.
fn scoped(includes: &[String], excludes: &[String]) -> Vec<String> {
    let (inc, exc) = (sorted(includes), sorted(excludes));
    let mut errs = Vec::new();
    if inc.len() > 1 && inc.contains("*") {
        errs.push(
            "includes list must either contain '*' only, or a non-empty list of items".to_string(),
        );
    }
    if exc.len() > 1 && exc.contains("*") {
        errs.push(
            "excludes list must either contain '*' only, or a non-empty list of items".to_string(),
        );
    }
    if !inc.is_empty() && exc.contains("*") {
        errs.push("when exclude is '*', include cannot have value".to_string());
    }
    for item in &exc {
        if inc.contains(item) {
            errs.push(format!(
                "excludes list cannot contain an item in the includes list: {}",
                echo(item)
            ));
        }
    }
    errs
}

/// `ValidateNamespaceIncludesExcludes`.
pub(crate) fn namespaces(includes: &[String], excludes: &[String]) -> Vec<String> {
    for (field, items) in [
        ("includedNamespaces", includes),
        ("excludedNamespaces", excludes),
    ] {
        if items.len() > MAX_PATTERNS_PER_LIST {
            return vec![format!(
                "{field} holds {} patterns, more than the {MAX_PATTERNS_PER_LIST} allowed",
                items.len()
            )];
        }
    }
    let mut errs = includes_excludes(includes, excludes);
    for ns in sorted(includes).into_iter().chain(sorted(excludes)) {
        errs.extend(namespace_name(ns));
    }
    errs
}

/// Validates one namespace entry: a wildcard pattern of the supported kind whose non-wildcard
/// characters form a valid namespace name. The empty string is allowed ("no namespace").
fn namespace_name(ns: &str) -> Vec<String> {
    if ns.is_empty() {
        return Vec::new();
    }
    if let Err(e) = wildcard_pattern(ns) {
        return vec![e.to_string()];
    }
    let stand_in: String = ns
        .chars()
        .map(|c| {
            if matches!(c, '*' | '?' | '[' | ']') {
                'x'
            } else {
                c
            }
        })
        .collect();
    dns1123_label(&stand_in)
        .into_iter()
        .map(|msg| format!("invalid namespace {}: {msg}", excerpt(ns)))
        .collect()
}

/// The checks Velero applies to namespace patterns before expanding them.
fn wildcard_pattern(pattern: &str) -> Result<(), &'static str> {
    if pattern.contains(['|', '(', ')', '!', '{', '}', ',']) {
        return Err("wildcard pattern contains unsupported characters: |, (, ), !, {, }, ,");
    }
    if pattern.contains("**") {
        return Err("wildcard pattern contains consecutive asterisks (only single * allowed)");
    }
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'[' => match bytes[i + 1..].iter().position(|b| *b == b']') {
                Some(0) => return Err("wildcard pattern contains empty bracket pattern '[]'"),
                Some(offset) => i += offset + 1,
                None => return Err("wildcard pattern contains unclosed bracket '['"),
            },
            b']' => return Err("wildcard pattern contains unmatched closing bracket ']'"),
            _ => {}
        }
        i += 1;
    }
    // Anything the checks above let through must also compile.
    Glob::new(pattern)
        .map(|_| ())
        .map_err(|_| "wildcard pattern is not a valid glob")
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// Kubernetes `IsDNS1123Label`, with its messages.
pub(crate) fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let label_ok = |s: &str| {
        let b = s.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && !b.iter().any(u8::is_ascii_uppercase)
    };
    if !label_ok(value) {
        if value.split('.').all(label_ok) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(format!(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"
            ));
        }
    }
    errs
}
