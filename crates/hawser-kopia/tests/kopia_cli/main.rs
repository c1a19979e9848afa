//! Repositories written by kopia itself (the CLI built from Velero's kopia fork by
//! `scripts/build-kopia.sh`, named by `KOPIA`) into an S3 bucket (moto, or the run's
//! `HAWSER_TEST_S3_ENDPOINT`) in Velero's layout (`kopia/<namespace>/`, password
//! `static-passw0rd`, user and host `default`), read by this crate through `hawser-store`:
//! snapshots listed, restored byte for byte with modes, times, links and holes. `scripts/test`
//! leaves them out without `KOPIA`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod maintenance;
mod objects;
mod older;
#[path = "../../../hawser-store/tests/common/mod.rs"]
mod store_common;
mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use common::{describe, noise};
use hawser_kopia::{
    Blobs, FORMAT_BLOB, KopiaError, NewRepository, Repository, RestoreOptions,
    VELERO_DEFAULT_PASSWORD,
};
use hawser_store::Location;
use store_common::StorageServer;
use support::{Kopia, open};

/// A tree with what a volume holds: small and empty files, a file large enough to be split
/// into several contents, a sparse file, modes with setuid, links (one dangling), a deep path,
/// a name that is not ASCII and an empty directory (kopia lists its entries as `null`); times
/// with nanoseconds.
fn tree(root: &Path) {
    let write = |path: &str, data: &[u8], mode: u32| {
        let at = root.join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(&at, data).unwrap();
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("a.txt", b"hello\n", 0o644);
    write("empty", b"", 0o600);
    write("data/big.bin", &noise(20 << 20, 7), 0o640);
    let mut sparse = noise(64 << 10, 9);
    sparse.resize(8 << 20, 0);
    sparse.extend(noise(64 << 10, 11));
    write("data/sparse.img", &sparse, 0o644);
    write("bin/tool", b"#!/bin/sh\necho tool\n", 0o4755);
    write("bin/a&b <c>", b"", 0o644);
    write(
        "deep/er/still/ünïcode name.txt",
        "ça va\n".as_bytes(),
        0o644,
    );
    std::fs::create_dir(root.join("void")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::os::unix::fs::symlink("../nowhere", root.join("data/dangling")).unwrap();
    std::fs::set_permissions(root.join("deep"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let mtime = filetime::FileTime::from_unix_time(1_765_000_000, 123_456_789);
    filetime::set_file_mtime(root.join("a.txt"), mtime).unwrap();
    filetime::set_symlink_file_times(root.join("link"), mtime, mtime).unwrap();
}

/// What kopia's restore of snapshot `id` holds: `describe`'s view, links' times to the
/// microsecond as kopia sets them.
fn restored_by_kopia(kopia: &Kopia, id: &str) -> BTreeMap<String, String> {
    let restored = tempfile::tempdir().unwrap();
    let target = restored.path().join("tree");
    kopia.run(&["restore", id, target.to_str().unwrap()]);
    link_times_in_micros(describe(&target))
}

/// `describe`'s view with links' times rounded up to the microsecond, as kopia's restore
/// sets them (through Go's `NsecToTimeval`).
fn link_times_in_micros(view: BTreeMap<String, String>) -> BTreeMap<String, String> {
    view.into_iter()
        .map(|(path, what)| {
            let what = match what.split_once(" mtime ") {
                Some((link, time)) if link.starts_with("link") => {
                    let (seconds, nanos) = time.split_once('.').unwrap();
                    let total = seconds.parse::<u128>().unwrap() * 1_000_000_000
                        + nanos.parse::<u128>().unwrap();
                    format!("{link} mtime {}us", total.div_ceil(1000))
                }
                _ => what,
            };
            (path, what)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_written_by_kopia_restore_byte_for_byte_with_modes_times_and_links() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-read");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let source = tempfile::tempdir().unwrap();
    tree(source.path());
    let first = kopia.snapshot(source.path());
    let first_view = describe(source.path());
    // An incremental snapshot: one file changed, one added.
    std::fs::write(source.path().join("a.txt"), b"changed\n").unwrap();
    std::fs::write(source.path().join("data/new.bin"), noise(3 << 20, 13)).unwrap();
    let second = kopia.snapshot(source.path());
    let second_view = describe(source.path());

    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let config = repo.config();
    assert_eq!(
        (config.hash.as_str(), config.encryption.as_str()),
        ("BLAKE2B-256-128", "AES256-GCM-HMAC-SHA256")
    );
    assert_eq!((config.version, config.index_version), (3, 2));
    let snapshots = repo.snapshots().await.unwrap();
    let ids: Vec<&str> = snapshots.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str()]);
    assert_eq!(
        (snapshots[0].host.as_str(), snapshots[0].user.as_str()),
        ("default", "default")
    );
    assert_eq!(snapshots[0].path, source.path().display().to_string());

    for (snapshot, expected) in snapshots.iter().zip([first_view, second_view]) {
        let target = tempfile::tempdir().unwrap();
        let stats = repo
            .restore(snapshot, target.path(), RestoreOptions::default())
            .await
            .unwrap();
        assert_eq!(
            describe(target.path()),
            expected,
            "snapshot {}",
            snapshot.id
        );
        assert_eq!(stats.symlinks, 2);
        // The zeros of the sparse file are holes again.
        let sparse = std::fs::metadata(target.path().join("data/sparse.img")).unwrap();
        assert!(
            sparse.blocks() * 512 < sparse.len() / 2,
            "{} blocks for {} bytes",
            sparse.blocks(),
            sparse.len()
        );
    }
    // The large file was split into several contents, read through an indirect list.
    let root = repo.directory(&snapshots[0].root.obj).await.unwrap();
    let data = root.iter().find(|e| e.name == "data").unwrap();
    let big = repo
        .directory(&data.obj)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.name == "big.bin")
        .unwrap();
    assert!(big.obj.starts_with('I'), "{}", big.obj);
}

#[tokio::test]
async fn a_wrong_password_or_a_missing_repository_is_said_so() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-password");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let err = open(&server, &bucket, "shop", "not-the-password")
        .await
        .err()
        .unwrap();
    assert!(matches!(err, KopiaError::WrongPassword), "{err}");
    let err = open(&server, &bucket, "other", VELERO_DEFAULT_PASSWORD)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, KopiaError::Storage { blob, .. } if blob == "kopia.repository"),
        "{err}"
    );
}

#[tokio::test]
async fn a_restore_never_writes_through_what_is_already_there() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-target");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("a.txt"), b"restored\n").unwrap();
    kopia.snapshot(source.path());
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let snapshot = repo.snapshots().await.unwrap().pop().unwrap();

    // A link at the file's name pointing outside the target: an error, the outside untouched.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"mine\n").unwrap();
    let target = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&victim, target.path().join("a.txt")).unwrap();
    let err = repo
        .restore(&snapshot, target.path(), RestoreOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, KopiaError::Restore { .. }), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"mine\n");
}

/// The object ID of `path` (`a/b`) in snapshot `id` of `source`, as kopia's CLI shows the
/// listing of its directory.
fn kopia_object(kopia: &Kopia, source: &str, id: &str, path: &str) -> String {
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--json", source])).unwrap();
    let snapshot = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("snapshot {id} not in {listed}"));
    let root = snapshot["rootEntry"]["obj"].as_str().unwrap();
    let (dir, name) = path
        .rsplit_once('/')
        .map_or((root.to_owned(), path), |(dir, name)| {
            (format!("{root}/{dir}"), name)
        });
    let listing: serde_json::Value = serde_json::from_str(&kopia.run(&["show", &dir])).unwrap();
    let entry = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {dir}: {listing}"));
    entry["obj"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_written_here_are_read_by_kopia_and_taken_as_its_parents() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-write");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let source = tempfile::tempdir().unwrap();
    tree(source.path());
    let path = source.path().display().to_string();
    let by_kopia = kopia.snapshot(source.path());
    std::fs::write(source.path().join("data/new.bin"), noise(20 << 20, 17)).unwrap();

    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let info = common::source(&path);
    let tags = BTreeMap::from([("snapshot-uploader".to_owned(), "kopia".to_owned())]);
    let ours = repo
        .write_snapshot(source.path(), &info, &tags)
        .await
        .unwrap();
    assert_eq!(ours.tags, tags);

    // kopia lists it as the newest snapshot of the source, verifies every file and restores
    // the same tree.
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--json", &path])).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [by_kopia.as_str(), ours.id.as_str()]);
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100", &ours.id]);
    kopia.run(&["content", "verify", "--full"]);
    assert_eq!(
        restored_by_kopia(&kopia, &ours.id),
        link_times_in_micros(describe(source.path()))
    );
    // The same bytes have the same content ID as kopia's (same keyed hash); an unchanged
    // directory's listing is the same content as kopia's, a name with `&` and `<` included, and
    // an empty one's.
    for unchanged in ["a.txt", "empty", "bin/tool", "bin", "deep", "void"] {
        assert_eq!(
            kopia_object(&kopia, &path, &ours.id, unchanged),
            kopia_object(&kopia, &path, &by_kopia, unchanged),
            "{unchanged}"
        );
    }

    // Each takes the other's snapshot as its parent: the one here keeps kopia's object of the
    // unchanged large file (not read again) and counts it cached; kopia's next reads no file
    // and keeps the object written here of the new one.
    let big = kopia_object(&kopia, &path, &ours.id, "data/big.bin");
    assert_eq!(big, kopia_object(&kopia, &path, &by_kopia, "data/big.bin"));
    let ours_listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == ours.id.as_str())
        .unwrap();
    // Every file but the new one: a.txt, empty, big.bin, sparse.img, tool, `a&b <c>`, the
    // deep one.
    assert_eq!(ours_listed["stats"]["cachedFiles"], 7, "{ours_listed}");
    assert_eq!(ours_listed["stats"]["nonCachedFiles"], 1, "{ours_listed}");
    let next = kopia.snapshot(source.path());
    let new = kopia_object(&kopia, &path, &ours.id, "data/new.bin");
    assert!(new.starts_with('I'), "{new}");
    assert_eq!(kopia_object(&kopia, &path, &next, "data/new.bin"), new);
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--json", &path])).unwrap();
    let next_listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == next.as_str())
        .unwrap();
    assert_eq!(next_listed["stats"]["nonCachedFiles"], 0, "{next_listed}");

    // A second snapshot here of the unchanged tree uploads no file data.
    let location = Location::new(&server.spec(&bucket)).unwrap();
    let blobs = Blobs::new(location, "kopia/shop");
    let data_packs = |ids: &[String]| ids.iter().filter(|i| i.starts_with('p')).count();
    let before = data_packs(&blobs.list().await.unwrap());
    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let again = repo
        .write_snapshot(source.path(), &info, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(data_packs(&blobs.list().await.unwrap()), before);
    let snapshots = repo.snapshots().await.unwrap();
    assert_eq!(snapshots.len(), 4);
    let target = tempfile::tempdir().unwrap();
    repo.restore(&again, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(describe(target.path()), describe(source.path()));

    // A directory of many entries is read by kopia too.
    let big = tempfile::tempdir().unwrap();
    crate::common::many_files(big.path(), 6000);
    let elsewhere = hawser_kopia::SourceInfo {
        path: "/many".to_owned(),
        ..info.clone()
    };
    let many = repo
        .write_snapshot(big.path(), &elsewhere, &BTreeMap::new())
        .await
        .unwrap();
    assert!(many.root.obj.starts_with('k'), "{}", many.root.obj);
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100", &many.id]);
    assert_eq!(restored_by_kopia(&kopia, &many.id), describe(big.path()));

    // kopia's full maintenance accepts what was written here (it rewrites the index and
    // collects garbage); the snapshots still verify there and restore here.
    kopia.run(&["maintenance", "run", "--full", "--safety=none"]);
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let after = repo.snapshots().await.unwrap();
    assert_eq!(after.len(), 5);
    let target = tempfile::tempdir().unwrap();
    repo.restore(&after[1], target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(describe(target.path()), describe(source.path()));

    // Files are cut where kopia cuts them: the same tree written here from another path (with
    // no parent there) gives the large and the sparse file the objects kopia's first snapshot
    // gave them.
    let mut repo = repo;
    let copy = tempfile::tempdir().unwrap();
    tree(copy.path());
    let copy_path = copy.path().display().to_string();
    let copied = repo
        .write_snapshot(copy.path(), &common::source(&copy_path), &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(copied.stats.cached_files, 0, "{:?}", copied.stats);
    for file in ["data/big.bin", "data/sparse.img"] {
        let object = kopia_object(&kopia, &copy_path, &copied.id, file);
        assert!(object.starts_with('I'), "{file}: {object}");
        assert_eq!(
            object,
            kopia_object(&kopia, &path, &by_kopia, file),
            "{file}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_created_here_opens_in_kopia_and_carries_velero_s_marker() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-create");
    server.create_bucket(&bucket);
    let location = Location::new(&server.spec(&bucket)).unwrap();
    let blobs = Blobs::new(location, "kopia/app");
    let mut repo = Repository::create(blobs.clone(), VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let err = Repository::create(blobs.clone(), "another")
        .await
        .err()
        .unwrap();
    assert!(matches!(err, KopiaError::AlreadyExists), "{err}");
    // Velero's marker holds the repository's unique ID.
    let format: serde_json::Value =
        serde_json::from_slice(&blobs.get("kopia.repository").await.unwrap()).unwrap();
    let marker: serde_json::Value =
        serde_json::from_slice(&blobs.get(hawser_kopia::VELERO_MARKER_BLOB).await.unwrap())
            .unwrap();
    assert_eq!(marker["uniqueID"], format["uniqueID"]);

    let source = tempfile::tempdir().unwrap();
    tree(source.path());
    let path = source.path().display().to_string();
    let info = common::source(&path);
    let ours = repo
        .write_snapshot(source.path(), &info, &BTreeMap::new())
        .await
        .unwrap();

    // kopia connects with the password, finds kopia's defaults, verifies and restores.
    let kopia = Kopia::new();
    kopia.connect(&server, &bucket, "app");
    let status = kopia.run(&["repository", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(
        status["contentFormat"]["hash"], "BLAKE2B-256-128",
        "{status:#}"
    );
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100", &ours.id]);
    assert_eq!(
        restored_by_kopia(&kopia, &ours.id),
        link_times_in_micros(describe(source.path()))
    );
    // kopia's snapshot after a change, read here.
    std::fs::write(source.path().join("a.txt"), b"after\n").unwrap();
    let theirs = kopia.snapshot(source.path());
    let repo = open(&server, &bucket, "app", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let snapshots = repo.snapshots().await.unwrap();
    assert_eq!(
        snapshots.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [ours.id.as_str(), theirs.as_str()]
    );
    let target = tempfile::tempdir().unwrap();
    repo.restore(&snapshots[1], target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(describe(target.path()), describe(source.path()));

    // Deleting a snapshot here: gone for kopia too.
    let mut repo = repo;
    repo.delete_snapshot(&ours.id).await.unwrap();
    let left: Vec<String> = repo
        .snapshots()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(left, std::slice::from_ref(&theirs));
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--json", &path])).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [theirs.as_str()]);
    let err = repo.delete_snapshot(&ours.id).await.unwrap_err();
    assert!(matches!(err, KopiaError::MissingSnapshot(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blake3_repository_created_here_hashes_as_kopia_does() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-blake3");
    server.create_bucket(&bucket);
    let location = Location::new(&server.spec(&bucket)).unwrap();
    let blobs = Blobs::new(location, "kopia/app");
    let blake3 = NewRepository {
        hash: "BLAKE3-256-128".to_owned(),
        ..NewRepository::default()
    };
    let mut repo = Repository::create_with(blobs, VELERO_DEFAULT_PASSWORD, &blake3)
        .await
        .unwrap();
    assert_eq!(repo.config().hash, "BLAKE3-256-128");
    let source = tempfile::tempdir().unwrap();
    tree(source.path());
    let path = source.path().display().to_string();
    let info = common::source(&path);
    let ours = repo
        .write_snapshot(source.path(), &info, &BTreeMap::new())
        .await
        .unwrap();
    let kopia = Kopia::new();
    kopia.connect(&server, &bucket, "app");
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100", &ours.id]);
    assert_eq!(
        restored_by_kopia(&kopia, &ours.id),
        link_times_in_micros(describe(source.path()))
    );
    // kopia hashes the same small files to the same IDs.
    std::fs::write(source.path().join("data/new.bin"), b"new").unwrap();
    let theirs = kopia.snapshot(source.path());
    for file in ["a.txt", "bin/tool"] {
        assert_eq!(
            kopia_object(&kopia, &path, &theirs, file),
            kopia_object(&kopia, &path, &ours.id, file),
            "{file}"
        );
    }
    let other = || Blobs::new(Location::new(&server.spec(&bucket)).unwrap(), "kopia/other");
    for (hash, splitter) in [
        ("SHA1", "FIXED-4M"),
        ("BLAKE3-256-128", "DYNAMIC-3M-RABINKARP"),
    ] {
        let new = NewRepository {
            hash: hash.to_owned(),
            splitter: splitter.to_owned(),
        };
        let err = Repository::create_with(other(), "p", &new).await.err();
        assert!(
            matches!(err, Some(KopiaError::Unsupported { .. })),
            "{err:?}"
        );
    }
    assert!(!other().exists(FORMAT_BLOB).await.unwrap());
}

#[tokio::test]
async fn damage_in_the_bucket_is_named_never_restored_wrongly() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-damage");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("data.bin"), noise(300 << 10, 21)).unwrap();
    kopia.snapshot(source.path());
    let location = Location::new(&server.spec(&bucket)).unwrap();
    let blobs = Blobs::new(location.clone(), "kopia/shop");
    let first_indexes: Vec<String> = blobs
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.starts_with("xn"))
        .collect();
    std::fs::write(source.path().join("more.bin"), noise(100 << 10, 23)).unwrap();
    kopia.snapshot(source.path());
    let ids = blobs.list().await.unwrap();
    let pack = ids.iter().find(|i| i.starts_with('p')).unwrap().clone();
    let original = blobs.get(&pack).await.unwrap();
    let restore = |repo: Repository| async move {
        let snapshot = repo.snapshots().await.unwrap().pop().unwrap();
        let target = tempfile::tempdir().unwrap();
        repo.restore(&snapshot, target.path(), RestoreOptions::default())
            .await
            .map(|_| ())
    };

    // One flipped byte in the first file's content.
    let mut flipped = original.to_vec();
    flipped[100] ^= 1;
    blobs.put(&pack, flipped.into()).await.unwrap();
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let err = restore(repo).await.unwrap_err();
    assert!(
        matches!(&err, KopiaError::Authentication { what } if what.starts_with("content ")),
        "{err}"
    );

    // The pack cut short.
    blobs.put(&pack, original.slice(..64)).await.unwrap();
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let err = restore(repo).await.unwrap_err();
    // An error of the store, or (where it answers a range past the end with what there is) the
    // pack named as shorter than its index says.
    let named = match &err {
        KopiaError::Storage { blob, .. } => *blob == pack,
        KopiaError::Malformed { what, .. } => *what == format!("pack {pack}"),
        _ => false,
    };
    assert!(named, "{err}");
    blobs.put(&pack, original.clone()).await.unwrap();

    // The first snapshot's index blobs gone: the second snapshot names contents (the first
    // file, not written again) that no index holds any more.
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    restore(repo).await.unwrap();
    for index in &first_indexes {
        location
            .delete(&format!("kopia/shop/{index}"))
            .await
            .unwrap();
    }
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    match repo.snapshots().await {
        Ok(mut snapshots) => {
            let snapshot = snapshots.pop().unwrap();
            let target = tempfile::tempdir().unwrap();
            let err = repo
                .restore(&snapshot, target.path(), RestoreOptions::default())
                .await
                .unwrap_err();
            assert!(matches!(err, KopiaError::MissingContent(_)), "{err}");
        }
        Err(err) => assert!(matches!(err, KopiaError::MissingContent(_)), "{err}"),
    }
}
