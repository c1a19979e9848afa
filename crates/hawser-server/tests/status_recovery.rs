//! A new server instance resolving the Backups/Restores a previous instance left unfinished.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod status_support;

use std::time::Duration;

use hawser_api::phase::BackupPhase;
use hawser_core::clock::Clock;
use hawser_server::status::{
    Kind, MemoryRecords, ObjectKey, RecordedOutcome, StatusConfig, StatusUpdate,
    restart_failure_reason,
};
use serde_json::json;
use status_support::*;

#[tokio::test]
async fn a_new_instance_resolves_orphans_from_records_and_fails_those_without() {
    let sim = start_sim(false).await;
    // Left by instance "old": one backup whose record says Completed, one restore recorded as
    // PartiallyFailed, one backup and one restore with no record at all.
    create(&sim, Kind::Backup, "recorded", "InProgress", Some("old"));
    create(&sim, Kind::Restore, "recorded-r", "Finalizing", Some("old"));
    create(&sim, Kind::Backup, "lost", "InProgress", Some("old"));
    create(&sim, Kind::Restore, "lost-r", "InProgress", Some("old"));
    // Not orphans: work not started yet, already final.
    create(&sim, Kind::Backup, "queued", "Queued", None);
    create(&sim, Kind::Backup, "done", "Completed", Some("old"));

    let records = MemoryRecords::default();
    records.insert(
        ObjectKey::new(Kind::Backup, NS, "recorded"),
        RecordedOutcome::phase("Completed")
            .with("completionTimestamp", "2026-12-02T09:00:00Z")
            .with("progress", json!({"totalItems": 12, "itemsBackedUp": 12})),
    );
    records.insert(
        ObjectKey::new(Kind::Restore, NS, "recorded-r"),
        RecordedOutcome::phase("PartiallyFailed").with("errors", 2),
    );

    let fixed_now: jiff::Timestamp = "2026-12-02T11:22:33.456Z".parse().unwrap();
    let config = StatusConfig {
        clock: Clock::fixed(fixed_now),
        ..short_config("new")
    };
    let (engine, _metrics, _client) = engine_for(&sim, config).await;
    let report = engine.resolve_orphans(&records).await.unwrap();
    assert_eq!(
        (
            report.in_flight,
            report.owned,
            report.from_record,
            report.failed_without_record,
            report.unresolved
        ),
        (4, 0, 2, 2, 0),
        "{report:?}"
    );

    let b = get(&sim, Kind::Backup, "recorded").unwrap();
    assert_eq!(b["status"]["phase"], json!("Completed"));
    assert_eq!(b["status"]["progress"]["itemsBackedUp"], json!(12));
    assert_eq!(
        b["status"]["completionTimestamp"],
        json!("2026-12-02T09:00:00Z")
    );
    assert!(b["status"].get("failureReason").is_none());
    let r = get(&sim, Kind::Restore, "recorded-r").unwrap();
    assert_eq!(
        (r["status"]["phase"].clone(), r["status"]["errors"].clone()),
        (json!("PartiallyFailed"), json!(2))
    );

    let lost = get(&sim, Kind::Backup, "lost").unwrap();
    assert_eq!(lost["status"]["phase"], json!("Failed"));
    assert_eq!(
        lost["status"]["failureReason"],
        json!(restart_failure_reason(Kind::Backup))
    );
    assert_eq!(
        lost["status"]["failureReason"],
        json!(
            "hawser server restarted while the backup was in progress; no completion record was found in the storage location"
        )
    );
    assert_eq!(
        lost["status"]["completionTimestamp"],
        json!("2026-12-02T11:22:33Z")
    );
    let lost_r = get(&sim, Kind::Restore, "lost-r").unwrap();
    assert_eq!(lost_r["status"]["phase"], json!("Failed"));
    assert_eq!(
        lost_r["status"]["failureReason"],
        json!(restart_failure_reason(Kind::Restore))
    );

    assert_eq!(phase(&sim, Kind::Backup, "queued"), "Queued");
    assert_eq!(phase(&sim, Kind::Backup, "done"), "Completed");
    assert!(!events(&sim, "lost", "StatusRecovered").is_empty());

    // A second round finds nothing left to do.
    let again = engine.resolve_orphans(&records).await.unwrap();
    assert_eq!(again.in_flight, 0, "{again:?}");
}

#[tokio::test]
async fn objects_with_a_live_worker_or_a_pending_status_are_left_alone() {
    let sim = start_sim(false).await;
    let (engine, _metrics, _client) = engine_for(&sim, short_config("me")).await;
    create(&sim, Kind::Backup, "working", "InProgress", Some("me"));
    create(
        &sim,
        Kind::Backup,
        "mine-but-dead",
        "InProgress",
        Some("me"),
    );
    let _guard = engine.worker(ObjectKey::new(Kind::Backup, NS, "working"));
    let report = engine
        .resolve_orphans(&MemoryRecords::default())
        .await
        .unwrap();
    assert_eq!(
        (report.in_flight, report.owned, report.failed_without_record),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(phase(&sim, Kind::Backup, "working"), "InProgress");
    assert_eq!(phase(&sim, Kind::Backup, "mine-but-dead"), "Failed");

    // A status pending in the re-driver is the truth: recovery must not overwrite it with Failed.
    create(&sim, Kind::Backup, "pending", "InProgress", Some("me"));
    sim.faults().refuse(Some(Duration::from_secs(3)));
    let err = engine
        .write(StatusUpdate::backup(NS, "pending", BackupPhase::Completed))
        .await
        .unwrap_err();
    assert!(err.is_pending(), "{err:?}");
    sim.faults().clear();
    let report = engine
        .resolve_orphans(&MemoryRecords::default())
        .await
        .unwrap();
    assert_eq!(report.failed_without_record, 0, "{report:?}");
    let landed = eventually(Duration::from_secs(3), || {
        phase(&sim, Kind::Backup, "pending") == "Completed"
    })
    .await;
    assert!(landed.is_some());
}

#[tokio::test]
async fn the_resync_loop_resolves_an_orphan_that_appears_later() {
    let sim = start_sim(false).await;
    let (engine, _metrics, _client) = engine_for(&sim, short_config("me")).await;
    let runner = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run_recovery(MemoryRecords::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    create(
        &sim,
        Kind::Restore,
        "late",
        "InProgress",
        Some("gone-instance"),
    );
    // Resync period 1 s: resolved at the next round.
    let t = eventually(Duration::from_secs(3), || {
        phase(&sim, Kind::Restore, "late") == "Failed"
    })
    .await;
    assert!(t.is_some(), "resolved by the periodic resync");
    engine.shutdown();
    tokio::time::timeout(Duration::from_secs(2), runner)
        .await
        .expect("recovery loop stops on shutdown")
        .unwrap();
}
