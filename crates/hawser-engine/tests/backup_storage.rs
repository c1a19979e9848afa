//! The backup engine when its storage location fails, with hawser-store's fault wrapper: the
//! archive cannot be stored at all, or its upload breaks after some parts were stored. The
//! location's directory is then read from the disk itself (a location's listing hides the staging
//! file of an unfinished upload), and must hold nothing: no archive, no part of one, and none of
//! the files written after the archive (resource list, results, log).
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

mod backup_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::time::Duration;

use hawser_api::Backup;
use hawser_api::phase::BackupPhase;
use hawser_engine::backup::{self, BackupError, BackupOptions, BackupOutcome, Progress};
use hawser_store::faults::{StoreFault, StoreFaults};
use hawser_store::{Location, LocationOptions, LocationSpec};
use kube::{Client, Config};
use kube_sim::{KubeSim, SimConfig};
use serde_json::json;
use store_common::files_under;
use tempfile::TempDir;
use tokio::sync::watch;

const BUCKET: &str = "backups-bucket";
/// Part size of the mid-upload test: the archive is many parts long.
const PART: usize = 64 * 1024;

/// A simulator with namespace `bulk`: 40 ConfigMaps of 32 KiB of letters gzip cannot shrink
/// much (an archive of about a megabyte).
async fn bulk_cluster() -> (KubeSim, Client) {
    let sim = KubeSim::start(SimConfig::default())
        .await
        .expect("simulator starts");
    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();
    let store = sim.store();
    store
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bulk"}}))
        .unwrap();
    for i in 0..40u64 {
        store
            .insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("blob-{i}"), "namespace": "bulk"},
                "data": {"blob": noise(i, 32 * 1024)}
            }))
            .unwrap();
    }
    (sim, client)
}

/// Text that gzip cannot shrink much (a fixed pseudo-random sequence of letters).
fn noise(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'a' + u8::try_from((state >> 33) % 26).unwrap())
        })
        .collect()
}

fn location(dir: &TempDir, options: LocationOptions, faults: &StoreFaults) -> Location {
    let spec =
        LocationSpec::new("filesystem", BUCKET).with_config("root", dir.path().to_str().unwrap());
    Location::with_options(&spec, options)
        .unwrap()
        .with_faults(faults)
}

async fn back_up(client: Client, location: &Location, name: &str) -> Result<u64, BackupError> {
    let (progress_tx, progress_rx) = watch::channel(Progress::default());
    let backup = Backup::named(name).including_namespaces(&["bulk"]);
    let options = BackupOptions::default()
        .with_page_size(4)
        .with_progress(progress_tx);
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        backup_support::check_and_run(client, location, &backup, options),
    )
    .await
    .expect("the backup ends within a minute");
    let items = result?.items_backed_up;
    assert_eq!(progress_rx.borrow().items_backed_up, items);
    Ok(items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_that_cannot_be_stored_fails_the_backup_and_stores_nothing() {
    let (_sim, client) = bulk_cluster().await;
    let dir = TempDir::new().unwrap();
    let faults = StoreFaults::default();
    // Every request of the archive's upload fails; the other objects could be stored.
    faults.add(StoreFault::on("b3.tar.gz"));
    let location = location(&dir, LocationOptions::default(), &faults);

    let error = back_up(client, &location, "b3")
        .await
        .expect_err("a backup whose archive cannot be stored fails");

    assert_eq!(error.phase(), BackupPhase::Failed);
    assert!(
        matches!(error, BackupError::Storage { .. } | BackupError::Archive(_)),
        "{error:?}"
    );
    let message = error.full_message();
    assert!(
        message.contains("b3.tar.gz") && message.contains("injected storage fault"),
        "{message}"
    );
    assert!(faults.injected() >= 1);
    assert_eq!(faults.delivered(), 0);
    assert_eq!(
        files_under(dir.path()),
        Vec::<String>::new(),
        "files stored by a failed backup"
    );

    // The record of the failure says what failed.
    let backup = Backup::named("b3").including_namespaces(&["bulk"]);
    let failed = BackupOutcome::failed(
        &error,
        "2026-01-01T00:00:00Z".parse().unwrap(),
        "2026-01-01T00:00:01Z".parse().unwrap(),
    );
    let record = backup::record(&backup, &failed).unwrap();
    assert_eq!(record["status"]["phase"], "Failed");
    let reason = record["status"]["failureReason"].as_str().unwrap();
    assert!(
        reason.contains("storing") && reason.contains("b3.tar.gz"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_broken_after_three_parts_fails_the_backup_and_leaves_no_file() {
    let (_sim, client) = bulk_cluster().await;
    let dir = TempDir::new().unwrap();
    let faults = StoreFaults::default();
    faults.add(StoreFault::on("b5.tar.gz").after_parts(3));
    let options = LocationOptions {
        part_size: PART,
        ..LocationOptions::default()
    };
    let location = location(&dir, options, &faults);

    let error = back_up(client, &location, "b5")
        .await
        .expect_err("a backup whose upload broke fails");

    assert_eq!(error.phase(), BackupPhase::Failed);
    assert!(
        matches!(error, BackupError::Storage { .. } | BackupError::Archive(_)),
        "{error:?}"
    );
    assert!(
        error.full_message().contains("b5.tar.gz"),
        "{}",
        error.full_message()
    );
    // The failure came mid-upload: three parts had reached the disk.
    assert_eq!(faults.delivered(), 3 * PART as u64);
    assert!(faults.injected() >= 1);
    assert_eq!(
        files_under(dir.path()),
        Vec::<String>::new(),
        "files left by a backup whose upload broke"
    );
}
