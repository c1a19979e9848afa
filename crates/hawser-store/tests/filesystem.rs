//! The `filesystem` provider end to end, and spec errors that need no server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use bytes::Bytes;
use common::{artifact, files_under, read_blocking, write_blocking};
use hawser_store::{
    AccessMode, ConfigError, Location, LocationSpec, StoreError, ValidationError, validate,
};

fn fs_spec(root: &std::path::Path) -> LocationSpec {
    LocationSpec::new("filesystem", "velero")
        .with_prefix("cluster-a")
        .with_config("root", root.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_round_trip_list_commit_delete() {
    let root = tempfile::tempdir().unwrap();
    let location = Location::new(&fs_spec(root.path())).unwrap();
    validate(&location).await.unwrap();

    // 20 MiB with the default 8 MiB parts.
    let data = artifact(20 * 1024 * 1024 + 3, 11);
    let key = "backups/b1/b1.tar.gz";
    assert_eq!(
        write_blocking(&location, key, data.clone()).await.unwrap(),
        data.len() as u64
    );
    let on_disk = root.path().join("velero/cluster-a/backups/b1/b1.tar.gz");
    assert_eq!(
        std::fs::metadata(&on_disk).unwrap().len(),
        data.len() as u64
    );
    assert!(
        read_blocking(&location, key).await == data,
        "read-back differs"
    );

    location
        .put("restores/r1/restore-r1-logs.gz", Bytes::from_static(b"log"))
        .await
        .unwrap();
    assert!(!location.backup_exists("b1").await.unwrap());
    assert_eq!(location.backup_metadata("b1").await.unwrap(), None);
    location
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();
    assert!(location.backup_exists("b1").await.unwrap());
    assert!(
        root.path()
            .join("velero/cluster-a/backups/b1/velero-backup.json")
            .is_file()
    );

    assert_eq!(
        location.list_backups().await.unwrap(),
        vec!["b1".to_owned()]
    );
    assert_eq!(
        location.list_restores().await.unwrap(),
        vec!["r1".to_owned()]
    );
    assert_eq!(
        location.list_objects("backups/b1").await.unwrap(),
        vec![
            "backups/b1/b1.tar.gz".to_owned(),
            "backups/b1/velero-backup.json".to_owned()
        ]
    );
    validate(&location).await.unwrap();

    assert_eq!(location.delete_backup("b1").await.unwrap(), 2);
    assert!(location.list_backups().await.unwrap().is_empty());
    assert!(location.get(key).await.unwrap_err().is_not_found());
    assert!(
        location.delete_prefix("").await.is_err(),
        "emptying the whole location must be refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rejects_foreign_top_level_directories() {
    let root = tempfile::tempdir().unwrap();
    let location = Location::new(&fs_spec(root.path())).unwrap();
    let base = root.path().join("velero/cluster-a");
    for dir in [
        "backups/b1",
        "restores/r1",
        "restic/x",
        "kopia/x",
        "metadata",
        "plugins",
    ] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
        std::fs::write(base.join(dir).join("f"), b"x").unwrap();
    }
    std::fs::write(base.join("README"), b"objects at the top level are allowed").unwrap();
    validate(&location).await.unwrap();

    for dir in ["zeta", "alpha", "beta", "gamma"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
        std::fs::write(base.join(dir).join("f"), b"x").unwrap();
    }
    let err = validate(&location).await.unwrap_err();
    assert!(
        matches!(&err, ValidationError::InvalidLayout { dirs, .. } if dirs.len() == 4),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "Backup store contains 4 invalid top-level directories: [alpha beta gamma ...]"
    );
    assert_eq!(err.category(), "InvalidLayout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_or_failed_writer_stores_nothing() {
    let root = tempfile::tempdir().unwrap();
    let location = Location::new(&fs_spec(root.path())).unwrap();
    let mut writer = location.blocking_writer("backups/b1/b1.tar.gz").unwrap();
    // The archive writer fails half-way and drops its output.
    tokio::task::spawn_blocking(move || {
        writer.write_all(&artifact(12 * 1024 * 1024, 5)).unwrap();
        drop(writer);
    })
    .await
    .unwrap();
    // The abort runs on the upload task, in the background. The directory itself is looked at:
    // the location's listing would hide the `b1.tar.gz#1` staging file of an unaborted upload.
    let left = files_left(root.path()).await;
    assert!(
        left.is_empty(),
        "files left by an abandoned upload: {left:?}"
    );
    assert!(!location.exists("backups/b1/b1.tar.gz").await.unwrap());

    // The async writer: abort removes what it wrote too.
    let mut writer = location.writer("backups/b2/b2.tar.gz").unwrap();
    writer.write(&artifact(9 * 1024 * 1024, 6)).await.unwrap();
    writer.abort().await;
    assert_eq!(files_under(root.path()), Vec::<String>::new());
}

/// The files under `dir` once no more disappear (at most 2 s): a background abort is done.
async fn files_left(dir: &std::path::Path) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let files = files_under(dir);
        if files.is_empty() || tokio::time::Instant::now() > deadline {
            return files;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_every_write() {
    let root = tempfile::tempdir().unwrap();
    let writable = Location::new(&fs_spec(root.path())).unwrap();
    writable
        .commit_backup("b1", Bytes::from_static(b"{}"), false)
        .await
        .unwrap();
    let location =
        Location::new(&fs_spec(root.path()).with_access_mode(AccessMode::ReadOnly)).unwrap();
    assert!(location.is_read_only());

    let refused: Vec<StoreError> = vec![
        location
            .put("backups/b2/x", Bytes::new())
            .await
            .unwrap_err(),
        location
            .commit_backup("b2", Bytes::new(), false)
            .await
            .unwrap_err(),
        location
            .delete("backups/b1/velero-backup.json")
            .await
            .unwrap_err(),
        location.delete_backup("b1").await.unwrap_err(),
        location.writer("backups/b2/b2.tar.gz").unwrap_err(),
        location
            .blocking_writer("backups/b2/b2.tar.gz")
            .unwrap_err(),
    ];
    for err in &refused {
        assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("the backup storage location is ReadOnly (spec.accessMode)"),
            "{err}"
        );
    }
    assert_eq!(
        refused[1].to_string(),
        "refusing to write `backups/b2/velero-backup.json`: the backup storage location is ReadOnly (spec.accessMode)"
    );
    // Reads work and nothing changed.
    assert_eq!(
        location.list_backups().await.unwrap(),
        vec!["b1".to_owned()]
    );
    assert!(location.backup_exists("b1").await.unwrap());
    assert!(!location.exists("backups/b2/x").await.unwrap());
}

#[test]
fn spec_errors_name_the_bsl_field() {
    let root = tempfile::tempdir().unwrap();
    let cases: Vec<(LocationSpec, &str)> = vec![
        (
            LocationSpec::new("ibm", "b"),
            "spec.provider `ibm` is not supported (supported: aws, gcp, azure, filesystem)",
        ),
        (
            LocationSpec::new("filesystem", "b"),
            "spec.config.root is required for provider `filesystem`",
        ),
        (
            LocationSpec::new("filesystem", "b").with_config("root", "relative/dir"),
            "spec.config.root is invalid: `relative/dir` is not an absolute path",
        ),
        (
            LocationSpec::new("filesystem", "").with_config("root", root.path().to_str().unwrap()),
            "spec.objectStorage.bucket is required for provider `filesystem`",
        ),
        (
            LocationSpec::new("filesystem", "a/b")
                .with_config("root", root.path().to_str().unwrap()),
            "spec.objectStorage.bucket is invalid: it must not contain `/` (put sub-directories in spec.objectStorage.prefix)",
        ),
        (
            LocationSpec::new("filesystem", "b")
                .with_config("root", root.path().to_str().unwrap())
                .with_prefix("a/../b"),
            "spec.objectStorage.prefix is invalid",
        ),
        (
            LocationSpec::new("aws", "b"),
            "spec.config.region is required for provider `aws`",
        ),
        (
            LocationSpec::new("aws", "b")
                .with_config("region", "eu-west-1")
                .with_config("s3URL", "http://x"),
            "spec.config has keys not valid for provider `aws`: s3URL; valid keys are: region, s3Url,",
        ),
        (
            LocationSpec::new("aws", "b").with_config("s3Url", "minio:9000"),
            "spec.config.s3Url is invalid: `minio:9000` has no scheme",
        ),
        (
            LocationSpec::new("aws", "b")
                .with_config("region", "r")
                .with_config("s3ForcePathStyle", "yes"),
            "spec.config.s3ForcePathStyle is invalid: `yes` is not a boolean",
        ),
        (
            LocationSpec::new("aws", "b")
                .with_config("region", "r")
                .with_config("customerKeyEncryptionFile", "/keys/k"),
            "spec.config.customerKeyEncryptionFile is invalid: hawser does not support this `aws` setting",
        ),
        (
            LocationSpec::new("aws", "b")
                .with_config("region", "r")
                .with_config("tagging", "=b"),
            "spec.config.tagging is invalid: `=b` has no tag key",
        ),
        (
            LocationSpec::new("azure", "c"),
            "spec.config.storageAccount is required for provider `azure`",
        ),
        (
            LocationSpec::new("azure", "c")
                .with_config("storageAccount", "acct")
                .with_credentials("AZURE_CLOUD_NAME=x\n"),
            "spec.credential is invalid: the credentials file needs AZURE_TENANT_ID",
        ),
        (
            LocationSpec::new("gcp", "b").with_config("kmsKeyName", "k"),
            "spec.config.kmsKeyName is invalid: hawser does not support this `gcp` setting",
        ),
    ];
    for (spec, expected) in cases {
        let err: ConfigError = Location::new(&spec).unwrap_err();
        assert!(
            err.to_string().starts_with(expected),
            "{spec:?}\n  got:      {err}\n  expected: {expected}"
        );
    }
}

#[test]
fn provider_clients_build_from_velero_config() {
    // Built only: the requests are in tests/providers.rs.
    let azure = LocationSpec::new("azure", "velero")
        .with_config("storageAccount", "acct")
        .with_config(
            "storageAccountKeyEnvVar",
            "AZURE_STORAGE_ACCOUNT_ACCESS_KEY",
        )
        .with_config("resourceGroup", "rg")
        .with_credentials(
            "AZURE_STORAGE_ACCOUNT_ACCESS_KEY=a2V5\nAZURE_CLOUD_NAME=AzurePublicCloud\n",
        );
    assert_eq!(
        Location::new(&azure).unwrap().provider(),
        hawser_store::Provider::Azure
    );

    let sp = LocationSpec::new("azure", "velero")
        .with_config("storageAccount", "acct")
        .with_credentials("AZURE_TENANT_ID=t\nAZURE_CLIENT_ID=c\nAZURE_CLIENT_SECRET=s\n");
    Location::new(&sp).unwrap();

    let missing_var = LocationSpec::new("azure", "velero")
        .with_config("storageAccount", "acct")
        .with_config("storageAccountKeyEnvVar", "KEY")
        .with_credentials("AZURE_TENANT_ID=t\n");
    let err = Location::new(&missing_var).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.config.storageAccountKeyEnvVar is invalid: the credentials file has no variable `KEY`"
    );

    let aws = LocationSpec::new("velero.io/aws", "bucket")
        .with_prefix("p")
        .with_config("region", "eu-central-1")
        .with_config("kmsKeyId", "alias/backups")
        .with_credentials("[default]\naws_access_key_id=a\naws_secret_access_key=b\n");
    let location = Location::new(&aws).unwrap();
    assert_eq!((location.bucket(), location.prefix()), ("bucket", "p"));
}

/// A `filesystem` location has no URLs of its own: outside hawser server it says so; served by
/// a [`FileUrls`] it gives that signer's URL, which verifies to the location and key.
#[tokio::test]
async fn filesystem_download_urls_come_from_the_file_server() {
    let root = tempfile::tempdir().unwrap();
    let location = Location::new(&fs_spec(root.path())).unwrap();
    let err = location
        .download_url("backups/b1/b1-logs.gz", std::time::Duration::from_secs(600))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "NotSignable");

    let files = std::sync::Arc::new(hawser_store::FileUrls::new("http://127.0.0.1:1234"));
    let location = location.served_by(files.clone(), "default");
    let url = location
        .download_url("backups/b1/b1-logs.gz", std::time::Duration::from_secs(600))
        .await
        .unwrap();
    let path = url.strip_prefix("http://127.0.0.1:1234").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let file = files.verify(path, now).unwrap();
    assert_eq!(file.location, "default");
    assert_eq!(file.key, "backups/b1/b1-logs.gz");
    assert_eq!(
        files.verify(path, now + 601),
        Err(hawser_store::UrlRefused::Expired)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_commit_never_writes_over_a_record_of_the_same_name() {
    let root = tempfile::tempdir().unwrap();
    let location = Location::new(&fs_spec(root.path())).unwrap();
    location
        .commit_backup("b1", Bytes::from_static(b"{\"by\":\"first\"}"), false)
        .await
        .unwrap();
    let err = location
        .commit_backup("b1", Bytes::from_static(b"{\"by\":\"second\"}"), false)
        .await
        .unwrap_err();
    assert_eq!(err.category(), "AlreadyExists", "{err}");
    assert!(err.to_string().contains("not written over"), "{err}");
    assert_eq!(
        location.backup_metadata("b1").await.unwrap().unwrap(),
        Bytes::from_static(b"{\"by\":\"first\"}")
    );
    // The backup's own rewrite (its final phase) replaces it.
    location
        .commit_backup("b1", Bytes::from_static(b"{\"by\":\"final\"}"), true)
        .await
        .unwrap();
    assert_eq!(
        location.backup_metadata("b1").await.unwrap().unwrap(),
        Bytes::from_static(b"{\"by\":\"final\"}")
    );
}
