//! One canonical name per archived type. A backup names each type's directory under
//! `resources/` with `GroupResource.String()` (the lower-case plural, then its group after a
//! dot: `secrets`, `deployments.apps`), the name Velero resolves through discovery. Every
//! restore rule (the never-restored list, the user's filters, cleaning, token stripping, the
//! must-have types, priorities) compares that name, so a directory written any other way
//! (`secret/`, `Secrets/`, `node/`, `restore.velero.io/`) could slip past them; it is refused.

use std::collections::HashSet;

use crate::selection::Catalogue;

/// Why an archive directory is not the canonical name of a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NonCanonicalType {
    /// Another spelling (singular, kind, short name, other case) of a type the cluster serves.
    #[error(
        "resources/{dir}/ is not the canonical name of a type (the cluster serves it as {canonical}); nothing under it is restored"
    )]
    Alias {
        /// The directory name.
        dir: String,
        /// The type's canonical name.
        canonical: String,
    },
    /// Not a lower-case `resource[.group]` name at all.
    #[error(
        "resources/{dir}/ is not a canonical type name (the lower-case plural, then its group after a dot); nothing under it is restored"
    )]
    Malformed {
        /// The directory name.
        dir: String,
    },
}

/// The canonical type names of one cluster, to check archive directories against.
#[derive(Debug, Clone, Default)]
pub struct ArchiveTypes {
    catalogue: Catalogue,
    served: HashSet<String>,
}

impl ArchiveTypes {
    /// The names `catalogue` serves.
    pub fn new(catalogue: &Catalogue) -> Self {
        Self {
            served: catalogue
                .resources()
                .iter()
                .map(crate::selection::ApiResource::group_resource)
                .collect(),
            catalogue: catalogue.clone(),
        }
    }

    /// Accepts `dir` when it is the canonical name of a served type, or a well-formed name the
    /// cluster does not serve (yet: a custom resource whose CRD the restore creates); refuses
    /// any other spelling of a served type and anything that is not lower-case `resource.group`.
    pub fn check(&self, dir: &str) -> Result<(), NonCanonicalType> {
        if self.served.contains(dir) {
            return Ok(());
        }
        if let Some(r) = self.catalogue.resolve(dir) {
            return Err(NonCanonicalType::Alias {
                dir: dir.to_owned(),
                canonical: r.group_resource(),
            });
        }
        if well_formed(dir) {
            Ok(())
        } else {
            Err(NonCanonicalType::Malformed {
                dir: dir.to_owned(),
            })
        }
    }
}

/// `resource` or `resource.group`: lower-case DNS labels separated by dots.
fn well_formed(name: &str) -> bool {
    name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    }) && name.len() <= 253
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use crate::selection::ApiResource;

    fn resource(
        group: &str,
        kind: &str,
        plural: &str,
        short: &[&str],
        namespaced: bool,
    ) -> ApiResource {
        ApiResource {
            group: group.to_owned(),
            version: "v1".to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            singular: String::new(),
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            namespaced,
            verbs: Vec::new(),
        }
    }

    fn types() -> ArchiveTypes {
        ArchiveTypes::new(&Catalogue::new(vec![
            resource("", "Node", "nodes", &["no"], false),
            resource("", "Secret", "secrets", &[], true),
            resource("", "ServiceAccount", "serviceaccounts", &["sa"], true),
            resource(
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                "clusterrolebindings",
                &[],
                false,
            ),
            resource("velero.io", "Restore", "restores", &[], true),
            resource(
                "snapshot.storage.k8s.io",
                "VolumeSnapshotContent",
                "volumesnapshotcontents",
                &["vsc"],
                false,
            ),
        ]))
    }

    #[test]
    fn canonical_names_and_unserved_well_formed_names_pass() {
        let t = types();
        for dir in [
            "nodes",
            "secrets",
            "restores.velero.io",
            "clusterrolebindings.rbac.authorization.k8s.io",
            "widgets.shop.example.com",
        ] {
            assert_eq!(t.check(dir), Ok(()), "{dir}");
        }
    }

    #[test]
    fn every_other_spelling_of_a_served_type_is_refused_with_its_canonical_name() {
        let t = types();
        for (dir, canonical) in [
            ("node", "nodes"),
            ("no", "nodes"),
            ("Node", "nodes"),
            ("nodes.", "nodes"),
            ("secret", "secrets"),
            ("Secrets", "secrets"),
            ("SECRETS", "secrets"),
            ("Secret", "secrets"),
            ("sa", "serviceaccounts"),
            ("restore.velero.io", "restores.velero.io"),
            ("Restores.velero.io", "restores.velero.io"),
            (
                "clusterrolebinding.rbac.authorization.k8s.io",
                "clusterrolebindings.rbac.authorization.k8s.io",
            ),
            (
                "ClusterRoleBinding.rbac.authorization.k8s.io",
                "clusterrolebindings.rbac.authorization.k8s.io",
            ),
            (
                "vsc.snapshot.storage.k8s.io",
                "volumesnapshotcontents.snapshot.storage.k8s.io",
            ),
        ] {
            assert_eq!(
                t.check(dir),
                Err(NonCanonicalType::Alias {
                    dir: dir.to_owned(),
                    canonical: canonical.to_owned()
                }),
                "{dir}"
            );
        }
    }

    #[test]
    fn names_that_are_not_lower_case_resource_group_are_refused() {
        let t = types();
        for dir in [
            "Widgets.shop.example.com",
            "widgets..example.com",
            "-x",
            "a_b",
            "ünïcode",
        ] {
            assert!(
                matches!(t.check(dir), Err(NonCanonicalType::Malformed { .. })),
                "{dir}"
            );
        }
        let message = t.check("secret").unwrap_err().to_string();
        assert_eq!(
            message,
            "resources/secret/ is not the canonical name of a type (the cluster serves it as secrets); nothing under it is restored"
        );
    }
}
