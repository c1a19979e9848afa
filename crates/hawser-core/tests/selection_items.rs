//! Selection of namespaces and items: namespace filter and tracker, label selectors, per-item
//! checks, ordered resources (velero-compat §6.2, §6.6–§6.8).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)] // a panic is how a test reports failure

mod support;

use hawser_core::selection::*;
use serde_json::{Value, json};
use support::*;

#[test]
fn namespace_filter_globs_and_exclusions() {
    let s = Filters::new()
        .namespaces(&["prod-*", "web"])
        .exclude_namespaces(&["prod-secret"])
        .selection();
    let cases = [
        ("prod-a", true),
        ("prod-secret", false),
        ("web", true),
        ("webx", false),
        ("default", false),
    ];
    for (ns, want) in cases {
        assert_eq!(s.namespace_included(ns), want, "{ns}");
    }
    let all = Filters::new().exclude_namespaces(&["kube-*"]).selection();
    assert!(all.namespace_included("default"));
    assert!(!all.namespace_included("kube-system"));
    let q = Filters::new()
        .namespaces(&["team-?", "ns-[ab]"])
        .selection();
    assert!(q.namespace_included("team-1") && !q.namespace_included("team-12"));
    assert!(q.namespace_included("ns-b") && !q.namespace_included("ns-c"));
}

#[test]
fn listing_is_cluster_wide_only_when_star_is_included() {
    let existing = strings(&["default", "prod-a", "prod-b", "prod-secret"]);
    assert_eq!(
        Filters::new().selection().namespace_scope(&existing),
        NamespaceScope::All
    );
    assert_eq!(
        Filters::new()
            .exclude_namespaces(&["default"])
            .selection()
            .namespace_scope(&existing),
        NamespaceScope::All
    );
    let s = Filters::new()
        .namespaces(&["prod-*", "missing"])
        .exclude_namespaces(&["prod-secret"])
        .selection();
    assert_eq!(
        s.namespace_scope(&existing),
        NamespaceScope::Only(strings(&["missing", "prod-a", "prod-b"]))
    );
    assert_eq!(
        s.missing_included_namespaces(&existing),
        strings(&["missing"])
    );
}

#[test]
fn namespaces_labelled_exclude_from_backup_are_excluded() {
    let namespaces = [
        json!({"metadata": {"name": "keep", "labels": {}}}),
        json!({"metadata": {"name": "skip", "labels": {"velero.io/exclude-from-backup": "true"}}}),
        json!({"metadata": {"name": "other", "labels": {"velero.io/exclude-from-backup": "false"}}}),
    ];
    let excluded = namespaces_excluded_by_label(&namespaces);
    assert_eq!(excluded, strings(&["skip"]));
    let mut filters = BackupFilters::default();
    filters.excluded_namespaces.extend(excluded);
    let s = Selection::new(&filters, &catalogue()).unwrap();
    let pod = object("v1", "Pod", Some("skip"), "p", json!({}));
    assert_eq!(
        s.check_item(&type_of("pods"), &pod, false),
        Err(SkipReason::NamespaceExcluded)
    );
    assert!(s.namespace_included("keep"));
}

#[test]
fn namespace_objects_are_tracked_by_selector_by_filter_or_by_items() {
    let namespaces = [
        ns_object("a", "Active", json!({"app": "web"})),
        ns_object("b", "Active", json!({})),
        ns_object("c", "Terminating", json!({"app": "web"})),
        ns_object("d", "Active", json!({})),
    ];
    // No selector, filter = everything: every Active namespace.
    let t = Filters::new().selection().namespace_tracker(&namespaces);
    assert_eq!(t.names().collect::<Vec<_>>(), ["a", "b", "d"]);
    // Selector with everything-filter: only matches (and later, namespaces of items).
    let mut t = Filters::new()
        .selector(LabelSelector::matching([("app", "web")]))
        .selection()
        .namespace_tracker(&namespaces);
    assert_eq!(t.names().collect::<Vec<_>>(), ["a"]);
    t.track("d");
    assert!(t.is_tracked("d") && !t.is_tracked("b"));
    // Selector with a specific namespace filter: the union.
    let t = Filters::new()
        .namespaces(&["b"])
        .or_selectors(vec![LabelSelector::matching([("app", "web")])])
        .selection()
        .namespace_tracker(&namespaces);
    assert_eq!(t.names().collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn or_selectors_give_one_list_each_and_replace_the_single_selector() {
    let single = Filters::new()
        .selector(LabelSelector::matching([("app", "web")]))
        .selection();
    assert_eq!(single.list_label_selectors(), ["app=web"]);
    let ors = Filters::new()
        .or_selectors(vec![
            LabelSelector::matching([("app", "web")]),
            LabelSelector::matching([("app", "db")]),
        ])
        .selection();
    assert_eq!(ors.list_label_selectors(), ["app=web", "app=db"]);
    assert!(ors.labels_match(&object("v1", "Pod", Some("a"), "p", json!({"app": "db"}))));
    assert!(!ors.labels_match(&object(
        "v1",
        "Pod",
        Some("a"),
        "p",
        json!({"app": "cache"})
    )));
    assert_eq!(Filters::new().selection().list_label_selectors(), [""]);
    let expr = Filters::new()
        .selector(LabelSelector::default().with_expression("tier", "NotIn", &["test"]))
        .selection();
    assert!(expr.labels_match(&object("v1", "Pod", Some("a"), "p", json!({}))));
    assert!(!expr.labels_match(&object(
        "v1",
        "Pod",
        Some("a"),
        "p",
        json!({"tier": "test"})
    )));
}

#[test]
fn per_item_checks() {
    let s = Filters::new()
        .namespaces(&["web"])
        .resources(&["pods", "persistentvolumes"], &[])
        .selection();
    let pods = type_of("pods");
    let pvs = type_of("persistentvolumes");
    let cms = type_of("configmaps");
    let cases: Vec<(&str, &ApiResource, Value, bool, Result<(), SkipReason>)> = vec![
        (
            "plain pod",
            &pods,
            object("v1", "Pod", Some("web"), "p", json!({})),
            false,
            Ok(()),
        ),
        (
            "exclude label",
            &pods,
            object(
                "v1",
                "Pod",
                Some("web"),
                "p",
                json!({"velero.io/exclude-from-backup": "true"}),
            ),
            false,
            Err(SkipReason::ExcludedByLabel),
        ),
        (
            "exclude label false",
            &pods,
            object(
                "v1",
                "Pod",
                Some("web"),
                "p",
                json!({"velero.io/exclude-from-backup": "false"}),
            ),
            false,
            Ok(()),
        ),
        (
            "other namespace",
            &pods,
            object("v1", "Pod", Some("db"), "p", json!({})),
            false,
            Err(SkipReason::NamespaceExcluded),
        ),
        (
            "namespaced type not included",
            &cms,
            object("v1", "ConfigMap", Some("web"), "c", json!({})),
            false,
            Err(SkipReason::TypeNotIncluded),
        ),
        // Auto mode, specific namespaces: PVs are not listed, but an action may pull one in,
        // and it is kept because the resource filter includes persistentvolumes.
        (
            "action PV",
            &pvs,
            object("v1", "PersistentVolume", None, "pv1", json!({})),
            false,
            Ok(()),
        ),
        (
            "must-include skips exclusion checks",
            &cms,
            object(
                "v1",
                "ConfigMap",
                Some("db"),
                "c",
                json!({"velero.io/exclude-from-backup": "true"}),
            ),
            true,
            Ok(()),
        ),
    ];
    for (what, r, obj, must, want) in cases {
        assert_eq!(s.check_item(r, &obj, must), want, "{what}");
    }
    assert!(
        !s.type_included("persistentvolumes"),
        "auto mode with specific namespaces lists no PVs"
    );

    let mut deleting = object("v1", "Pod", Some("web"), "p", json!({}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(
        s.check_item(&pods, &deleting, false),
        Err(SkipReason::BeingDeleted)
    );
    assert_eq!(
        s.check_item(&pods, &deleting, true),
        Err(SkipReason::BeingDeleted),
        "even must-include"
    );
}

#[test]
fn cluster_items_pulled_in_by_actions_are_dropped_only_when_their_type_is_excluded() {
    let pv = object("v1", "PersistentVolume", None, "pv1", json!({}));
    let pvs = type_of("persistentvolumes");
    // Old style, auto, includes that do not name PVs: excluded.
    let s = Filters::new()
        .namespaces(&["web"])
        .resources(&["pods"], &[])
        .selection();
    assert_eq!(
        s.check_item(&pvs, &pv, false),
        Err(SkipReason::ClusterTypeExcluded)
    );
    // Old style, includeClusterResources=false: excluded.
    let s = Filters::new()
        .namespaces(&["web"])
        .cluster_resources(Some(false))
        .selection();
    assert_eq!(
        s.check_item(&pvs, &pv, false),
        Err(SkipReason::ClusterTypeExcluded)
    );
    // Scoped style with specific namespaces: PVs are not listed but kept when pulled in.
    let s = Filters::new().namespaces(&["web"]).selection();
    assert!(!s.type_included("persistentvolumes"));
    assert_eq!(s.check_item(&pvs, &pv, false), Ok(()));
    // ... unless explicitly excluded.
    let s = Filters::new()
        .namespaces(&["web"])
        .cluster_scoped(&[], &["pv"])
        .selection();
    assert_eq!(
        s.check_item(&pvs, &pv, false),
        Err(SkipReason::ClusterTypeExcluded)
    );
    // A Namespace object is never dropped by the cluster-type check.
    let s = Filters::new()
        .namespaces(&["web"])
        .cluster_scoped(&[], &["*"])
        .selection();
    let ns = object("v1", "Namespace", None, "web", json!({}));
    assert_eq!(s.check_item(&type_of("namespaces"), &ns, false), Ok(()));
}

#[test]
fn an_item_is_backed_up_once() {
    let mut seen = BackedUpItems::default();
    let pod = object("v1", "Pod", Some("web"), "p", json!({}));
    assert_eq!(seen.insert(&pod), Ok(()));
    assert_eq!(seen.insert(&pod), Err(SkipReason::AlreadyBackedUp));
    assert_eq!(
        seen.insert(&object("v1", "Pod", Some("db"), "p", json!({}))),
        Ok(())
    );
    assert_eq!(seen.len(), 2);
}

#[test]
fn filters_deserialise_from_a_backup_spec() {
    let spec = json!({
        "includedNamespaces": ["web"],
        "includeClusterResources": false,
        "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        "ttl": "720h0m0s",
        "storageLocation": "default"
    });
    let filters: BackupFilters = serde_json::from_value(spec).unwrap();
    assert_eq!(filters.included_namespaces, ["web"]);
    assert_eq!(filters.include_cluster_resources, Some(false));
    assert!(filters.uses_old_filters() && !filters.uses_new_filters());
    let s = Selection::new(&filters, &catalogue()).unwrap();
    assert_eq!(s.list_label_selectors(), ["app=web,tier"]);
}

#[test]
fn ordered_items_come_first_in_the_given_order_then_the_rest_in_listing_order() {
    let spec: std::collections::BTreeMap<String, String> = [
        ("pods".to_string(), "web/c,web/a,web/missing".to_string()),
        ("persistentvolumes".to_string(), "pv2".to_string()),
    ]
    .into_iter()
    .collect();
    let order = order_for_type(&spec, "pods");
    assert_eq!(order, ["web/c", "web/a", "web/missing"]);
    assert!(order_for_type(&spec, "deployments").is_empty());
    let listed = vec![
        ("web", "a"),
        ("web", "b"),
        ("db", "c"),
        ("web", "c"),
        ("web", "d"),
    ];
    let sorted = sort_by_order(listed, &order, |(ns, name)| format!("{ns}/{name}"));
    let names: Vec<(String, bool)> = sorted
        .items
        .iter()
        .map(|((ns, n), o)| (format!("{ns}/{n}"), *o))
        .collect();
    assert_eq!(
        names,
        [
            ("web/c".to_string(), true),
            ("web/a".to_string(), true),
            ("web/b".to_string(), false),
            ("db/c".to_string(), false),
            ("web/d".to_string(), false),
        ]
    );
    assert_eq!(sorted.not_found, ["web/missing"]);
    let pvs = sort_by_order(
        vec!["pv1", "pv2"],
        &order_for_type(&spec, "persistentvolumes"),
        |n| n.to_string(),
    );
    assert_eq!(pvs.items, [("pv2", true), ("pv1", false)]);
}
