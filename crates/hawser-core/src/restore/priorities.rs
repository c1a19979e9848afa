//! `--restore-resource-priorities`: the types a restore walks first (high) and last (low).
//!
//! The flag's string form is a comma-separated list in which a lone `-` separates the high list
//! from the low list (`a,b,-,c`); without `-` every entry is high. Entries are resolved through
//! the [`Catalogue`] (so `volumesnapshotclass.snapshot.storage.k8s.io` maps to the plural the
//! cluster serves); an entry that resolves to nothing is used as written.

use crate::selection::Catalogue;

/// Velero's default high-priority list, in order.
pub const DEFAULT_HIGH: [&str; 23] = [
    "customresourcedefinitions",
    "namespaces",
    "storageclasses",
    "volumesnapshotclass.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
    "volumesnapshots.snapshot.storage.k8s.io",
    "datauploads.velero.io",
    "persistentvolumes",
    "persistentvolumeclaims",
    "clusterroles",
    "roles",
    "serviceaccounts",
    "clusterrolebindings",
    "rolebindings",
    "secrets",
    "configmaps",
    "limitranges",
    "priorityclasses",
    "pods",
    "replicasets.apps",
    "clusterclasses.cluster.x-k8s.io",
    "endpoints",
    "services",
];

/// Velero's default low-priority list, in order.
pub const DEFAULT_LOW: [&str; 5] = [
    "clusterbootstraps.run.tanzu.vmware.com",
    "clusters.cluster.x-k8s.io",
    "clusterresourcesets.addons.cluster.x-k8s.io",
    "apps.kappctrl.k14s.io",
    "packageinstalls.packaging.carvel.dev",
];

/// A priority flag that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrioritiesError {
    /// More than one `-` separator.
    #[error("invalid restore resource priorities {flag:?}: more than one \"-\" separator")]
    TwoSeparators {
        /// The flag as given.
        flag: String,
    },
    /// An empty entry (`a,,b`).
    #[error("invalid restore resource priorities {flag:?}: empty entry")]
    EmptyEntry {
        /// The flag as given.
        flag: String,
    },
    /// The same entry twice.
    #[error("invalid restore resource priorities {flag:?}: {entry:?} is listed twice")]
    Duplicate {
        /// The flag as given.
        flag: String,
        /// The repeated entry.
        entry: String,
    },
}

impl PrioritiesError {
    /// Stable short category.
    pub fn category(&self) -> &'static str {
        "InvalidPriorities"
    }
}

/// The high and low priority lists, as written (not yet resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priorities {
    /// Walked first, in order.
    pub high: Vec<String>,
    /// Walked last, in order.
    pub low: Vec<String>,
}

impl Default for Priorities {
    /// Velero's defaults.
    fn default() -> Self {
        Self {
            high: DEFAULT_HIGH.iter().map(|s| (*s).to_string()).collect(),
            low: DEFAULT_LOW.iter().map(|s| (*s).to_string()).collect(),
        }
    }
}

impl Priorities {
    /// Parses the flag; `None` or an all-blank string gives the defaults.
    pub fn from_flag(flag: Option<&str>) -> Result<Self, PrioritiesError> {
        let Some(flag) = flag.filter(|f| !f.trim().is_empty()) else {
            return Ok(Self::default());
        };
        let mut high = Vec::new();
        let mut low = Vec::new();
        let mut after_separator = false;
        for entry in flag.split(',').map(str::trim) {
            if entry.is_empty() {
                return Err(PrioritiesError::EmptyEntry {
                    flag: flag.to_string(),
                });
            }
            if entry == "-" {
                if after_separator {
                    return Err(PrioritiesError::TwoSeparators {
                        flag: flag.to_string(),
                    });
                }
                after_separator = true;
                continue;
            }
            if high.iter().chain(low.iter()).any(|e: &String| e == entry) {
                return Err(PrioritiesError::Duplicate {
                    flag: flag.to_string(),
                    entry: entry.to_string(),
                });
            }
            let list = if after_separator { &mut low } else { &mut high };
            list.push(entry.to_string());
        }
        Ok(Self { high, low })
    }

    /// The flag's string form (`high,-,low`; just `high` when the low list is empty).
    pub fn to_flag(&self) -> String {
        let mut parts: Vec<&str> = self.high.iter().map(String::as_str).collect();
        if !self.low.is_empty() {
            parts.push("-");
            parts.extend(self.low.iter().map(String::as_str));
        }
        parts.join(",")
    }

    /// Both lists resolved to canonical `resource.group` names through `catalogue`; an entry
    /// resolving to a type already listed is dropped (each type is walked once).
    pub fn resolve(&self, catalogue: &Catalogue) -> Resolved {
        let mut seen: Vec<String> = Vec::new();
        let mut resolve_list = |list: &[String]| {
            let mut out = Vec::new();
            for entry in list {
                let name = catalogue.canonical_name(entry);
                if !seen.contains(&name) {
                    seen.push(name.clone());
                    out.push(name);
                }
            }
            out
        };
        let high = resolve_list(&self.high);
        let low = resolve_list(&self.low);
        Resolved { high, low }
    }
}

/// Priority lists of canonical `resource.group` names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// Walked first, in order.
    pub high: Vec<String>,
    /// Walked last, in order.
    pub low: Vec<String>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use crate::selection::ApiResource;

    fn res(group: &str, kind: &str, plural: &str, singular: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: singular.into(),
            short_names: vec![],
            namespaced: true,
            verbs: vec![],
        }
    }

    #[test]
    fn no_flag_gives_velero_defaults() {
        let p = Priorities::from_flag(None).unwrap();
        assert_eq!(
            p.high.first().map(String::as_str),
            Some("customresourcedefinitions")
        );
        assert_eq!(p.high.last().map(String::as_str), Some("services"));
        assert_eq!(p.low.len(), 5);
        assert_eq!(Priorities::from_flag(Some("  ")).unwrap(), p);
    }

    #[test]
    fn dash_separates_high_from_low() {
        let p =
            Priorities::from_flag(Some("namespaces, pods ,-,clusters.cluster.x-k8s.io")).unwrap();
        assert_eq!(p.high, ["namespaces", "pods"]);
        assert_eq!(p.low, ["clusters.cluster.x-k8s.io"]);
        let only_high = Priorities::from_flag(Some("pods,secrets")).unwrap();
        assert!(only_high.low.is_empty());
        let only_low = Priorities::from_flag(Some("-,pods")).unwrap();
        assert!(only_low.high.is_empty());
        assert_eq!(only_low.low, ["pods"]);
    }

    #[test]
    fn default_flag_string_round_trips() {
        let flag = Priorities::default().to_flag();
        assert!(flag.starts_with("customresourcedefinitions,namespaces,"));
        assert!(flag.contains(",services,-,clusterbootstraps.run.tanzu.vmware.com,"));
        assert_eq!(
            Priorities::from_flag(Some(&flag)).unwrap(),
            Priorities::default()
        );
    }

    #[test]
    fn malformed_flags_are_rejected() {
        assert!(matches!(
            Priorities::from_flag(Some("a,-,b,-,c")),
            Err(PrioritiesError::TwoSeparators { .. })
        ));
        assert!(matches!(
            Priorities::from_flag(Some("a,,b")),
            Err(PrioritiesError::EmptyEntry { .. })
        ));
        assert!(matches!(
            Priorities::from_flag(Some("a,-,a")),
            Err(PrioritiesError::Duplicate { entry, .. }) if entry == "a"
        ));
    }

    #[test]
    fn entries_resolve_through_the_catalogue() {
        let catalogue = Catalogue::new(vec![
            res("", "Pod", "pods", "pod"),
            res(
                "snapshot.storage.k8s.io",
                "VolumeSnapshotClass",
                "volumesnapshotclasses",
                "volumesnapshotclass",
            ),
        ]);
        let resolved = Priorities::default().resolve(&catalogue);
        // The singular default entry maps to the served plural.
        assert!(
            resolved
                .high
                .contains(&"volumesnapshotclasses.snapshot.storage.k8s.io".to_string())
        );
        assert!(
            !resolved
                .high
                .iter()
                .any(|e| e == "volumesnapshotclass.snapshot.storage.k8s.io")
        );
        // Unknown entries are kept verbatim.
        assert!(resolved.high.contains(&"replicasets.apps".to_string()));
        assert!(resolved.high.contains(&"pods".to_string()));
    }

    #[test]
    fn entries_resolving_to_one_type_are_walked_once() {
        let catalogue = Catalogue::new(vec![res("", "Pod", "pods", "pod")]);
        let p = Priorities::from_flag(Some("pod,pods,-,Pod")).unwrap();
        let resolved = p.resolve(&catalogue);
        assert_eq!(resolved.high, ["pods"]);
        assert!(resolved.low.is_empty());
    }
}
