//! What Velero's built-in backup item actions add to a backup (velero-compat §6.9): the items
//! an item depends on, which are backed up with it even when their type is not listed.
//!
//! * `velero.io/pod`: a Pod brings the PersistentVolumeClaims its volumes name;
//! * `velero.io/pv`: a PersistentVolumeClaim brings its bound PersistentVolume
//!   (`spec.volumeName`);
//! * `velero.io/service-account`: a ServiceAccount brings every ClusterRoleBinding whose
//!   subjects name it, and the ClusterRole each of those binds.
//!
//! The items found here still pass [`super::Selection::check_item`] (the per-item checks Velero
//! applies to action-returned items): a namespaced one whose type is not included, or whose
//! namespace is excluded, is skipped; a cluster-scoped one only when its type is explicitly
//! excluded. Label selectors do not apply to them.

use serde_json::Value;

use crate::json::text;

/// `persistentvolumeclaims` (core group).
pub const PERSISTENT_VOLUME_CLAIMS: &str = "persistentvolumeclaims";
/// `persistentvolumes` (core group).
pub const PERSISTENT_VOLUMES: &str = "persistentvolumes";
/// `pods` (core group).
pub const PODS: &str = "pods";
/// `serviceaccounts` (core group).
pub const SERVICE_ACCOUNTS: &str = "serviceaccounts";
/// ClusterRoleBindings' group resource.
pub const CLUSTER_ROLE_BINDINGS: &str = "clusterrolebindings.rbac.authorization.k8s.io";
/// ClusterRoles' group resource.
pub const CLUSTER_ROLES: &str = "clusterroles.rbac.authorization.k8s.io";

/// The types whose items an action can add; a backup remembers which of their items it holds.
pub const ADDABLE_TYPES: [&str; 4] = [
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
];

/// One item named by another: its group resource, namespace (`""` for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemKey {
    /// Canonical group resource (`persistentvolumes`, `clusterroles.rbac.authorization.k8s.io`).
    pub group_resource: String,
    /// Namespace, `""` for a cluster-scoped item.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ItemKey {
    /// The key of `item` of type `group_resource`.
    #[must_use]
    pub fn of(group_resource: &str, item: &Value) -> Self {
        Self {
            group_resource: group_resource.to_owned(),
            namespace: text(item, "/metadata/namespace").to_owned(),
            name: text(item, "/metadata/name").to_owned(),
        }
    }

    fn new(group_resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            group_resource: group_resource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `ns/name`, or `name` for a cluster-scoped item.
    #[must_use]
    pub fn full_name(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// The items `item` (of type `group_resource`) brings with it: a Pod's claims, a claim's
/// volume. A ServiceAccount's bindings need the bindings themselves: see
/// [`bindings_of_accounts`].
#[must_use]
pub fn related_items(group_resource: &str, item: &Value) -> Vec<ItemKey> {
    match group_resource {
        PODS => {
            let namespace = text(item, "/metadata/namespace");
            let mut claims: Vec<ItemKey> = item
                .pointer("/spec/volumes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.pointer("/persistentVolumeClaim/claimName"))
                .filter_map(Value::as_str)
                .filter(|name| !name.is_empty())
                .map(|name| ItemKey::new(PERSISTENT_VOLUME_CLAIMS, namespace, name))
                .collect();
            claims.sort();
            claims.dedup();
            claims
        }
        PERSISTENT_VOLUME_CLAIMS => match text(item, "/spec/volumeName") {
            "" => Vec::new(),
            volume => vec![ItemKey::new(PERSISTENT_VOLUMES, "", volume)],
        },
        _ => Vec::new(),
    }
}

/// The ClusterRoleBindings among `bindings` whose subjects name one of `accounts`
/// (`(namespace, name)` of ServiceAccounts), each with the ClusterRole it binds.
#[must_use]
pub fn bindings_of_accounts(
    bindings: &[Value],
    accounts: &std::collections::BTreeSet<(String, String)>,
) -> Vec<ItemKey> {
    let mut out = Vec::new();
    for binding in bindings {
        let names_an_account = binding
            .pointer("/subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|s| {
                text(s, "/kind") == "ServiceAccount"
                    && accounts.contains(&(
                        text(s, "/namespace").to_owned(),
                        text(s, "/name").to_owned(),
                    ))
            });
        if !names_an_account {
            continue;
        }
        out.push(ItemKey::of(CLUSTER_ROLE_BINDINGS, binding));
        if text(binding, "/roleRef/kind") == "ClusterRole" {
            let role = text(binding, "/roleRef/name");
            if !role.is_empty() {
                out.push(ItemKey::new(CLUSTER_ROLES, "", role));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_brings_each_claim_its_volumes_name_once() {
        let pod = json!({
            "metadata": {"name": "db-0", "namespace": "shop"},
            "spec": {"volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                {"name": "again", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                {"name": "logs", "persistentVolumeClaim": {"claimName": "logs"}},
                {"name": "tmp", "emptyDir": {}}
            ]}
        });
        let names: Vec<String> = related_items(PODS, &pod)
            .iter()
            .map(ItemKey::full_name)
            .collect();
        assert_eq!(names, ["shop/data-db-0", "shop/logs"]);
    }

    #[test]
    fn a_bound_claim_brings_its_volume_and_an_unbound_one_nothing() {
        let bound = json!({"metadata": {"name": "data", "namespace": "shop"}, "spec": {"volumeName": "pv-7"}});
        assert_eq!(
            related_items(PERSISTENT_VOLUME_CLAIMS, &bound),
            [ItemKey::new(PERSISTENT_VOLUMES, "", "pv-7")]
        );
        let pending = json!({"metadata": {"name": "data", "namespace": "shop"}, "spec": {}});
        assert!(related_items(PERSISTENT_VOLUME_CLAIMS, &pending).is_empty());
        assert!(related_items("configmaps", &bound).is_empty());
    }

    #[test]
    fn an_account_brings_the_cluster_role_bindings_naming_it_and_their_roles() {
        let bindings = [
            json!({"metadata": {"name": "reader"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "namespace": "shop", "name": "web"}]}),
            json!({"metadata": {"name": "other-ns"}, "roleRef": {"kind": "ClusterRole", "name": "edit"},
                   "subjects": [{"kind": "ServiceAccount", "namespace": "other", "name": "web"}]}),
            json!({"metadata": {"name": "user"}, "roleRef": {"kind": "ClusterRole", "name": "admin"},
                   "subjects": [{"kind": "User", "namespace": "shop", "name": "web"}]}),
            json!({"metadata": {"name": "also-reader"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "namespace": "shop", "name": "web"}]}),
        ];
        let accounts = BTreeSet::from([("shop".to_owned(), "web".to_owned())]);
        let found: Vec<(String, String)> = bindings_of_accounts(&bindings, &accounts)
            .into_iter()
            .map(|k| (k.group_resource, k.name))
            .collect();
        assert_eq!(
            found,
            [
                (CLUSTER_ROLE_BINDINGS.to_owned(), "also-reader".to_owned()),
                (CLUSTER_ROLE_BINDINGS.to_owned(), "reader".to_owned()),
                (CLUSTER_ROLES.to_owned(), "view".to_owned()),
            ]
        );
    }
}
