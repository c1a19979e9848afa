//! Validation of backup filters, with Velero's messages (velero-compat §2.2.1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)] // a panic is how a test reports failure

mod support;

use hawser_core::selection::*;
use support::*;

#[test]
fn validation_messages() {
    let mixed = "include-resources, exclude-resources and include-cluster-resources are old filter parameters.\n\
include-cluster-scoped-resources, exclude-cluster-scoped-resources, include-namespace-scoped-resources and exclude-namespace-scoped-resources are new filter parameters.\n\
They cannot be used together";
    let cases: Vec<(&str, Filters, Vec<&str>)> = vec![
        ("valid", Filters::new().namespaces(&["a", "b-*"]), vec![]),
        (
            "mixed",
            Filters::new()
                .resources(&["pods"], &[])
                .cluster_scoped(&["sc"], &[]),
            vec![mixed],
        ),
        (
            "mixed tri-state",
            Filters::new()
                .cluster_resources(Some(true))
                .namespace_scoped(&[], &["secrets"]),
            vec![mixed],
        ),
        (
            "old includes with star and more",
            Filters::new().resources(&["*", "pods"], &[]),
            vec![
                "Invalid included/excluded resource lists: includes list must either contain '*' only, or a non-empty list of items",
            ],
        ),
        (
            "old excludes with star",
            Filters::new().resources(&[], &["*"]),
            vec!["Invalid included/excluded resource lists: excludes list cannot contain '*'"],
        ),
        (
            "old item in both",
            Filters::new().resources(&["pods", "secrets"], &["secrets"]),
            vec![
                "Invalid included/excluded resource lists: excludes list cannot contain an item in the includes list: secrets",
            ],
        ),
        (
            "old exclude glob is fine",
            Filters::new().resources(&[], &["*.apps"]),
            vec![],
        ),
        (
            "scoped exclude star alone is fine",
            Filters::new().cluster_scoped(&[], &["*"]),
            vec![],
        ),
        (
            "scoped excludes star and more",
            Filters::new().cluster_scoped(&[], &["*", "sc"]),
            vec![
                "Invalid cluster-scoped included/excluded resource lists: excludes list must either contain '*' only, or a non-empty list of items",
            ],
        ),
        (
            "scoped include with exclude star",
            Filters::new().namespace_scoped(&["pods"], &["*"]),
            vec![
                "Invalid namespace-scoped included/excluded resource lists: when exclude is '*', include cannot have value",
            ],
        ),
        (
            "scoped includes star and more",
            Filters::new().namespace_scoped(&["*", "pods"], &[]),
            vec![
                "Invalid namespace-scoped included/excluded resource lists: includes list must either contain '*' only, or a non-empty list of items",
            ],
        ),
        (
            "scoped item in both",
            Filters::new().cluster_scoped(&["sc"], &["sc"]),
            vec![
                "Invalid cluster-scoped included/excluded resource lists: excludes list cannot contain an item in the includes list: sc",
            ],
        ),
        (
            "namespace excludes star",
            Filters::new().exclude_namespaces(&["*"]),
            vec![
                "Invalid included/excluded namespace lists: excludes list cannot contain '*'",
                "Invalid included/excluded namespace lists: excludes list cannot contain an item in the includes list: *",
            ],
        ),
        (
            "namespace in both",
            Filters::new().namespaces(&["a"]).exclude_namespaces(&["a"]),
            vec![
                "Invalid included/excluded namespace lists: excludes list cannot contain an item in the includes list: a",
            ],
        ),
        (
            "namespace upper case",
            Filters::new().namespaces(&["Web"]),
            vec![
                "Invalid included/excluded namespace lists: invalid namespace \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        (
            "namespace with dots",
            Filters::new().namespaces(&["a.b"]),
            vec![
                "Invalid included/excluded namespace lists: invalid namespace \"a.b\": must not contain dots",
            ],
        ),
        (
            "namespace too long",
            Filters::new().namespaces(&[&"a".repeat(64)]),
            vec![
                "Invalid included/excluded namespace lists: invalid namespace \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": must be no more than 63 characters",
            ],
        ),
        (
            "namespace braces",
            Filters::new().namespaces(&["{a,b}"]),
            vec![
                "Invalid included/excluded namespace lists: wildcard pattern contains unsupported characters: |, (, ), !, {, }, ,",
            ],
        ),
        (
            "namespace double star",
            Filters::new().namespaces(&["a**"]),
            vec![
                "Invalid included/excluded namespace lists: wildcard pattern contains consecutive asterisks (only single * allowed)",
            ],
        ),
        (
            "namespace unclosed bracket",
            Filters::new().namespaces(&["ns-[ab"]),
            vec![
                "Invalid included/excluded namespace lists: wildcard pattern contains unclosed bracket '['",
            ],
        ),
        (
            "namespace empty bracket",
            Filters::new().namespaces(&["ns-[]"]),
            vec![
                "Invalid included/excluded namespace lists: wildcard pattern contains empty bracket pattern '[]'",
            ],
        ),
        (
            "namespace stray bracket",
            Filters::new().namespaces(&["ns-]"]),
            vec![
                "Invalid included/excluded namespace lists: wildcard pattern contains unmatched closing bracket ']'",
            ],
        ),
        (
            "both selectors",
            Filters::new()
                .selector(LabelSelector::default())
                .or_selectors(vec![]),
            vec![
                "encountered labelSelector as well as orLabelSelectors in backup spec, only one can be specified",
            ],
        ),
    ];
    for (what, filters, want) in cases {
        assert_eq!(filters.errors(), want, "{what}");
    }
}

#[test]
fn validation_reports_every_error_in_velero_order() {
    let errs = Filters::new()
        .resources(&["pods"], &["pods"])
        .namespace_scoped(&["cm"], &[])
        .exclude_namespaces(&["*"])
        .errors();
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(errs[0].starts_with("include-resources, exclude-resources"));
    assert!(errs[1].starts_with("Invalid included/excluded resource lists:"));
    assert!(errs[2].starts_with("Invalid included/excluded namespace lists:"));
    assert_eq!(
        errs[3],
        "Invalid included/excluded namespace lists: excludes list cannot contain an item in the includes list: *"
    );
}

#[test]
fn invalid_label_selectors_fail_validation() {
    let errs = Filters::new()
        .selector(LabelSelector::default().with_expression("a", "In", &[]))
        .errors();
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("invalid labelSelector:"), "{errs:?}");
}

#[test]
fn an_uncompilable_pattern_fails_validation_in_every_list() {
    let scoped: [(&str, Filters); 4] = [
        (
            "includedClusterScopedResources",
            Filters::new().cluster_scoped(&["[x"], &[]),
        ),
        (
            "excludedClusterScopedResources",
            Filters::new().cluster_scoped(&[], &["[x"]),
        ),
        (
            "includedNamespaceScopedResources",
            Filters::new().namespace_scoped(&["[x"], &[]),
        ),
        (
            "excludedNamespaceScopedResources",
            Filters::new().namespace_scoped(&[], &["[x"]),
        ),
    ];
    let old = [
        ("includedResources", Filters::new().resources(&["[x"], &[])),
        (
            "excludedResources",
            Filters::new().resources(&[], &["secrets", "[x"]),
        ),
    ];
    for (field, filters) in scoped.into_iter().chain(old) {
        let errs = filters.errors();
        let index = if field == "excludedResources" { 1 } else { 0 };
        assert_eq!(
            errs,
            [format!(
                "Invalid included/excluded resource lists: {field}[{index}]: invalid glob pattern \"[x\": unclosed '['"
            )],
            "{field}"
        );
    }
}

#[test]
fn a_brace_bomb_fails_validation_with_an_excerpt() {
    let bomb = "{".repeat(100_000);
    let errs = Filters::new().resources(&[], &[bomb.as_str()]).errors();
    assert_eq!(errs.len(), 1, "{errs:?}");
    let want = format!(
        "Invalid included/excluded resource lists: excludedResources[0]: invalid glob pattern {:?}... (100000 bytes): longer than 1024 bytes",
        "{".repeat(64)
    );
    assert_eq!(errs[0], want);
    // Namespaces: Velero's own checks refuse braces; the echoed name is cut short too.
    let errs = Filters::new().namespaces(&[bomb.as_str()]).errors();
    assert!(errs.iter().all(|e| e.len() < 400), "{errs:?}");
    let long = "a".repeat(100_000);
    let errs = Filters::new().exclude_namespaces(&[long.as_str()]).errors();
    assert!(
        !errs.is_empty() && errs.iter().all(|e| e.len() < 400),
        "{errs:?}"
    );
}

#[test]
fn lists_and_their_invalid_patterns_are_counted() {
    let many: Vec<String> = (0..=MAX_PATTERNS_PER_LIST)
        .map(|i| format!("t{i}"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let errs = Filters::new().namespace_scoped(&[], &many).errors();
    assert_eq!(
        errs,
        [
            "Invalid included/excluded resource lists: excludedNamespaceScopedResources holds 1025 patterns, more than the 1024 allowed"
        ]
    );
    let errs = Filters::new().exclude_namespaces(&many).errors();
    assert_eq!(
        errs,
        [
            "Invalid included/excluded namespace lists: excludedNamespaces holds 1025 patterns, more than the 1024 allowed"
        ]
    );
    let bad: Vec<String> = (0..8).map(|i| format!("[{i}")).collect();
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let errs = Filters::new().resources(&bad, &[]).errors();
    assert_eq!(errs.len(), 6, "{errs:?}");
    assert_eq!(
        errs[5],
        "Invalid included/excluded resource lists: includedResources: 3 more invalid patterns"
    );
}

#[test]
fn an_uncompilable_policy_pattern_fails_validation() {
    let policy = IncludeExcludePolicy {
        excluded_namespace_scoped_resources: vec!["{a".into()],
        ..IncludeExcludePolicy::default()
    };
    let errs =
        Selection::with_policy(&BackupFilters::default(), &catalogue(), Some(&policy)).unwrap_err();
    assert_eq!(
        errs,
        [
            "Invalid resource policy: excludedNamespaceScopedResources[0]: invalid glob pattern \"{a\": unclosed '{'"
        ]
    );
}
