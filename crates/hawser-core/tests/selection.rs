//! Backup item selection, one test (or table) per rule of velero-compat §6.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)] // a panic is how a test reports failure

use hawser_core::selection::{
    ApiResource, BackedUpItems, BackupFilters, Catalogue, LabelSelector, NamespaceScope, Selection,
    SkipReason, namespaces_excluded_by_label,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Fixtures

fn res(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: String::new(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        namespaced,
        verbs: ["list", "create", "get", "delete", "watch", "update"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    }
}

/// A small cluster in discovery order (core first, as the API server serves it).
fn catalogue() -> Catalogue {
    let mut read_only = res(
        "",
        "v1",
        "ComponentStatus",
        "componentstatuses",
        false,
        &["cs"],
    );
    read_only.verbs = vec!["list".into(), "get".into()];
    Catalogue::new(vec![
        res("", "v1", "ConfigMap", "configmaps", true, &["cm"]),
        res("", "v1", "Namespace", "namespaces", false, &["ns"]),
        res(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            &["pv"],
        ),
        res("", "v1", "Pod", "pods", true, &["po"]),
        res("", "v1", "Pod", "pods/log", true, &[]),
        res("", "v1", "Event", "events", true, &["ev"]),
        res(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &["pvc"],
        ),
        res("", "v1", "Secret", "secrets", true, &[]),
        read_only,
        res(
            "extensions",
            "v1beta1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
        ),
        res("apps", "v1", "Deployment", "deployments", true, &["deploy"]),
        res("apps", "v1", "ReplicaSet", "replicasets", true, &["rs"]),
        res("events.k8s.io", "v1", "Event", "events", true, &["ev"]),
        res(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
        ),
        res(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            &["sc"],
        ),
        res(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
        ),
        res(
            "snapshot.storage.k8s.io",
            "v1",
            "VolumeSnapshot",
            "volumesnapshots",
            true,
            &["vs"],
        ),
        res(
            "snapshot.storage.k8s.io",
            "v1",
            "VolumeSnapshotContent",
            "volumesnapshotcontents",
            false,
            &["vsc"],
        ),
        res("example.com", "v1", "Widget", "widgets", true, &["wd"]),
    ])
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Filters builder: `Filters::new().namespaces(&["a"]).build()`.
#[derive(Default)]
struct Filters(BackupFilters);

impl Filters {
    fn new() -> Self {
        Self::default()
    }
    fn namespaces(mut self, inc: &[&str]) -> Self {
        self.0.included_namespaces = strings(inc);
        self
    }
    fn exclude_namespaces(mut self, exc: &[&str]) -> Self {
        self.0.excluded_namespaces = strings(exc);
        self
    }
    fn resources(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_resources = strings(inc);
        self.0.excluded_resources = strings(exc);
        self
    }
    fn cluster_resources(mut self, value: Option<bool>) -> Self {
        self.0.include_cluster_resources = value;
        self
    }
    fn cluster_scoped(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_cluster_scoped_resources = strings(inc);
        self.0.excluded_cluster_scoped_resources = strings(exc);
        self
    }
    fn namespace_scoped(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_namespace_scoped_resources = strings(inc);
        self.0.excluded_namespace_scoped_resources = strings(exc);
        self
    }
    fn selector(mut self, s: LabelSelector) -> Self {
        self.0.label_selector = Some(s);
        self
    }
    fn or_selectors(mut self, s: Vec<LabelSelector>) -> Self {
        self.0.or_label_selectors = Some(s);
        self
    }
    fn selection(self) -> Selection {
        match Selection::new(&self.0, &catalogue()) {
            Ok(s) => s,
            Err(errs) => panic!("unexpected validation errors: {errs:?}"),
        }
    }
    fn errors(self) -> Vec<String> {
        match Selection::new(&self.0, &catalogue()) {
            Ok(_) => Vec::new(),
            Err(errs) => errs,
        }
    }
}

fn type_of(name: &str) -> ApiResource {
    catalogue()
        .resolve(name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not in the test catalogue"))
}

fn object(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    labels: Value,
) -> Value {
    let mut meta = json!({"name": name, "labels": labels});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta})
}

fn included_types(s: &Selection) -> Vec<String> {
    s.resources_to_back_up()
        .iter()
        .map(|r| r.group_resource())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Resource names (§1.1: `resource[.group]`, short names resolved via discovery)

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

// §6.1 discovery order, verbs, subresources, cohabiting types.

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

// ---------------------------------------------------------------------------------------------
// §6.2 namespaces

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

fn ns_object(name: &str, phase: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}, "status": {"phase": phase}})
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

// ---------------------------------------------------------------------------------------------
// §6.3 old-style filter and the includeClusterResources tri-state

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

// ---------------------------------------------------------------------------------------------
// §6.4 scoped filters

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

// §6.5 auto-excludes

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

// §6.6 label selectors

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

// ---------------------------------------------------------------------------------------------
// §6.7 per-item checks

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

// §6.9 CRDs of custom resources

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

// ---------------------------------------------------------------------------------------------
// Validation (§2.2.1)

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
