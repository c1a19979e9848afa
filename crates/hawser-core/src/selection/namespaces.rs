//! Which namespaces a backup lists, and which Namespace objects it keeps (Velero's namespace
//! tracker).

use std::collections::BTreeSet;

use super::glob::has_wildcard;
use super::labels::{CompiledSelector, object_labels};
use super::{EXCLUDE_FROM_BACKUP_LABEL, Selection};

/// Where a backup LISTs namespaced types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceScope {
    /// One cluster-wide LIST per type (the namespace filter includes `*`).
    All,
    /// One LIST per namespace, in this (sorted) order.
    Only(Vec<String>),
}

impl Selection {
    /// Where to LIST namespaced types, given the names of the namespaces that exist. Patterns
    /// in the include list are expanded against `existing`; plain names are kept even when they
    /// do not exist (see [`Selection::missing_included_namespaces`]).
    pub fn namespace_scope(&self, existing: &[String]) -> NamespaceScope {
        if self.namespace_included("*") {
            return NamespaceScope::All;
        }
        let mut names = BTreeSet::new();
        for pattern in self.namespaces.includes.items() {
            if has_wildcard(pattern) {
                names.extend(
                    existing
                        .iter()
                        .filter(|ns| self.namespace_included(ns))
                        .cloned(),
                );
            } else if self.namespace_included(pattern) {
                names.insert(pattern.to_string());
            }
        }
        NamespaceScope::Only(names.into_iter().collect())
    }

    /// Plain (non-pattern) included namespaces that do not exist; Velero logs each as an error,
    /// which makes the backup `PartiallyFailed`.
    pub fn missing_included_namespaces(&self, existing: &[String]) -> Vec<String> {
        self.namespaces
            .includes
            .items()
            .filter(|ns| *ns != "*" && !has_wildcard(ns) && !existing.iter().any(|e| e == ns))
            .map(str::to_string)
            .collect()
    }

    /// A tracker initialised from the listed Namespace objects: a namespace is tracked when it
    /// is `Active` and either its labels match the (OR) label selector(s), or its name passes the
    /// namespace filter — except that with a selector and an everything-namespace filter only
    /// selector matches count.
    pub fn namespace_tracker(&self, namespaces: &[serde_json::Value]) -> NamespaceTracker {
        let mut tracker = NamespaceTracker::default();
        let has_selector = self.single_selector.is_some() || !self.or_selectors.is_empty();
        for ns in namespaces {
            let Some(name) = ns
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
            else {
                continue;
            };
            if ns
                .pointer("/status/phase")
                .and_then(serde_json::Value::as_str)
                != Some("Active")
            {
                continue;
            }
            let labels = object_labels(ns);
            let matches = |s: &CompiledSelector| s.matches(&labels);
            if self.single_selector.as_ref().is_some_and(matches)
                || self.or_selectors.iter().any(matches)
            {
                tracker.track(name);
                continue;
            }
            if self.namespaces.include_everything() && has_selector {
                continue;
            }
            if self.namespace_included(name) {
                tracker.track(name);
            }
        }
        tracker
    }
}

/// Namespaces whose Namespace object goes into the backup: those chosen by
/// [`Selection::namespace_tracker`] plus every namespace an item was backed up from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceTracker {
    tracked: BTreeSet<String>,
}

impl NamespaceTracker {
    /// Records a namespace (call it for each backed-up namespaced item).
    pub fn track(&mut self, namespace: &str) {
        if !namespace.is_empty() && !self.tracked.contains(namespace) {
            self.tracked.insert(namespace.to_string());
        }
    }

    /// Whether the Namespace object `name` is kept.
    pub fn is_tracked(&self, name: &str) -> bool {
        self.tracked.contains(name)
    }

    /// The tracked names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tracked.iter().map(String::as_str)
    }
}

/// Names of the namespaces labelled `velero.io/exclude-from-backup=true`; the server adds them
/// to a backup's `excludedNamespaces` before validating it.
pub fn namespaces_excluded_by_label(namespaces: &[serde_json::Value]) -> Vec<String> {
    namespaces
        .iter()
        .filter(|ns| {
            object_labels(ns)
                .get(EXCLUDE_FROM_BACKUP_LABEL)
                .is_some_and(|v| v == "true")
        })
        .filter_map(|ns| {
            ns.pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
        })
        .map(str::to_string)
        .collect()
}
