//! Maintenance here, read by kopia: after this crate's full maintenance frees a snapshot
//! kopia deleted, kopia verifies and restores every other snapshot, its own and ours, and its
//! own full maintenance accepts the repository; epochs advanced and compacted here (in a
//! local directory, where blob times can be moved back, then copied blob for blob into a
//! bucket) are read by kopia.

use std::collections::BTreeMap;

use hawser_kopia::{Blobs, Repository, RestoreOptions, Safety, VELERO_DEFAULT_PASSWORD};
use hawser_store::Location;

use crate::common::{collect_now, compacted_epochs, create, describe, ids, noise, restores_as};
use crate::store_common::StorageServer;
use crate::support::{Kopia, open};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collected_here_kopia_still_verifies_and_restores() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-gc");
    server.create_bucket(&bucket);
    let kopia = Kopia::new();
    kopia.create(&server, &bucket, "shop");
    let kept = tempfile::tempdir().unwrap();
    crate::tree(kept.path());
    let gone = tempfile::tempdir().unwrap();
    std::fs::write(gone.path().join("only.bin"), noise(6 << 20, 23)).unwrap();
    let by_kopia = kopia.snapshot(kept.path());
    let doomed = kopia.snapshot(gone.path());
    std::fs::write(kept.path().join("data/new.bin"), noise(3 << 20, 29)).unwrap();
    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let info = crate::common::source(&kept.path().display().to_string());
    let ours = repo
        .write_snapshot(kept.path(), &info, &BTreeMap::new())
        .await
        .unwrap();
    kopia.run(&["snapshot", "delete", &doomed, "--delete"]);

    let location = Location::new(&server.spec(&bucket)).unwrap();
    let blobs = Blobs::new(location, "kopia/shop");
    let pack_bytes = || async {
        let listing = blobs.list_meta().await.unwrap();
        listing
            .iter()
            .filter(|b| b.id.starts_with('p'))
            .map(|b| b.size)
            .sum::<u64>()
    };
    let before = pack_bytes().await;
    let mut repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let gc = collect_now(&mut repo).await;
    assert_eq!(gc.snapshots, 2, "{gc:?}");
    assert!(gc.marked >= 2 && gc.blobs_deleted >= 1, "{gc:?}");
    // The short packs left (kopia's and ours) were rewritten into new ones, which kopia reads.
    assert!(gc.rewritten > 0, "{gc:?}");
    assert!(before - pack_bytes().await >= 6 << 20, "{gc:?}");

    kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
    kopia.run(&["content", "verify", "--full"]);
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--all", "--json"])).unwrap();
    let mut ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    let mut want = [by_kopia.as_str(), ours.id.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);
    assert_eq!(
        crate::restored_by_kopia(&kopia, &ours.id),
        crate::link_times_in_micros(describe(kept.path()))
    );

    // kopia's own full maintenance after ours; both snapshots still restore here.
    kopia.run(&["maintenance", "run", "--full", "--safety=none"]);
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
    let repo = open(&server, &bucket, "shop", VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let after = repo.snapshots().await.unwrap();
    assert_eq!(after.len(), 2);
    let target = tempfile::tempdir().unwrap();
    let latest = after.iter().find(|s| s.id == ours.id).unwrap();
    repo.restore(latest, target.path(), RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(describe(target.path()), describe(kept.path()));
}

/// Nine epochs written and compacted here, the first eight merged into a range checkpoint
/// (kopia's `FullCheckpointFrequency` is 7), are read by kopia; the range alone holds those
/// epochs' index: with their other index blobs gone, both sides still read every snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_compacted_here_are_read_by_kopia() {
    let root = tempfile::tempdir().unwrap();
    let (local, dir) = create(root.path(), VELERO_DEFAULT_PASSWORD).await;
    let tree = tempfile::tempdir().unwrap();
    let mut repo = Repository::open(local.clone(), VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let snapshots = compacted_epochs(&mut repo, &dir, tree.path(), 9).await;
    let report = repo.maintain(true, &Safety::NONE).await.unwrap();
    // Epochs 0 to 7 are compacted: their uncompacted blobs go (8 × 20, and the one of the
    // maintenance parameters written at creation).
    assert_eq!(report.superseded_deleted, 161, "{report}");
    assert_eq!(report.quick.range, Some((0, 7)), "{report}");
    let ranges = ids(&dir, "xr0_7_");
    assert_eq!(ranges.len(), 1, "{:?}", ids(&dir, "x"));
    // Nothing more is due.
    let again = repo.maintain(true, &Safety::NONE).await.unwrap();
    assert_eq!(again.quick.range, None, "{again}");
    for single in ids(&dir, "xs") {
        if single.starts_with("xs8_") {
            continue;
        }
        local.delete(&single).await.unwrap();
    }
    let repo = Repository::open(local.clone(), VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    assert_eq!(repo.snapshots().await.unwrap().len(), 180);
    restores_as(&repo, &snapshots[3].0, &snapshots[3].1).await;

    let server = StorageServer::start();
    let bucket = server.bucket("kopia-epochs");
    server.create_bucket(&bucket);
    let remote = Blobs::new(Location::new(&server.spec(&bucket)).unwrap(), "kopia/shop");
    for id in local.list().await.unwrap() {
        remote
            .put(&id, local.get(&id).await.unwrap())
            .await
            .unwrap();
    }
    let kopia = Kopia::new();
    kopia.connect(&server, &bucket, "shop");
    let listed: serde_json::Value =
        serde_json::from_str(&kopia.run(&["snapshot", "list", "--all", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 180);
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
    kopia.run(&["content", "verify", "--full"]);
    for (snapshot, view) in [&snapshots[0], &snapshots[90], &snapshots[179]] {
        assert_eq!(crate::restored_by_kopia(&kopia, &snapshot.id), *view);
    }
}

/// A repository created here holds the maintenance parameters Velero writes (owner
/// `default@default`, kopia's default cycles): kopia's maintenance, which runs only as the
/// owner, runs there without being forced (as Velero's maintenance job runs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopia_maintains_a_repository_created_here_as_its_owner() {
    let server = StorageServer::start();
    let bucket = server.bucket("kopia-owner");
    server.create_bucket(&bucket);
    let blobs = Blobs::new(Location::new(&server.spec(&bucket)).unwrap(), "kopia/app");
    let mut repo = Repository::create(blobs.clone(), VELERO_DEFAULT_PASSWORD)
        .await
        .unwrap();
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("a.bin"), noise(1 << 20, 3)).unwrap();
    let info = crate::common::source("/data");
    repo.write_snapshot(source.path(), &info, &BTreeMap::new())
        .await
        .unwrap();
    // Written here, found here: not taken for a snapshot.
    assert_eq!(repo.snapshots().await.unwrap().len(), 1);

    let kopia = Kopia::new();
    kopia.connect(&server, &bucket, "app");
    let params: serde_json::Value =
        serde_json::from_str(&kopia.run(&["maintenance", "info", "--json"])).unwrap();
    assert_eq!(params["owner"], "default@default", "{params}");
    assert_eq!(
        params["quick"]["interval"], 3_600_000_000_000_u64,
        "{params}"
    );
    assert_eq!(
        params["full"]["interval"], 86_400_000_000_000_u64,
        "{params}"
    );
    assert!(!blobs.exists("kopia.maintenance").await.unwrap());
    kopia.run(&["maintenance", "run", "--full", "--safety=none"]);
    // kopia records the run it made.
    assert!(blobs.exists("kopia.maintenance").await.unwrap());
    kopia.run(&["snapshot", "verify", "--verify-files-percent=100"]);
}
