//! Velero's built-in backup item actions, against kube-sim: a Pod brings its claims, a claim
//! its volume, a ServiceAccount the ClusterRoleBindings naming it and their ClusterRoles; items
//! being deleted are skipped with a log line; the per-item checks still apply to what the
//! actions add.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod backup_support;

use std::collections::BTreeSet;
use std::io::{Cursor, Read};

use hawser_api::Backup;
use hawser_api::phase::BackupPhase;
use hawser_core::archive::{ArchiveReader, ReaderOptions};
use hawser_core::layout::Layout;
use hawser_engine::backup::BackupOptions;
use hawser_store::{Location, LocationSpec};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams};
use kube::{Client, Config};
use kube_sim::{KubeSim, SimConfig};
use serde_json::json;
use tempfile::TempDir;

/// Namespace `shop`: Pod `db-0` (claims `data` and `logs`), the claims (`data` bound to
/// `pv-data`, `logs` bound to `pv-logs` and being deleted, held by its finalizer), ServiceAccount `web`, claim `idle`
/// bound to `pv-idle` and used by no Pod. Cluster: the three PVs, an unrelated PV, binding
/// `web-reader` (names `shop/web`, binds ClusterRole `view`), binding `others` (names
/// `other/web`, binds `edit`), both ClusterRoles.
async fn cluster() -> (KubeSim, Client) {
    let sim = KubeSim::start(SimConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();
    let store = sim.store();
    let objects = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-0", "namespace": "shop"},
               "spec": {"serviceAccountName": "web", "containers": [{"name": "db", "image": "postgres:17"}],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                    {"name": "logs", "persistentVolumeClaim": {"claimName": "logs"}}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "shop"},
               "spec": {"volumeName": "pv-data", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "logs", "namespace": "shop", "finalizers": ["kubernetes.io/pvc-protection"]},
               "spec": {"volumeName": "pv-logs", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "idle", "namespace": "shop"},
               "spec": {"volumeName": "pv-idle", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web", "namespace": "shop"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "web-reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "namespace": "shop", "name": "web"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "others"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "ServiceAccount", "namespace": "other", "name": "web"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "view"}, "rules": []}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "edit"}, "rules": []}),
    ];
    for object in objects {
        store.insert(object).unwrap();
    }
    for (name, claim) in [
        ("pv-data", "data"),
        ("pv-logs", "logs"),
        ("pv-idle", "idle"),
        ("pv-unrelated", "elsewhere"),
    ] {
        store
            .insert(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                    "persistentVolumeReclaimPolicy": "Retain",
                                    "claimRef": {"namespace": "shop", "name": claim},
                                    "hostPath": {"path": format!("/data/{name}")}}}))
            .unwrap();
    }
    // Held by its finalizer, the deleted claim stays with its deletionTimestamp set.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "shop");
    claims
        .delete("logs", &DeleteParams::default())
        .await
        .unwrap();
    (sim, client)
}

fn location(dir: &TempDir) -> Location {
    let spec =
        LocationSpec::new("filesystem", "bucket").with_config("root", dir.path().to_str().unwrap());
    Location::new(&spec).unwrap()
}

/// The archive's paths without the versioned copies, e.g. `persistentvolumes/cluster/pv-data`.
async fn archived(location: &Location, name: &str) -> BTreeSet<String> {
    let bytes = location
        .get(&Layout::new(None).backup_contents(name))
        .await
        .unwrap();
    let mut reader = ArchiveReader::new(Cursor::new(bytes.to_vec()), ReaderOptions::default());
    reader
        .items()
        .unwrap()
        .map(|item| {
            let path = item.unwrap().path;
            path.trim_start_matches("resources/")
                .trim_end_matches(".json")
                .replace("/namespaces/", "/")
        })
        .collect()
}

async fn backup_log(location: &Location, name: &str) -> String {
    let bytes = location
        .get(&Layout::new(None).backup_log(name))
        .await
        .unwrap();
    let data =
        hawser_core::archive::gzjson::gunzip_limited(Cursor::new(bytes.to_vec()), 1 << 20).unwrap();
    let mut text = String::new();
    Cursor::new(data).read_to_string(&mut text).unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_backup_brings_the_volumes_and_bindings_its_items_name() {
    let (_sim, client) = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = Backup::named("shop").including_namespaces(&["shop"]);

    let outcome =
        backup_support::check_and_run(client, &location, &backup, BackupOptions::default())
            .await
            .unwrap();

    let paths = archived(&location, "shop").await;
    let cluster_scoped: BTreeSet<&str> = paths
        .iter()
        .filter(|p| p.contains("/cluster/"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        cluster_scoped,
        BTreeSet::from([
            "clusterrolebindings.rbac.authorization.k8s.io/cluster/web-reader",
            "clusterroles.rbac.authorization.k8s.io/cluster/view",
            "namespaces/cluster/shop",
            "persistentvolumes/cluster/pv-data",
            "persistentvolumes/cluster/pv-idle",
        ]),
        "a namespaced backup lists no cluster-scoped type, but takes what its items name; \
         the claim being deleted is not backed up, so neither is its volume"
    );
    assert!(paths.contains("pods/shop/db-0"), "{paths:?}");
    assert!(
        paths.contains("persistentvolumeclaims/shop/data"),
        "{paths:?}"
    );
    assert!(
        !paths.contains("persistentvolumeclaims/shop/logs"),
        "{paths:?}"
    );
    assert_eq!(
        outcome.phase,
        BackupPhase::Completed,
        "{:?}",
        outcome.results
    );
    assert_eq!(outcome.items_backed_up, paths.len() as u64);

    let log = backup_log(&location, "shop").await;
    // Once when listed, once when the Pod names it and its GET finds it being deleted.
    assert_eq!(
        log.matches("Skipped 1 items of persistentvolumeclaims (being-deleted): shop/logs")
            .count(),
        2,
        "{log}"
    );
    assert!(
        log.contains("Backed up 2 additional items of persistentvolumes named by backed-up items"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_item_checks_apply_to_what_the_actions_add() {
    let (_sim, client) = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);

    // Only Pods: the claims' type is not included, so no claim comes, and no volume either
    // (nor the Namespace object: its type is not included).
    let mut pods_only = Backup::named("pods").including_namespaces(&["shop"]);
    pods_only.spec.included_resources = Some(vec!["pods".to_owned()]);
    backup_support::check_and_run(
        client.clone(),
        &location,
        &pods_only,
        BackupOptions::default(),
    )
    .await
    .unwrap();
    let paths = archived(&location, "pods").await;
    assert_eq!(paths, BTreeSet::from(["pods/shop/db-0".to_owned()]),);
    let log = backup_log(&location, "pods").await;
    assert!(
        log.contains(
            "Skipped 2 items of persistentvolumeclaims (type-not-included): shop/data, shop/logs"
        ),
        "{log}"
    );

    // Volumes excluded explicitly: the claims come, their volumes do not.
    let mut no_volumes = Backup::named("no-volumes").including_namespaces(&["shop"]);
    no_volumes.spec.excluded_resources = Some(vec!["persistentvolumes".to_owned()]);
    backup_support::check_and_run(client, &location, &no_volumes, BackupOptions::default())
        .await
        .unwrap();
    let paths = archived(&location, "no-volumes").await;
    assert!(
        paths.contains("persistentvolumeclaims/shop/data"),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("persistentvolumes/")),
        "{paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_backup_holds_each_named_item_once() {
    let (_sim, client) = cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let backup = Backup::named("all");

    let outcome =
        backup_support::check_and_run(client, &location, &backup, BackupOptions::default())
            .await
            .unwrap();

    let paths = archived(&location, "all").await;
    for path in [
        "persistentvolumes/cluster/pv-data",
        "persistentvolumes/cluster/pv-unrelated",
        "persistentvolumes/cluster/pv-logs",
        "clusterroles.rbac.authorization.k8s.io/cluster/edit",
        "clusterrolebindings.rbac.authorization.k8s.io/cluster/others",
    ] {
        assert!(paths.contains(path), "{path} in {paths:?}");
    }
    assert_eq!(
        outcome.items_backed_up,
        paths.len() as u64,
        "every item once: listed items are not added again"
    );
    let log = backup_log(&location, "all").await;
    assert!(!log.contains("additional items"), "{log}");
}
