//! One suite for every provider, each against a server of its protocol: `aws` against moto (or
//! s3s-fs with `HAWSER_TEST_S3_SERVER=s3s-fs`), `azure` against Azurite, `gcp` against moto
//! serving GCS's XML API, which is S3's (no GCS emulator here speaks it; see docs/storage.md).
//! `scripts/start-storage.sh` starts them; `azure` and `gcp` tests each start a server of their
//! own.
//!
//! What every provider must do for hawser: store a large artifact in parts and read it back, list
//! backups for the sync, delete a backup's keys, leave nothing that looks complete when an upload
//! fails half-way, give a download URL a plain HTTP client can read, and name the cause when a
//! location cannot be used.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{
    Kind, StorageServer, artifact, plain_get, read_blocking, test_options, write_blocking,
};
use hawser_store::faults::{StoreFault, StoreFaults};
use hawser_store::{FailureKind, Location, validate};

/// A bucket of the test's own on `server`, and a location on it under the prefix `cluster-a`.
fn location(server: &StorageServer, base: &str) -> (String, Location) {
    let bucket = server.bucket(base);
    server.create_bucket(&bucket);
    let spec = server.spec(&bucket).with_prefix("cluster-a");
    (
        bucket,
        Location::with_options(&spec, test_options()).unwrap(),
    )
}

/// A 12 MiB archive (three parts of 5 MiB at most) goes up through the blocking writer and comes
/// back byte for byte; the sync's listing sees every backup and its record; deleting a backup removes
/// every key it had and nothing of another backup's.
async fn large_artifact_listing_and_deletion(kind: Kind) {
    let server = StorageServer::for_test(kind);
    let (_, location) = location(&server, "round-trip");
    validate(&location).await.unwrap();

    let archive = artifact(12 * 1024 * 1024, 7);
    let written = write_blocking(&location, "backups/b1/b1.tar.gz", archive.clone())
        .await
        .unwrap();
    assert_eq!(written, archive.len() as u64);
    location
        .put("backups/b1/b1-logs.gz", Bytes::from_static(b"logs"))
        .await
        .unwrap();
    // Only a backup with its record counts: b2 has an archive and no velero-backup.json yet.
    location
        .put("backups/b2/b2.tar.gz", Bytes::from_static(b"partial"))
        .await
        .unwrap();
    location
        .commit_backup("b1", Bytes::from_static(b"{\"kind\":\"Backup\"}"), false)
        .await
        .unwrap();
    location
        .commit_backup("b3", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();

    assert_eq!(
        read_blocking(&location, "backups/b1/b1.tar.gz").await,
        archive,
        "the archive read back"
    );
    assert_eq!(
        location.head("backups/b1/b1.tar.gz").await.unwrap().size,
        archive.len() as u64
    );
    // The sync lists every backup directory and reads each one's record: b2 has none yet.
    assert_eq!(location.list_backups().await.unwrap(), ["b1", "b2", "b3"]);
    assert!(location.backup_metadata("b2").await.unwrap().is_none());
    assert_eq!(
        location.backup_metadata("b1").await.unwrap().unwrap(),
        Bytes::from_static(b"{\"kind\":\"Backup\"}")
    );
    validate(&location).await.unwrap();

    assert_eq!(location.delete_backup("b1").await.unwrap(), 3);
    assert_eq!(location.list_backups().await.unwrap(), ["b2", "b3"]);
    assert!(
        location
            .list_objects("backups/b1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!location.exists("backups/b1/b1.tar.gz").await.unwrap());
    assert_eq!(
        location.list_objects("backups/b2").await.unwrap(),
        ["backups/b2/b2.tar.gz"]
    );
}

/// An upload that fails after its first part stores nothing: no object under the key, nothing
/// else in the backup's directory, and the error names the key.
async fn failure_mid_upload_stores_nothing(kind: Kind) {
    let server = StorageServer::for_test(kind);
    let (_, location) = location(&server, "cut");
    let faults = StoreFaults::default();
    faults.add(StoreFault::on("b1.tar.gz").after_parts(1));
    let faulty = location.clone().with_faults(&faults);

    let err = write_blocking(
        &faulty,
        "backups/b1/b1.tar.gz",
        artifact(12 * 1024 * 1024, 3),
    )
    .await
    .unwrap_err();
    assert!(err.contains("backups/b1/b1.tar.gz"), "{err}");
    assert!(faults.injected() >= 1);
    assert!(
        faults.delivered() >= 5 * 1024 * 1024,
        "the first part reached the store"
    );
    assert!(!location.exists("backups/b1/b1.tar.gz").await.unwrap());
    assert!(location.list_objects("backups").await.unwrap().is_empty());
    assert!(location.list_backups().await.unwrap().is_empty());
    if matches!(server.kind, Kind::Moto | Kind::GcsOnMoto) {
        assert!(server.incomplete_uploads(location.bucket()).is_empty());
    }
}

/// The download URL of an object reads it with a plain HTTP GET and no credentials; a missing
/// object's URL answers 404; where the server checks signatures, a URL whose signature was
/// changed is refused.
async fn download_url_is_readable_with_a_plain_get(kind: Kind) {
    let server = StorageServer::for_test(kind);
    let (bucket, location) = location(&server, "signed");
    let key = "backups/b1/b1-logs.gz";
    let body = Bytes::from_static(b"\x1f\x8bnot really gzip");
    location.put(key, body.clone()).await.unwrap();

    let url = location
        .download_url(key, Duration::from_secs(600))
        .await
        .unwrap();
    assert!(
        url.starts_with(&format!("{}/{bucket}/cluster-a/{key}?", server.endpoint)),
        "{url}"
    );
    let (status, got) = plain_get(&url);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
    assert_eq!(got, body.to_vec());

    let missing = location
        .download_url("backups/b1/b1.tar.gz", Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(plain_get(&missing).0, 404, "{missing}");

    if matches!(server.kind, Kind::S3sFs | Kind::Azurite) {
        // Another object under the same signature.
        let forged = url.replacen("b1-logs.gz", "b1.tar.gz", 1);
        let (status, answer) = plain_get(&forged);
        assert_eq!(
            status,
            403,
            "{forged}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
}

/// A location that cannot be used says why: no such bucket, an endpoint nobody answers on, and
/// (where the server checks credentials) credentials it refuses.
async fn validation_names_the_cause(kind: Kind) {
    let server = StorageServer::for_test(kind);
    let bucket = server.bucket("causes");
    server.create_bucket(&bucket);
    let check = |spec: hawser_store::LocationSpec, want: FailureKind, says: &'static str| async move {
        let location = Location::with_options(&spec, test_options()).unwrap();
        let err = validate(&location).await.unwrap_err();
        assert_eq!(err.failure_kind(), Some(want), "{}", err.reason());
        assert!(err.reason().contains(says), "{}", err.reason());
    };

    check(
        server.spec("no-such-bucket"),
        FailureKind::NoSuchBucket,
        "the bucket does not exist",
    )
    .await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    check(
        server.spec_at(&format!("http://127.0.0.1:{closed}"), &bucket),
        FailureKind::Unreachable,
        "the storage endpoint is unreachable",
    )
    .await;
    match server.spec_with_wrong_credentials(&bucket) {
        Some(wrong) => {
            check(
                wrong.clone(),
                FailureKind::AccessDenied,
                "the credentials were rejected",
            )
            .await;
            let location = Location::with_options(&wrong, test_options()).unwrap();
            let err = location
                .put("backups/b/velero-backup.json", Bytes::from_static(b"{}"))
                .await
                .unwrap_err();
            assert_eq!(err.category(), "AccessDenied", "{}", err.full_message());
        }
        None => println!("{} accepts any credentials: not checked", kind.name()),
    }
    // The right spec on the same server works.
    let location = Location::with_options(&server.spec(&bucket), test_options()).unwrap();
    validate(&location).await.unwrap();
}

/// The suite, once per provider.
macro_rules! suite {
    ($($provider:ident => $kind:expr),* $(,)?) => {$(
        mod $provider {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn large_artifact_listing_and_deletion() {
                super::large_artifact_listing_and_deletion($kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn failure_mid_upload_stores_nothing() {
                super::failure_mid_upload_stores_nothing($kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn download_url_is_readable_with_a_plain_get() {
                super::download_url_is_readable_with_a_plain_get($kind).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn validation_names_the_cause() {
                super::validation_names_the_cause($kind).await;
            }
        }
    )*};
}

suite!(aws => Kind::s3(), azure => Kind::Azurite, gcp => Kind::GcsOnMoto);
