//! The kopia versions of older Velero releases (1.15 to 1.17, each its own kopia fork), named by
//! `KOPIA_OLDER` (paths separated by `:`, built by `scripts/build-kopia.sh 1.15` and so on):
//! what each wrote is restored here byte for byte, and each verifies, restores and maintains
//! what was written here over its snapshot. `scripts/test` leaves this test out without them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hawser_kopia::{RestoreOptions, VELERO_DEFAULT_PASSWORD};

use crate::common::{self, describe, noise};
use crate::store_common::StorageServer;
use crate::support::{Kopia, open};
use crate::{link_times_in_micros, restored_by_kopia, tree};

fn older_binaries() -> Vec<PathBuf> {
    let list = std::env::var("KOPIA_OLDER").expect(
        "KOPIA_OLDER is not set: KOPIA_OLDER=$(scripts/build-kopia.sh 1.15):… scripts/test",
    );
    let binaries: Vec<PathBuf> = std::env::split_paths(&list).collect();
    assert!(!binaries.is_empty(), "KOPIA_OLDER names no kopia");
    binaries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kopia_of_velero_1_15_to_1_17_and_hawser_read_each_other() {
    let server = StorageServer::start();
    for (i, binary) in older_binaries().into_iter().enumerate() {
        let kopia = Kopia::with_binary(binary.clone());
        let version = kopia.run(&["--version"]);
        let bucket = server.bucket(&format!("kopia-older-{i}"));
        server.create_bucket(&bucket);
        kopia.create(&server, &bucket, "shop");
        let source = tempfile::tempdir().unwrap();
        tree(source.path());
        let path = source.path().display().to_string();
        let theirs = kopia.snapshot(source.path());
        let view = describe(source.path());

        // What it wrote restores here as it was.
        let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
            .await
            .unwrap();
        let snapshots = repo.snapshots().await.unwrap();
        assert_eq!(snapshots.len(), 1, "{version}");
        assert_eq!(snapshots[0].id, theirs, "{version}");
        let target = tempfile::tempdir().unwrap();
        repo.restore(&snapshots[0], target.path(), RestoreOptions::default())
            .await
            .unwrap();
        assert_eq!(describe(target.path()), view, "{version}");

        // What is written here over its snapshot it takes, verifies, restores and maintains.
        std::fs::write(source.path().join("data/new.bin"), noise(6 << 20, 21)).unwrap();
        let ours = repo
            .write_snapshot(source.path(), &common::source(&path), &BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(
            ours.stats.non_cached_files, 1,
            "{version}: {:?}",
            ours.stats
        );
        // (These versions verify every snapshot: they take no snapshot ID.)
        kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
        assert_eq!(
            restored_by_kopia(&kopia, &ours.id),
            link_times_in_micros(describe(source.path())),
            "{version}"
        );
        kopia.run(&["maintenance", "run", "--full", "--safety=none"]);
        let next = kopia.snapshot(source.path());
        let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
            .await
            .unwrap();
        let snapshots = repo.snapshots().await.unwrap();
        let latest = snapshots.iter().find(|s| s.id == next).unwrap();
        // Its next snapshot took the one written here as its parent: no file read again.
        assert_eq!(
            latest.stats.non_cached_files, 0,
            "{version}: {:?}",
            latest.stats
        );
        let target = tempfile::tempdir().unwrap();
        repo.restore(latest, target.path(), RestoreOptions::default())
            .await
            .unwrap();
        assert_eq!(
            describe(target.path()),
            describe(source.path()),
            "{version}"
        );
    }
}
