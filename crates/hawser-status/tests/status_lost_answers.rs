//! Final status writes whose request the API server applied without the answer coming back
//! (kube-sim's `drop-response`), or held without answering (`hang`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod status_support;

use std::time::Duration;

use hawser_api::phase::BackupPhase;
use hawser_status::metrics::AttemptOutcome;
use hawser_status::{Kind, StatusUpdate};
use kube_sim::{DropResponseFault, HangFault};
use status_support::*;
use tokio::time::Instant;

fn completed(name: &str) -> StatusUpdate {
    StatusUpdate::backup(NS, name, BackupPhase::Completed).status(&timestamp(false))
}

fn rv_number(obj: &serde_json::Value) -> u64 {
    rv(obj).parse().unwrap()
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_is_recognised_as_landed_and_not_written_again() {
    // Without and with the status subresource (the status is then patched on `/status`).
    for subresource in [false, true] {
        let h = start_with(short_config("a"), subresource).await;
        let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
        h.sim.faults().drop_response(
            DropResponseFault::new()
                .verbs(&["patch"])
                .resources(&["backups"])
                .name("b1")
                .count(1),
        );

        let landing = h
            .engine
            .write(completed("b1").observed(rv(&obj), BackupPhase::InProgress))
            .await
            .expect("the status is stored");

        assert!(
            landing.already_there,
            "subresource={subresource}: {landing:?}"
        );
        assert_eq!(
            h.metrics
                .attempts(Kind::Backup, AttemptOutcome::AlreadyLanded),
            1,
            "subresource={subresource}"
        );
        assert_eq!(
            h.metrics.attempts(Kind::Backup, AttemptOutcome::Landed),
            0,
            "subresource={subresource}: a second write landed"
        );
        let stored = get(&h.sim, Kind::Backup, "b1").unwrap();
        assert_eq!(stored["status"]["phase"], "Completed");
        assert_eq!(
            stored["status"]["completionTimestamp"],
            "2026-12-02T10:00:00Z"
        );
        // One write changed the object: the one whose answer was lost.
        assert_eq!(
            rv_number(&stored),
            rv_number(&obj) + 1,
            "subresource={subresource}: the object was written more than once"
        );

        // The lost write (logged with code 0 once applied), then at most the same write again,
        // refused by its resourceVersion precondition; nothing else, now or later.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let codes: Vec<u16> = requests(&h.sim, "backups", "b1", "patch")
            .iter()
            .map(|r| r.code)
            .collect();
        assert_eq!(
            codes.first(),
            Some(&0),
            "subresource={subresource}: {codes:?}"
        );
        assert!(
            codes[1..].iter().all(|c| *c == 409),
            "subresource={subresource}: a second write was accepted: {codes:?}"
        );
        assert_eq!(
            rv_number(&get(&h.sim, Kind::Backup, "b1").unwrap()),
            rv_number(&obj) + 1
        );
        assert_eq!(h.engine.pending(), 0);
    }
}

#[tokio::test]
async fn a_request_hung_past_the_client_timeout_is_retried_and_the_status_lands() {
    let config = short_config("a");
    let request_timeout = config.request_timeout;
    let h = start(config).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    // The first PATCH is held for 10 s (far past the 1 s request timeout), then dropped unserved.
    h.sim.faults().hang(
        HangFault::new()
            .verbs(&["patch"])
            .resources(&["backups"])
            .name("b1")
            .hold_for(Duration::from_secs(10))
            .count(1),
    );

    let t0 = Instant::now();
    let landing = h
        .engine
        .write(completed("b1").observed(rv(&obj), BackupPhase::InProgress))
        .await
        .expect("lands within the deadline");
    let took = t0.elapsed();

    assert_eq!(landing.attempts, 2, "{landing:?}");
    assert!(!landing.already_there);
    assert!(took >= request_timeout, "{took:?}");
    assert!(
        took < Duration::from_secs(5),
        "waited for the hang instead of timing out: {took:?}"
    );
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Completed");
    let codes: Vec<u16> = requests(&h.sim, "backups", "b1", "patch")
        .iter()
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, [0, 200]);
}

#[tokio::test]
async fn a_hang_longer_than_the_deadline_ends_with_the_status_landed_once_it_ends() {
    let config = short_config("a");
    let (timeout, cap, request_timeout) = (
        config.resource_timeout,
        config.max_backoff,
        config.request_timeout,
    );
    let h = start(config).await;
    let obj = create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    // Every PATCH of the Backup hangs for 4 s (twice the resource timeout), unserved.
    let hang = Duration::from_secs(4);
    h.sim.faults().hang(
        HangFault::new()
            .verbs(&["patch"])
            .resources(&["backups"])
            .name("b1")
            .for_duration(hang),
    );

    let t0 = Instant::now();
    let err = h
        .engine
        .write(
            StatusUpdate::backup(NS, "b1", BackupPhase::Failed)
                .status(&failure_reason("upload failed"))
                .observed(rv(&obj), BackupPhase::InProgress),
        )
        .await
        .unwrap_err();
    assert!(err.is_pending(), "{err:?}");
    assert!(t0.elapsed() <= timeout + request_timeout + Duration::from_millis(300));
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "InProgress");
    assert_eq!(h.engine.pending(), 1);

    let landed = eventually(Duration::from_secs(10), || {
        phase(&h.sim, Kind::Backup, "b1") == "Failed"
    })
    .await;
    assert!(landed.is_some(), "the status never landed after the hang");
    let took = t0.elapsed();
    assert!(took >= hang, "landed during the hang: {took:?}");
    assert!(
        took <= hang + cap + request_timeout + Duration::from_millis(500),
        "took {took:?} after a {hang:?} hang"
    );
    assert_eq!(
        get(&h.sim, Kind::Backup, "b1").unwrap()["status"]["failureReason"],
        "upload failed"
    );
    // Every request during the hang was held and never applied; one landed after it.
    let codes: Vec<u16> = requests(&h.sim, "backups", "b1", "patch")
        .iter()
        .map(|r| r.code)
        .collect();
    assert!(codes.len() >= 2, "{codes:?}");
    assert_eq!(codes.last(), Some(&200), "{codes:?}");
    assert!(
        codes[..codes.len() - 1].iter().all(|c| *c == 0),
        "{codes:?}"
    );
    let settled = eventually(Duration::from_secs(2), || h.engine.pending() == 0).await;
    assert!(settled.is_some());
}
