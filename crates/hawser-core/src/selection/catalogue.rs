//! The resource catalogue: what discovery says the cluster serves, and how a name a user wrote
//! (`pods`, `pod`, `Pod`, `po`, `deployments.apps`, `deploy.apps`) resolves to one resource.
//!
//! Resolution follows the Kubernetes REST mapper that Velero uses (a short-name expander in front
//! of a priority mapper over discovery):
//!
//! 1. `name` is split at its first `.` into `resource` and `group` (`deployments.apps` →
//!    `deployments`, `apps`); without a dot there is no group constraint.
//! 2. If no resource (in the group, when one was given) has that exact plural or singular name,
//!    short names are tried: first a resource whose short name is `resource` (in exactly that
//!    group, when given), then, when a group was given, one whose group merely starts with it
//!    (`deploy.app` → `deployments.apps`).
//! 3. The (expanded) resource is lower-cased and compared with each resource's plural and
//!    singular name (the singular defaults to the lower-cased kind, so `Deployment` resolves).
//!    When several groups serve the name, the first in catalogue order wins (discovery order puts
//!    the core group first, so `events` is the core `events`).
//!
//! A name that resolves to nothing is kept as written by the filters, so `*.apps` still works as
//! a glob and an unknown name does not silently widen a filter.

use serde::{Deserialize, Serialize};

/// One resource type as served by discovery at its group's preferred version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResource {
    /// API group, `""` for the core group.
    #[serde(default)]
    pub group: String,
    /// Version (the group's preferred version).
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name, e.g. `deployments`.
    pub plural: String,
    /// Singular name; empty means "the lower-cased kind", as the REST mapper guesses.
    #[serde(default)]
    pub singular: String,
    /// Short names, e.g. `["deploy"]`.
    #[serde(default)]
    pub short_names: Vec<String>,
    /// Whether objects of this type live in a namespace.
    pub namespaced: bool,
    /// Verbs the API server supports for the type.
    #[serde(default)]
    pub verbs: Vec<String>,
}

/// The verbs a type must support to be backed up (Velero's discovery filter).
pub const BACKUP_VERBS: [&str; 4] = ["list", "create", "get", "delete"];

impl ApiResource {
    /// Kubernetes `GroupResource.String()`: `pods` for the core group, `deployments.apps` otherwise.
    pub fn group_resource(&self) -> String {
        group_resource(&self.plural, &self.group)
    }

    /// `apiVersion` of objects of this type: `v1`, `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The singular name, or the lower-cased kind when discovery gave none.
    pub fn singular_name(&self) -> String {
        if self.singular.is_empty() {
            self.kind.to_lowercase()
        } else {
            self.singular.clone()
        }
    }

    /// Whether Velero's discovery would back this type up: it supports list, create, get and
    /// delete and is not a subresource.
    pub fn supports_backup(&self) -> bool {
        !self.plural.contains('/')
            && BACKUP_VERBS
                .iter()
                .all(|verb| self.verbs.iter().any(|v| v == verb))
    }
}

/// `GroupResource.String()` of a plural name and a group.
pub fn group_resource(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// Resources served by the cluster, in discovery order (core group first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalogue {
    resources: Vec<ApiResource>,
}

/// Types that two groups serve; Velero backs each up once, from the first group it meets.
const COHABITING: [(&str, &str, &str); 5] = [
    ("deployments", "extensions", "apps"),
    ("daemonsets", "extensions", "apps"),
    ("replicasets", "extensions", "apps"),
    ("networkpolicies", "extensions", "networking.k8s.io"),
    ("events", "", "events.k8s.io"),
];

impl Catalogue {
    /// A catalogue of `resources`, in discovery order.
    pub fn new(resources: Vec<ApiResource>) -> Self {
        Self { resources }
    }

    /// All resources, in the order given.
    pub fn resources(&self) -> &[ApiResource] {
        &self.resources
    }

    /// Resolves a user-written resource name (see the module docs); `None` when nothing matches.
    pub fn resolve(&self, name: &str) -> Option<&ApiResource> {
        let (resource, group) = match name.split_once('.') {
            Some((resource, group)) => (resource, Some(group)),
            None => (name, None),
        };
        let in_group = |r: &ApiResource| group.is_none_or(|g| r.group == g);
        let exact = self
            .resources
            .iter()
            .any(|r| in_group(r) && (r.plural == resource || r.singular == resource));
        let (resource, group) = if exact {
            (resource.to_string(), group.map(str::to_string))
        } else if let Some(r) = self
            .resources
            .iter()
            .find(|r| in_group(r) && r.short_names.iter().any(|s| s == resource))
        {
            (r.plural.clone(), Some(r.group.clone()))
        } else if let Some(r) = group.and_then(|g| {
            self.resources
                .iter()
                .find(|r| r.group.starts_with(g) && r.short_names.iter().any(|s| s == resource))
        }) {
            (r.plural.clone(), Some(r.group.clone()))
        } else {
            (resource.to_string(), group.map(str::to_string))
        };
        let resource = resource.to_lowercase();
        self.resources.iter().find(|r| {
            group.as_deref().is_none_or(|g| r.group == g)
                && (r.plural == resource || r.singular_name() == resource)
        })
    }

    /// The canonical `resource.group` name a filter entry stands for: the resolved type's
    /// [`ApiResource::group_resource`], or the entry unchanged when it resolves to nothing.
    pub fn canonical_name(&self, name: &str) -> String {
        self.resolve(name)
            .map_or_else(|| name.to_string(), ApiResource::group_resource)
    }

    /// The types a backup walks, in the order it walks them: only types that
    /// [support backup](ApiResource::supports_backup), groups in catalogue order with the
    /// `extensions` group last, and within the core group pods, then persistentvolumeclaims,
    /// then persistentvolumes, then the rest in catalogue order.
    pub fn discovery_order(&self) -> Vec<&ApiResource> {
        let mut groups: Vec<&str> = Vec::new();
        for r in &self.resources {
            if !groups.contains(&r.group.as_str()) {
                groups.push(&r.group);
            }
        }
        // A stable sort: only `extensions` moves.
        groups.sort_by_key(|g| *g == "extensions");
        let mut out = Vec::new();
        for group in groups {
            let mut members: Vec<&ApiResource> = self
                .resources
                .iter()
                .filter(|r| r.group == group && r.supports_backup())
                .collect();
            if group.is_empty() {
                members.sort_by_key(|r| core_priority(&r.plural));
            }
            out.extend(members);
        }
        out
    }
}

fn core_priority(plural: &str) -> u8 {
    match plural.to_lowercase().as_str() {
        "pods" => 0,
        "persistentvolumeclaims" => 1,
        "persistentvolumes" => 2,
        _ => 3,
    }
}

/// Tracks the "cohabiting" types (`deployments` in `extensions` and `apps`, `events` in the core
/// group and `events.k8s.io`, …) so that each is backed up from the first group seen only.
#[derive(Debug, Clone, Default)]
pub struct CohabitingTracker {
    seen: Vec<&'static str>,
}

impl CohabitingTracker {
    /// Records that `resource` is about to be backed up; `false` when a cohabiting twin already
    /// was, in which case the caller skips it.
    pub fn first_sighting(&mut self, resource: &ApiResource) -> bool {
        let twin = COHABITING.iter().find(|(plural, g1, g2)| {
            resource.plural == *plural && (resource.group == *g1 || resource.group == *g2)
        });
        match twin {
            Some((plural, _, _)) if self.seen.contains(plural) => false,
            Some((plural, _, _)) => {
                self.seen.push(plural);
                true
            }
            None => true,
        }
    }
}
