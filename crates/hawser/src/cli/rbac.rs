//! The server's permissions under `hawser install --rbac minimal`, instead of Velero's binding to
//! `cluster-admin`.
//!
//! What the server calls, by part:
//! - backups read every kind they include: get, list, watch across the cluster;
//! - restores create what a backup holds and update or patch what exists: create, update,
//!   patch and get across the cluster;
//! - backup hooks run commands in pods: `pods/exec` across the cluster;
//! - the controllers work on the `velero.io` objects of the server namespace (watch, create,
//!   update, patch their status, delete Backups, Restores and requests), keep restore records in
//!   ConfigMaps there, read the Secrets that storage locations name there and write Events
//!   about Backups and Restores there;
//! - leader election and the instance Leases use the Leases of the namespace (the Role
//!   `hawser-leader-election`, created in both modes).
//!
//! RBAC cannot take a kind away from a wildcard, so the cluster-wide rules name the core kinds
//! one by one and leave Secrets out: outside the server namespace the server can neither read
//! nor write them. The other groups are named too (the built-in ones, CSI snapshots and
//! `velero.io`); a backup that includes the objects of other API groups needs a ClusterRole for
//! them bound to the server's account (docs/cli.md).

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use super::manifests::meta;

/// Name of the namespaced Role and RoleBinding of the minimal mode.
pub const SERVER_ROLE_NAME: &str = "hawser-server";

/// The core kinds a backup reads and a restore writes: all of them but Secrets.
pub const CORE_RESOURCES: &[&str] = &[
    "configmaps",
    "endpoints",
    "events",
    "limitranges",
    "namespaces",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "pods",
    "podtemplates",
    "replicationcontrollers",
    "resourcequotas",
    "serviceaccounts",
    "services",
];

/// The API groups, besides the core one, whose kinds a backup reads and a restore writes.
pub const API_GROUPS: &[&str] = &[
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "snapshot.storage.k8s.io",
    "storage.k8s.io",
    "velero.io",
];

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["get", "create", "update", "patch"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

fn subject(namespace: &str, account: &str) -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: account.to_owned(),
        namespace: Some(namespace.to_owned()),
        ..Subject::default()
    }])
}

/// The cluster-wide rules: read for backups, write for restores, deleting CSI snapshots (a
/// backup deletes its VolumeSnapshots once their contents keep the snapshots, and deleting the
/// backup deletes those contents, only the ones labelled with its uid), and running backup
/// hooks in pods.
pub fn cluster_rules() -> Vec<PolicyRule> {
    vec![
        rule(&[""], CORE_RESOURCES, READ),
        rule(API_GROUPS, &["*"], READ),
        rule(&[""], CORE_RESOURCES, WRITE),
        rule(API_GROUPS, &["*"], WRITE),
        rule(
            &["snapshot.storage.k8s.io"],
            &["volumesnapshots", "volumesnapshotcontents"],
            &["delete"],
        ),
        // Backup hooks run their commands in the pods (a WebSocket exec is a `get` on
        // API servers before 1.31 and a `create` since).
        rule(&[""], &["pods/exec"], &["get", "create"]),
    ]
}

/// The rules in the server namespace: its `velero.io` objects, restore records, the Secrets of
/// its storage locations, Events.
pub fn namespace_rules() -> Vec<PolicyRule> {
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    vec![
        rule(&["velero.io"], &["*"], &all),
        rule(&[""], &["configmaps"], &all),
        rule(&[""], &["secrets"], READ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "update", "patch"],
        ),
    ]
}

/// The ClusterRole and its binding (named as Velero names its binding, `<name>`), the Role
/// and its binding `hawser-server` in `namespace`, all for the ServiceAccount `account`.
pub fn minimal(
    namespace: &str,
    account: &str,
    name: &str,
) -> (ClusterRole, ClusterRoleBinding, Role, RoleBinding) {
    let cluster_role = ClusterRole {
        metadata: meta(name, None),
        rules: Some(cluster_rules()),
        ..ClusterRole::default()
    };
    let cluster_binding = ClusterRoleBinding {
        metadata: meta(name, None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: name.to_owned(),
        },
        subjects: subject(namespace, account),
    };
    let role = Role {
        metadata: meta(SERVER_ROLE_NAME, Some(namespace)),
        rules: Some(namespace_rules()),
    };
    let binding = RoleBinding {
        metadata: meta(SERVER_ROLE_NAME, Some(namespace)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: SERVER_ROLE_NAME.to_owned(),
        },
        subjects: subject(namespace, account),
    };
    (cluster_role, cluster_binding, role, binding)
}
