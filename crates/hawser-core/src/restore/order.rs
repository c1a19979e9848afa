//! The order in which a restore walks the archived types (velero-compat §7.2): CRDs first (their
//! own pass, so that discovery can be refreshed before custom resources are created), then the
//! high priorities in order, then every other archived type alphabetically, then the low
//! priorities in order. Each type appears once; types not in the archive are not listed.

use std::collections::BTreeSet;

use super::priorities::Resolved;

/// The canonical name of the CRD type.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// Where in the walk a type falls. Types of one tier may be created concurrently only within a
/// single type; the walk goes type by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// `customresourcedefinitions`, restored before everything else.
    Crds,
    /// A high-priority type.
    High,
    /// A type in neither list, walked alphabetically.
    Unprioritised,
    /// A low-priority type.
    Low,
}

/// Whether `group_resource` names the CRD type (with or without its group).
pub fn is_crd(group_resource: &str) -> bool {
    group_resource == CRDS || group_resource == "customresourcedefinitions"
}

/// The walk over `archived` (canonical `resource.group` names of the archive's types).
pub fn restore_order<'a, I>(archived: I, priorities: &Resolved) -> Vec<(Tier, String)>
where
    I: IntoIterator<Item = &'a str>,
{
    let archived: BTreeSet<&str> = archived.into_iter().collect();
    let mut out: Vec<(Tier, String)> = Vec::new();
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    for name in archived.iter().filter(|n| is_crd(n)) {
        out.push((Tier::Crds, (*name).to_string()));
        taken.insert(name);
    }
    for entry in &priorities.high {
        if let Some(name) = archived.get(entry.as_str())
            && taken.insert(name)
        {
            out.push((Tier::High, (*name).to_string()));
        }
    }
    let low: Vec<&str> = priorities
        .low
        .iter()
        .filter_map(|e| archived.get(e.as_str()).copied())
        .filter(|n| !taken.contains(n))
        .collect();
    for name in &archived {
        if !taken.contains(name) && !low.contains(name) {
            out.push((Tier::Unprioritised, (*name).to_string()));
        }
    }
    for name in low {
        if taken.insert(name) {
            out.push((Tier::Low, name.to_string()));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use crate::restore::Priorities;
    use crate::selection::Catalogue;

    fn names(order: &[(Tier, String)]) -> Vec<&str> {
        order.iter().map(|(_, n)| n.as_str()).collect()
    }

    #[test]
    fn crds_then_high_then_alphabetical_then_low() {
        let p = Priorities::from_flag(Some(
            "namespaces,pods,secrets,-,zlow.example.com,alow.example.com",
        ))
        .unwrap()
        .resolve(&Catalogue::default());
        let archived = [
            "widgets.example.com",
            "pods",
            "alow.example.com",
            CRDS,
            "deployments.apps",
            "namespaces",
            "zlow.example.com",
            "configmaps",
        ];
        let order = restore_order(archived, &p);
        assert_eq!(
            names(&order),
            [
                CRDS,
                "namespaces",
                "pods",
                "configmaps",
                "deployments.apps",
                "widgets.example.com",
                "zlow.example.com",
                "alow.example.com",
            ]
        );
        assert_eq!(order[0].0, Tier::Crds);
        assert_eq!(order[1].0, Tier::High);
        assert_eq!(order[3].0, Tier::Unprioritised);
        assert_eq!(order[7].0, Tier::Low);
    }

    #[test]
    fn priorities_absent_from_the_archive_are_not_walked() {
        let p = Priorities::default().resolve(&Catalogue::default());
        let order = restore_order(["services", "configmaps"], &p);
        assert_eq!(names(&order), ["configmaps", "services"]);
        assert!(order.iter().all(|(t, _)| *t == Tier::High));
    }

    #[test]
    fn each_type_is_walked_once() {
        let p = Priorities::from_flag(Some("pods,-,secrets"))
            .unwrap()
            .resolve(&Catalogue::default());
        let order = restore_order(["pods", "pods", "secrets"], &p);
        assert_eq!(names(&order), ["pods", "secrets"]);
    }

    #[test]
    fn crd_type_leads_even_when_not_a_priority() {
        let p = Priorities::from_flag(Some("pods"))
            .unwrap()
            .resolve(&Catalogue::default());
        let order = restore_order(["pods", CRDS], &p);
        assert_eq!(names(&order), [CRDS, "pods"]);
    }
}
