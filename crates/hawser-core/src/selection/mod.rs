//! Backup item selection, as Velero does it (velero-compat §6).
//!
//! Pipeline: the caller deserialises the Backup spec into [`BackupFilters`] (adding the
//! namespaces labelled `velero.io/exclude-from-backup=true`, see
//! [`namespaces_excluded_by_label`]) and builds a [`Catalogue`] from discovery;
//! [`Selection::new`] validates the filters (Velero's messages, in Velero's order) and resolves
//! every resource name against the catalogue. The selection then answers, without I/O:
//!
//! * which types to walk and in which order ([`Selection::resources_to_back_up`]),
//! * where to LIST them ([`Selection::namespace_scope`]) and with which label selectors
//!   ([`Selection::list_label_selectors`]),
//! * whether one item is kept ([`Selection::check_item`], the per-item checks of §6.7),
//! * which Namespace objects are kept ([`Selection::namespace_tracker`]),
//! * in which order listed items of one type go ([`sort_by_order`], `spec.orderedResources`),
//! * which items the listed ones bring with them ([`related`], Velero's built-in item actions).
//!
//! Resource filters come in two styles. The old style (`includedResources`,
//! `excludedResources`, `includeClusterResources`) is used when any of those is set; otherwise
//! the scoped style (the four `…ScopedResources` lists). Setting both is a validation error.
//!
//! Where Velero's code and its documented behaviour part, hawser follows the documentation:
//!
//! * The server's auto-excludes ([`AUTO_EXCLUDED_RESOURCES`]) are added to the exclude lists but
//!   do not count as user-written excludes when deciding whether a filter-free backup is a full
//!   backup, so a backup without filters takes every cluster-scoped type. (Velero appends them to
//!   the spec lists first, which makes its "both cluster lists empty" test fail.)
//! * Naming an auto-excluded type in an include list does not empty that list (Velero deletes
//!   the name from the includes, which turns "only volumesnapshots" into "everything else").
//! * An invalid label selector is a validation error (Velero sends it to the API server and
//!   fails each LIST).
//! * A resource pattern that does not compile, or passes the limits of [`Glob`], is a
//!   validation error naming it (Velero keeps it, and it makes its whole list match nothing).
//! * Namespace patterns are matched as globs instead of being expanded against the live
//!   namespace list first; membership is the same, except that a pattern matching no namespace
//!   never turns the filter into "all namespaces" for the cluster-scoped-type decision.

mod catalogue;
mod filter;
mod glob;
mod labels;
mod namespaces;
mod ordered;
pub mod policies;
pub mod related;
pub(crate) mod validate;
pub mod volume_policies;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

pub use catalogue::{ApiResource, BACKUP_VERBS, Catalogue, CohabitingTracker, group_resource};
pub use filter::{IncludesExcludes, NAMESPACES, ResourceFilter};
pub use glob::{
    Glob, GlobError, GlobSet, MAX_NESTING, MAX_PATTERN_LEN, MAX_PATTERNS_PER_LIST, excerpt,
    has_wildcard,
};
pub use labels::{CompiledSelector, LabelSelector, LabelSelectorRequirement, object_labels};
pub use namespaces::{NamespaceScope, NamespaceTracker, namespaces_excluded_by_label};
pub use ordered::{Ordered, order_for_type, sort_by_order};
pub use validate::{
    BOTH_SELECTORS_MESSAGE, MIXED_FILTERS_MESSAGE, POLICY_WITH_OLD_FILTERS_MESSAGE, validate,
};

use filter::ResourceLists;

/// Label that excludes an item (or, on a Namespace, a whole namespace) from backups.
pub const EXCLUDE_FROM_BACKUP_LABEL: &str = "velero.io/exclude-from-backup";
/// Annotation on an action-returned item that skips the exclusion checks.
pub const MUST_INCLUDE_ADDITIONAL_ITEMS_ANNOTATION: &str =
    "backup.velero.io/must-include-additional-items";
/// Types the server always excludes from collection (CSI actions produce them instead).
pub const AUTO_EXCLUDED_RESOURCES: [&str; 2] = [
    "volumesnapshots.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
];
/// The CRD type's canonical name.
pub const CUSTOM_RESOURCE_DEFINITIONS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// The selection fields of a Backup spec (velero-compat §1.1). Deserialises from the spec JSON
/// directly; other fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupFilters {
    /// `includedNamespaces`; empty = all.
    #[serde(default)]
    pub included_namespaces: Vec<String>,
    /// `excludedNamespaces`.
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    /// `includedResources` (old style).
    #[serde(default)]
    pub included_resources: Vec<String>,
    /// `excludedResources` (old style).
    #[serde(default)]
    pub excluded_resources: Vec<String>,
    /// `includeClusterResources` (old style tri-state; `None` = auto).
    #[serde(default)]
    pub include_cluster_resources: Option<bool>,
    /// `includedClusterScopedResources`.
    #[serde(default)]
    pub included_cluster_scoped_resources: Vec<String>,
    /// `excludedClusterScopedResources`.
    #[serde(default)]
    pub excluded_cluster_scoped_resources: Vec<String>,
    /// `includedNamespaceScopedResources`.
    #[serde(default)]
    pub included_namespace_scoped_resources: Vec<String>,
    /// `excludedNamespaceScopedResources`.
    #[serde(default)]
    pub excluded_namespace_scoped_resources: Vec<String>,
    /// `labelSelector`.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// `orLabelSelectors`.
    #[serde(default)]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
}

impl BackupFilters {
    /// Whether any old-style resource filter is set (then the old style is used).
    pub fn uses_old_filters(&self) -> bool {
        self.include_cluster_resources.is_some()
            || !self.included_resources.is_empty()
            || !self.excluded_resources.is_empty()
    }

    /// Whether any scoped resource filter is set.
    pub fn uses_new_filters(&self) -> bool {
        !self.included_cluster_scoped_resources.is_empty()
            || !self.excluded_cluster_scoped_resources.is_empty()
            || !self.included_namespace_scoped_resources.is_empty()
            || !self.excluded_namespace_scoped_resources.is_empty()
    }
}

/// The include/exclude part of a resource-policy ConfigMap (`spec.resourcePolicy`); merged into
/// scoped filters with lower priority than the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncludeExcludePolicy {
    /// `includedClusterScopedResources`.
    #[serde(default)]
    pub included_cluster_scoped_resources: Vec<String>,
    /// `excludedClusterScopedResources`.
    #[serde(default)]
    pub excluded_cluster_scoped_resources: Vec<String>,
    /// `includedNamespaceScopedResources`.
    #[serde(default)]
    pub included_namespace_scoped_resources: Vec<String>,
    /// `excludedNamespaceScopedResources`.
    #[serde(default)]
    pub excluded_namespace_scoped_resources: Vec<String>,
}

/// Why an item is left out of a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Labelled `velero.io/exclude-from-backup=true`.
    ExcludedByLabel,
    /// Its namespace is not included.
    NamespaceExcluded,
    /// Cluster-scoped and its type is excluded.
    ClusterTypeExcluded,
    /// Namespaced and its type is not included.
    TypeNotIncluded,
    /// `metadata.deletionTimestamp` is set.
    BeingDeleted,
    /// The same apiVersion/Kind, namespace and name was already backed up.
    AlreadyBackedUp,
}

impl SkipReason {
    /// Stable short text for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExcludedByLabel => "excluded-by-label",
            Self::NamespaceExcluded => "namespace-excluded",
            Self::ClusterTypeExcluded => "cluster-type-excluded",
            Self::TypeNotIncluded => "type-not-included",
            Self::BeingDeleted => "being-deleted",
            Self::AlreadyBackedUp => "already-backed-up",
        }
    }
}

/// A validated, resolved selection (see the module docs).
#[derive(Debug, Clone)]
pub struct Selection {
    catalogue: Catalogue,
    namespaces: IncludesExcludes,
    resources: ResourceFilter,
    single_selector: Option<CompiledSelector>,
    or_selectors: Vec<CompiledSelector>,
}

/// What is wrong with `policy` (a resource policy's include/exclude part) for a backup with
/// `filters`: old-style filters beside it, and malformed patterns in it.
pub fn policy_errors(
    filters: &BackupFilters,
    policy: Option<&IncludeExcludePolicy>,
) -> Vec<String> {
    let Some(policy) = policy else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if filters.uses_old_filters() {
        errs.push(POLICY_WITH_OLD_FILTERS_MESSAGE.to_string());
    }
    errs.extend(validate::policy_patterns(policy));
    errs
}

impl Selection {
    /// Validates `filters` and resolves them against `catalogue`. The error holds every
    /// validation message (the Backup's `status.validationErrors`).
    pub fn new(filters: &BackupFilters, catalogue: &Catalogue) -> Result<Self, Vec<String>> {
        Self::with_policy(filters, catalogue, None)
    }

    /// Like [`Selection::new`], merging the include/exclude policy of the backup's resource
    /// policy ConfigMap when there is one. A policy together with old-style filters is a
    /// validation error.
    pub fn with_policy(
        filters: &BackupFilters,
        catalogue: &Catalogue,
        policy: Option<&IncludeExcludePolicy>,
    ) -> Result<Self, Vec<String>> {
        let mut errs = validate(filters);
        errs.extend(policy_errors(filters, policy));
        if !errs.is_empty() {
            return Err(errs);
        }
        let namespaces =
            IncludesExcludes::new(&filters.included_namespaces, &filters.excluded_namespaces);
        let lists = ResourceLists {
            old_style: filters.uses_old_filters(),
            included: &filters.included_resources,
            excluded: &filters.excluded_resources,
            include_cluster_resources: filters.include_cluster_resources,
            included_cluster: &filters.included_cluster_scoped_resources,
            excluded_cluster: &filters.excluded_cluster_scoped_resources,
            included_namespaced: &filters.included_namespace_scoped_resources,
            excluded_namespaced: &filters.excluded_namespace_scoped_resources,
        };
        let mut resources = ResourceFilter::build(
            catalogue,
            &lists,
            namespaces.include_everything(),
            &AUTO_EXCLUDED_RESOURCES,
        );
        if let Some(policy) = policy {
            resources.combine_with_policy(catalogue, policy);
        }
        // Validation compiled every selector already; a failure here cannot happen, but an
        // error is still reported rather than assumed away.
        let compile = |s: &LabelSelector| s.compile().map_err(|e| vec![e]);
        let or_selectors: Vec<CompiledSelector> = filters
            .or_label_selectors
            .iter()
            .flatten()
            .map(compile)
            .collect::<Result<_, _>>()?;
        let single_selector = filters.label_selector.as_ref().map(compile).transpose()?;
        Ok(Self {
            catalogue: catalogue.clone(),
            namespaces,
            resources,
            single_selector,
            or_selectors,
        })
    }

    /// The catalogue the selection was resolved against.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The resolved resource filter.
    pub fn resource_filter(&self) -> &ResourceFilter {
        &self.resources
    }

    /// Whether the namespace filter passes `name` (glob patterns, excludes win).
    pub fn namespace_included(&self, name: &str) -> bool {
        self.namespaces.should_include(name)
    }

    /// Whether the namespace filter includes everything (no excludes, includes empty or `*`).
    pub fn all_namespaces(&self) -> bool {
        self.namespaces.include_everything()
    }

    /// Whether objects of type `r` are listed and backed up.
    pub fn resource_included(&self, r: &ApiResource) -> bool {
        self.resources.should_include(r)
    }

    /// Like [`Selection::resource_included`] for a name in any accepted form; `false` for a type
    /// the catalogue does not know.
    pub fn type_included(&self, name: &str) -> bool {
        self.catalogue
            .resolve(name)
            .is_some_and(|r| self.resources.should_include(r))
    }

    /// Whether type `r` is explicitly excluded (applied to cluster-scoped action items).
    pub fn resource_excluded(&self, r: &ApiResource) -> bool {
        self.resources.should_exclude(r)
    }

    /// The types to walk, in order: [`Catalogue::discovery_order`], filtered by
    /// [`Selection::resource_included`], each cohabiting type once.
    pub fn resources_to_back_up(&self) -> Vec<&ApiResource> {
        let mut cohabiting = CohabitingTracker::default();
        self.catalogue
            .discovery_order()
            .into_iter()
            .filter(|r| self.resources.should_include(r) && cohabiting.first_sighting(r))
            .collect()
    }

    /// Whether the CRD of every backed-up custom resource is added to the backup: only when
    /// CRDs are neither explicitly excluded nor included.
    pub fn adds_crds_of_custom_resources(&self) -> bool {
        self.catalogue
            .resolve(CUSTOM_RESOURCE_DEFINITIONS)
            .is_some_and(|crd| {
                !self.resources.should_exclude(crd) && !self.resources.should_include(crd)
            })
    }

    /// The `labelSelector` values of the LISTs of one type: one per OR selector, else the single
    /// selector, else one unfiltered LIST (`""`).
    pub fn list_label_selectors(&self) -> Vec<String> {
        if !self.or_selectors.is_empty() {
            return self
                .or_selectors
                .iter()
                .map(CompiledSelector::to_query)
                .collect();
        }
        vec![
            self.single_selector
                .as_ref()
                .map(CompiledSelector::to_query)
                .unwrap_or_default(),
        ]
    }

    /// Whether `obj`'s labels satisfy the selectors (what the API server does for the LISTs).
    pub fn labels_match(&self, obj: &serde_json::Value) -> bool {
        let labels = object_labels(obj);
        if !self.or_selectors.is_empty() {
            return self.or_selectors.iter().any(|s| s.matches(&labels));
        }
        self.single_selector
            .as_ref()
            .is_none_or(|s| s.matches(&labels))
    }

    /// The per-item checks of §6.7 for `obj` of type `r`. `must_include` is set for
    /// action-returned items annotated `backup.velero.io/must-include-additional-items=true`;
    /// it skips every check except the deletion one. The duplicate check is
    /// [`BackedUpItems::insert`].
    pub fn check_item(
        &self,
        r: &ApiResource,
        obj: &serde_json::Value,
        must_include: bool,
    ) -> Result<(), SkipReason> {
        if !must_include {
            if object_labels(obj)
                .get(EXCLUDE_FROM_BACKUP_LABEL)
                .is_some_and(|v| v == "true")
            {
                return Err(SkipReason::ExcludedByLabel);
            }
            let namespace = obj
                .pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            if !namespace.is_empty() && !self.namespace_included(namespace) {
                return Err(SkipReason::NamespaceExcluded);
            }
            if namespace.is_empty()
                && r.group_resource() != NAMESPACES
                && self.resources.should_exclude(r)
            {
                return Err(SkipReason::ClusterTypeExcluded);
            }
            if !namespace.is_empty() && !self.resources.should_include(r) {
                return Err(SkipReason::TypeNotIncluded);
            }
        }
        if obj
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Err(SkipReason::BeingDeleted);
        }
        Ok(())
    }

    /// `true` when [`Selection::check_item`] passes.
    pub fn item_included(&self, r: &ApiResource, obj: &serde_json::Value) -> bool {
        self.check_item(r, obj, false).is_ok()
    }
}

/// Items already written to a backup, keyed by apiVersion/Kind, namespace and name.
#[derive(Debug, Clone, Default)]
pub struct BackedUpItems {
    seen: HashSet<(String, String, String)>,
}

impl BackedUpItems {
    /// Records `obj`; `Err(AlreadyBackedUp)` when it was recorded before.
    pub fn insert(&mut self, obj: &serde_json::Value) -> Result<(), SkipReason> {
        let field = |p: &str| {
            obj.pointer(p)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let key = (
            format!("{}/{}", field("/apiVersion"), field("/kind")),
            field("/metadata/namespace"),
            field("/metadata/name"),
        );
        if self.seen.insert(key) {
            Ok(())
        } else {
            Err(SkipReason::AlreadyBackedUp)
        }
    }

    /// Number of distinct items recorded.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}
