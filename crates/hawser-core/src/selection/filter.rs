//! Include/exclude lists and the two resource-type filters (the old `includedResources` style
//! and the new scoped style), with Velero's exact decision rules.

use super::IncludeExcludePolicy;
use super::catalogue::{ApiResource, Catalogue};
use super::glob::GlobSet;

/// The `namespaces` type's canonical name.
pub const NAMESPACES: &str = "namespaces";

/// An include list and an exclude list of glob patterns. An empty include list, or one holding
/// `*`, includes everything; an exclude match always wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncludesExcludes {
    /// Include patterns.
    pub includes: GlobSet,
    /// Exclude patterns.
    pub excludes: GlobSet,
}

impl IncludesExcludes {
    /// Lists as given, without resolving names.
    pub fn new(includes: &[String], excludes: &[String]) -> Self {
        Self {
            includes: GlobSet::from_items(includes.iter().cloned()),
            excludes: GlobSet::from_items(excludes.iter().cloned()),
        }
    }

    /// Velero's `ShouldInclude`.
    pub fn should_include(&self, name: &str) -> bool {
        if self.excludes.matches(name) {
            return false;
        }
        self.includes.is_empty() || self.includes.has("*") || self.includes.matches(name)
    }

    /// Velero's `IncludeEverything`: no excludes and includes empty or exactly `*`.
    pub fn include_everything(&self) -> bool {
        self.excludes.is_empty()
            && (self.includes.is_empty() || (self.includes.len() == 1 && self.includes.has("*")))
    }
}

/// Resolves the entries of an old-style resource list: `*` stays (in includes; it is dropped
/// from excludes), every other entry becomes its canonical `resource.group`.
fn resolve_old(
    catalogue: &Catalogue,
    includes: &[String],
    excludes: &[String],
) -> IncludesExcludes {
    let mut out = IncludesExcludes::default();
    for item in includes {
        if item == "*" {
            out.includes.insert("*");
        } else {
            out.includes.insert(catalogue.canonical_name(item));
        }
    }
    for item in excludes.iter().filter(|item| *item != "*") {
        out.excludes.insert(catalogue.canonical_name(item));
    }
    out
}

/// Resolves the entries of a scoped list: `*` stays, a name of the other scope is dropped, an
/// unknown name stays as written.
fn resolve_scoped(catalogue: &Catalogue, items: &[String], namespaced: bool) -> GlobSet {
    let mut out = GlobSet::default();
    for item in items {
        if item == "*" {
            out.insert("*");
            continue;
        }
        match catalogue.resolve(item) {
            Some(r) if r.namespaced != namespaced => {}
            Some(r) => out.insert(r.group_resource()),
            None => out.insert(item.clone()),
        }
    }
    out
}

/// The resource-type filter of a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceFilter {
    /// `includedResources`/`excludedResources`/`includeClusterResources`.
    Old {
        /// Resolved include/exclude lists (auto-excludes added to the excludes).
        filter: IncludesExcludes,
        /// The tri-state: `None` = auto.
        include_cluster_resources: Option<bool>,
        /// Whether the namespace filter includes everything (decides "auto").
        all_namespaces: bool,
    },
    /// The four scoped lists.
    Scoped {
        /// Namespace-scoped types (auto-excludes added to the excludes).
        namespaced: IncludesExcludes,
        /// Cluster-scoped types (auto-excludes added to the excludes).
        cluster: IncludesExcludes,
        /// Whether every cluster type is taken: both cluster lists were empty and both the
        /// namespace filter and the namespaced-type filter (as the user wrote them) include
        /// everything.
        full_backup: bool,
    },
}

/// Inputs of [`ResourceFilter::build`], the user's lists as written.
pub(super) struct ResourceLists<'a> {
    pub old_style: bool,
    pub included: &'a [String],
    pub excluded: &'a [String],
    pub include_cluster_resources: Option<bool>,
    pub included_cluster: &'a [String],
    pub excluded_cluster: &'a [String],
    pub included_namespaced: &'a [String],
    pub excluded_namespaced: &'a [String],
}

impl ResourceFilter {
    pub(super) fn build(
        catalogue: &Catalogue,
        lists: &ResourceLists<'_>,
        all_namespaces: bool,
        auto_excluded: &[&str],
    ) -> Self {
        if lists.old_style {
            let mut filter = resolve_old(catalogue, lists.included, lists.excluded);
            for name in auto_excluded {
                filter.excludes.insert(*name);
            }
            return Self::Old {
                filter,
                include_cluster_resources: lists.include_cluster_resources,
                all_namespaces,
            };
        }
        let mut namespaced = IncludesExcludes {
            includes: resolve_scoped(catalogue, lists.included_namespaced, true),
            excludes: resolve_scoped(catalogue, lists.excluded_namespaced, true),
        };
        let mut cluster = IncludesExcludes {
            includes: resolve_scoped(catalogue, lists.included_cluster, false),
            excludes: resolve_scoped(catalogue, lists.excluded_cluster, false),
        };
        let full_backup = cluster.includes.is_empty()
            && cluster.excludes.is_empty()
            && all_namespaces
            && namespaced.include_everything();
        for name in auto_excluded {
            match catalogue.resolve(name) {
                Some(r) if r.namespaced => namespaced.excludes.insert(*name),
                Some(_) => cluster.excludes.insert(*name),
                None => {
                    namespaced.excludes.insert(*name);
                    cluster.excludes.insert(*name);
                }
            }
        }
        Self::Scoped {
            namespaced,
            cluster,
            full_backup,
        }
    }

    /// Merges a resource policy's include/exclude lists in, with lower priority than the spec:
    /// an entry is added only when neither list of its scope already matches it. Only the scoped
    /// style takes policies (validation rejects them with old-style filters). An added entry
    /// ends a full backup, as a spec entry would.
    pub(super) fn combine_with_policy(
        &mut self,
        catalogue: &Catalogue,
        policy: &IncludeExcludePolicy,
    ) {
        let Self::Scoped {
            namespaced,
            cluster,
            full_backup,
        } = self
        else {
            return;
        };
        let lists = [
            (&policy.excluded_namespace_scoped_resources, true, true),
            (&policy.included_namespace_scoped_resources, true, false),
            (&policy.excluded_cluster_scoped_resources, false, true),
            (&policy.included_cluster_scoped_resources, false, false),
        ];
        for (items, is_namespaced, into_excludes) in lists {
            let target = if is_namespaced {
                &mut *namespaced
            } else {
                &mut *cluster
            };
            let names: Vec<String> = resolve_scoped(catalogue, items, is_namespaced)
                .items()
                .map(str::to_string)
                .collect();
            for name in names {
                if target.includes.matches(&name) || target.excludes.matches(&name) {
                    continue;
                }
                if into_excludes {
                    target.excludes.insert(name);
                } else {
                    target.includes.insert(name);
                }
                *full_backup = false;
            }
        }
    }

    /// Whether objects of type `r` are listed and backed up (Velero's `ShouldInclude`).
    pub fn should_include(&self, r: &ApiResource) -> bool {
        let name = r.group_resource();
        match self {
            Self::Old {
                filter,
                include_cluster_resources,
                all_namespaces,
            } => {
                if !r.namespaced && *include_cluster_resources == Some(false) {
                    return false;
                }
                if name != NAMESPACES
                    && !r.namespaced
                    && include_cluster_resources.is_none()
                    && !all_namespaces
                {
                    return false;
                }
                filter.should_include(&name)
            }
            Self::Scoped {
                namespaced,
                cluster,
                full_backup,
            } => {
                if r.namespaced {
                    if namespaced.excludes.has("*") || namespaced.excludes.matches(&name) {
                        return false;
                    }
                    return namespaced.includes.is_empty()
                        || namespaced.includes.has("*")
                        || namespaced.includes.matches(&name);
                }
                if cluster.excludes.has("*") || cluster.excludes.matches(&name) {
                    return false;
                }
                if *full_backup {
                    return true;
                }
                cluster.includes.has("*") || cluster.includes.matches(&name) || name == NAMESPACES
            }
        }
    }

    /// Whether the type is explicitly excluded (Velero's `ShouldExclude`), the test applied to
    /// cluster-scoped items that actions pull in.
    pub fn should_exclude(&self, r: &ApiResource) -> bool {
        let name = r.group_resource();
        match self {
            Self::Old {
                filter,
                include_cluster_resources,
                ..
            } => {
                if filter.excludes.matches(&name) {
                    return true;
                }
                if !r.namespaced {
                    if *include_cluster_resources == Some(false) {
                        return true;
                    }
                    if include_cluster_resources.is_none() && !filter.should_include(&name) {
                        return true;
                    }
                }
                false
            }
            Self::Scoped {
                namespaced,
                cluster,
                ..
            } => {
                if r.namespaced {
                    namespaced.excludes.matches(&name)
                } else {
                    cluster.excludes.matches(&name)
                }
            }
        }
    }
}
