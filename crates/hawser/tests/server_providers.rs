//! Every storage provider through `hawser server`: `aws` against moto (or s3s-fs with
//! `HAWSER_TEST_S3_SERVER=s3s-fs`), `azure` against Azurite, `gcp` against moto serving GCS's
//! XML API (hawser-store's `tests/providers.rs` says why).
//! A backup in one cluster, its logs read through a download URL, the backup synced into a
//! second cluster pointed at the same bucket and restored there, then deleted from the first
//! cluster: its keys leave the bucket and the second cluster's copy goes with the next sync.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::time::Duration;

use cli_support::Cluster;
use serde_json::json;
use server_support::{
    FAST, Server, create_backup, create_restore, phase, request_deletion, seed, storage_location,
    until_gone, wait_final, wait_for,
};
use store_common::{Kind, StorageServer};

async fn round_trip(kind: Kind) {
    let storage = StorageServer::for_test(kind);
    let bucket = storage.bucket("e2e");
    storage.create_bucket(&bucket);
    let spec = storage.spec(&bucket);
    let location = hawser_store::Location::new(&spec.clone().with_prefix("cluster-a")).unwrap();

    // The first cluster backs up `shop`.
    let first = Cluster::start().await;
    let first_dir = tempfile::tempdir().unwrap();
    seed(&first, 3);
    storage_location(&first, &spec, "cluster-a", None);
    // GCS sends a bearer token: over plain http only to an endpoint the server lists.
    let trusted = format!("--trusted-endpoint={}", storage.endpoint);
    let flags: Vec<&str> = FAST.iter().copied().chain([trusted.as_str()]).collect();
    let first_server = Server::start(&first, first_dir.path(), &flags).await;
    let available = |o: &serde_json::Value| phase(o) == "Available";
    let timeout = Duration::from_secs(30);
    wait_for(
        &first,
        Some(&first_server),
        "BackupStorageLocation",
        "default",
        timeout,
        available,
    )
    .await;
    create_backup(&first, "b1", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&first, &first_server, "Backup", "b1").await;
    assert_eq!(
        phase(&done),
        "Completed",
        "{done:#}\n{}",
        first_server.log_text()
    );
    // 3 ConfigMaps, 2 Secrets and the Namespace.
    assert_eq!(done["status"]["progress"]["itemsBackedUp"], 6);
    let record = location.backup_metadata("b1").await.unwrap().unwrap();
    let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(record["status"]["phase"], "Completed");

    // The backup's log, through a DownloadRequest and the URL the server signed for it: the
    // stored log, whole.
    let run = first.hawser(&["backup", "logs", "b1"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, first_server.log_text());
    let stored = location.get("backups/b1/b1-logs.gz").await.unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&stored[..]), &mut log)
        .unwrap();
    assert!(!log.is_empty());
    assert_eq!(run.stdout, log);

    // A second cluster pointed at the same bucket and prefix syncs the backup and restores it.
    let second = Cluster::start().await;
    let second_dir = tempfile::tempdir().unwrap();
    storage_location(&second, &spec, "cluster-a", Some("1s"));
    let second_server = Server::start(&second, second_dir.path(), &flags).await;
    let synced = wait_for(
        &second,
        Some(&second_server),
        "Backup",
        "b1",
        timeout,
        |o| phase(o) == "Completed",
    )
    .await;
    assert_eq!(
        synced["metadata"]["labels"]["velero.io/storage-location"],
        "default"
    );
    create_restore(&second, "r1", json!({"backupName": "b1"}));
    let restored = wait_final(&second, &second_server, "Restore", "r1").await;
    assert_eq!(
        phase(&restored),
        "Completed",
        "{restored:#}\n{}",
        second_server.log_text()
    );
    let mut names: Vec<String> = second
        .store()
        .list("v1", "ConfigMap", Some("shop"))
        .iter()
        .map(|cm| cm["metadata"]["name"].as_str().unwrap().to_owned())
        .filter(|name| name.starts_with("cm-"))
        .collect();
    names.sort();
    assert_eq!(names, ["cm-0", "cm-1", "cm-2"]);
    assert!(
        !location
            .list_objects("restores/r1")
            .await
            .unwrap()
            .is_empty(),
        "the restore's log and results are in the location"
    );

    // Deleted from the first cluster: its keys leave the bucket, and the second cluster drops
    // its copy at the next sync.
    request_deletion(&first, "delete-b1", "b1");
    until_gone(&first, &first_server, "Backup", "b1").await;
    assert!(
        location
            .list_objects("backups/b1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(location.list_backups().await.unwrap().is_empty());
    until_gone(&second, &second_server, "Backup", "b1").await;
    assert!(
        second.get("velero.io/v1", "Restore", "r1").is_some(),
        "a Restore of another cluster is that cluster's own"
    );
}

/// The round trip, once per provider.
macro_rules! suite {
    ($($provider:ident => $kind:expr),* $(,)?) => {$(
        mod $provider {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn backup_logs_sync_restore_and_deletion_through_the_location() {
                super::round_trip($kind).await;
            }
        }
    )*};
}

suite!(aws => super::Kind::s3(), azure => super::Kind::Azurite, gcp => super::Kind::GcsOnMoto);
