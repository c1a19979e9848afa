//! `hawser backup logs`, `backup download`, `restore logs` and `version` against a `hawser
//! server` process and kube-sim: DownloadRequests and ServerStatusRequests answered by the
//! server, files read through the URLs it signs (a filesystem location served by the server
//! itself, and an S3 location's pre-signed URLs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::io::Read;
use std::time::Duration;

use cli_support::{Cluster, NS};
use serde_json::json;
use server_support::*;

const DR: (&str, &str) = ("velero.io/v1", "DownloadRequest");

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// A Restore of `shop` from `backup` into `shop-copy`.
fn restore_shop(cluster: &Cluster, name: &str, backup: &str) {
    create_restore(
        cluster,
        name,
        json!({"backupName": backup, "includedNamespaces": ["shop"],
               "namespaceMapping": {"shop": "shop-copy"}}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_logs_download_restore_logs_and_version() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    seed(&cluster, 3);
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "b1", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "b1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");

    // The log, gunzipped, exactly as stored.
    let stored_log = gunzip(&std::fs::read(artifact(root.path(), "b1", "b1-logs.gz")).unwrap());
    let run = cluster.hawser(&["backup", "logs", "b1"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, server.log_text());
    assert!(stored_log.contains("Backup finished"), "{stored_log}");
    assert_eq!(run.stdout, stored_log);

    // The archive, byte for byte; an existing file is kept unless --force.
    let out = cluster.dir().join("b1.tgz");
    let out_arg = out.to_str().unwrap();
    let run = cluster
        .hawser(&["backup", "download", "b1", "-o", out_arg])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("Backup b1 has been successfully downloaded to "),
        "{}",
        run.stdout
    );
    let archive = std::fs::read(artifact(root.path(), "b1", "b1.tar.gz")).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == archive,
        "the download differs from the archive"
    );
    let run = cluster
        .hawser(&["backup", "download", "b1", "-o", out_arg])
        .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    std::fs::write(&out, b"old").unwrap();
    let run = cluster
        .hawser(&["backup", "download", "b1", "-o", out_arg, "--force"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read(&out).unwrap() == archive);

    // Velero's side files are there, with Velero's content for "none".
    for (file, content) in [
        ("b1-itemoperations.json.gz", "[]\n"),
        ("b1-volumeinfo.json.gz", "[]\n"),
        ("b1-volumesnapshots.json.gz", "null\n"),
        ("b1-podvolumebackups.json.gz", "null\n"),
    ] {
        let bytes = std::fs::read(artifact(root.path(), "b1", file)).unwrap();
        assert_eq!(gunzip(&bytes), content, "{file}");
    }

    // The URLs the server signed: good as they are; refused once changed.
    let requests = cluster.store().list(DR.0, DR.1, Some(NS));
    let url = requests
        .iter()
        .filter_map(|r| r["status"]["downloadURL"].as_str())
        .find(|u| u.contains("b1-logs.gz"))
        .expect("the logs request has a URL")
        .to_owned();
    let (status, body) = store_common::plain_get(&url);
    assert_eq!(status, 200);
    assert_eq!(gunzip(&body), stored_log);
    let (status, _) = store_common::plain_get(&url.replace("b1-logs.gz", "b1.tar.gz"));
    assert_eq!(status, 403, "a URL changed to another file is refused");
    for r in &requests {
        assert_eq!(r["status"]["phase"], "Processed");
        assert!(r["status"]["expiration"].is_string(), "{r:#}");
        assert!(
            r["metadata"]["name"].as_str().unwrap().starts_with("b1-"),
            "{r:#}"
        );
    }

    // A restore's log, and a backup that is not finished yet.
    restore_shop(&cluster, "r1", "b1");
    let done = wait_final(&cluster, &server, "Restore", "r1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let stored = std::fs::read(
        root.path()
            .join(BUCKET)
            .join("restores/r1/restore-r1-logs.gz"),
    )
    .unwrap();
    let run = cluster.hawser(&["restore", "logs", "r1"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, gunzip(&stored));
    for (file, content) in [
        ("restore-r1-itemoperations.json.gz", "[]\n"),
        ("r1-volumeinfo.json.gz", "[]\n"),
    ] {
        let bytes = std::fs::read(root.path().join(BUCKET).join("restores/r1").join(file)).unwrap();
        assert_eq!(gunzip(&bytes), content, "{file}");
    }

    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "running", "namespace": NS},
            "spec": {}, "status": {"phase": "InProgress"}
        }))
        .unwrap();
    let run = cluster.hawser(&["backup", "logs", "running"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "logs for backup \"running\" are not available until it's finished processing"
        ),
        "{}",
        run.stderr
    );
    let run = cluster.hawser(&["backup", "logs", "nope"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("Backup velero/nope not found"),
        "{}",
        run.stderr
    );

    // Both versions, in Velero's layout.
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let run = cluster.hawser(&["version"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with(&format!("Client:\n\tVersion: {version}\n\tGit commit: ")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .ends_with(&format!("Server:\n\tVersion: {version}\n")),
        "{}",
        run.stdout
    );
    let ssr = cluster
        .store()
        .list("velero.io/v1", "ServerStatusRequest", Some(NS));
    assert_eq!(ssr.len(), 1);
    assert!(
        ssr[0]["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("velero-cli-")
    );
    assert_eq!(ssr[0]["status"]["phase"], "Processed");
    assert!(
        ssr[0]["status"]["plugins"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "velero.io/aws", "kind": "ObjectStore"})),
        "{:#}",
        ssr[0]
    );
    let run = cluster.hawser(&["version", "--client-only"]).await;
    assert_eq!(run.code, 0);
    assert!(!run.stdout.contains("Server:"), "{}", run.stdout);
    // A log from the bucket that carries terminal sequences (set the title, clear the screen)
    // is printed with them shown, not run.
    let hostile = "line one\n\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}2Jline two\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, hostile.as_bytes()).unwrap();
    std::fs::write(
        artifact(root.path(), "b1", "b1-logs.gz"),
        gz.finish().unwrap(),
    )
    .unwrap();
    let run = cluster.hawser(&["backup", "logs", "b1"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "line one\n\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{9b}2Jline two\n"
    );
}

/// Velero's answers to requests it cannot serve, and the deletion of expired ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_targets_expired_requests_and_no_server() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let store = cluster.store();

    // Without a server the CLI says so once its timeout has passed.
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "b0", "namespace": NS},
            "spec": {"storageLocation": "default"}, "status": {"phase": "Completed"}
        }))
        .unwrap();
    let run = cluster
        .hawser(&["backup", "logs", "b0", "--timeout", "1s"])
        .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("timed out after 1s waiting for the server to answer DownloadRequest"),
        "{}",
        run.stderr
    );
    // A backup that failed validation never ran: the CLI says why there is no log.
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "refused", "namespace": NS},
            "spec": {"storageLocation": "nowhere"},
            "status": {"phase": "FailedValidation", "validationErrors": [
                "BackupStorageLocation nowhere named in spec.storageLocation does not exist"
            ]}
        }))
        .unwrap();
    let run = cluster.hawser(&["backup", "logs", "refused"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("failed validation and never ran, so it has no log; why: BackupStorageLocation nowhere named in spec.storageLocation does not exist")
            && !run.stderr.contains("wait until"),
        "{}",
        run.stderr
    );
    let run = cluster.hawser(&["version", "--timeout", "1s"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("<error getting server version: "),
        "{}",
        run.stdout
    );
    for r in store.list(DR.0, DR.1, Some(NS)) {
        store
            .delete(DR.0, DR.1, NS, r["metadata"]["name"].as_str().unwrap())
            .unwrap();
    }

    // Before the server starts: one expired request, one for a backup that does not exist.
    let past = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DownloadRequest",
            "metadata": {"name": "old", "namespace": NS},
            "spec": {"target": {"kind": "BackupLog", "name": "b0"}},
            "status": {"phase": "Processed", "downloadURL": "http://x", "expiration": past.to_string()}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DownloadRequest",
            "metadata": {"name": "ghost", "namespace": NS},
            "spec": {"target": {"kind": "BackupContents", "name": "ghost"}}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DownloadRequest",
            "metadata": {"name": "ghost-restore", "namespace": NS},
            "spec": {"target": {"kind": "RestoreLog", "name": "ghost"}}
        }))
        .unwrap();
    let server = Server::start(&cluster, root.path(), FAST).await;

    poll(&server, "the expired request's deletion", || {
        cluster.get(DR.0, DR.1, "old").is_none().then_some(())
    })
    .await;
    for name in ["ghost", "ghost-restore"] {
        let refused = wait_for(
            &cluster,
            Some(&server),
            "DownloadRequest",
            name,
            Duration::from_secs(10),
            |r| r["status"]["expiration"].is_string(),
        )
        .await;
        // Velero: logged, not requeued; only the expiration is written, so it goes in 10 min.
        assert!(refused["status"]["downloadURL"].is_null(), "{refused:#}");
        assert!(
            matches!(refused["status"]["phase"].as_str(), None | Some("" | "New")),
            "{refused:#}"
        );
    }
    let log = server.log_text();
    assert!(log.contains("backup ghost not found"), "{log}");
    assert!(log.contains("restore ghost not found"), "{log}");
}

/// An S3 location (moto): the log through the store's pre-signed URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_location_logs_through_a_presigned_url() {
    let s3 = store_common::S3Server::start();
    let bucket = s3.bucket("logs");
    s3.create_bucket(&bucket);
    let cluster = Cluster::start().await;
    storage_location(&cluster, &s3.spec(&bucket), "c1", None);
    seed(&cluster, 2);
    let logs = tempfile::tempdir().unwrap();
    let server = Server::start(&cluster, logs.path(), FAST).await;
    create_backup(&cluster, "s1", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "s1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());

    let location = hawser_store::Location::new(
        &store_common::spec_for(&s3.endpoint, &bucket).with_prefix("c1"),
    )
    .unwrap();
    let stored = location.get("backups/s1/s1-logs.gz").await.unwrap();
    let run = cluster.hawser(&["backup", "logs", "s1"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, server.log_text());
    assert_eq!(run.stdout, gunzip(&stored));
    let url = cluster
        .store()
        .list(DR.0, DR.1, Some(NS))
        .iter()
        .find_map(|r| r["status"]["downloadURL"].as_str().map(str::to_owned))
        .unwrap();
    assert!(
        url.starts_with(&format!(
            "{}/{bucket}/c1/backups/s1/s1-logs.gz?",
            s3.endpoint
        )),
        "{url}"
    );

    let out = cluster.dir().join("s1.tgz");
    let run = cluster
        .hawser(&["backup", "download", "s1", "-o", out.to_str().unwrap()])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let archive = location.get("backups/s1/s1.tar.gz").await.unwrap();
    assert!(std::fs::read(&out).unwrap() == archive.to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_details_show_the_warnings_and_the_resource_lists() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    seed(&cluster, 2);
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "b1",
        json!({
            "includedNamespaces": ["shop"],
            "volumeGroupSnapshotLabelKey": "group"
        }),
    );
    let done = wait_final(&cluster, &server, "Backup", "b1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");

    // Without --details: the warnings (there is one), not the resource list.
    let run = cluster.hawser(&["backup", "describe", "b1"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("Warnings:\n  Velero:   spec.volumeGroupSnapshotLabelKey:"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n  Cluster:    <none>\n  Namespaces: <none>\n"),
        "{}",
        run.stdout
    );
    // No errors: no `Errors:` section, as in Velero.
    assert!(!run.stdout.contains("Errors:"), "{}", run.stdout);
    assert!(!run.stdout.contains("Resource List:"), "{}", run.stdout);

    let run = cluster
        .hawser(&["backup", "describe", "b1", "--details"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("Resource List:\n  v1/ConfigMap:\n    - shop/cm-0\n    - shop/cm-1\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  v1/Secret:\n    - shop/api-token\n"),
        "{}",
        run.stdout
    );

    restore_shop(&cluster, "r1", "b1");
    let done = wait_final(&cluster, &server, "Restore", "r1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let run = cluster
        .hawser(&["restore", "describe", "r1", "--details"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("Resource List:\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("    - shop-copy/cm-0"),
        "{}",
        run.stdout
    );
}

/// The bundle's entries: path → content.
fn bundle_entries(path: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    let file = std::fs::File::open(path).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            (path, text)
        })
        .collect()
}

/// `hawser debug`: Velero's checks first (the server is installed, the backup and restore
/// named exist), then a bundle with the namespace's objects, the versions, the pods' logs (or
/// why not), and the backup's and restore's descriptions and logs as the commands print them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_writes_a_bundle_of_objects_versions_logs_and_descriptions() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    seed(&cluster, 2);
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "b1", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "b1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    restore_shop(&cluster, "r1", "b1");
    let done = wait_final(&cluster, &server, "Restore", "r1").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    let output = cluster.dir().join("bundle.tar.gz");
    let out = output.to_str().unwrap();

    // No server Deployment in the namespace: refused, nothing written (Velero's check).
    let run = cluster.hawser(&["debug", "--output", out]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("component=velero"), "{}", run.stderr);
    assert!(!output.exists());

    let store = cluster.store();
    store
        .insert(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "velero", "namespace": NS, "labels": {"component": "velero"}},
            "spec": {"selector": {"matchLabels": {"deploy": "velero"}},
                     "template": {"metadata": {"labels": {"deploy": "velero"}},
                                  "spec": {"containers": [{"name": "velero", "image": "hawser"}]}}}
        }))
        .unwrap();
    // A Pod needs its service account to exist on a real API server (no controller makes the
    // namespace's `default` one in the test's cluster): one of its own.
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "bundle-test", "namespace": NS}
        }))
        .unwrap();
    store
        .insert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "velero-0", "namespace": NS},
            "spec": {"serviceAccountName": "bundle-test", "automountServiceAccountToken": false,
                     "containers": [{"name": "velero", "image": "hawser"}]}
        }))
        .unwrap();
    let run = cluster
        .hawser(&["debug", "--backup", "nope", "--output", out])
        .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("Backup velero/nope not found"),
        "{}",
        run.stderr
    );
    assert!(!output.exists());

    let run = cluster
        .hawser(&[
            "debug",
            "--backup",
            "b1",
            "--restore",
            "r1",
            "--output",
            out,
        ])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("Generated debug information bundle: /"),
        "{}",
        run.stdout
    );
    let entries = bundle_entries(&output);
    let entry = |path: &str| {
        entries
            .get(&format!("velero-bundle/{path}"))
            .unwrap_or_else(|| panic!("no {path} in {:?}", entries.keys()))
    };
    let version = entry("version.txt");
    assert!(version.starts_with("Client:\n\tVersion: v"), "{version}");
    assert!(version.contains("Server:\n\tVersion: "), "{version}");
    let backup = entry("resources/velero.io_v1/backups/b1.yaml");
    assert!(backup.contains("kind: Backup\n"), "{backup}");
    assert!(backup.contains("phase: Completed"), "{backup}");
    assert!(entry("resources/velero.io_v1/restores/r1.yaml").contains("kind: Restore\n"));
    assert!(
        entry("resources/velero.io_v1/backupstoragelocations/default.yaml")
            .contains("kind: BackupStorageLocation\n")
    );
    // The pod's container has an entry: its log, or why there is none. kube-sim serves no
    // logs, so the entry says why; a real API server answers for a pod no node runs as it
    // sees fit, so there only the entry is required.
    let log = entry("logs/velero-0/velero.log");
    if !cluster.is_real() {
        assert!(log.starts_with("<error getting the log:"), "{log}");
    }
    for (kind, name) in [("backup", "b1"), ("restore", "r1")] {
        let described = cluster.hawser(&[kind, "describe", name, "--details"]).await;
        assert_eq!(
            entry(&format!("{kind}_describe_{name}.txt")),
            &described.stdout
        );
        let log = cluster.hawser(&[kind, "logs", name]).await;
        assert!(!log.stdout.is_empty());
        assert_eq!(entry(&format!("{kind}_{name}.log")), &log.stdout);
    }
}
