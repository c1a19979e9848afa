//! CSI snapshots through the backup engine, against kube-sim with its CSI side on: a claim's
//! snapshot cut while the backup runs, waited for, finalized; a snapshot that never becomes
//! ready, one that fails, and `snapshotVolumes: false`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod backup_support;

use std::io::Cursor;
use std::time::Duration;

use hawser_api::phase::{BackupPhase, RestorePhase};
use hawser_api::{Backup, Restore};
use hawser_core::archive::gzjson::read_gz_json;
use hawser_core::archive::{ArchiveReader, ReaderOptions};
use hawser_core::csi::{BackupOperation, OperationPhase};
use hawser_core::duration::GoDuration;
use hawser_core::layout::Layout;
use hawser_engine::backup::operations::{self, SnapshotOperations};
use hawser_engine::backup::{self, BackupOptions, BackupOutcome};
use hawser_engine::restore::{self, RestoreOptions, ValidatedRestore};
use hawser_store::{Location, LocationSpec};
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, Config};
use kube_sim::csi::{self, CsiConfig, CsiSim, dynamic_api as dynamic};
use kube_sim::{KubeSim, SimConfig};
use serde_json::{Value, json};
use tempfile::TempDir;

struct Cluster {
    _sim: KubeSim,
    _csi: CsiSim,
    client: Client,
    /// Holds the location's directory while the test runs.
    _dir: TempDir,
    location: Location,
}

/// Namespace `shop` with a Pod and claims `data` (plain), `stuck` (never ready) and `broken`
/// (its snapshot fails) of the simulated driver, all bound; snapshots ready 300 ms after cut.
async fn cluster(claims: &[(&str, &str)]) -> Cluster {
    let sim = KubeSim::start(SimConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();
    let config = CsiConfig {
        ready_after: Duration::from_millis(300),
        ..CsiConfig::default()
    };
    let csi = CsiSim::start(client.clone(), config).await.unwrap();
    sim.store()
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    let claim_api = dynamic(
        &client,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("shop"),
    );
    for (name, fault) in claims {
        let claim: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "shop", "annotations": {csi::SNAPSHOT_FAULT: fault}},
            "spec": {"storageClassName": csi::STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
        claim_api
            .create(&PostParams::default(), &claim)
            .await
            .unwrap();
    }
    for (name, _) in claims {
        bound_volume(&claim_api, name).await;
    }
    let dir = TempDir::new().unwrap();
    let spec =
        LocationSpec::new("filesystem", "bucket").with_config("root", dir.path().to_str().unwrap());
    let location = Location::new(&spec).unwrap();
    Cluster {
        _sim: sim,
        _csi: csi,
        client,
        _dir: dir,
        location,
    }
}

/// The volume the claim `name` is bound to, once it is (10 s at most).
async fn bound_volume(claims: &Api<DynamicObject>, name: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let claim = claims.get(name).await.unwrap();
        if let Some(volume) = claim.data["spec"]["volumeName"].as_str() {
            return volume.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "claim {name} is bound: {:?}",
            claim.data
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn snapshots(client: &Client) -> Api<DynamicObject> {
    dynamic(
        client,
        "snapshot.storage.k8s.io",
        "VolumeSnapshot",
        "volumesnapshots",
        Some("shop"),
    )
}

fn contents(client: &Client) -> Api<DynamicObject> {
    dynamic(
        client,
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        None,
    )
}

fn backup_of_shop(name: &str, item_operation_timeout: &str) -> Backup {
    let mut backup = Backup::named(name).including_namespaces(&["shop"]);
    backup.metadata.uid = Some(format!("uid-{name}"));
    backup.spec.csi_snapshot_timeout = Some(GoDuration::parse("10s").unwrap());
    backup.spec.item_operation_timeout = Some(GoDuration::parse(item_operation_timeout).unwrap());
    backup
}

/// Polls the operations as the server does until they have all ended (20 s at most).
async fn wait_for_operations(client: &Client, backup: &Backup, operations: &mut [BackupOperation]) {
    let driver = SnapshotOperations::new(
        client.clone(),
        Duration::from_secs(5),
        hawser_core::clock::Clock::system(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !operations::all_done(operations) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "operations end: {operations:?}"
        );
        driver.poll(backup, operations).await;
        tokio::time::sleep(SnapshotOperations::polling(backup).max).await;
    }
}

async fn finalize(cluster: &Cluster, backup: &Backup, outcome: BackupOutcome) -> BackupOutcome {
    let mut operations =
        operations::load(&cluster.location, backup.metadata.name.as_deref().unwrap())
            .await
            .unwrap();
    assert_eq!(
        operations, outcome.operations,
        "the stored operations are the outcome's"
    );
    wait_for_operations(&cluster.client, backup, &mut operations).await;
    let driver = SnapshotOperations::new(
        cluster.client.clone(),
        Duration::from_secs(5),
        hawser_core::clock::Clock::system(),
    );
    driver
        .finalize(&cluster.location, backup, &operations, outcome)
        .await
        .unwrap()
}

async fn archived(location: &Location, name: &str) -> Vec<(String, Value)> {
    let bytes = location
        .get(&Layout::new(None).backup_contents(name))
        .await
        .unwrap();
    let mut reader = ArchiveReader::new(Cursor::new(bytes.to_vec()), ReaderOptions::default());
    reader
        .items()
        .unwrap()
        .map(|i| {
            let i = i.unwrap();
            (i.path, i.object)
        })
        .collect()
}

async fn gz_json(location: &Location, key: &str) -> Value {
    let bytes = location.get(key).await.unwrap();
    read_gz_json(Cursor::new(bytes), 1 << 20).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_snapshot_is_cut_waited_for_and_kept_when_the_backup_ends() {
    let cluster = cluster(&[("data", "")]).await;
    let backup = backup_of_shop("with-volume", "1m");

    let outcome = backup_support::check_and_run(
        cluster.client.clone(),
        &cluster.location,
        &backup,
        BackupOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome.phase,
        BackupPhase::WaitingForPluginOperations,
        "{:?}",
        outcome.results
    );
    assert_eq!(outcome.operations.len(), 1);
    let operation = &outcome.operations[0];
    assert_eq!(operation.status.phase, OperationPhase::InProgress);
    let snapshot_name = operation.spec.resource_identifier.name.clone();
    assert!(snapshot_name.starts_with("velero-data-"), "{snapshot_name}");

    let entries = archived(&cluster.location, "with-volume").await;
    let find = |prefix: &str| {
        entries
            .iter()
            .find(|(p, _)| p.starts_with(prefix))
            .map(|(_, o)| o.clone())
    };
    let content = find("resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/")
        .expect("the content is archived");
    assert_eq!(
        content["spec"]["deletionPolicy"], "Retain",
        "archived as it is kept: {content}"
    );
    assert!(
        content["status"]["snapshotHandle"]
            .as_str()
            .is_some_and(|h| h.starts_with("snap-")),
        "{content}"
    );
    let snapshot = find("resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/shop/")
        .expect("the snapshot is archived");
    assert_eq!(snapshot["metadata"]["name"], snapshot_name.as_str());
    assert_eq!(
        snapshot["metadata"]["labels"]["velero.io/backup-name"],
        "with-volume"
    );
    assert!(
        find(&format!(
            "resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/{}",
            csi::SNAPSHOT_CLASS
        ))
        .is_some()
    );
    let claim = find("resources/persistentvolumeclaims/namespaces/shop/data.json")
        .expect("the claim is archived");
    assert_eq!(
        claim["metadata"]["annotations"]["velero.io/volume-snapshot-name"],
        snapshot_name.as_str(),
        "the archived claim names its snapshot, as Velero's restore reads it"
    );
    assert!(
        find("resources/persistentvolumes/cluster/").is_some(),
        "the claim brought its volume"
    );

    let outcome = finalize(&cluster, &backup, outcome).await;

    assert_eq!(
        outcome.phase,
        BackupPhase::Completed,
        "{:?}",
        outcome.results
    );
    assert!(
        snapshots(&cluster.client)
            .get_opt(&snapshot_name)
            .await
            .unwrap()
            .is_none(),
        "the VolumeSnapshot object is deleted"
    );
    let content_name = content["metadata"]["name"].as_str().unwrap();
    assert!(
        contents(&cluster.client)
            .get_opt(content_name)
            .await
            .unwrap()
            .is_some(),
        "its content, Retain, keeps the snapshot"
    );
    let layout = Layout::new(None);
    let stored = gz_json(
        &cluster.location,
        &layout.backup_item_operations("with-volume"),
    )
    .await;
    assert_eq!(stored[0]["status"]["phase"], "Completed", "{stored}");
    let info = gz_json(&cluster.location, &layout.backup_volume_info("with-volume")).await;
    assert_eq!(info[0]["pvcName"], "data");
    assert_eq!(info[0]["backupMethod"], "CSISnapshot");
    assert_eq!(info[0]["result"], "succeeded");
    assert_eq!(
        info[0]["csiSnapshotInfo"]["snapshotHandle"],
        content["status"]["snapshotHandle"]
    );

    // Restored into another namespace: the claim is provisioned from the snapshot's handle.
    let record: Backup =
        serde_json::from_value(backup::record(&backup, &outcome).unwrap()).unwrap();
    let mut restore = Restore::named("back").from_backup("with-volume");
    restore.spec.namespace_mapping = Some([("shop".to_owned(), "shop-copy".to_owned())].into());
    let options = RestoreOptions::default();
    let valid = ValidatedRestore::check(&cluster.client, restore, record, options.api_retry)
        .await
        .unwrap();
    let restored = restore::run(cluster.client.clone(), &cluster.location, &valid, options)
        .await
        .unwrap();
    assert_eq!(
        restored.phase,
        RestorePhase::Completed,
        "{:?}",
        restored.results
    );
    let claims = dynamic(
        &cluster.client,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Some("shop-copy"),
    );
    let volume_name = bound_volume(&claims, "data").await;
    let volumes = dynamic(
        &cluster.client,
        "",
        "PersistentVolume",
        "persistentvolumes",
        None,
    );
    let volume = volumes.get(&volume_name).await.unwrap();
    assert_eq!(
        volume
            .metadata
            .annotations
            .unwrap_or_default()
            .get(csi::RESTORED_FROM),
        content["status"]["snapshotHandle"]
            .as_str()
            .map(str::to_owned)
            .as_ref(),
        "a new volume, provisioned from the backup's snapshot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_never_ready_fails_its_operation_at_the_timeout_and_a_failed_one_at_once() {
    let cluster = cluster(&[("stuck", "never-ready"), ("broken", "error")]).await;
    let backup = backup_of_shop("faulty", "1s");

    let outcome = backup_support::check_and_run(
        cluster.client.clone(),
        &cluster.location,
        &backup,
        BackupOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome.phase,
        BackupPhase::WaitingForPluginOperationsPartiallyFailed
    );
    let errors = &outcome.results.errors.namespaces["shop"];
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("PersistentVolumeClaim shop/broken was not snapshotted: VolumeSnapshot shop/velero-broken-")
            && errors[0].contains("simulated snapshot failure"),
        "{errors:?}"
    );
    assert_eq!(
        outcome.operations.len(),
        1,
        "only the stuck claim's snapshot was cut"
    );

    let outcome = finalize(&cluster, &backup, outcome).await;

    assert_eq!(outcome.phase, BackupPhase::PartiallyFailed);
    let errors = &outcome.results.errors.namespaces["shop"];
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[1].contains(
            "velero.io/csi-volumesnapshot-backupper failed: VolumeSnapshot shop/velero-stuck-"
        ) && errors[1].contains("not ready to use within the item operation timeout (1s)"),
        "the operation is named: {errors:?}"
    );
    let stored = gz_json(
        &cluster.location,
        &Layout::new(None).backup_results("faulty"),
    )
    .await;
    assert_eq!(
        stored["errors"]["namespaces"]["shop"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_snapshot_is_taken_when_snapshot_volumes_is_false() {
    let cluster = cluster(&[("data", "")]).await;
    let mut backup = backup_of_shop("objects-only", "1m");
    backup.spec.snapshot_volumes = Some(false);

    let outcome = backup_support::check_and_run(
        cluster.client.clone(),
        &cluster.location,
        &backup,
        BackupOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(outcome.phase, BackupPhase::Completed);
    assert!(outcome.operations.is_empty());
    assert_eq!(outcome.warnings(), 0, "asked for: no warning");
    assert!(
        snapshots(&cluster.client)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let stored = gz_json(
        &cluster.location,
        &Layout::new(None).backup_item_operations("objects-only"),
    )
    .await;
    assert_eq!(stored, json!([]));
}
