//! Objects written here as kopia writes them, with a splitter other than the default.

use std::collections::BTreeMap;
use std::path::Path;

use hawser_kopia::{Repository, RestoreOptions, Snapshot, VELERO_DEFAULT_PASSWORD};

use crate::common::{self, describe};
use crate::kopia_object;
use crate::store_common::StorageServer;
use crate::support::{Kopia, open};

/// With a small splitter kopia cuts directory listings and writes lists of lists: the same
/// directory written here (as another source, so nothing is taken from kopia's snapshot) is
/// the same object, listings, lists and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_and_long_lists_are_cut_as_kopia_cuts_them() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-split");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create_split(&server, &bucket, "shop", "FIXED-128K");
    let source = tempfile::tempdir().unwrap();
    // A listing of about 300 KiB: three contents.
    std::fs::create_dir(source.path().join("many")).unwrap();
    common::many_files(&source.path().join("many"), 1500);
    // 2,560 pieces of 128 KiB (one content, the file is a hole): their list, about 150 KiB,
    // is cut in two, and those two are listed in turn.
    let zeros = std::fs::File::create(source.path().join("zeros.img")).unwrap();
    zeros.set_len(320 << 20).unwrap();
    std::fs::write(source.path().join("a.txt"), b"hello\n").unwrap();
    // Listings without entries (`null` in kopia's), one of a directory holding only what
    // neither side stores (a named pipe); a time at the Unix epoch (left out in kopia's).
    std::fs::create_dir(source.path().join("void")).unwrap();
    std::fs::create_dir(source.path().join("pipes")).unwrap();
    let fifo = source.path().join("pipes/fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let epoch = source.path().join("epoch.txt");
    std::fs::write(&epoch, b"1970\n").unwrap();
    filetime::set_file_mtime(&epoch, filetime::FileTime::from_unix_time(0, 0)).unwrap();
    // Names that are not UTF-8: kopia lists them by their bytes and writes each invalid byte
    // as `\ufffd` (`x\xff` before `x😀` by bytes, after it by the replaced names).
    let odd = source.path().join("odd");
    std::fs::create_dir(&odd).unwrap();
    for name in [&b"x\xff"[..], "x😀".as_bytes(), b"y\xe2\x82"] {
        let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name);
        std::fs::write(odd.join(name), name.as_encoded_bytes()).unwrap();
    }
    let by_kopia = kopia.snapshot(source.path());
    let path = source.path().display().to_string();
    assert!(kopia_object(&kopia, &path, &by_kopia, "many").starts_with("Ik"));
    assert!(kopia_object(&kopia, &path, &by_kopia, "zeros.img").starts_with("IIx"));

    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let ours = kopia_s_object_written_here(&kopia, &mut repo, source.path()).await;
    assert_eq!(ours.stats.cached_files, 0, "{:?}", ours.stats);
    // Again: every file is the parent's, found by the name kopia reads back.
    let again = elsewhere(&mut repo, source.path()).await;
    assert_eq!(again.stats.cached_files, ours.stats.file_count);
    assert_eq!(again.root.obj, ours.root.obj);
    let target = tempfile::tempdir().unwrap();
    repo.restore(&ours, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    // Neither side stores the pipe (and reading it to describe it would wait for a writer).
    std::fs::remove_file(&fifo).unwrap();
    // Restored under the names kopia reads back (as kopia restores them).
    let mut names: Vec<String> = std::fs::read_dir(target.path().join("odd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["x\u{fffd}", "x😀", "y\u{fffd}\u{fffd}"]);
    std::fs::remove_dir_all(target.path().join("odd")).unwrap();
    std::fs::remove_dir_all(&odd).unwrap();
    assert_eq!(describe(target.path()), describe(source.path()));
}

/// A repository kopia made with a Rabin-Karp splitter: files written here are cut where kopia
/// cuts them (the same objects as kopia's snapshot of the same directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabin_karp_cuts_are_kopia_s() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-rabin");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create_split(&server, &bucket, "shop", "DYNAMIC-128K-RABINKARP");
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("noise.bin"), common::noise(3 << 20, 11)).unwrap();
    std::fs::write(source.path().join("zeros.bin"), vec![0u8; 1 << 20]).unwrap();
    let by_kopia = kopia.snapshot(source.path());
    let path = source.path().display().to_string();
    let noise = kopia_object(&kopia, &path, &by_kopia, "noise.bin");
    assert!(noise.starts_with("Ix"), "{noise}");

    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    kopia_s_object_written_here(&kopia, &mut repo, source.path()).await;
}

/// Snapshots `dir` here as another source (so nothing is taken from kopia's snapshot of it).
async fn elsewhere(repo: &mut Repository, dir: &Path) -> Snapshot {
    repo.write_snapshot(dir, &common::source("/elsewhere"), &BTreeMap::new())
        .await
        .unwrap()
}

/// Snapshots `dir`, of which kopia's only snapshot was taken, here [`elsewhere`]; checks its
/// root is kopia's object.
async fn kopia_s_object_written_here(kopia: &Kopia, repo: &mut Repository, dir: &Path) -> Snapshot {
    let ours = elsewhere(repo, dir).await;
    let path = dir.display().to_string();
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--json", &path])).unwrap();
    assert_eq!(
        ours.root.obj,
        listed[0]["rootEntry"]["obj"].as_str().unwrap(),
        "{listed}"
    );
    ours
}
