//! Repositories written and read by Velero's own code: `scripts/velero-uploader` (built by
//! `scripts/build-velero-uploader.sh` from Velero v1.18.3's Go module, named by
//! `VELERO_UPLOADER`) runs Velero's repository provider and kopia uploader as a pod volume backup
//! does, against an S3 bucket (moto). This crate restores what Velero wrote, Velero restores what
//! this crate wrote, and Velero's next backup takes a snapshot written here as its parent.
//! `scripts/test` leaves them out without `VELERO_UPLOADER`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{noise, without_link_times};
use hawser_kopia::{
    Blobs, KopiaError, Repository, RestoreOptions, SourceInfo, VELERO_DEFAULT_PASSWORD,
};
use hawser_store::Location;
use store_common::StorageServer;

/// Velero's uploader on the repository of namespace `shop` in `bucket`.
struct Velero<'a> {
    server: &'a StorageServer,
    bucket: String,
    password: String,
}

impl Velero<'_> {
    fn run(&self, args: &[&str]) -> serde_json::Value {
        let program = std::env::var_os("VELERO_UPLOADER")
            .map(PathBuf::from)
            .expect("VELERO_UPLOADER is not set: run VELERO_UPLOADER=$(scripts/build-velero-uploader.sh) scripts/test");
        let out = Command::new(program)
            .args(&args[..1])
            .args(["--endpoint", self.server.host(), "--bucket", &self.bucket])
            .args(["--prefix", "kopia/shop/", "--password", &self.password])
            .args(&args[1..])
            .output()
            .expect("velero-uploader starts");
        assert!(
            out.status.success(),
            "velero-uploader {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Backs `dir` up as the pod volume `shop/db-0/data`; returns the snapshot ID.
    fn backup(&self, dir: &Path) -> String {
        let out = self.run(&[
            "backup",
            "--source",
            dir.to_str().unwrap(),
            "--real-source",
            "shop/db-0/data",
        ]);
        out["snapshotID"].as_str().unwrap().to_owned()
    }
}

/// A volume: files small and large (several contents), a nested directory, a link.
fn volume(root: &Path) {
    std::fs::create_dir_all(root.join("pgdata/base")).unwrap();
    std::fs::write(root.join("pgdata/PG_VERSION"), b"16\n").unwrap();
    std::fs::write(root.join("pgdata/base/16384"), noise(12 << 20, 3)).unwrap();
    std::fs::write(root.join("pgdata/postgresql.conf"), noise(20 << 10, 5)).unwrap();
    std::os::unix::fs::symlink("pgdata/PG_VERSION", root.join("version")).unwrap();
}

async fn open(
    server: &StorageServer,
    bucket: &str,
    password: &str,
) -> Result<Repository, KopiaError> {
    let location = Location::new(&server.spec(bucket)).unwrap();
    Repository::open(Blobs::new(location, "kopia/shop"), password).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_velero_backs_up_restores_here_and_back() {
    let server = StorageServer::start();
    let bucket = server.bucket("velero-uploader");
    server.create_bucket(&bucket);
    let velero = Velero {
        server: &server,
        bucket: bucket.clone(),
        password: VELERO_DEFAULT_PASSWORD.to_owned(),
    };
    let source = tempfile::tempdir().unwrap();
    volume(source.path());
    let by_velero = velero.backup(source.path());

    // Velero's snapshot, as Velero names it, restored here byte for byte.
    let mut repo = open(&server, &bucket, VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let snapshots = repo.snapshots().await.unwrap();
    assert_eq!(snapshots.len(), 1);
    let snapshot = &snapshots[0];
    assert_eq!(snapshot.id, by_velero);
    assert_eq!(
        (
            snapshot.host.as_str(),
            snapshot.user.as_str(),
            snapshot.path.as_str()
        ),
        (
            "default",
            "default",
            "snapshot-pod-volume/kopia/shop/db-0/data"
        )
    );
    assert_eq!(
        snapshot.tags.get("snapshot-requester").map(String::as_str),
        Some("snapshot-pod-volume")
    );
    assert_eq!(
        snapshot.tags.get("snapshot-uploader").map(String::as_str),
        Some("kopia")
    );
    let target = tempfile::tempdir().unwrap();
    repo.restore(snapshot, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(
        without_link_times(common::describe(target.path())),
        without_link_times(common::describe(source.path()))
    );

    // A snapshot written here as Velero names its source, restored by Velero byte for byte.
    std::fs::write(source.path().join("pgdata/postgresql.conf"), b"changed\n").unwrap();
    std::fs::write(source.path().join("pgdata/base/16385"), noise(12 << 20, 31)).unwrap();
    let info = SourceInfo {
        host: "default".to_owned(),
        user: "default".to_owned(),
        path: snapshot.path.clone(),
    };
    let ours = repo
        .write_snapshot(source.path(), &info, &snapshot.tags)
        .await
        .unwrap();
    let target = tempfile::tempdir().unwrap();
    velero.run(&[
        "restore",
        "--snapshot",
        &ours.id,
        "--target",
        target.path().to_str().unwrap(),
    ]);
    assert_eq!(
        without_link_times(common::describe(target.path())),
        without_link_times(common::describe(source.path()))
    );

    // Each takes the other's snapshot as its parent: the one here keeps the object of Velero's
    // for the unchanged large file (not read again), and Velero's next backup reads no file and
    // keeps the object written here for the new one.
    let next = velero.backup(source.path());
    let repo = open(&server, &bucket, VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let object = |id: &str, name: &'static str| {
        let id = id.to_owned();
        let repo = &repo;
        async move {
            let snapshot = repo
                .snapshots()
                .await
                .unwrap()
                .into_iter()
                .find(|s| s.id == id)
                .unwrap();
            let top = repo.directory(&snapshot.root.obj).await.unwrap();
            let pgdata = top.iter().find(|e| e.name == "pgdata").unwrap();
            let base = repo.directory(&pgdata.obj).await.unwrap();
            let base = base.iter().find(|e| e.name == "base").unwrap();
            let files = repo.directory(&base.obj).await.unwrap();
            files.into_iter().find(|e| e.name == name).unwrap().obj
        }
    };
    assert_eq!(
        object(&ours.id, "16384").await,
        object(&by_velero, "16384").await
    );
    let ours_new = object(&ours.id, "16385").await;
    assert!(ours_new.starts_with('I'), "{ours_new}");
    assert_eq!(object(&next, "16385").await, ours_new);
    let next = repo
        .snapshots()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == next)
        .unwrap();
    assert_eq!(next.stats.non_cached_files, 0, "{:?}", next.stats);
    assert!(next.stats.cached_files >= 4, "{:?}", next.stats);
}

#[tokio::test]
async fn a_custom_password_opens_velero_s_repository_and_a_wrong_one_is_named() {
    let server = StorageServer::start();
    let bucket = server.bucket("velero-password");
    server.create_bucket(&bucket);
    let velero = Velero {
        server: &server,
        bucket: bucket.clone(),
        password: "a-custom-repository-password".to_owned(),
    };
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("f"), b"data\n").unwrap();
    velero.backup(source.path());
    let repo = open(&server, &bucket, "a-custom-repository-password")
        .await
        .unwrap();
    assert_eq!(repo.snapshots().await.unwrap().len(), 1);
    let err = open(&server, &bucket, VELERO_DEFAULT_PASSWORD)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, KopiaError::WrongPassword), "{err}");
}

/// A repository created here is maintained by Velero's maintenance job's code (the provider's
/// `PruneRepo`: kopia's maintenance as Velero's user, not forced), which refuses a repository
/// without Velero's maintenance owner; what Velero backs up there afterwards restores here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn velero_maintains_a_repository_created_here() {
    let server = StorageServer::start();
    let bucket = server.bucket("velero-maintain");
    server.create_bucket(&bucket);
    let blobs = Blobs::new(Location::new(&server.spec(&bucket)).unwrap(), "kopia/shop");
    let mut repo = Repository::create(blobs.clone(), VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let source = tempfile::tempdir().unwrap();
    volume(source.path());
    let info = SourceInfo {
        host: "default".to_owned(),
        user: "default".to_owned(),
        path: "snapshot-pod-volume/kopia/shop/db-0/data".to_owned(),
    };
    repo.write_snapshot(source.path(), &info, &Default::default())
        .await
        .unwrap();
    let velero = Velero {
        server: &server,
        bucket: bucket.clone(),
        password: VELERO_DEFAULT_PASSWORD.to_owned(),
    };
    assert!(!blobs.exists("kopia.maintenance").await.unwrap());
    assert_eq!(velero.run(&["maintain"])["maintained"], true);
    // kopia's maintenance ran (it records its runs) rather than stopping at the owner check.
    assert!(blobs.exists("kopia.maintenance").await.unwrap());
    let by_velero = velero.backup(source.path());
    let repo = open(&server, &bucket, VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let snapshots = repo.snapshots().await.unwrap();
    let theirs = snapshots.iter().find(|s| s.id == by_velero).unwrap();
    let target = tempfile::tempdir().unwrap();
    repo.restore(theirs, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(
        without_link_times(common::describe(target.path())),
        without_link_times(common::describe(source.path()))
    );
}
