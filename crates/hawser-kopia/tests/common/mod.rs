//! What the repository tests share: data that does not repeat, and a view of a tree that two
//! equal trees share.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hawser_kopia::{Blobs, NewRepository, Repository, Safety, Snapshot, SourceInfo};
use hawser_store::faults::StoreFaults;
use hawser_store::{Location, LocationSpec};

/// `len` bytes that do not repeat (xorshift from `seed`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// Every path under `root` with what identifies it: type, mode, size, mtime (ns), content
/// digest or link target.
pub fn describe(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                pending.push(path.clone());
                format!("dir {:o}", meta.mode() & 0o7777)
            } else {
                let data = std::fs::read(&path).unwrap();
                let sum = data
                    .iter()
                    .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b));
                format!(
                    "file {:o} {} bytes sum {sum:x}",
                    meta.mode() & 0o7777,
                    meta.len()
                )
            };
            // A link's own time is kept too; directories' times change as kopia reads them
            // on some systems, so only files' and links' are compared.
            let time = if meta.is_dir() {
                String::new()
            } else {
                format!(" mtime {}.{:09}", meta.mtime(), meta.mtime_nsec())
            };
            out.insert(name, format!("{what}{time}"));
        }
    }
    out
}

/// `describe`'s view without links' times (Velero's restore does not set them).
pub fn without_link_times(view: BTreeMap<String, String>) -> BTreeMap<String, String> {
    view.into_iter()
        .map(|(path, what)| match what.split_once(" mtime ") {
            Some((link, _)) if link.starts_with("link") => (path, link.to_owned()),
            _ => (path, what),
        })
        .collect()
}

/// A repository in `root`'s bucket `bucket`, and where its blobs are as files; its uploads
/// fail as `faults` say.
pub async fn create_with(root: &Path, password: &str, faults: &StoreFaults) -> (Blobs, PathBuf) {
    create_as(root, password, faults, &NewRepository::default()).await
}

/// [`create_with`] with the hash and splitter of `new`.
pub async fn create_as(
    root: &Path,
    password: &str,
    faults: &StoreFaults,
    new: &NewRepository,
) -> (Blobs, PathBuf) {
    let spec =
        LocationSpec::new("filesystem", "bucket").with_config("root", root.display().to_string());
    let location = Location::new(&spec).unwrap().with_faults(faults);
    let blobs = Blobs::new(location, "kopia/ns");
    Repository::create_with(blobs.clone(), password, new)
        .await
        .unwrap();
    (blobs, root.join("bucket/kopia/ns"))
}

pub async fn create(root: &Path, password: &str) -> (Blobs, PathBuf) {
    create_with(root, password, &StoreFaults::default()).await
}

pub fn source(path: &str) -> SourceInfo {
    SourceInfo {
        host: "default".to_owned(),
        user: "default".to_owned(),
        path: path.to_owned(),
    }
}

/// Moves the times of the blobs whose IDs start with `prefix` back by `by`.
pub fn age_blobs(dir: &Path, prefix: &str, by: Duration) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            let file = std::fs::File::options()
                .write(true)
                .open(entry.path())
                .unwrap();
            file.set_modified(SystemTime::now() - by).unwrap();
        }
    }
}

pub fn ids(dir: &Path, prefix: &str) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    ids.sort();
    ids
}

/// Writes 20 snapshots of `tree` an epoch into `repo` (whose blobs are files in `dir`), for
/// `epochs` epochs (2 to 9), moving each epoch's first index blob back a day, so that quick
/// maintenance advances the write epoch to `epochs` and compacts every epoch but the last two
/// (kopia's default thresholds). Returns each snapshot with the tree it holds.
pub async fn compacted_epochs(
    repo: &mut Repository,
    dir: &Path,
    tree: &Path,
    epochs: u64,
) -> Vec<(Snapshot, BTreeMap<String, String>)> {
    let mut snapshots = Vec::new();
    // Epochs of 20 index blobs spanning a day each (kopia's default thresholds).
    for epoch in 0..epochs {
        for i in 0..20u64 {
            std::fs::write(tree.join("file"), format!("epoch {epoch} write {i}")).unwrap();
            let s = repo
                .write_snapshot(tree, &source("/vol"), &BTreeMap::new())
                .await
                .unwrap();
            snapshots.push((s, describe(tree)));
        }
        let first = ids(dir, &format!("xn{epoch}_"))[0].clone();
        age_blobs(dir, &first, Duration::from_secs(25 * 3600));
        let report = repo.maintain(false, &Safety::FULL).await.unwrap();
        assert_eq!(report.quick.advanced_to, Some(epoch + 1), "{report}");
        assert!(report.gc.is_none());
        // An epoch is settled once the write epoch is two past it.
        let settled: Vec<u64> = epoch.checked_sub(2).into_iter().collect();
        assert_eq!(report.quick.compacted, settled, "{report}");
    }
    let markers: Vec<String> = (1..=epochs).map(|e| format!("xe{e}")).collect();
    assert_eq!(ids(dir, "xe"), markers);
    let report = repo.maintain(false, &Safety::FULL).await.unwrap();
    assert_eq!(report.quick.compacted, [epochs - 2], "{report}");
    assert_eq!(report.quick.advanced_to, None);
    assert_eq!(ids(dir, "xs").len() as u64, epochs - 1);

    snapshots
}

/// `count` small files in `dir` with long names (a listing of about 200 bytes per entry).
pub fn many_files(dir: &Path, count: usize) {
    for i in 0..count {
        let name = format!("file-{i:06}-with-a-name-long-enough-to-fill-a-listing-quickly");
        std::fs::write(dir.join(name), i.to_string()).unwrap();
    }
}

/// Restores `snapshot` into a new directory and checks that it holds `view` (`describe`'s).
pub async fn restores_as(repo: &Repository, snapshot: &Snapshot, view: &BTreeMap<String, String>) {
    let target = tempfile::tempdir().unwrap();
    repo.restore(
        snapshot,
        target.path(),
        hawser_kopia::RestoreOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(describe(target.path()), *view);
}

/// Full maintenance without margins, one second after the last write: a content written in
/// the second the collection starts is marked a second later and dropped only by the next run.
pub async fn collect_now(repo: &mut Repository) -> hawser_kopia::GcReport {
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let report = repo.maintain(true, &Safety::NONE).await.unwrap();
    report.gc.expect("full maintenance collects")
}
