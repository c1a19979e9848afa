//! Uploads that fail part-way (the `testing` feature's fault wrapper, and a proxy that cuts the
//! connection to S3 after a number of bytes): the failure reaches the writer with the key in its
//! message, the store is left with nothing of the upload (no object, no staging file, no open
//! multipart upload), and the limits are exact (a fault whose limit is not reached stores the
//! artifact whole).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::Bytes;
use common::{Proxy, S3Server, artifact, files_under, read_blocking, spec_for, write_blocking};
use hawser_store::faults::{StoreFault, StoreFaults};
use hawser_store::{FailureKind, Location, LocationOptions, LocationSpec, StoreError};

const PART: usize = 64 * 1024;

fn fs_location(root: &std::path::Path) -> Location {
    let spec =
        LocationSpec::new("filesystem", "velero").with_config("root", root.to_str().unwrap());
    let options = LocationOptions {
        part_size: PART,
        ..LocationOptions::default()
    };
    Location::with_options(&spec, options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filesystem_upload_cut_after_two_parts_fails_and_leaves_no_file() {
    let root = tempfile::tempdir().unwrap();
    let faults = StoreFaults::default();
    faults.add(StoreFault::on(".tar.gz").after_parts(2));
    let location = fs_location(root.path()).with_faults(&faults);
    let key = "backups/b1/b1.tar.gz";

    // Ten parts' worth: the third part fails while later ones are still being produced.
    let err = write_blocking(&location, key, artifact(10 * PART + 5, 1))
        .await
        .expect_err("an upload whose third part fails must fail");
    assert!(
        err.contains("upload `backups/b1/b1.tar.gz` failed (Unreachable)"),
        "{err}"
    );
    assert!(err.contains("injected storage fault"), "{err}");
    assert!(faults.injected() >= 1);
    assert_eq!(faults.caught(), ["backups/b1/b1.tar.gz"]);

    // On disk, not through the location's listing (which hides `b1.tar.gz#1` staging files):
    // the upload was aborted, so not even its first two parts are left.
    assert_eq!(files_under(root.path()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_and_part_limits_are_exact() {
    let root = tempfile::tempdir().unwrap();
    let faults = StoreFaults::default();
    let location = fs_location(root.path()).with_faults(&faults);
    let data = artifact(3 * PART, 2);
    let len = data.len() as u64;

    // Exactly the artifact's size (three parts) gets through: it is stored whole.
    let whole = faults.add(StoreFault::on("whole.tar.gz").after_bytes(len));
    let parts = faults.add(StoreFault::on("parts.tar.gz").after_parts(3));
    for key in ["backups/b/whole.tar.gz", "backups/b/parts.tar.gz"] {
        write_blocking(&location, key, data.clone()).await.unwrap();
        assert!(read_blocking(&location, key).await == data, "{key} differs");
    }
    assert_eq!(faults.injected(), 0);
    faults.remove(whole);
    faults.remove(parts);

    // One byte or one part less, and the same upload fails.
    faults.add(StoreFault::on("short-bytes.tar.gz").after_bytes(len - 1));
    faults.add(StoreFault::on("short-parts.tar.gz").after_parts(2));
    for key in [
        "backups/b/short-bytes.tar.gz",
        "backups/b/short-parts.tar.gz",
    ] {
        let err = write_blocking(&location, key, data.clone()).await;
        assert!(err.is_err(), "{key} was stored although its upload failed");
        assert!(!location.exists(key).await.unwrap(), "{key}");
    }
    assert_eq!(
        files_under(&root.path().join("velero/backups/b")),
        ["parts.tar.gz", "whole.tar.gz"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_request_put_fails_as_often_as_asked_then_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let faults = StoreFaults::default();
    faults.add(StoreFault::on("velero-backup.json").times(1));
    let location = fs_location(root.path()).with_faults(&faults);

    // The other objects of the backup are not affected.
    location
        .put("backups/b1/b1-logs.gz", Bytes::from_static(b"log"))
        .await
        .unwrap();
    let err = location
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Storage {
                operation: "put",
                kind: FailureKind::Unreachable,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!location.backup_exists("b1").await.unwrap());
    assert_eq!(files_under(root.path()), ["velero/backups/b1/b1-logs.gz"]);

    // The fault was for one upload: the next commit lands.
    location
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();
    assert!(location.backup_exists("b1").await.unwrap());
    assert_eq!(faults.injected(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_multipart_upload_cut_after_one_part_is_aborted_in_the_bucket() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("faulty-parts");
    s3.create_bucket(&bucket);
    let faults = StoreFaults::default();
    faults.add(StoreFault::on(".tar.gz").after_parts(1));
    let location = Location::with_options(&s3.spec(&bucket), common::test_options())
        .unwrap()
        .with_faults(&faults);

    // 5 MiB parts: the first part is stored in S3, the second fails.
    let key = "backups/b1/b1.tar.gz";
    let err = write_blocking(&location, key, artifact(16 * 1024 * 1024, 4))
        .await
        .expect_err("the upload must fail at its second part");
    assert!(
        err.contains("upload `backups/b1/b1.tar.gz` failed"),
        "{err}"
    );
    assert!(!location.exists(key).await.unwrap());
    assert!(location.list_objects("").await.unwrap().is_empty());
    // The multipart upload (with its first part) was aborted, not left to a lifecycle rule.
    assert_eq!(s3.incomplete_uploads(&bucket), Vec::<String>::new());

    // The last part fails, when the writer is finished: aborted as well.
    faults.clear();
    faults.add(StoreFault::on(".tar.gz").after_parts(2));
    let key = "backups/b2/b2.tar.gz";
    let err = write_blocking(&location, key, artifact(12 * 1024 * 1024, 6))
        .await
        .expect_err("the upload must fail at its third and last part");
    assert!(
        err.contains("upload `backups/b2/b2.tar.gz` failed"),
        "{err}"
    );
    assert!(location.list_objects("").await.unwrap().is_empty());
    assert_eq!(s3.incomplete_uploads(&bucket), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_connection_cut_after_six_mebibytes_fails_the_upload_and_stores_nothing() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("cut-bytes");
    s3.create_bucket(&bucket);
    // The network to S3 carries 6 MiB of requests, then goes away for good.
    let proxy = Proxy::cutting_after(&s3.endpoint, 6 * 1024 * 1024).await;
    let through_proxy = Location::with_options(
        &spec_for(&proxy.endpoint(), &bucket),
        common::test_options(),
    )
    .unwrap();
    let direct = Location::with_options(&s3.spec(&bucket), common::test_options()).unwrap();

    let key = "backups/b2/b2.tar.gz";
    let err = write_blocking(&through_proxy, key, artifact(20 * 1024 * 1024, 5))
        .await
        .expect_err("the upload succeeded although the connection was cut");
    assert!(
        err.contains("upload `backups/b2/b2.tar.gz` failed (Unreachable)"),
        "{err}"
    );
    assert!(
        proxy.sent.load(std::sync::atomic::Ordering::SeqCst) <= 6 * 1024 * 1024,
        "the proxy let more through than its limit"
    );
    // Nothing of the artifact is visible in the bucket.
    assert!(!direct.exists(key).await.unwrap());
    assert!(direct.list_objects("").await.unwrap().is_empty());
}
