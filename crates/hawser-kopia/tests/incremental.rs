//! Incremental snapshots: a file the parent snapshot holds unchanged (size, modification time,
//! permissions, owner) is not read again, as kopia's cached files are; any change to those
//! makes it read. Files that change while they are read are recorded as kopia records them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;

use common::{create, describe, noise, restores_as, source};
use hawser_kopia::{ObjectId, Repository, RestoreOptions};

const PASSWORD: &str = "incremental";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_files_are_taken_from_the_parent_without_being_read() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, _) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let path = |name: &str| tree.path().join(name);
    std::fs::create_dir(path("sub")).unwrap();
    std::fs::write(path("same"), noise(3 << 20, 1)).unwrap();
    std::fs::write(path("resized"), b"short").unwrap();
    std::fs::write(path("sub/chmod"), b"mode").unwrap();
    std::fs::write(path("sub/touched"), b"time").unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let first = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    let before = describe(tree.path());

    // New bytes behind the same size and time, as a writer that restores the time leaves
    // them: not read, so the snapshot keeps the parent's bytes (what kopia does too).
    let keep_time = |name: &str, write: &dyn Fn()| {
        let time = filetime::FileTime::from_last_modification_time(
            &std::fs::metadata(path(name)).unwrap(),
        );
        write();
        filetime::set_file_mtime(path(name), time).unwrap();
    };
    keep_time("same", &|| {
        std::fs::write(path("same"), noise(3 << 20, 2)).unwrap()
    });
    // The same size and time, but another size, mode or time: read again.
    keep_time("resized", &|| {
        std::fs::write(path("resized"), b"longer").unwrap()
    });
    keep_time("sub/chmod", &|| {
        std::fs::write(path("sub/chmod"), b"MODE").unwrap();
        std::fs::set_permissions(path("sub/chmod"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
    });
    std::fs::write(path("sub/touched"), b"TIME").unwrap();

    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let second = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    let target = tempfile::tempdir().unwrap();
    repo.restore(&second, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    let restored = |name: &str| std::fs::read(target.path().join(name)).unwrap();
    assert_eq!(restored("same"), noise(3 << 20, 1), "taken from the parent");
    assert_eq!(restored("resized"), b"longer");
    assert_eq!(restored("sub/chmod"), b"MODE");
    assert_eq!(restored("sub/touched"), b"TIME");

    // Another source has no parent: everything is read.
    let other = repo
        .write_snapshot(tree.path(), &source("/elsewhere"), &BTreeMap::new())
        .await
        .unwrap();
    restores_as(&repo, &other, &describe(tree.path())).await;
    // The first snapshot is as it was.
    restores_as(&repo, &first, &before).await;
}

/// A file that grows or shrinks while it is read is recorded as kopia records it: with the
/// bytes read up to the end the reading found, and that many as its size (its mode and time
/// those seen before reading). Whenever the changes happen, what is stored is a prefix of the
/// file's bytes and its recorded size is the stored length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_changing_while_read_are_stored_as_read() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, _) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let growing = tree.path().join("growing.log");
    let shrinking = tree.path().join("shrinking.img");
    let start = 24 << 20;
    std::fs::write(&growing, noise(start, 3)).unwrap();
    let original = noise(start, 4);
    std::fs::write(&shrinking, &original).unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let changer = {
        let (stop, growing, shrinking) = (stop.clone(), growing.clone(), shrinking.clone());
        std::thread::spawn(move || {
            use std::io::Write as _;
            let mut log = std::fs::OpenOptions::new()
                .append(true)
                .open(&growing)
                .unwrap();
            let cut = std::fs::OpenOptions::new()
                .write(true)
                .open(&shrinking)
                .unwrap();
            let mut length = start as u64;
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                log.write_all(&noise(16 << 10, 100 + round)).unwrap();
                // 24 MiB last about 1.5 s: the snapshot reads the file while it shrinks.
                length = length.saturating_sub(16 << 10);
                cut.set_len(length).unwrap();
                round += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let written = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    changer.join().unwrap();
    let snapshot = written.unwrap();

    let entries = repo.directory(&snapshot.root.obj).await.unwrap();
    let final_log = std::fs::read(&growing).unwrap();
    for entry in entries {
        let stored = repo
            .read_object(&ObjectId::parse(&entry.obj).unwrap())
            .await
            .unwrap();
        assert_eq!(entry.size, stored.len() as u64, "{}", entry.name);
        let whole: &[u8] = match entry.name.as_str() {
            "growing.log" => {
                assert!(stored.len() >= start, "{}", stored.len());
                &final_log
            }
            "shrinking.img" => &original,
            other => panic!("unexpected entry {other}"),
        };
        assert!(stored.len() <= whole.len(), "{}", entry.name);
        assert!(
            stored == whole[..stored.len()],
            "{}: not a prefix",
            entry.name
        );
    }
    assert_eq!(snapshot.stats.file_count, 2);
}
