//! A new server instance resolving the Backups/Restores a previous instance left unfinished.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod status_support;

use std::time::Duration;

use hawser_api::labels::{HAWSER_ATTEMPT, HAWSER_INTERRUPTED_ATTEMPTS};
use hawser_api::phase::BackupPhase;
use hawser_core::clock::Clock;
use hawser_status::metrics::Resolution;
use hawser_status::{
    Kind, MemoryRecords, ObjectKey, RecordedOutcome, Rerun, Resumed, StatusConfig, StatusUpdate,
    restart_failure_reason,
};
use serde_json::json;
use status_support::*;
use tokio_util::sync::CancellationToken;

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
    // hawser_status_recovered_total counts each, by kind and resolution.
    let metrics = engine.metrics();
    for kind in [Kind::Backup, Kind::Restore] {
        assert_eq!(metrics.recovered_count(kind, Resolution::FromRecord), 1);
        assert_eq!(
            metrics.recovered_count(kind, Resolution::FailedWithoutRecord),
            1
        );
        assert_eq!(metrics.recovered_count(kind, Resolution::Resumed), 0);
    }

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
        tokio::spawn(async move {
            engine
                .run_recovery(MemoryRecords::default(), CancellationToken::new())
                .await
        })
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

/// Sets annotations on an object of the simulator.
fn annotate(sim: &kube_sim::KubeSim, kind: Kind, name: &str, annotations: serde_json::Value) {
    let mut object = get(sim, kind, name).unwrap();
    for (k, v) in annotations.as_object().unwrap() {
        object["metadata"]["annotations"][k] = v.clone();
    }
    sim.store().insert(object).unwrap();
}

#[tokio::test]
async fn interrupted_work_without_a_record_is_handed_back_until_the_bound_then_failed_with_each_reason()
 {
    let sim = start_sim(false).await;
    let config = StatusConfig {
        resume_attempts: 2,
        ..short_config("me")
    };
    let (engine, _metrics, _client) = engine_for(&sim, config).await;
    let (resumer, mut resumed) = tokio::sync::mpsc::unbounded_channel();
    engine.resume_with(resumer);
    let first = create(&sim, Kind::Backup, "b-first", "InProgress", Some("gone"));
    create(&sim, Kind::Restore, "r-second", "InProgress", Some("me"));
    annotate(
        &sim,
        Kind::Restore,
        "r-second",
        json!({HAWSER_ATTEMPT: "2", HAWSER_INTERRUPTED_ATTEMPTS: "[\"attempt 1 ended\"]"}),
    );
    create(&sim, Kind::Backup, "b-last", "InProgress", Some("gone"));
    annotate(
        &sim,
        Kind::Backup,
        "b-last",
        json!({HAWSER_ATTEMPT: "3", HAWSER_INTERRUPTED_ATTEMPTS: "[\"one\", \"two\"]"}),
    );
    // Started work that is not InProgress has no rerun: only its record could say more.
    create(
        &sim,
        Kind::Backup,
        "b-waiting",
        "WaitingForPluginOperations",
        Some("gone"),
    );

    let report = engine
        .resolve_orphans(&MemoryRecords::default())
        .await
        .unwrap();
    assert_eq!(
        (report.resumed, report.failed_without_record),
        (2, 2),
        "{report:?}"
    );
    let counted = |resolution| {
        [Kind::Backup, Kind::Restore]
            .into_iter()
            .map(|kind| engine.metrics().recovered_count(kind, resolution))
            .sum::<u64>()
    };
    assert_eq!(
        (
            counted(Resolution::Resumed),
            counted(Resolution::FailedWithoutRecord)
        ),
        (2, 2)
    );
    let mut handed = Vec::new();
    while let Ok(r) = resumed.try_recv() {
        handed.push(r);
    }
    handed.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    let by_name = |name: &str| {
        handed
            .iter()
            .find_map(|r| match r {
                Resumed::Rerun(rerun) if rerun.key.name == name => Some(rerun.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name} not handed back: {handed:?}"))
    };
    let b = by_name("b-first");
    assert_eq!(
        b,
        Rerun {
            key: ObjectKey::new(Kind::Backup, NS, "b-first"),
            uid: first["metadata"]["uid"].as_str().unwrap().to_owned(),
            owner: Some("gone".to_owned()),
            attempt: 2,
            interrupted: vec![
                "attempt 1 ended when its server gone stopped (its instance Lease expired or was released), before its record was stored".to_owned()
            ],
        }
    );
    let r = by_name("r-second");
    assert_eq!(r.attempt, 3);
    assert_eq!(r.interrupted.len(), 2, "{r:?}");
    assert_eq!(r.interrupted[0], "attempt 1 ended");
    assert!(
        r.interrupted[1].starts_with("attempt 2 was stopped when this server (me) stopped leading"),
        "{r:?}"
    );
    // Handed back, not written: the rerun decides.
    assert_eq!(phase(&sim, Kind::Backup, "b-first"), "InProgress");

    let last = get(&sim, Kind::Backup, "b-last").unwrap();
    assert_eq!(last["status"]["phase"], "Failed");
    let reason = last["status"]["failureReason"].as_str().unwrap();
    assert!(
        reason.starts_with(&restart_failure_reason(Kind::Backup)),
        "{reason}"
    );
    assert!(
        reason.contains("it was run 3 times (--resume-attempts 2): one; two; attempt 3 ended when its server gone stopped"),
        "{reason}"
    );
    assert_eq!(phase(&sim, Kind::Backup, "b-waiting"), "Failed");

    // Without a resumer (or with --resume-attempts 0) nothing is run again.
    engine.step_down();
    let report = engine
        .resolve_orphans(&MemoryRecords::default())
        .await
        .unwrap();
    assert_eq!(
        (report.resumed, report.failed_without_record),
        (0, 2),
        "{report:?}"
    );
    assert_eq!(
        get(&sim, Kind::Backup, "b-first").unwrap()["status"]["failureReason"],
        json!(restart_failure_reason(Kind::Backup))
    );
}

#[tokio::test]
async fn stepping_down_keeps_pending_statuses_a_record_decides_and_drops_the_others() {
    let sim = start_sim(false).await;
    let (engine, _metrics, _client) = engine_for(&sim, short_config("me")).await;
    create(&sim, Kind::Backup, "recorded", "InProgress", Some("me"));
    create(&sim, Kind::Backup, "undecided", "InProgress", Some("me"));
    sim.faults().refuse(None);
    let decided = engine
        .write(StatusUpdate::backup(NS, "recorded", BackupPhase::Completed).decided_by_record())
        .await
        .unwrap_err();
    let undecided = engine
        .write(
            StatusUpdate::backup(NS, "undecided", BackupPhase::Failed)
                .status(&failure_reason("no record")),
        )
        .await
        .unwrap_err();
    assert!(decided.is_pending() && undecided.is_pending());
    assert_eq!(engine.pending(), 2);

    assert_eq!(engine.step_down(), 1);
    assert_eq!(engine.pending(), 1);
    assert!(engine.is_pending(&ObjectKey::new(Kind::Backup, NS, "recorded")));
    sim.faults().clear();
    let landed = eventually(Duration::from_secs(3), || {
        phase(&sim, Kind::Backup, "recorded") == "Completed"
    })
    .await;
    assert!(landed.is_some(), "the decided status did not land");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&sim, Kind::Backup, "undecided"), "InProgress");
    assert_eq!(engine.pending(), 0);
}

#[tokio::test]
async fn recovery_stops_with_its_term_and_deletes_the_instance_lease() {
    let sim = start_sim(false).await;
    let (engine, _metrics, _client) = engine_for(&sim, short_config("me")).await;
    let stop = CancellationToken::new();
    let runner = {
        let (engine, stop) = (engine.clone(), stop.clone());
        tokio::spawn(async move { engine.run_recovery(MemoryRecords::default(), stop).await })
    };
    let lease = || sim.store().get("coordination.k8s.io/v1", "Lease", NS, "me");
    assert!(
        eventually(Duration::from_secs(3), || lease().is_some())
            .await
            .is_some()
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(3), runner)
        .await
        .expect("recovery ended with its term")
        .unwrap();
    assert!(lease().is_none(), "the instance Lease outlived the term");
}
