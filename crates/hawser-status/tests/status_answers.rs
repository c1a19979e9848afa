//! How each kind of API answer to a status write is handled: 429 with Retry-After, 404, 422,
//! 409, a CR finalized by someone else, and the status subresource.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod status_support;

use std::time::Duration;

use hawser_api::phase::{BackupPhase, Phase};
use hawser_status::metrics::AttemptOutcome;
use hawser_status::{Kind, StatusUpdate, WriteError};
use kube_sim::StatusFault;
use serde_json::json;
use status_support::*;

fn completed(name: &str) -> StatusUpdate {
    StatusUpdate::backup(NS, name, BackupPhase::Completed).status(&timestamp(false))
}

#[tokio::test]
async fn too_many_requests_with_retry_after_is_not_retried_before_it() {
    for plain in [false, true] {
        let h = start(short_config("a")).await;
        let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
        let mut fault = StatusFault::new(429)
            .retry_after(1)
            .verbs(&["patch"])
            .resources(&["backups"])
            .count(1);
        if plain {
            // The priority-and-fairness shape: plain text, only the header carries the wait.
            fault = fault.plain();
        }
        h.sim.faults().status(fault);
        let landing = h
            .engine
            .write(completed("b1").observed(rv(&obj), BackupPhase::InProgress))
            .await
            .unwrap();
        assert_eq!(landing.attempts, 2);
        assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Completed");
        let patches = requests(&h.sim, "backups", "b1", "patch");
        assert_eq!(
            patches.iter().map(|r| r.code).collect::<Vec<_>>(),
            [429, 200],
            "plain={plain}"
        );
        let gap = time_of(&patches[1]) - time_of(&patches[0]);
        assert!(
            gap >= 0.99,
            "second attempt {gap}s after the 429 (plain={plain})"
        );
        assert!(gap <= 1.6, "waited too long: {gap}s (plain={plain})");
    }
}

#[tokio::test]
async fn a_deleted_cr_stops_quietly_after_one_request() {
    let h = start(short_config("a")).await;
    let err = h.engine.write(completed("gone")).await.unwrap_err();
    assert!(matches!(err, WriteError::Gone { .. }), "{err:?}");
    assert_eq!(err.category(), "ObjectGone");
    let all: Vec<_> = h
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.name == "gone")
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].code, 404);
    assert_eq!(h.engine.pending(), 0);
    assert!(events(&h.sim, "gone", "StatusWriteRejected").is_empty());

    // Deleted between the worker's read and the write: the PATCH answers 404.
    let obj = create(&h.sim, Kind::Backup, "b2", "InProgress", Some("a"));
    h.sim
        .store()
        .delete("velero.io/v1", "Backup", NS, "b2")
        .unwrap();
    let err = h
        .engine
        .write(completed("b2").observed(rv(&obj), BackupPhase::InProgress))
        .await
        .unwrap_err();
    assert!(matches!(err, WriteError::Gone { .. }), "{err:?}");
    assert_eq!(requests(&h.sim, "backups", "b2", "patch").len(), 1);
}

#[tokio::test]
async fn an_invalid_answer_stops_with_a_warning_event_and_no_more_attempts() {
    let h = start(short_config("a")).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    h.sim.faults().status(
        StatusFault::new(422)
            .verbs(&["patch"])
            .resources(&["backups"]),
    );
    let err = h
        .engine
        .write(completed("b1").observed(rv(&obj), BackupPhase::InProgress))
        .await
        .unwrap_err();
    assert!(matches!(err, WriteError::Rejected { .. }), "{err:?}");
    assert_eq!(err.category(), "StatusWriteRejected");
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "InProgress");
    let warnings = events(&h.sim, "b1", "StatusWriteRejected");
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0]["type"], json!("Warning"));
    // No retry, now or later (the re-driver does not take refused statuses).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(requests(&h.sim, "backups", "b1", "patch").len(), 1);
    assert_eq!(h.engine.pending(), 0);
    assert_eq!(
        h.metrics.attempts(Kind::Backup, AttemptOutcome::Rejected),
        1
    );
}

#[tokio::test]
async fn a_conflict_rereads_and_reapplies_the_still_legal_transition() {
    let h = start(short_config("a")).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    // Someone else changes the object after the worker read it: its resourceVersion is stale.
    let mut other = get(&h.sim, Kind::Backup, "b1").unwrap();
    other["metadata"]["labels"] = json!({"team": "x"});
    h.sim.store().insert(other).unwrap();

    let landing = h
        .engine
        .write(completed("b1").observed(rv(&obj), BackupPhase::InProgress))
        .await
        .unwrap();
    assert_eq!(landing.attempts, 2);
    let stored = get(&h.sim, Kind::Backup, "b1").unwrap();
    assert_eq!(stored.pointer("/status/phase"), Some(&json!("Completed")));
    assert_eq!(
        stored.pointer("/metadata/labels/team"),
        Some(&json!("x")),
        "the other write is kept"
    );
    let seq: Vec<(String, u16)> = h
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.name == "b1")
        .map(|r| (r.verb, r.code))
        .collect();
    assert_eq!(
        seq,
        [
            ("patch".into(), 409),
            ("get".into(), 200),
            ("patch".into(), 200)
        ]
    );
    assert_eq!(
        h.metrics.attempts(Kind::Backup, AttemptOutcome::Conflict),
        1
    );
}

#[tokio::test]
async fn a_conflict_with_a_cr_finalized_meanwhile_drops_the_status() {
    let h = start(short_config("a")).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    set_phase(&h.sim, Kind::Backup, "b1", "Completed");
    let failed = StatusUpdate::backup(NS, "b1", BackupPhase::Failed)
        .observed(rv(&obj), BackupPhase::InProgress);
    let err = h.engine.write(failed).await.unwrap_err();
    assert!(
        matches!(err, WriteError::Stale { ref current, .. } if *current == Phase::Backup(BackupPhase::Completed)),
        "{err:?}"
    );
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Completed");
}

#[tokio::test]
async fn a_pending_failed_status_is_dropped_when_someone_else_completes_the_cr() {
    let h = start(short_config("a")).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    h.sim.faults().refuse(Some(Duration::from_secs(4)));
    let failed = StatusUpdate::backup(NS, "b1", BackupPhase::Failed)
        .observed(rv(&obj), BackupPhase::InProgress);
    let err = h.engine.write(failed).await.unwrap_err();
    assert!(err.is_pending(), "{err:?}");
    // While the API is unreachable for hawser, another writer finalizes the backup.
    set_phase(&h.sim, Kind::Backup, "b1", "Completed");

    let dropped = eventually(Duration::from_secs(8), || h.engine.pending() == 0).await;
    assert!(dropped.is_some(), "the stale pending status is dropped");
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Completed");
    assert_eq!(h.metrics.attempts(Kind::Backup, AttemptOutcome::Stale), 1);
    assert_eq!(h.metrics.pending(Kind::Backup), 0);
    // And nothing more is tried afterwards.
    let before = requests(&h.sim, "backups", "b1", "patch").len();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(requests(&h.sim, "backups", "b1", "patch").len(), before);
}

#[tokio::test]
async fn a_newer_write_replaces_a_pending_one() {
    let h = start(short_config("a")).await;
    create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    h.sim.faults().refuse(Some(Duration::from_secs(3)));
    let err = h
        .engine
        .write(StatusUpdate::backup(NS, "b1", BackupPhase::PartiallyFailed))
        .await
        .unwrap_err();
    assert!(err.is_pending());
    assert_eq!(h.engine.pending(), 1);
    let landing = h
        .engine
        .write(StatusUpdate::backup(NS, "b1", BackupPhase::Failed))
        .await;
    assert!(landing.is_ok(), "{landing:?}");
    assert_eq!(h.engine.pending(), 0);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Failed");
}

#[tokio::test]
async fn with_the_status_subresource_a_claim_is_two_writes_and_the_status_goes_to_status() {
    let h = start_with(short_config("inst-1"), true).await;
    create(&h.sim, Kind::Backup, "b1", "New", None);
    let claim = StatusUpdate::backup(NS, "b1", BackupPhase::InProgress)
        .status(&timestamp(true))
        .claim();
    h.engine.write(claim).await.unwrap();
    let stored = get(&h.sim, Kind::Backup, "b1").unwrap();
    assert_eq!(stored.pointer("/status/phase"), Some(&json!("InProgress")));
    assert_eq!(
        stored["metadata"]["annotations"][hawser_api::labels::HAWSER_OWNER],
        json!("inst-1")
    );
    let patches: Vec<String> = requests(&h.sim, "backups", "b1", "patch")
        .into_iter()
        .map(|r| r.subresource)
        .collect();
    assert_eq!(patches, ["", "status"]);

    h.engine.write(completed("b1")).await.unwrap();
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Completed");
    let last = requests(&h.sim, "backups", "b1", "patch").pop().unwrap();
    assert_eq!(last.subresource, "status");
}

#[tokio::test]
async fn without_the_subresource_a_claim_is_one_write_with_the_annotation() {
    let h = start(short_config("inst-1")).await;
    create(&h.sim, Kind::Restore, "r1", "New", None);
    let claim =
        StatusUpdate::restore(NS, "r1", hawser_api::phase::RestorePhase::InProgress).claim();
    h.engine.write(claim).await.unwrap();
    let stored = get(&h.sim, Kind::Restore, "r1").unwrap();
    assert_eq!(stored.pointer("/status/phase"), Some(&json!("InProgress")));
    assert_eq!(
        stored["metadata"]["annotations"][hawser_api::labels::HAWSER_OWNER],
        json!("inst-1")
    );
    let patches: Vec<String> = requests(&h.sim, "restores", "r1", "patch")
        .into_iter()
        .map(|r| r.subresource)
        .collect();
    assert_eq!(patches, [""]);
}
