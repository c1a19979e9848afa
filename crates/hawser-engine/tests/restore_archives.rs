//! The restore engine against kube-sim with hand-written archives: hostile entries, unreadable
//! and missing archives, and volumes left to dynamic provisioning.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod restore_support;

use hawser_api::phase::RestorePhase;
use hawser_engine::restore::{RestoreError, RestoreOptions};
use restore_support::*;
use serde_json::json;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_entries_are_item_errors_and_create_nothing_else() {
    let Cluster { sim, client } = empty_cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let archive = HandArchive::new()
        .file("metadata/version", b"1.1.0\n")
        .item(
            "resources/namespaces/cluster/web.json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}),
        )
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &config_map("good", "web"),
        )
        .item(
            "resources/configmaps/namespaces/web/../../../../escape.json",
            &config_map("escape", "web"),
        )
        .file(
            "resources/configmaps/namespaces/web/broken.json",
            b"{\"kind\": ",
        )
        .raw(
            b"resources/configmaps/namespaces/web/link.json",
            tar::EntryType::Symlink,
            b"/etc/passwd",
            b"",
        )
        .item("notes/readme.json", &json!({"kind": "ConfigMap"}))
        .gzipped();
    let backup = store_archive(&location, "hand", archive).await;
    let restore = restore_of("hostile", "hand", json!({}));
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(outcome.phase, RestorePhase::PartiallyFailed);
    let errors = &outcome.results.errors;
    let web = &errors.namespaces["web"];
    assert_eq!(web.len(), 2, "{errors:?}");
    assert!(
        web.iter()
            .any(|m| m.contains("broken.json") && m.contains("not valid JSON"))
    );
    assert!(
        web.iter()
            .any(|m| m.contains("link.json") && m.contains("links are not allowed"))
    );
    assert_eq!(errors.velero.len(), 2, "{errors:?}");
    assert!(
        errors
            .velero
            .iter()
            .any(|m| m.contains("escapes the archive root"))
    );
    assert!(
        errors
            .velero
            .iter()
            .any(|m| m.contains("notes/readme.json"))
    );
    assert_eq!(outcome.errors(), 4);
    let store = sim.store();
    assert_eq!(names(&store.list("v1", "ConfigMap", Some("web"))), ["good"]);
    assert!(store.get("v1", "ConfigMap", "web", "escape").is_none());
    let list = restored_list(&location, "hostile").await;
    assert_eq!(list.len(), 2, "{list:?}"); // the namespace and the one good item
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_archive_fails_the_restore_before_anything_is_created() {
    let Cluster { sim, client } = empty_cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let good = HandArchive::new()
        .item(
            "resources/namespaces/cluster/web.json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}),
        )
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &config_map("good", "web"),
        )
        .gzipped();
    // The same archive cut short: the items before the cut are readable, the stream is not.
    let truncated = good[..good.len() - 40].to_vec();
    let cases = [
        ("truncated", truncated),
        ("not-gzip", b"PK\x03\x04 a zip file".to_vec()),
    ];
    for (name, bytes) in cases {
        let backup = store_archive(&location, name, bytes).await;
        let before = sim.store().resource_version();
        let restore = restore_of(name, name, json!({}));
        let err = check_and_run(
            &client,
            &location,
            &restore,
            &backup,
            RestoreOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(err, RestoreError::Archive { .. }),
            "{name}: {err:?}"
        );
        assert_eq!(err.phase(), RestorePhase::Failed);
        assert_eq!(err.category(), "ArchiveCorrupt");
        assert!(
            err.full_message().contains("reading the backup archive"),
            "{err}"
        );
        assert_eq!(
            sim.store().resource_version(),
            before,
            "{name}: nothing written"
        );
        assert!(sim.store().get("v1", "Namespace", "", "web").is_none());
    }
    // A missing archive fails too.
    let err = check_and_run(
        &client,
        &location,
        &restore_of("missing", "absent", json!({})),
        &hawser_api::Backup::named("absent"),
        RestoreOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.category(), "ArchiveUnavailable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_with_reclaim_policy_delete_are_left_to_dynamic_provisioning() {
    let Cluster { sim, client } = empty_cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let pv = |name: &str, policy: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"persistentVolumeReclaimPolicy": policy, "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
                "claimRef": {"namespace": "db", "name": format!("claim-{name}"), "uid": "u-1"}}})
    };
    let pvc = |volume: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("claim-{volume}"), "namespace": "db",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": volume, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}})
    };
    let archive = HandArchive::new()
        .item(
            "resources/namespaces/cluster/db.json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "db"}}),
        )
        .item(
            "resources/persistentvolumes/cluster/pv-delete.json",
            &pv("pv-delete", "Delete"),
        )
        .item(
            "resources/persistentvolumes/cluster/pv-retain.json",
            &pv("pv-retain", "Retain"),
        )
        .item(
            "resources/persistentvolumeclaims/namespaces/db/claim-pv-delete.json",
            &pvc("pv-delete"),
        )
        .item(
            "resources/persistentvolumeclaims/namespaces/db/claim-pv-retain.json",
            &pvc("pv-retain"),
        )
        .gzipped();
    let backup = store_archive(&location, "volumes", archive).await;
    let restore = restore_of("volumes", "volumes", json!({}));
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let store = sim.store();
    assert!(
        store
            .get("v1", "PersistentVolume", "", "pv-delete")
            .is_none()
    );
    let kept = store
        .get("v1", "PersistentVolume", "", "pv-retain")
        .unwrap();
    assert!(kept["spec"]["claimRef"].get("uid").is_none(), "{kept}");
    assert!(
        kept["metadata"]
            .get("annotations")
            .is_none_or(|a| a.get("pv.kubernetes.io/bound-by-controller").is_none())
    );
    let fresh = store
        .get("v1", "PersistentVolumeClaim", "db", "claim-pv-delete")
        .unwrap();
    assert!(
        fresh["spec"]
            .get("volumeName")
            .is_none_or(|v| v != "pv-delete"),
        "{fresh}"
    );
    let bound = store
        .get("v1", "PersistentVolumeClaim", "db", "claim-pv-retain")
        .unwrap();
    assert_eq!(bound["spec"]["volumeName"], "pv-retain");
    let log = log_text(&location, "volumes").await;
    assert!(
        log.contains("Skipped 1 items of persistentvolumes: dynamically_reprovisioned"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_whose_object_disagrees_with_its_path_is_an_error_naming_the_entry() {
    let Cluster { sim, client } = empty_cluster().await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let namespace =
        |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let archive = HandArchive::new()
        .file("metadata/version", b"1.1.0\n")
        .item("resources/namespaces/cluster/web.json", &namespace("web"))
        .item(
            "resources/configmaps/namespaces/web/good.json",
            &config_map("good", "web"),
        )
        // Another name than its path's.
        .item(
            "resources/configmaps/namespaces/web/renamed.json",
            &config_map("impostor", "web"),
        )
        // Another namespace than its path's.
        .item(
            "resources/configmaps/namespaces/web/moved.json",
            &config_map("moved", "kube-system"),
        )
        // Another kind than its path's type.
        .item(
            "resources/configmaps/namespaces/web/secretive.json",
            &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "secretive", "namespace": "web"}, "data": {"k": "dg=="}}),
        )
        // A namespaced object under a cluster-scoped path.
        .item(
            "resources/namespaces/cluster/ghost.json",
            &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "ghost", "namespace": "web"}}),
        )
        // A Namespace object named otherwise than its path.
        .item(
            "resources/namespaces/cluster/shadow.json",
            &namespace("elsewhere"),
        )
        .gzipped();
    let backup = store_archive(&location, "mixed", archive).await;
    let restore = restore_of("mixed", "mixed", json!({}));
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(outcome.phase, RestorePhase::PartiallyFailed);
    let errors = &outcome.results.errors;
    let web = &errors.namespaces["web"];
    let expected_web = [
        "error restoring configmaps/web/renamed: the object in archive entry resources/configmaps/namespaces/web/renamed.json has metadata.name \"impostor\" but its path names it \"renamed\"; it is not restored",
        "error restoring configmaps/web/moved: the object in archive entry resources/configmaps/namespaces/web/moved.json has metadata.namespace \"kube-system\" but its path puts it in namespace \"web\"; it is not restored",
        "error restoring configmaps/web/secretive: the object in archive entry resources/configmaps/namespaces/web/secretive.json has kind \"Secret\" but its path holds configmaps (kind \"ConfigMap\"); it is not restored",
    ];
    assert_eq!(web.len(), expected_web.len(), "{errors:?}");
    for message in expected_web {
        assert!(
            web.iter().any(|m| m == message),
            "missing {message}\nin {web:#?}"
        );
    }
    let expected_cluster = [
        "error restoring namespaces/ghost: the object in archive entry resources/namespaces/cluster/ghost.json has metadata.namespace \"web\" but its path says it is cluster-scoped; it is not restored",
        "error restoring namespaces/shadow: the object in archive entry resources/namespaces/cluster/shadow.json has metadata.name \"elsewhere\" but its path names it \"shadow\"; it is not restored",
    ];
    assert_eq!(errors.cluster.len(), expected_cluster.len(), "{errors:?}");
    for message in expected_cluster {
        assert!(
            errors.cluster.iter().any(|m| m == message),
            "missing {message}\nin {:#?}",
            errors.cluster
        );
    }

    // Nothing was created for them, under either identity; the good item was.
    let store = sim.store();
    assert_eq!(names(&store.list("v1", "ConfigMap", Some("web"))), ["good"]);
    assert!(
        store
            .get("v1", "ConfigMap", "kube-system", "moved")
            .is_none()
    );
    assert!(store.list("v1", "Secret", Some("web")).is_empty());
    for ns in ["ghost", "shadow", "elsewhere"] {
        assert!(store.get("v1", "Namespace", "", ns).is_none(), "{ns}");
    }
    let list = restored_list(&location, "mixed").await;
    assert_eq!(
        list.get("v1/ConfigMap"),
        [
            "web/good(created)",
            "web/moved(failed)",
            "web/renamed(failed)",
            "web/secretive(failed)"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_control_objects_are_never_restored_and_the_restore_says_so() {
    let Cluster { sim, client } = empty_cluster().await;
    install_velero_crds(&client).await;
    let dir = TempDir::new().unwrap();
    let location = location(&dir);
    let velero = |kind: &str, name: &str, spec: serde_json::Value| {
        json!({"apiVersion": "velero.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "velero"}, "spec": spec})
    };
    let archive = HandArchive::new()
        .file("metadata/version", b"1.1.0\n")
        .item(
            "resources/namespaces/cluster/velero.json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "velero"}}),
        )
        .item(
            "resources/deletebackuprequests.velero.io/namespaces/velero/kill.json",
            &velero(
                "DeleteBackupRequest",
                "kill",
                json!({"backupName": "victim"}),
            ),
        )
        .item(
            "resources/schedules.velero.io/namespaces/velero/every-second.json",
            &velero(
                "Schedule",
                "every-second",
                json!({"schedule": "@every 1s", "template": {}}),
            ),
        )
        .item(
            "resources/downloadrequests.velero.io/namespaces/velero/out.json",
            &velero(
                "DownloadRequest",
                "out",
                json!({"target": {"kind": "BackupLog", "name": "victim"}}),
            ),
        )
        .item(
            "resources/configmaps/namespaces/velero/settings.json",
            &config_map("settings", "velero"),
        )
        .gzipped();
    let backup = store_archive(&location, "forged", archive).await;
    let restore = restore_of("r-forged", "forged", json!({}));
    let outcome = run_restore(&client, &location, &restore, &backup).await;

    assert_eq!(
        outcome.phase,
        RestorePhase::Completed,
        "{:?}",
        outcome.results
    );
    let warnings = &outcome.results.warnings.velero;
    for gr in [
        "deletebackuprequests.velero.io",
        "schedules.velero.io",
        "downloadrequests.velero.io",
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("1 {gr} objects")) && w.contains("never creates")),
            "{gr}: {warnings:?}"
        );
    }
    let store = sim.store();
    for kind in ["DeleteBackupRequest", "Schedule", "DownloadRequest"] {
        assert!(
            store.list("velero.io/v1", kind, Some("velero")).is_empty(),
            "{kind}"
        );
    }
    // The ordinary object beside them is restored.
    assert_eq!(
        names(&store.list("v1", "ConfigMap", Some("velero"))),
        ["settings"]
    );

    // Filters that leave the control objects out say nothing of them.
    let restore = restore_of(
        "r-configmaps",
        "forged",
        json!({"includedResources": ["configmaps"], "existingResourcePolicy": "none"}),
    );
    let outcome = run_restore(&client, &location, &restore, &backup).await;
    assert!(
        outcome
            .results
            .warnings
            .velero
            .iter()
            .all(|w| !w.contains("control objects")),
        "{:?}",
        outcome.results
    );
}
