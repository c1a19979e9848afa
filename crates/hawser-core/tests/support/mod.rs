//! Fixtures shared by the selection tests: a small catalogue and a filters builder.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // not every test file uses every fixture

use hawser_core::selection::{ApiResource, BackupFilters, Catalogue, LabelSelector, Selection};
use serde_json::{Value, json};

pub fn res(
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
pub fn catalogue() -> Catalogue {
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

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Filters builder: `Filters::new().namespaces(&["a"]).build()`.
#[derive(Default)]
pub struct Filters(pub BackupFilters);

impl Filters {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn namespaces(mut self, inc: &[&str]) -> Self {
        self.0.included_namespaces = strings(inc);
        self
    }
    pub fn exclude_namespaces(mut self, exc: &[&str]) -> Self {
        self.0.excluded_namespaces = strings(exc);
        self
    }
    pub fn resources(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_resources = strings(inc);
        self.0.excluded_resources = strings(exc);
        self
    }
    pub fn cluster_resources(mut self, value: Option<bool>) -> Self {
        self.0.include_cluster_resources = value;
        self
    }
    pub fn cluster_scoped(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_cluster_scoped_resources = strings(inc);
        self.0.excluded_cluster_scoped_resources = strings(exc);
        self
    }
    pub fn namespace_scoped(mut self, inc: &[&str], exc: &[&str]) -> Self {
        self.0.included_namespace_scoped_resources = strings(inc);
        self.0.excluded_namespace_scoped_resources = strings(exc);
        self
    }
    pub fn selector(mut self, s: LabelSelector) -> Self {
        self.0.label_selector = Some(s);
        self
    }
    pub fn or_selectors(mut self, s: Vec<LabelSelector>) -> Self {
        self.0.or_label_selectors = Some(s);
        self
    }
    pub fn selection(self) -> Selection {
        match Selection::new(&self.0, &catalogue()) {
            Ok(s) => s,
            Err(errs) => panic!("unexpected validation errors: {errs:?}"),
        }
    }
    pub fn errors(self) -> Vec<String> {
        match Selection::new(&self.0, &catalogue()) {
            Ok(_) => Vec::new(),
            Err(errs) => errs,
        }
    }
}

pub fn type_of(name: &str) -> ApiResource {
    catalogue()
        .resolve(name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not in the test catalogue"))
}

pub fn object(
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

pub fn included_types(s: &Selection) -> Vec<String> {
    s.resources_to_back_up()
        .iter()
        .map(|r| r.group_resource())
        .collect()
}

pub fn ns_object(name: &str, phase: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}, "status": {"phase": phase}})
}
