//! One writer at a time, a write cut short by the store, quick maintenance (epochs advanced and
//! compacted) and full maintenance (garbage collected) on a repository in a local directory,
//! whose blobs' times a test can move back. kopia's view of maintenance is in
//! `kopia_cli/maintenance.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{
    age_blobs, collect_now, compacted_epochs, create, create_with, describe, ids, noise,
    restores_as, source,
};
use hawser_kopia::{KopiaError, NewRepository, ObjectId, Repository, RestoreOptions, Safety};
use hawser_store::faults::{StoreFault, StoreFaults};

const PASSWORD: &str = "maintained";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_died_holds_the_repository_until_its_session_expires() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    for i in 0..16u64 {
        std::fs::write(tree.path().join(format!("f{i}")), noise(6 << 20, i + 1)).unwrap();
    }
    // A write stopped dead after it took the repository and stored a pack (its future
    // dropped, as a killed process stops): its marker stays.
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let watch = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while ids(&dir, "s").is_empty() || ids(&dir, "p").is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no session marker and pack"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let (info, tags) = (source("/vol"), BTreeMap::new());
    tokio::select! {
        biased;
        () = watch => {}
        done = repo.write_snapshot(tree.path(), &info, &tags) => {
            panic!("the write ended before it was seen: {done:?}")
        }
    }
    // A pack the store was already writing may still land (a file written aside, then renamed
    // into place): wait until no such file is left and nothing changes for a second.
    let mut seen = ids(&dir, "");
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = ids(&dir, "");
        if now == seen && !now.iter().any(|n| n.contains('#')) {
            break;
        }
        seen = now;
    }
    let marker = ids(&dir, "s");
    assert_eq!(marker.len(), 1, "{marker:?}");
    let session = marker[0].split('-').nth(1).unwrap().to_owned();

    // Nobody else writes meanwhile: neither a snapshot nor maintenance.
    let refused = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap_err();
    let KopiaError::Busy {
        session: holder, ..
    } = &refused
    else {
        panic!("{refused}")
    };
    assert_eq!(*holder, session);
    assert!(refused.to_string().contains("hawser@"), "{refused}");
    let refused = repo.maintain(true, &Safety::NONE).await.unwrap_err();
    assert!(matches!(refused, KopiaError::Busy { .. }), "{refused}");
    assert_eq!(ids(&dir, "s"), marker, "a refused writer leaves no marker");

    // Half an hour without a marker or a pack: the session is taken as gone.
    for kind in ["s", "p", "q"] {
        age_blobs(&dir, kind, Duration::from_secs(31 * 60));
    }
    let written = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(ids(&dir, "s"), marker, "the write's own marker is gone");

    // With kopia's margins the dead session's packs stay (its marker is younger than 96
    // hours); without, they and its marker go, and the snapshot is whole.
    let report = repo.maintain(true, &Safety::FULL).await.unwrap();
    let gc = report.gc.unwrap();
    assert_eq!((gc.blobs_deleted, gc.marked), (0, 0), "{gc:?}");
    assert!(gc.blobs_kept > 0, "{gc:?}");
    let dead_packs = |dir: &Path| {
        ids(dir, "p")
            .into_iter()
            .filter(|p| p.ends_with(&session))
            .count()
    };
    assert!(dead_packs(&dir) > 0);
    let report = repo.maintain(true, &Safety::NONE).await.unwrap();
    let gc = report.gc.unwrap();
    assert!(gc.blobs_deleted > 0, "{gc:?}");
    assert_eq!(dead_packs(&dir), 0);
    assert!(ids(&dir, "s").is_empty());
    let repo = Repository::open(blobs, PASSWORD).await.unwrap();
    restores_as(&repo, &written, &describe(tree.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_by_the_store_leaves_its_whole_packs_to_the_next_one() {
    let root = tempfile::tempdir().unwrap();
    let faults = StoreFaults::default();
    let (blobs, dir) = create_with(root.path(), PASSWORD, &faults).await;
    let tree = tempfile::tempdir().unwrap();
    for i in 0..3u64 {
        std::fs::write(tree.path().join(format!("f{i}")), noise(12 << 20, i + 40)).unwrap();
    }
    // The session marker and the first (full) pack are stored; the next upload, at the end,
    // is cut.
    faults.add(StoreFault::on("").after_uploads(2).times(1));
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let failed = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap_err();
    assert!(matches!(failed, KopiaError::Storage { .. }), "{failed}");
    assert_eq!(faults.injected(), 1);
    assert!(ids(&dir, "s").is_empty(), "a failed write leaves no marker");
    let reopened = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    assert!(
        reopened.snapshots().await.unwrap().is_empty(),
        "a failed write publishes no snapshot"
    );
    // The first data pack at least (the cut one may be the metadata pack, stored in parallel).
    let first: Vec<String> = ids(&dir, "p");
    let size = |id: &String| std::fs::metadata(dir.join(id)).unwrap().len();
    let stored: u64 = first.iter().map(size).sum();
    assert!(stored >= 20 << 20, "{stored} in {first:?}");

    // The next write finds the stored pack's contents and uploads only the rest.
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let written = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    let again: u64 = ids(&dir, "p")
        .iter()
        .filter(|p| !first.contains(p))
        .map(size)
        .sum();
    assert!(
        again + stored < (36 << 20) + (1 << 20),
        "{again} + {stored}"
    );
    restores_as(&repo, &written, &describe(tree.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_maintenance_frees_deleted_snapshots_and_keeps_the_rest_whole() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let kept = tempfile::tempdir().unwrap();
    std::fs::write(kept.path().join("small"), b"kept\n").unwrap();
    std::fs::write(kept.path().join("kept"), noise(1 << 20, 2)).unwrap();
    let gone = tempfile::tempdir().unwrap();
    std::fs::write(gone.path().join("only"), noise(5 << 20, 3)).unwrap();

    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let first = repo
        .write_snapshot(gone.path(), &source("/gone"), &BTreeMap::new())
        .await
        .unwrap();
    let second = repo
        .write_snapshot(kept.path(), &source("/kept"), &BTreeMap::new())
        .await
        .unwrap();
    repo.delete_snapshot(&first.id).await.unwrap();

    // Everything is new: kopia's margins collect nothing.
    let report = repo.maintain(true, &Safety::FULL).await.unwrap();
    let gc = report.gc.clone().unwrap();
    assert_eq!(
        (gc.snapshots, gc.marked, gc.blobs_deleted),
        (1, 0, 0),
        "{gc:?}"
    );
    assert!(gc.too_recent > 0, "{gc:?}");
    assert!(
        report.to_string().contains("too recent to collect: "),
        "{report}"
    );

    // Without margins the contents only the deleted snapshot used are marked and dropped,
    // and its data pack deleted (its metadata pack holds the manifests, which stay).
    let packs_before = ids(&dir, "p").len();
    let gc = collect_now(&mut repo).await;
    assert!(
        gc.marked >= 2,
        "the deleted snapshot's listing and data: {gc:?}"
    );
    assert!(gc.watermark.is_some(), "{gc:?}");
    assert!(
        gc.blobs_deleted >= 1 && gc.bytes_deleted >= 5 << 20,
        "{gc:?}"
    );
    assert_eq!(ids(&dir, "p").len(), packs_before - 1);

    let repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    assert_eq!(
        repo.snapshots()
            .await
            .unwrap()
            .iter()
            .map(|s| &s.id)
            .collect::<Vec<_>>(),
        [&second.id]
    );
    restores_as(&repo, &second, &describe(kept.path())).await;
    let checked = repo
        .verify(&second, RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(checked.files, 2);

    // A second run finds nothing more to do.
    let mut repo = repo;
    let gc = repo
        .maintain(true, &Safety::NONE)
        .await
        .unwrap()
        .gc
        .unwrap();
    assert_eq!(
        (gc.marked, gc.undeleted, gc.blobs_deleted),
        (0, 0, 0),
        "{gc:?}"
    );
}

/// The bytes of the blobs whose names start with `prefix`.
fn pack_bytes(dir: &Path, prefix: &str) -> u64 {
    ids(dir, prefix)
        .iter()
        .map(|id| std::fs::metadata(dir.join(id)).unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_packs_are_rewritten_so_a_deleted_snapshot_s_share_of_a_pack_is_freed() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("keep"), noise(1 << 20, 11)).unwrap();
    std::fs::write(tree.path().join("drop"), noise(4 << 20, 12)).unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let first = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    // The next snapshot keeps `keep` (in the first snapshot's pack) and adds a small file.
    std::fs::remove_file(tree.path().join("drop")).unwrap();
    std::fs::write(tree.path().join("new"), noise(512 << 10, 13)).unwrap();
    let second = repo
        .write_snapshot(tree.path(), &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    repo.delete_snapshot(&first.id).await.unwrap();
    let shared = ids(&dir, "p");
    assert_eq!(shared.len(), 2, "one data pack per snapshot");

    // kopia's margins: the contents are too new to rewrite.
    let gc = repo
        .maintain(true, &Safety::FULL)
        .await
        .unwrap()
        .gc
        .unwrap();
    assert_eq!(gc.rewritten, 0, "{gc:?}");
    assert!(gc.short_packs_kept >= 2, "{gc:?}");
    assert_eq!(ids(&dir, "p"), shared);

    // Without margins, but with an hour between a rewrite and deleting what it emptied:
    // `drop` is dropped, `keep` and `new` are copied into one new pack, and the old packs
    // stay (their contents' entries elsewhere are younger than the hour).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let delayed = Safety {
        rewrite_delete_delay: Duration::from_secs(3600),
        ..Safety::NONE
    };
    let gc = repo.maintain(true, &delayed).await.unwrap().gc.unwrap();
    assert!(gc.watermark.is_some(), "{gc:?}");
    assert!(gc.rewritten >= 2, "{gc:?}");
    let now = ids(&dir, "p");
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(shared.iter().all(|p| now.contains(p)), "{now:?}");
    restores_as(&repo, &second, &describe(tree.path())).await;

    // A run within the delay keeps them too: their contents moved less than an hour ago.
    let gc = repo.maintain(true, &delayed).await.unwrap().gc.unwrap();
    assert_eq!(
        gc.rewritten, 0,
        "one short pack of a kind is left alone: {gc:?}"
    );
    assert_eq!(ids(&dir, "p"), now);

    // Once their contents moved longer ago than the delay (read from each old pack's own
    // index), they go: the 4 MiB that only the deleted snapshot used is freed.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let short_delay = Safety {
        rewrite_delete_delay: Duration::from_secs(1),
        ..Safety::NONE
    };
    let gc = repo.maintain(true, &short_delay).await.unwrap().gc.unwrap();
    assert!(gc.blobs_deleted >= 2, "{gc:?}");
    assert_eq!(
        gc.rewritten, 0,
        "one short pack of a kind is left alone: {gc:?}"
    );
    let now = ids(&dir, "p");
    assert_eq!(now.len(), 1, "{now:?}");
    assert!(!shared.contains(&now[0]));
    assert!(pack_bytes(&dir, "p") < (1 << 20) + (768 << 10), "{now:?}");
    let repo = Repository::open(blobs, PASSWORD).await.unwrap();
    restores_as(&repo, &second, &describe(tree.path())).await;
    let checked = repo
        .verify(&second, RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(checked.files, 2);
}

/// Two snapshots of `tree`, each with a 1 MiB file of its own in a short data pack.
async fn two_short_data_packs(repo: &mut Repository, tree: &Path, dir: &Path) -> Vec<String> {
    std::fs::write(tree.join("a"), noise(1 << 20, 21)).unwrap();
    repo.write_snapshot(tree, &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    std::fs::write(tree.join("b"), noise(1 << 20, 22)).unwrap();
    repo.write_snapshot(tree, &source("/vol"), &BTreeMap::new())
        .await
        .unwrap();
    let packs = ids(dir, "p");
    assert_eq!(packs.len(), 2, "{packs:?}");
    packs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_content_stops_the_rewrite_and_nothing_is_deleted() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let packs = two_short_data_packs(&mut repo, tree.path(), &dir).await;
    // A byte of the first content of one pack (past its 32-byte preamble) flipped.
    let damaged = dir.join(&packs[0]);
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&damaged, &bytes).unwrap();
    let before = ids(&dir, "");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let err = repo.maintain(true, &Safety::NONE).await.unwrap_err();
    assert!(matches!(err, KopiaError::Authentication { .. }), "{err}");
    // Nothing was deleted, and the repository was let go.
    let after = ids(&dir, "");
    let kept = |b: &&String| !b.starts_with('s');
    assert!(
        before.iter().filter(kept).all(|b| after.contains(b)),
        "{after:?}"
    );
    assert!(ids(&dir, "s").is_empty(), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_content_rewritten_stays_deleted() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    two_short_data_packs(&mut repo, tree.path(), &dir).await;
    // Both snapshots deleted: both files' contents are unused.
    for snapshot in repo.snapshots().await.unwrap() {
        repo.delete_snapshot(&snapshot.id).await.unwrap();
    }

    // Marked deleted but not dropped (a drop margin), then copied out of the two short packs:
    // the copies are deleted too.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let margin = Safety {
        drop_after: Duration::from_secs(3600),
        ..Safety::NONE
    };
    let gc = repo.maintain(true, &margin).await.unwrap().gc.unwrap();
    assert!(gc.marked >= 2 && gc.watermark.is_none(), "{gc:?}");
    assert!(gc.rewritten >= 2, "{gc:?}");
    let packs = ids(&dir, "p");
    assert_eq!(packs.len(), 1, "the two packs copied into one: {packs:?}");

    // Read back from the bucket: a snapshot holding the same two files stores them again,
    // which it would not do were their contents live.
    let mut repo = Repository::open(blobs, PASSWORD).await.unwrap();
    let again = repo
        .write_snapshot(tree.path(), &source("/again"), &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(ids(&dir, "p").len(), 2);
    restores_as(&repo, &again, &describe(tree.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_advance_are_compacted_and_their_blobs_cleaned_up() {
    let root = tempfile::tempdir().unwrap();
    let (blobs, dir) = create(root.path(), PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let snapshots = compacted_epochs(&mut repo, &dir, tree.path(), 3).await;

    // The compactions are new: the blobs they replace stay under kopia's margin, go without.
    let report = repo.maintain(true, &Safety::FULL).await.unwrap();
    assert_eq!(report.superseded_deleted, 0);
    let report = repo.maintain(true, &Safety::NONE).await.unwrap();
    // Two epochs of 20 index blobs, and the one of the parameters written at creation.
    assert_eq!(report.superseded_deleted, 41, "{report}");
    assert!(ids(&dir, "xn0_").is_empty() && ids(&dir, "xn1_").is_empty());

    // Every snapshot still lists and restores as written.
    let repo = Repository::open(blobs, PASSWORD).await.unwrap();
    assert_eq!(repo.snapshots().await.unwrap().len(), 60);
    for (snapshot, view) in [&snapshots[0], &snapshots[25], &snapshots[59]] {
        restores_as(&repo, snapshot, view).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_directory_is_listed_in_pieces_that_maintenance_keeps() {
    let root = tempfile::tempdir().unwrap();
    // Listings are cut by the splitter, as kopia cuts them: 128 KiB pieces here.
    let new = NewRepository {
        splitter: "FIXED-128K".to_owned(),
        ..NewRepository::default()
    };
    let (blobs, _) = common::create_as(root.path(), PASSWORD, &StoreFaults::default(), &new).await;
    let big = tempfile::tempdir().unwrap();
    common::many_files(big.path(), 6000);
    let small = tempfile::tempdir().unwrap();
    std::fs::write(small.path().join("one"), b"only here").unwrap();
    let mut repo = Repository::open(blobs.clone(), PASSWORD).await.unwrap();
    let listed = repo
        .write_snapshot(big.path(), &source("/big"), &BTreeMap::new())
        .await
        .unwrap();
    // Over a mebibyte of listing: pieces named by an indirect list of the directory's prefix.
    assert!(listed.root.obj.starts_with("Ik"), "{}", listed.root.obj);
    let listing = repo
        .object_contents(&ObjectId::parse(&listed.root.obj).unwrap())
        .await
        .unwrap();
    // The list and at least nine pieces of 128 KiB.
    assert!(listing.len() >= 10, "{listing:?}");
    let other = repo
        .write_snapshot(small.path(), &source("/small"), &BTreeMap::new())
        .await
        .unwrap();
    repo.delete_snapshot(&other.id).await.unwrap();
    let gc = collect_now(&mut repo).await;
    assert!(gc.marked >= 2, "{gc:?}");
    // 6000 files, the list and its pieces.
    assert_eq!(gc.in_use, 6000 + listing.len(), "{gc:?}");
    let repo = Repository::open(blobs, PASSWORD).await.unwrap();
    restores_as(&repo, &listed, &describe(big.path())).await;
}
