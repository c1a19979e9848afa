//! The sample application the demo backs up and restores: a namespace with a Deployment, a
//! Service, ConfigMaps, Secrets, a ServiceAccount bound to a Role, and a custom resource with
//! its CRD.

use serde_json::{Value, json};

/// The application's namespace.
pub const NAMESPACE: &str = "demo-shop";
/// The namespace the restore maps it to.
pub const RESTORED_NAMESPACE: &str = "demo-shop-restored";

/// Group of the sample custom resource.
pub const CR_GROUP: &str = "shop.example.com";

/// The CRD of the sample custom resource (`Storefront`, namespaced).
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("storefronts.{CR_GROUP}")},
        "spec": {
            "group": CR_GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "storefronts", "singular": "storefront",
                "kind": "Storefront", "listKind": "StorefrontList"
            },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true
                }}
            }]
        }
    })
}

/// The Namespace of the application.
pub fn namespace() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"team": "storefront"}}
    })
}

/// The application's data: a claim of kube-sim's CSI StorageClass (not in [`objects`]: its
/// copy is provisioned anew from its snapshot, so it is checked apart).
pub fn claim() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": NAMESPACE, "labels": {"app": "shop"}},
        "spec": {
            "storageClassName": kube_sim::csi::STORAGE_CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}
        }
    })
}

/// The name of [`claim`].
pub const CLAIM: &str = "shop-data";

/// The database Pod, which mounts [`CLAIM`] and carries backup hook annotations.
pub const DATABASE_POD: &str = "shop-db-0";
/// Its pre hook: the database's files frozen while the snapshot is cut.
pub const FREEZE: &str = r#"["/sbin/fsfreeze", "--freeze", "/var/lib/postgresql"]"#;
/// Its post hook.
pub const THAW: &str = r#"["/sbin/fsfreeze", "--unfreeze", "/var/lib/postgresql"]"#;

/// The namespaced objects of the application, in creation order.
pub fn objects() -> Vec<Value> {
    let labels = json!({"app": "shop", "tier": "web"});
    vec![
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shop-settings", "namespace": NAMESPACE, "labels": labels},
            "data": {"currency": "EUR", "page-size": "24"}
        }),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "shop-banner", "namespace": NAMESPACE,
                         "annotations": {"shop.example.com/owner": "marketing"}},
            "data": {"banner.html": "<h1>Winter sale</h1>"}
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db-credentials", "namespace": NAMESPACE, "labels": labels},
            "type": "Opaque",
            // base64 of "shop" and "secret-password".
            "data": {"username": "c2hvcA==", "password": "c2VjcmV0LXBhc3N3b3Jk"}
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "payment-api", "namespace": NAMESPACE},
            "type": "Opaque",
            "data": {"token": "dG9rLTEyMzQ1"}
        }),
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "shop", "namespace": NAMESPACE, "labels": labels}
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "shop-reader", "namespace": NAMESPACE},
            "rules": [{
                "apiGroups": [""], "resources": ["configmaps", "secrets"],
                "verbs": ["get", "list", "watch"]
            }]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "shop-reader", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "shop-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "shop", "namespace": NAMESPACE}]
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "shop", "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "shop"}},
                "template": {
                    "metadata": {"labels": {"app": "shop", "tier": "web"}},
                    "spec": {
                        "serviceAccountName": "shop",
                        "containers": [{
                            "name": "web",
                            "image": "registry.example.com/shop:1.4.2",
                            "ports": [{"containerPort": 8080}],
                            "envFrom": [{"configMapRef": {"name": "shop-settings"}}]
                        }]
                    }
                }
            }
        }),
        // The database, quiesced around its claim's snapshot by Velero's hook annotations
        // (kube-sim's `pods/exec` plays the commands; nothing runs them otherwise).
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": DATABASE_POD, "namespace": NAMESPACE,
                         "labels": {"app": "shop", "tier": "db"},
                         "annotations": {
                             "pre.hook.backup.velero.io/command": FREEZE,
                             "post.hook.backup.velero.io/command": THAW
                         }},
            "spec": {
                "containers": [{
                    "name": "db",
                    "image": "postgres:17",
                    "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"}]
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}]
            }
        }),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "shop", "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": {"app": "shop"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]
            }
        }),
        json!({
            "apiVersion": format!("{CR_GROUP}/v1"), "kind": "Storefront",
            "metadata": {"name": "main", "namespace": NAMESPACE},
            "spec": {"domain": "shop.example.com", "locales": ["en", "de"], "checkout": {"enabled": true}}
        }),
    ]
}
