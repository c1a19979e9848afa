//! Which archived items a restore restores (velero-compat §7.3, §7.4): the type filter (with the
//! never-restored kinds of §7.1 always excluded), the *source*-namespace filter, the
//! `includeClusterResources` tri-state, label selectors evaluated on the archived labels, and
//! the namespace mapping.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::selection::{
    Catalogue, CompiledSelector, IncludesExcludes, LabelSelector, NAMESPACES, object_labels,
};

/// Types a restore never restores; appended to the exclusions (`spec.excludedResources`).
pub const NON_RESTORABLE: [&str; 9] = [
    "nodes",
    "events",
    "events.events.k8s.io",
    "backups.velero.io",
    "restores.velero.io",
    "resticrepositories.velero.io",
    "csinodes.storage.k8s.io",
    "volumeattachments.storage.k8s.io",
    "backuprepositories.velero.io",
];

/// The server's own control objects: a restore never creates them, whatever its filters, and
/// says so in a warning when the filters would have selected some. Restored from a bucket, such
/// an object would set this server to work (delete a backup, send files away, run a schedule,
/// add a location, move volume data).
pub const CONTROL_TYPES: [&str; 11] = [
    "deletebackuprequests.velero.io",
    "downloadrequests.velero.io",
    "serverstatusrequests.velero.io",
    "schedules.velero.io",
    "backupstoragelocations.velero.io",
    "volumesnapshotlocations.velero.io",
    "backuprepositories.velero.io",
    "podvolumebackups.velero.io",
    "podvolumerestores.velero.io",
    "datauploads.velero.io",
    "datadownloads.velero.io",
];

/// Types that bypass the type and namespace filters and the selectors (Velero's must-have
/// list); cluster-scoped ones still follow `includeClusterResources`.
pub const FILTER_BYPASS: [&str; 2] = [
    "datauploads.velero.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
];

/// Annotation that forces status restore on (`"true"`) or off (`"false"`) for one object.
pub const RESTORE_STATUS_ANNOTATION: &str = "velero.io/restore-status";

/// `spec.restoreStatus`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatusFilter {
    /// Types whose status is restored.
    #[serde(default)]
    pub included_resources: Vec<String>,
    /// Types whose status is not restored.
    #[serde(default)]
    pub excluded_resources: Vec<String>,
}

/// The fields of a Restore spec that decide what is restored and how. Deserialises from the
/// spec JSON directly (`null` lists read as empty); other fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreFilters {
    /// `includedNamespaces`; empty = all.
    #[serde(default, deserialize_with = "null_default")]
    pub included_namespaces: Vec<String>,
    /// `excludedNamespaces`.
    #[serde(default, deserialize_with = "null_default")]
    pub excluded_namespaces: Vec<String>,
    /// `includedResources`; empty = all.
    #[serde(default, deserialize_with = "null_default")]
    pub included_resources: Vec<String>,
    /// `excludedResources`.
    #[serde(default, deserialize_with = "null_default")]
    pub excluded_resources: Vec<String>,
    /// `includeClusterResources` (`None` = auto).
    #[serde(default)]
    pub include_cluster_resources: Option<bool>,
    /// `namespaceMapping`: source namespace → target namespace.
    #[serde(default, deserialize_with = "null_default")]
    pub namespace_mapping: BTreeMap<String, String>,
    /// `labelSelector`.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// `orLabelSelectors`.
    #[serde(default)]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
    /// `restoreStatus`.
    #[serde(default)]
    pub restore_status: Option<RestoreStatusFilter>,
    /// `preserveNodePorts`.
    #[serde(default)]
    pub preserve_node_ports: Option<bool>,
    /// `existingResourcePolicy`: `none`, `update` or empty.
    #[serde(default)]
    pub existing_resource_policy: Option<String>,
}

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Why an archived item is not restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSkip {
    /// Its type is excluded (or not included).
    TypeExcluded,
    /// Its source namespace is excluded.
    NamespaceExcluded,
    /// It is cluster-scoped and cluster resources are not restored.
    ClusterResourcesExcluded,
    /// Its archived labels do not match the selector(s).
    LabelsDoNotMatch,
    /// The filters select it, but it is one of the [`CONTROL_TYPES`].
    ControlType,
}

impl FilterSkip {
    /// Stable short name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TypeExcluded => "type_excluded",
            Self::NamespaceExcluded => "namespace_excluded",
            Self::ClusterResourcesExcluded => "cluster_resources_excluded",
            Self::LabelsDoNotMatch => "labels_do_not_match",
            Self::ControlType => "control_type",
        }
    }
}

/// A validated, resolved selection for one restore.
#[derive(Debug, Clone)]
pub struct RestoreSelection {
    types: IncludesExcludes,
    namespaces: IncludesExcludes,
    include_cluster_resources: Option<bool>,
    selector: Option<CompiledSelector>,
    or_selectors: Vec<CompiledSelector>,
    status_types: IncludesExcludes,
    restore_status_set: bool,
    mapping: BTreeMap<String, String>,
}

impl RestoreSelection {
    /// Validates `filters` ([`super::validate`]) and resolves type names through `catalogue`.
    pub fn new(filters: &RestoreFilters, catalogue: &Catalogue) -> Result<Self, Vec<String>> {
        let errs = super::validate::validate(filters, catalogue);
        if !errs.is_empty() {
            return Err(errs);
        }
        let resolve = |list: &[String]| -> Vec<String> {
            list.iter()
                .map(|e| {
                    if e == "*" {
                        e.clone()
                    } else {
                        catalogue.canonical_name(e)
                    }
                })
                .collect()
        };
        let mut excluded = resolve(&filters.excluded_resources);
        excluded.extend(NON_RESTORABLE.iter().map(|s| (*s).to_string()));
        let types = IncludesExcludes::new(&resolve(&filters.included_resources), &excluded);
        let namespaces =
            IncludesExcludes::new(&filters.included_namespaces, &filters.excluded_namespaces);
        // Validation has compiled these once already; failures cannot occur here.
        let selector = filters
            .label_selector
            .as_ref()
            .and_then(|s| s.compile().ok());
        let or_selectors = filters
            .or_label_selectors
            .iter()
            .flatten()
            .filter_map(|s| s.compile().ok())
            .collect();
        let status = filters.restore_status.clone().unwrap_or_default();
        Ok(Self {
            types,
            namespaces,
            include_cluster_resources: filters.include_cluster_resources,
            selector,
            or_selectors,
            status_types: IncludesExcludes::new(
                &resolve(&status.included_resources),
                &resolve(&status.excluded_resources),
            ),
            restore_status_set: filters.restore_status.is_some(),
            mapping: filters.namespace_mapping.clone(),
        })
    }

    /// Whether the type (a canonical `resource.group`) is restored at all.
    pub fn type_included(&self, group_resource: &str) -> bool {
        FILTER_BYPASS.contains(&group_resource) || self.types.should_include(group_resource)
    }

    /// Whether items of the *source* namespace `namespace` are restored.
    pub fn namespace_included(&self, namespace: &str) -> bool {
        self.namespaces.should_include(namespace)
    }

    /// Whether an item the filters left out for `skip` is still restored when a restored item
    /// needs it (see [`super::additional`]): as in Velero, additional items pass by the label
    /// selectors, and a cluster-scoped one needs only `includeClusterResources` not `false`.
    pub fn admits_as_additional(&self, skip: FilterSkip) -> bool {
        match skip {
            FilterSkip::LabelsDoNotMatch => true,
            FilterSkip::ClusterResourcesExcluded => self.include_cluster_resources != Some(false),
            _ => false,
        }
    }

    /// Whether cluster-scoped items are restored (the tri-state: nil = only when the namespace
    /// filter includes everything).
    pub fn cluster_resources_included(&self) -> bool {
        self.include_cluster_resources
            .unwrap_or_else(|| self.namespaces.include_everything())
    }

    /// Whether the archived labels of `obj` match the selector(s).
    pub fn labels_match(&self, obj: &serde_json::Value) -> bool {
        let labels = object_labels(obj);
        if !self.or_selectors.is_empty() {
            return self.or_selectors.iter().any(|s| s.matches(&labels));
        }
        self.selector.as_ref().is_none_or(|s| s.matches(&labels))
    }

    /// The filter decision for an archived item of type `group_resource`, archived in source
    /// namespace `namespace` (`None` for cluster-scoped items). A `Namespace` object is
    /// filtered by the namespace filter on its own name, whatever `includeClusterResources`.
    /// An item the filters select that is one of the [`CONTROL_TYPES`] is
    /// [`FilterSkip::ControlType`].
    pub fn check_item(
        &self,
        group_resource: &str,
        namespace: Option<&str>,
        obj: &serde_json::Value,
    ) -> Result<(), FilterSkip> {
        self.filter_item(group_resource, namespace, obj)?;
        if CONTROL_TYPES.contains(&group_resource) {
            return Err(FilterSkip::ControlType);
        }
        Ok(())
    }

    fn filter_item(
        &self,
        group_resource: &str,
        namespace: Option<&str>,
        obj: &serde_json::Value,
    ) -> Result<(), FilterSkip> {
        if FILTER_BYPASS.contains(&group_resource) {
            // As in Velero, the must-have types skip the type and namespace filters and the
            // selectors, but a cluster-scoped one still needs cluster resources included.
            return match namespace {
                None if !self.cluster_resources_included() => {
                    Err(FilterSkip::ClusterResourcesExcluded)
                }
                _ => Ok(()),
            };
        }
        if !self.type_included(group_resource) {
            return Err(FilterSkip::TypeExcluded);
        }
        match namespace {
            Some(ns) if !self.namespace_included(ns) => return Err(FilterSkip::NamespaceExcluded),
            Some(_) => {}
            None if group_resource == NAMESPACES => {
                let name = obj
                    .pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("");
                if !self.namespace_included(name) {
                    return Err(FilterSkip::NamespaceExcluded);
                }
            }
            None if !self.cluster_resources_included() => {
                return Err(FilterSkip::ClusterResourcesExcluded);
            }
            None => {}
        }
        if !self.labels_match(obj) {
            return Err(FilterSkip::LabelsDoNotMatch);
        }
        Ok(())
    }

    /// The target namespace of source namespace `source`.
    pub fn target_namespace<'a>(&'a self, source: &'a str) -> &'a str {
        self.mapping.get(source).map_or(source, String::as_str)
    }

    /// Whether the status of `obj` (of type `group_resource`) is restored: the object's
    /// [`RESTORE_STATUS_ANNOTATION`] decides when it says `true` or `false`; otherwise the type
    /// must be included by `spec.restoreStatus` (absent = no status restored).
    pub fn restores_status(&self, group_resource: &str, obj: &serde_json::Value) -> bool {
        let annotation = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(RESTORE_STATUS_ANNOTATION))
            .and_then(serde_json::Value::as_str);
        match annotation {
            Some("true") => true,
            Some("false") => false,
            _ => self.restore_status_set && self.status_types.should_include(group_resource),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "filters_tests.rs"]
mod tests;
