//! What only the `aws` provider has, against a real S3-protocol server (moto or s3s-fs; see
//! `common::StorageServer`); what every provider does is in `providers.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use bytes::Bytes;
use common::{Proxy, S3Server, artifact, read_blocking, spec_for, test_options, write_blocking};
use hawser_store::{ConfigError, FailureKind, Location, StoreError, ValidationError, validate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_artifact_round_trip_with_path_style() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("velero");
    s3.create_bucket(&bucket);
    let location =
        Location::with_options(&s3.spec(&bucket).with_prefix("/cluster-a/"), test_options())
            .unwrap();

    // 12 MiB with 5 MiB parts: three parts.
    let data = artifact(12 * 1024 * 1024 + 17, 7);
    let key = "backups/b1/b1.tar.gz";
    let size = write_blocking(&location, key, data.clone()).await.unwrap();
    assert_eq!(size, data.len() as u64);

    let info = location.head(key).await.unwrap();
    assert_eq!(info.size, data.len() as u64);
    let e_tag = info.e_tag.unwrap_or_default();
    assert!(
        e_tag.trim_matches('"').ends_with("-3"),
        "not a three-part multipart upload: ETag {e_tag}"
    );

    assert!(
        read_blocking(&location, key).await == data,
        "read-back differs from what was written"
    );

    // The prefix is applied: a location without it sees the object under `cluster-a/`.
    let bare = Location::with_options(&s3.spec(&bucket), test_options()).unwrap();
    assert!(bare.exists("cluster-a/backups/b1/b1.tar.gz").await.unwrap());
    assert_eq!(
        bare.list_dirs("").await.unwrap(),
        vec!["cluster-a".to_owned()]
    );

    // Small objects, listing, commit marker.
    location
        .put("restores/r1/restore-r1-logs.gz", Bytes::from_static(b"log"))
        .await
        .unwrap();
    assert!(!location.backup_exists("b1").await.unwrap());
    location
        .commit_backup("b1", Bytes::from_static(b"{\"kind\":\"Backup\"}"), false)
        .await
        .unwrap();
    assert!(location.backup_exists("b1").await.unwrap());
    assert_eq!(
        location.backup_metadata("b1").await.unwrap().as_deref(),
        Some(&b"{\"kind\":\"Backup\"}"[..])
    );
    assert_eq!(
        location.list_backups().await.unwrap(),
        vec!["b1".to_owned()]
    );
    assert_eq!(
        location.list_restores().await.unwrap(),
        vec!["r1".to_owned()]
    );
    validate(&location).await.unwrap();

    // A small artifact goes through the same writer in a single request.
    write_blocking(&location, "backups/b1/b1-logs.gz", b"small".to_vec())
        .await
        .unwrap();
    assert_eq!(
        location.get("backups/b1/b1-logs.gz").await.unwrap(),
        Bytes::from_static(b"small")
    );

    assert_eq!(location.delete_backup("b1").await.unwrap(), 3);
    assert!(location.list_backups().await.unwrap().is_empty());
    assert!(
        location
            .get("backups/b1/b1.tar.gz")
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_from_a_named_profile() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("profiled");
    s3.create_bucket(&bucket);
    // `[default]` lacks its secret key: only the named profile can work.
    // The server's own keys (s3s-fs checks them; moto takes any).
    let file = "[default]\naws_access_key_id = broken\n\n[backup]\naws_access_key_id = testing\n\
                aws_secret_access_key = testing\naws_session_token = token\n";
    let spec = spec_for(&s3.endpoint, &bucket)
        .with_credentials(file)
        .with_config("profile", "backup");
    let location = Location::with_options(&spec, test_options()).unwrap();
    location
        .put("backups/x/velero-backup.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert!(location.backup_exists("x").await.unwrap());

    let default = spec_for(&s3.endpoint, &bucket).with_credentials(file);
    let err = Location::with_options(&default, test_options()).unwrap_err();
    assert!(matches!(err, ConfigError::Credentials { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "spec.credential: the referenced Secret key is not usable for provider `aws`"
    );
    let missing = spec_for(&s3.endpoint, &bucket)
        .with_credentials(file)
        .with_config("profile", "prod");
    let err = Location::with_options(&missing, test_options()).unwrap_err();
    let text = hawser_core::errors::chain_text(&err);
    assert!(
        text.contains("no profile `prod` (found: backup, default)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_bucket_is_a_clear_error() {
    let s3 = S3Server::start();
    let location = Location::with_options(&s3.spec("no-such-bucket"), test_options()).unwrap();
    let err = validate(&location).await.unwrap_err();
    assert_eq!(
        err.failure_kind(),
        Some(FailureKind::NoSuchBucket),
        "{err:?}"
    );
    assert!(
        err.reason().contains("the bucket does not exist"),
        "{}",
        err.reason()
    );
    assert_eq!(err.category(), "NoSuchBucket");

    // s3s-fs stores an object into a bucket that does not exist (it makes the directory);
    // S3 and moto answer NoSuchBucket.
    if s3.is_s3s() {
        return;
    }
    let err = location
        .put("backups/b/velero-backup.json", Bytes::from_static(b"{}"))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "NoSuchBucket", "{}", err.full_message());
}

/// An unknown host and a server that never answers are unreachable too, never a credentials
/// problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_failures_and_timeouts_are_unreachable() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let options = hawser_store::LocationOptions {
        request_timeout: std::time::Duration::from_secs(1),
        max_retries: 0,
        ..test_options()
    };
    for url in [
        "http://no-such-host.invalid:9000".to_owned(),
        format!("http://127.0.0.1:{port}"),
    ] {
        let location = Location::with_options(&spec_for(&url, "b"), options.clone()).unwrap();
        let err = validate(&location).await.unwrap_err();
        assert_eq!(
            err.failure_kind(),
            Some(FailureKind::Unreachable),
            "{url}: {}",
            err.reason()
        );
        assert!(err.reason().contains("unreachable"), "{}", err.reason());
        assert!(
            !err.reason().contains("spec.credential"),
            "{}",
            err.reason()
        );
    }
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_layout_makes_the_location_unavailable() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("shared");
    s3.create_bucket(&bucket);
    let location = Location::with_options(&s3.spec(&bucket), test_options()).unwrap();
    location
        .put("backups/b1/velero-backup.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    location
        .put("top-level-file", Bytes::from_static(b"ignored"))
        .await
        .unwrap();
    validate(&location).await.unwrap();
    location
        .put("photos/cat.jpg", Bytes::from_static(b"x"))
        .await
        .unwrap();
    let err = validate(&location).await.unwrap_err();
    assert!(
        matches!(&err, ValidationError::InvalidLayout { dirs, .. } if dirs == &["photos".to_owned()]),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "Backup store contains invalid top-level directories: [photos]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_failure_mid_upload_stores_nothing() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("flaky");
    s3.create_bucket(&bucket);
    let proxy = Proxy::start(&s3.endpoint).await;
    let through_proxy =
        Location::with_options(&spec_for(&proxy.endpoint(), &bucket), test_options()).unwrap();
    let direct = Location::with_options(&s3.spec(&bucket), test_options()).unwrap();

    let key = "backups/b2/b2.tar.gz";
    let mut writer = through_proxy.blocking_writer(key).unwrap();
    let data = artifact(30 * 1024 * 1024, 3);
    let (cut_tx, cut_rx) = std::sync::mpsc::channel::<()>();
    let producer = tokio::task::spawn_blocking(move || {
        for (i, chunk) in data.chunks(256 * 1024).enumerate() {
            if i == 40 {
                // 10 MiB written (two parts handed over): the storage goes away.
                cut_tx.send(()).unwrap();
            }
            if let Err(e) = writer.write_all(chunk) {
                return Err(e.to_string());
            }
        }
        writer.finish().map(|_| ()).map_err(|e| e.full_message())
    });
    tokio::task::spawn_blocking(move || cut_rx.recv().unwrap())
        .await
        .unwrap();
    proxy.cut();
    let outcome = producer.await.unwrap();
    let err = outcome.expect_err("the upload succeeded although the storage went away mid-way");
    assert!(
        err.contains("upload `backups/b2/b2.tar.gz` failed (Unreachable)"),
        "error does not say what failed: {err}"
    );

    // Nothing of the artifact is visible: no object at its key, none anywhere in the bucket.
    assert!(
        !direct.exists(key).await.unwrap(),
        "a partial artifact became visible"
    );
    assert_eq!(
        direct.list_objects("").await.unwrap(),
        Vec::<String>::new(),
        "objects stored by a failed upload"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_location_refuses_writes() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("readonly");
    s3.create_bucket(&bucket);
    let writable = Location::with_options(&s3.spec(&bucket), test_options()).unwrap();
    writable
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();
    let read_only = Location::with_options(
        &s3.spec(&bucket)
            .with_access_mode(hawser_store::AccessMode::ReadOnly),
        test_options(),
    )
    .unwrap();
    let err = read_only
        .commit_backup("b2", Bytes::from_static(b"{}"), false)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
    assert!(read_only.delete_backup("b1").await.is_err());
    assert!(read_only.blocking_writer("backups/b2/b2.tar.gz").is_err());
    // Reads still work, and nothing was deleted.
    assert_eq!(
        read_only.list_backups().await.unwrap(),
        vec!["b1".to_owned()]
    );
    let mut sink = Vec::new();
    sink.write_all(
        &read_only
            .get("backups/b1/velero-backup.json")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sink, b"{}");
}

/// Stores backup `b1`'s record (one request) and an 11 MiB archive (three parts), as a backup
/// does; returns the archive's bytes.
async fn record_and_archive(location: &Location) -> Vec<u8> {
    let archive = artifact(11 * 1024 * 1024, 5);
    write_blocking(location, "backups/b1/b1.tar.gz", archive.clone())
        .await
        .unwrap();
    location
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();
    archive
}

/// `tagging` (Velero's AWS plugin key) tags every object written: one sent in one request and
/// an archive sent in parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagging_tags_every_object_written() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("tagged");
    s3.create_bucket(&bucket);
    let spec = s3
        .spec(&bucket)
        .with_config("tagging", "backup-tool=hawser&team=platform%20ops");
    let location = Location::with_options(&spec, test_options()).unwrap();
    record_and_archive(&location).await;
    // s3s-fs takes the signed tagging header but has no GetObjectTagging to show the tags.
    if s3.is_s3s() {
        return;
    }
    for key in ["backups/b1/velero-backup.json", "backups/b1/b1.tar.gz"] {
        let mut tags = s3.inspect("tags", &bucket, key);
        tags.sort();
        assert_eq!(tags, ["backup-tool=hawser", "team=platform ops"], "{key}");
    }
}

/// `serverSideEncryption` and `kmsKeyId` ask S3 to encrypt every object written, one sent in one
/// request and an archive sent in parts; moto reports what each object was stored with. (s3s-fs
/// ignores the headers.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_encryption_is_asked_for_every_object_written() {
    let s3 = S3Server::start();
    if s3.is_s3s() {
        println!("not run: s3s-fs ignores server-side encryption");
        return;
    }
    let bucket = s3.bucket("encrypted");
    s3.create_bucket(&bucket);
    for (config, want) in [
        (vec![("serverSideEncryption", "AES256")], ["AES256", ""]),
        (
            vec![("kmsKeyId", "alias/backups")],
            ["aws:kms", "alias/backups"],
        ),
    ] {
        let mut spec = s3.spec(&bucket).with_prefix(want[0].replace(':', "-"));
        for (key, value) in config {
            spec = spec.with_config(key, value);
        }
        let location = Location::with_options(&spec, test_options()).unwrap();
        record_and_archive(&location).await;
        for key in ["velero-backup.json", "b1.tar.gz"] {
            let path = format!("{}/backups/b1/{key}", location.prefix());
            assert_eq!(s3.inspect("encryption", &bucket, &path), want, "{path}");
        }
    }
}

/// `checksumAlgorithm: SHA256` sends each upload's SHA-256 (each part's, for an archive sent in
/// parts; s3s-fs checks it against the bytes of an object sent in one request, here the record);
/// `""` sends none. Both store what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sha256_checksums_are_sent_and_accepted() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("checksums");
    s3.create_bucket(&bucket);
    for algorithm in ["SHA256", ""] {
        let spec = s3
            .spec(&bucket)
            .with_prefix(format!("c{}", algorithm.len()))
            .with_config("checksumAlgorithm", algorithm);
        let location = Location::with_options(&spec, test_options()).unwrap();
        let archive = record_and_archive(&location).await;
        assert_eq!(
            read_blocking(&location, "backups/b1/b1.tar.gz").await,
            archive,
            "{algorithm:?}"
        );
    }
}

/// `publicUrl`: download URLs are signed for the address clients outside the cluster reach the
/// storage at (here a TCP proxy in front of the server), not for `s3Url`; fetched through it
/// with a plain GET they read the object (on s3s-fs the signature, which covers the host, is
/// checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_urls_are_signed_for_the_public_url() {
    let s3 = S3Server::start();
    let bucket = s3.bucket("public");
    s3.create_bucket(&bucket);
    let public = Proxy::start(&s3.endpoint).await;
    let spec = s3.spec(&bucket).with_config("publicUrl", public.endpoint());
    let location = Location::with_options(&spec, test_options()).unwrap();
    let key = "backups/b1/b1-logs.gz";
    location
        .put(key, Bytes::from_static(b"log lines"))
        .await
        .unwrap();
    let url = location
        .download_url(key, std::time::Duration::from_secs(600))
        .await
        .unwrap();
    assert!(
        url.starts_with(&format!("{}/{bucket}/{key}?", public.endpoint())),
        "{url}"
    );
    let (status, body) = common::plain_get(&url);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, b"log lines");
}
