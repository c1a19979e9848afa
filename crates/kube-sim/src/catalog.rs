//! The served resources: the built-in catalogue plus one entry per served version of every
//! CustomResourceDefinition whose names are accepted (discovery lists only established ones).

use std::cmp::Ordering;

use serde_json::Value;

use crate::resource::{PrinterColumn, ResourceInfo};

/// The subresource of a pod that runs a command in one of its containers.
pub const EXEC: &str = "exec";

/// Which name rule a kind validates `metadata.name` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most kinds, all custom resources).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Label1035,
    /// Any name without `/` or `%` and not `.`/`..` (RBAC kinds).
    PathSegment,
}

/// A resource as the server serves it.
#[derive(Debug, Clone)]
pub struct Served {
    pub info: ResourceInfo,
    /// Storage key shared by all versions of a resource: `group/plural`.
    pub storage: String,
    /// Delete answers with the deleted object instead of a Success Status.
    pub returns_deleted: bool,
    pub name_rule: NameRule,
    /// The owning CRD's name for custom resources.
    pub crd: Option<String>,
    /// Extra subresources beyond `status` (e.g. `finalize` for namespaces).
    pub extra_subresources: Vec<&'static str>,
    /// CRD `selectableFields` json paths, as field selector names (`spec.x`).
    pub selectable_fields: Vec<String>,
}

impl Served {
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
    all_category: bool,
}

// One table row per built-in kind reads best as positional arguments.
#[allow(clippy::too_many_arguments)]
const fn b(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
    all_category: bool,
) -> Builtin {
    Builtin {
        group,
        kind,
        plural,
        short,
        namespaced,
        status,
        generation,
        all_category,
    }
}

const BUILTINS: &[Builtin] = &[
    b(
        "",
        "Namespace",
        "namespaces",
        &["ns"],
        false,
        true,
        false,
        false,
    ),
    b(
        "",
        "ConfigMap",
        "configmaps",
        &["cm"],
        true,
        false,
        false,
        false,
    ),
    b("", "Secret", "secrets", &[], true, false, false, false),
    b(
        "",
        "ServiceAccount",
        "serviceaccounts",
        &["sa"],
        true,
        false,
        false,
        false,
    ),
    b("", "Service", "services", &["svc"], true, true, false, true),
    b(
        "",
        "Endpoints",
        "endpoints",
        &["ep"],
        true,
        false,
        false,
        false,
    ),
    b("", "Pod", "pods", &["po"], true, true, false, true),
    b(
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        &["pvc"],
        true,
        true,
        false,
        false,
    ),
    b(
        "",
        "PersistentVolume",
        "persistentvolumes",
        &["pv"],
        false,
        true,
        false,
        false,
    ),
    b("", "Node", "nodes", &["no"], false, true, false, false),
    b("", "Event", "events", &["ev"], true, false, false, false),
    b(
        "apps",
        "Deployment",
        "deployments",
        &["deploy"],
        true,
        true,
        true,
        true,
    ),
    b(
        "apps",
        "StatefulSet",
        "statefulsets",
        &["sts"],
        true,
        true,
        true,
        true,
    ),
    b(
        "apps",
        "DaemonSet",
        "daemonsets",
        &["ds"],
        true,
        true,
        true,
        true,
    ),
    b(
        "apps",
        "ReplicaSet",
        "replicasets",
        &["rs"],
        true,
        true,
        true,
        true,
    ),
    b("batch", "Job", "jobs", &[], true, true, true, true),
    b(
        "batch",
        "CronJob",
        "cronjobs",
        &["cj"],
        true,
        true,
        true,
        true,
    ),
    b(
        "rbac.authorization.k8s.io",
        "Role",
        "roles",
        &[],
        true,
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        &[],
        true,
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        &[],
        false,
        false,
        false,
        false,
    ),
    b(
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        &["ing"],
        true,
        true,
        true,
        false,
    ),
    b(
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        &["netpol"],
        true,
        false,
        true,
        false,
    ),
    b(
        "storage.k8s.io",
        "StorageClass",
        "storageclasses",
        &["sc"],
        false,
        false,
        false,
        false,
    ),
    b(
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        &["pdb"],
        true,
        true,
        true,
        false,
    ),
    b(
        "coordination.k8s.io",
        "Lease",
        "leases",
        &[],
        true,
        false,
        false,
        false,
    ),
    b(
        "events.k8s.io",
        "Event",
        "events",
        &["ev"],
        true,
        false,
        false,
        false,
    ),
    b(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
        true,
        true,
        false,
    ),
];

/// The built-in resources.
pub fn builtins() -> Vec<Served> {
    BUILTINS
        .iter()
        .map(|b| {
            let verbs: Vec<String> = if b.plural == "namespaces" {
                [
                    "create", "delete", "get", "list", "patch", "update", "watch",
                ]
                .iter()
                .map(|s| (*s).to_string())
                .collect()
            } else {
                ALL_VERBS.iter().map(|s| (*s).to_string()).collect()
            };
            let mut categories = Vec::new();
            if b.all_category {
                categories.push("all".to_string());
            }
            if b.plural == "customresourcedefinitions" {
                categories.push("api-extensions".to_string());
            }
            let name_rule = match b.plural {
                "namespaces" => NameRule::Label,
                "services" => NameRule::Label1035,
                "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings" => {
                    NameRule::PathSegment
                }
                _ => NameRule::Subdomain,
            };
            Served {
                info: ResourceInfo {
                    group: b.group.to_string(),
                    version: "v1".to_string(),
                    kind: b.kind.to_string(),
                    list_kind: format!("{}List", b.kind),
                    plural: b.plural.to_string(),
                    singular: b.kind.to_lowercase(),
                    short_names: b.short.iter().map(|s| (*s).to_string()).collect(),
                    categories,
                    namespaced: b.namespaced,
                    verbs,
                    status_subresource: b.status,
                    uses_generation: b.generation,
                    printer_columns: builtin_columns(b.plural),
                },
                storage: format!("{}/{}", b.group, b.plural),
                returns_deleted: matches!(b.plural, "pods" | "services" | "namespaces"),
                name_rule,
                crd: None,
                extra_subresources: match b.plural {
                    "namespaces" => vec!["finalize"],
                    "pods" => vec![EXEC],
                    _ => Vec::new(),
                },
                selectable_fields: Vec::new(),
            }
        })
        .collect()
}

fn col(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.to_string(),
        type_: type_.to_string(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: json_path.to_string(),
    }
}

fn builtin_columns(plural: &str) -> Vec<PrinterColumn> {
    let age = col("Age", "date", ".metadata.creationTimestamp");
    match plural {
        "namespaces" => vec![col("Status", "string", ".status.phase"), age],
        "pods" => vec![col("Status", "string", ".status.phase"), age],
        "customresourcedefinitions" => {
            vec![col("Created At", "date", ".metadata.creationTimestamp")]
        }
        "deployments" | "statefulsets" | "replicasets" => vec![
            col("Ready", "integer", ".status.readyReplicas"),
            col("Replicas", "integer", ".spec.replicas"),
            age,
        ],
        _ => Vec::new(),
    }
}

/// Kube-aware version ordering: GA > beta > alpha, higher numbers first; others alphabetically last.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn key(v: &str) -> (u8, u64, u8, u64, String) {
        let Some(rest) = v.strip_prefix('v') else {
            return (0, 0, 0, 0, v.to_string());
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(major) = digits.parse::<u64>() else {
            return (0, 0, 0, 0, v.to_string());
        };
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return (3, major, 0, 0, String::new());
        }
        for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
            if let Some(n) = tail.strip_prefix(prefix)
                && let Ok(minor) = n.parse::<u64>()
            {
                return (rank, major, 0, minor, String::new());
            }
        }
        (0, 0, 0, 0, v.to_string())
    }
    let (ka, kb) = (key(a), key(b));
    // Higher class/major/minor first; unknown versions alphabetical.
    kb.0.cmp(&ka.0)
        .then(kb.1.cmp(&ka.1))
        .then(kb.3.cmp(&ka.3))
        .then(ka.4.cmp(&kb.4))
}

/// Whether a CRD object has the condition `kind` with status `True`.
pub fn crd_condition(crd: &Value, kind: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The served entries of a CRD object (one per served version), once its names are accepted or
/// it is established: the real custom resource handler serves from then on.
pub fn from_crd(crd: &Value) -> Vec<Served> {
    if !crd_condition(crd, "NamesAccepted") && !crd_condition(crd, "Established") {
        return Vec::new();
    }
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let s = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let strings = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let group = s("/spec/group");
    let kind = s("/spec/names/kind");
    let plural = s("/spec/names/plural");
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return Vec::new();
    }
    let singular = match s("/spec/names/singular") {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let list_kind = match s("/spec/names/listKind") {
        x if x.is_empty() => format!("{kind}List"),
        x => x,
    };
    let namespaced = s("/spec/scope") != "Cluster";
    let verbs: Vec<String> = if terminating {
        ["delete", "deletecollection", "get", "list", "watch"]
            .iter()
            .map(|v| (*v).to_string())
            .collect()
    } else {
        [
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ]
        .iter()
        .map(|v| (*v).to_string())
        .collect()
    };
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
                .collect()
        })
        .unwrap_or_default();
    versions.sort_by(|a, b| {
        compare_versions(
            a.get("name").and_then(Value::as_str).unwrap_or(""),
            b.get("name").and_then(Value::as_str).unwrap_or(""),
        )
    });
    versions
        .iter()
        .filter_map(|v| {
            let name = v.get("name").and_then(Value::as_str)?.to_string();
            let columns: Vec<PrinterColumn> = v
                .get("additionalPrinterColumns")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let selectable = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                        .map(|p| p.trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default();
            Some(Served {
                info: ResourceInfo {
                    group: group.clone(),
                    version: name,
                    kind: kind.clone(),
                    list_kind: list_kind.clone(),
                    plural: plural.clone(),
                    singular: singular.clone(),
                    short_names: strings("/spec/names/shortNames"),
                    categories: strings("/spec/names/categories"),
                    namespaced,
                    verbs: verbs.clone(),
                    status_subresource: v.pointer("/subresources/status").is_some(),
                    uses_generation: true,
                    printer_columns: columns,
                },
                storage: format!("{group}/{plural}"),
                returns_deleted: false,
                name_rule: NameRule::Subdomain,
                crd: Some(format!("{plural}.{group}")),
                extra_subresources: Vec::new(),
                selectable_fields: selectable,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_kube_aware() {
        let mut v = vec!["v1alpha1", "v1", "v1beta2", "v2", "v1beta1", "foo"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}
