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
