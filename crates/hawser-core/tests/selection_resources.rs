//! Selection of resource types: name resolution, discovery order, old and scoped filters,
//! auto-excludes (velero-compat §6.1, §6.3–§6.5, §6.9).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)] // a panic is how a test reports failure

mod support;

use hawser_core::selection::*;
use support::*;

#[test]
fn resource_names_resolve_in_every_form_velero_accepts() {
    let cat = catalogue();
    let cases = [
        ("pods", Some("pods")),
        ("pod", Some("pods")),
        ("Pod", Some("pods")),
        ("po", Some("pods")),
        ("deployments", Some("deployments.extensions")), // first group in discovery order
        ("deployments.apps", Some("deployments.apps")),
        ("deployment.apps", Some("deployments.apps")),
        ("Deployment.apps", Some("deployments.apps")),
        ("deploy.apps", Some("deployments.apps")),
        ("deploy.app", Some("deployments.apps")), // short name with a group prefix
        ("events", Some("events")),               // core wins over events.k8s.io
        ("events.events.k8s.io", Some("events.events.k8s.io")),
        (
            "crd",
            Some("customresourcedefinitions.apiextensions.k8s.io"),
        ),
        (
            "customresourcedefinition",
            Some("customresourcedefinitions.apiextensions.k8s.io"),
        ),
        ("sc", Some("storageclasses.storage.k8s.io")),
        ("widgets.example.com", Some("widgets.example.com")),
        ("pods.apps", None),
        ("nosuchthing", None),
        ("*.apps", None),
    ];
    for (name, want) in cases {
        let got = cat.resolve(name).map(ApiResource::group_resource);
        assert_eq!(got.as_deref(), want, "resolving {name:?}");
    }
    assert_eq!(
        cat.canonical_name("*.apps"),
        "*.apps",
        "unresolvable names are kept as written"
    );
}

#[test]
fn discovery_order_puts_pods_pvcs_pvs_first_and_extensions_last() {
    let cat = catalogue();
    let order: Vec<String> = cat
        .discovery_order()
        .iter()
        .map(|r| r.group_resource())
        .collect();
    assert_eq!(
        &order[..3],
        ["pods", "persistentvolumeclaims", "persistentvolumes"]
    );
    assert_eq!(
        order.last().map(String::as_str),
        Some("deployments.extensions")
    );
    assert!(
        !order.iter().any(|r| r == "pods/log"),
        "subresources are skipped"
    );
    assert!(
        !order.iter().any(|r| r == "componentstatuses"),
        "types without create/delete are skipped"
    );
}

#[test]
fn cohabiting_types_are_backed_up_once_from_the_first_group_seen() {
    let s = Filters::new().selection();
    let types = included_types(&s);
    assert!(types.contains(&"deployments.apps".to_string()));
    assert!(
        !types.contains(&"deployments.extensions".to_string()),
        "{types:?}"
    );
    assert!(types.contains(&"events".to_string()));
    assert!(
        !types.contains(&"events.events.k8s.io".to_string()),
        "{types:?}"
    );
}

#[test]
fn include_cluster_resources_false_means_no_cluster_types_not_even_namespaces() {
    let s = Filters::new().cluster_resources(Some(false)).selection();
    for t in [
        "persistentvolumes",
        "namespaces",
        "clusterroles.rbac.authorization.k8s.io",
    ] {
        assert!(!s.type_included(t), "{t}");
    }
    assert!(s.type_included("pods"));
}

#[test]
fn include_cluster_resources_true_takes_cluster_types_per_filter() {
    let s = Filters::new()
        .namespaces(&["web"])
        .cluster_resources(Some(true))
        .selection();
    assert!(s.type_included("persistentvolumes"));
    assert!(s.type_included("storageclasses"));
    let s = Filters::new()
        .namespaces(&["web"])
        .cluster_resources(Some(true))
        .resources(&["pods", "storageclasses"], &[])
        .selection();
    assert!(s.type_included("storageclasses"));
    assert!(!s.type_included("clusterroles"));
}

#[test]
fn include_cluster_resources_auto_follows_the_namespace_filter() {
    let auto_all = Filters::new().resources(&["*"], &["secrets"]).selection();
    assert!(
        auto_all.type_included("clusterroles"),
        "all namespaces: cluster types are taken"
    );
    assert!(!auto_all.type_included("secrets"));
    let auto_some = Filters::new()
        .namespaces(&["web"])
        .resources(&["*"], &[])
        .selection();
    assert!(!auto_some.type_included("clusterroles"));
    assert!(!auto_some.type_included("persistentvolumes"));
    assert!(
        auto_some.type_included("namespaces"),
        "the namespaces type is always considered"
    );
    assert!(auto_some.type_included("pods"));
    let excluded_ns = Filters::new()
        .exclude_namespaces(&["kube-system"])
        .resources(&["*"], &[])
        .selection();
    assert!(
        !excluded_ns.type_included("clusterroles"),
        "an exclude makes the filter not 'everything'"
    );
}

#[test]
fn old_style_lists_match_globs_and_resolved_names() {
    let s = Filters::new()
        .resources(&["*.apps", "po"], &["replicasets.apps"])
        .selection();
    assert!(s.type_included("deployments.apps"));
    assert!(s.type_included("pods"));
    assert!(!s.type_included("replicasets.apps"));
    assert!(!s.type_included("configmaps"));
    assert!(
        !s.type_included("nosuchthing"),
        "unknown types are never included"
    );
}

#[test]
fn no_filters_is_a_full_backup_with_every_cluster_type() {
    let s = Filters::new().selection();
    for t in [
        "clusterroles",
        "storageclasses",
        "persistentvolumes",
        "namespaces",
        "pods",
        "crd",
    ] {
        assert!(s.type_included(t), "{t}");
    }
}

#[test]
fn scoped_namespaced_filter() {
    let s = Filters::new()
        .namespace_scoped(&["deployments.apps", "cm"], &[])
        .selection();
    assert!(s.type_included("configmaps") && s.type_included("deployments.apps"));
    assert!(!s.type_included("pods"));
    assert!(
        !s.type_included("clusterroles"),
        "not a full backup: no cluster types"
    );
    assert!(
        s.type_included("namespaces"),
        "namespaces are included by default"
    );
    let none = Filters::new().namespace_scoped(&[], &["*"]).selection();
    assert!(!none.type_included("pods") && !none.type_included("configmaps"));
    let some = Filters::new()
        .namespace_scoped(&[], &["secrets"])
        .selection();
    assert!(some.type_included("pods") && !some.type_included("secrets"));
    assert!(
        !some.type_included("clusterroles"),
        "an exclude list makes it not a full backup"
    );
}

#[test]
fn scoped_cluster_filter() {
    let s = Filters::new()
        .cluster_scoped(&["storageclasses"], &[])
        .selection();
    assert!(s.type_included("storageclasses"));
    assert!(!s.type_included("clusterroles"));
    assert!(s.type_included("pods"), "namespaced types default to all");
    let all = Filters::new()
        .namespaces(&["web"])
        .cluster_scoped(&["*"], &[])
        .selection();
    assert!(all.type_included("clusterroles") && all.type_included("persistentvolumes"));
    let none = Filters::new().cluster_scoped(&[], &["*"]).selection();
    assert!(!none.type_included("clusterroles") && !none.type_included("namespaces"));
    let one_out = Filters::new()
        .cluster_scoped(&[], &["clusterroles"])
        .selection();
    assert!(!one_out.type_included("clusterroles"));
    assert!(
        !one_out.type_included("storageclasses"),
        "a cluster exclude list ends the full backup"
    );
    assert!(one_out.type_included("namespaces"));
    let namespaced_filter = Filters::new().namespaces(&["web"]).selection();
    assert!(!namespaced_filter.type_included("clusterroles"));
    assert!(namespaced_filter.type_included("namespaces"));
}

#[test]
fn scoped_lists_ignore_names_of_the_other_scope() {
    // `persistentvolumes` is cluster-scoped: in the namespaced include list it is dropped, which
    // leaves the list empty (= all namespaced types).
    let s = Filters::new()
        .namespace_scoped(&["persistentvolumes"], &[])
        .selection();
    assert!(s.type_included("pods"));
    assert!(
        s.type_included("persistentvolumes"),
        "the list is empty once resolved: full backup"
    );
}

#[test]
fn volume_snapshots_are_always_excluded_and_nothing_else_is() {
    for s in [
        Filters::new().selection(),
        Filters::new().resources(&["*"], &[]).selection(),
    ] {
        assert!(!s.type_included("volumesnapshots.snapshot.storage.k8s.io"));
        assert!(!s.type_included("volumesnapshotcontents.snapshot.storage.k8s.io"));
        assert!(s.type_included("events"));
        assert!(s.type_included("secrets"));
    }
    let explicit = Filters::new().cluster_scoped(&["vsc"], &[]).selection();
    assert!(
        !explicit.type_included("vsc"),
        "auto-excludes win over an explicit include"
    );
}

#[test]
fn crds_of_custom_resources_are_added_unless_crds_are_named_in_a_filter() {
    assert!(
        Filters::new()
            .namespaces(&["web"])
            .selection()
            .adds_crds_of_custom_resources()
    );
    assert!(
        !Filters::new()
            .cluster_scoped(&["crd"], &[])
            .selection()
            .adds_crds_of_custom_resources()
    );
    assert!(
        !Filters::new()
            .cluster_scoped(&[], &["crd"])
            .selection()
            .adds_crds_of_custom_resources()
    );
    // A full backup lists CRDs anyway.
    assert!(!Filters::new().selection().adds_crds_of_custom_resources());
}

// §6.4 resource-policy include/exclude lists

#[test]
fn resource_policy_lists_merge_in_below_the_spec() {
    let policy = IncludeExcludePolicy {
        excluded_namespace_scoped_resources: strings(&["secrets", "configmaps"]),
        included_cluster_scoped_resources: strings(&["storageclasses"]),
        ..IncludeExcludePolicy::default()
    };
    let filters = Filters::new()
        .namespace_scoped(&["configmaps", "pods"], &[])
        .0;
    let s = Selection::with_policy(&filters, &catalogue(), Some(&policy)).unwrap();
    assert!(
        s.type_included("configmaps"),
        "the spec's include wins over the policy's exclude"
    );
    assert!(s.type_included("pods"));
    assert!(
        !s.type_included("secrets"),
        "not in the spec includes anyway"
    );
    assert!(
        s.type_included("storageclasses"),
        "the policy adds a cluster type"
    );
    assert!(!s.type_included("clusterroles"));

    // Without spec filters the policy's exclude ends the full backup.
    let s = Selection::with_policy(&BackupFilters::default(), &catalogue(), Some(&policy)).unwrap();
    assert!(!s.type_included("secrets"));
    assert!(s.type_included("pods"));
    assert!(s.type_included("storageclasses"));
    assert!(!s.type_included("clusterroles"), "no longer a full backup");

    // An empty policy changes nothing.
    let s = Selection::with_policy(
        &BackupFilters::default(),
        &catalogue(),
        Some(&IncludeExcludePolicy::default()),
    )
    .unwrap();
    assert!(s.type_included("clusterroles"));
}

#[test]
fn a_resource_policy_cannot_be_combined_with_old_filters() {
    let filters = Filters::new().resources(&["pods"], &[]).0;
    let errs = Selection::with_policy(
        &filters,
        &catalogue(),
        Some(&IncludeExcludePolicy::default()),
    )
    .unwrap_err();
    assert_eq!(
        errs,
        [
            "include-resources, exclude-resources and include-cluster-resources are old filter parameters.\nThey cannot be used with include-exclude policies."
        ]
    );
}
