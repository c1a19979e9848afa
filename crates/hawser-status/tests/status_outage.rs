//! API outages (connection refused on the loopback port) during a final status write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod status_support;

use std::time::Duration;

use hawser_api::phase::BackupPhase;
use hawser_api::{BackupProgress, BackupStatus};
use hawser_status::{Kind, ProgressWrite, StatusConfig, StatusUpdate, WriteError};
use status_support::*;
use tokio::time::Instant;

fn failed(name: &str) -> StatusUpdate {
    StatusUpdate::backup(NS, name, BackupPhase::Failed).status(&failure_reason("upload failed"))
}

#[tokio::test]
async fn an_outage_shorter_than_the_timeout_lands_inside_the_reconcile_within_one_cap_of_recovery()
{
    let config = StatusConfig {
        resource_timeout: Duration::from_secs(5),
        ..short_config("a")
    };
    let cap = config.max_backoff;
    let h = start(config).await;
    create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));

    let outage = Duration::from_millis(1500);
    let t0 = Instant::now();
    h.sim.faults().refuse(Some(outage));
    let landing = h
        .engine
        .write(failed("b1"))
        .await
        .expect("lands before the deadline");
    let took = t0.elapsed();

    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "Failed");
    assert!(landing.attempts > 1, "{landing:?}");
    assert!(took >= outage, "landed during the outage? {took:?}");
    // One cap after recovery, plus a round trip and scheduling slack.
    assert!(
        took <= outage + cap + Duration::from_millis(400),
        "took {took:?}"
    );
    assert_eq!(h.engine.pending(), 0);
    assert_eq!(events(&h.sim, "b1", "StatusStoredAfterRetries").len(), 1);
}

#[tokio::test]
async fn an_outage_three_times_the_timeout_returns_at_the_deadline_and_the_redriver_lands_it() {
    let config = short_config("a");
    let (timeout, cap, request_timeout) = (
        config.resource_timeout,
        config.max_backoff,
        config.request_timeout,
    );
    let h = start(config).await;
    create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));

    let outage = timeout * 3;
    let t0 = Instant::now();
    h.sim.faults().refuse(Some(outage));
    let err = h
        .engine
        .write(failed("b1"))
        .await
        .expect_err("the outage outlasts the deadline");
    let returned = t0.elapsed();
    assert!(matches!(err, WriteError::HandedOver { .. }), "{err:?}");
    assert!(err.is_pending());
    // The worker is released at the deadline: not before it by more than one cap, never after
    // it by more than one request timeout.
    assert!(returned + cap >= timeout, "returned early: {returned:?}");
    assert!(
        returned <= timeout + request_timeout,
        "returned late: {returned:?}"
    );
    assert!(
        h.engine
            .is_pending(&hawser_status::ObjectKey::new(Kind::Backup, NS, "b1"))
    );
    assert_eq!(h.metrics.pending(Kind::Backup), 1);
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "InProgress");

    let landed = eventually(outage + Duration::from_secs(5), || {
        phase(&h.sim, Kind::Backup, "b1") == "Failed"
    })
    .await
    .expect("the re-driver lands the status");
    let after_recovery = (returned + landed).saturating_sub(outage);
    assert!(
        after_recovery <= cap + Duration::from_millis(400),
        "landed {after_recovery:?} after recovery"
    );
    let gone = eventually(Duration::from_secs(1), || h.engine.pending() == 0).await;
    assert!(gone.is_some(), "pending entry removed after landing");
    assert_eq!(h.metrics.pending(Kind::Backup), 0);
    let stored = get(&h.sim, Kind::Backup, "b1").unwrap();
    assert_eq!(
        stored
            .pointer("/status/failureReason")
            .and_then(|v| v.as_str()),
        Some("upload failed")
    );
    let ev = eventually(Duration::from_secs(1), || {
        !events(&h.sim, "b1", "StatusStoredAfterRetries").is_empty()
    })
    .await;
    assert!(
        ev.is_some(),
        "a Normal Event tells the status landed after retries"
    );
}

/// During a 60 s outage each pending status costs at most one attempt per jittered cap
/// (cap × 0.8 at the shortest), plus the attempts of the backoff's growth from 10 ms to the cap.
#[tokio::test]
async fn a_minute_long_outage_costs_each_pending_status_about_one_attempt_per_cap() {
    let config = StatusConfig {
        resource_timeout: Duration::from_secs(10),
        max_backoff: Duration::from_secs(5),
        request_timeout: Duration::from_secs(2),
        ..short_config("a")
    };
    let cap = config.max_backoff;
    let h = start(config).await;
    let names: Vec<String> = (0..5).map(|i| format!("b{i}")).collect();
    for n in &names {
        create(&h.sim, Kind::Backup, n, "InProgress", Some("a"));
    }
    let outage = Duration::from_secs(60);
    let t0 = Instant::now();
    h.sim.faults().refuse(Some(outage));
    let writes = names.iter().map(|n| h.engine.write(failed(n)));
    for r in futures::future::join_all(writes).await {
        assert!(matches!(r, Err(WriteError::HandedOver { .. })), "{r:?}");
    }
    for n in &names {
        let t = eventually(outage + Duration::from_secs(10), || {
            phase(&h.sim, Kind::Backup, n) == "Failed"
        })
        .await;
        assert!(t.is_some(), "{n} lands after the outage");
    }
    let total = t0.elapsed();
    assert!(
        total <= outage + cap + Duration::from_secs(1),
        "last landing {total:?}"
    );
    let failed_attempts = h.metrics.attempts(
        Kind::Backup,
        hawser_status::metrics::AttemptOutcome::Transient,
    );
    let per_cr = failed_attempts as f64 / names.len() as f64;
    // Growth phase 10 ms → 5 s: 10 attempts; then at most one per 4 s.
    let bound = outage.as_secs_f64() / (cap.as_secs_f64() * 0.8) + 10.0;
    assert!(per_cr <= bound, "{per_cr} attempts per CR, bound {bound}");
    // And it did keep trying: at least one attempt per cap after the growth phase.
    assert!(
        per_cr >= outage.as_secs_f64() / cap.as_secs_f64(),
        "{per_cr} attempts per CR"
    );
}

#[tokio::test]
async fn progress_writes_during_an_outage_cost_at_most_one_attempt_per_cap() {
    let config = StatusConfig {
        max_backoff: Duration::from_secs(2),
        ..short_config("a")
    };
    let cap = config.max_backoff;
    let h = start(config).await;
    create(&h.sim, Kind::Backup, "b1", "InProgress", Some("a"));
    let progress = |n: u64| {
        StatusUpdate::backup(NS, "b1", BackupPhase::InProgress).status(&BackupStatus {
            progress: Some(BackupProgress {
                items_backed_up: Some(hawser_api::count(n)),
                total_items: None,
            }),
            ..BackupStatus::default()
        })
    };
    assert!(matches!(
        h.engine.write_progress(progress(1)).await,
        ProgressWrite::Stored
    ));

    // A worker reporting every 50 ms through a 7 s outage.
    let outage = Duration::from_secs(7);
    h.sim.faults().refuse(Some(outage));
    let t0 = Instant::now();
    let (mut sent, mut paused) = (0u32, 0u32);
    let mut n = 2;
    while t0.elapsed() < outage {
        match h.engine.write_progress(progress(n)).await {
            ProgressWrite::Failed(_) => sent += 1,
            ProgressWrite::Paused => paused += 1,
            ProgressWrite::Stored => panic!("stored during the outage"),
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bound = (outage.as_secs_f64() / cap.as_secs_f64()).ceil() as u32 + 1;
    assert!(
        sent <= bound,
        "{sent} attempts in {outage:?}, bound {bound}"
    );
    assert!(sent >= 2, "{sent} attempts: it stopped trying");
    assert!(paused > 50, "{paused} paused reports");

    // Once the API is back, the next report after the pause is stored.
    let stored = eventually(cap + Duration::from_secs(2), || {
        let stored = get(&h.sim, Kind::Backup, "b1").unwrap();
        stored["status"]["progress"]["itemsBackedUp"] != 1
    });
    let writer = async {
        loop {
            if matches!(
                h.engine.write_progress(progress(n)).await,
                ProgressWrite::Stored
            ) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (landed, ()) = tokio::join!(stored, writer);
    assert!(landed.is_some(), "progress stored after the outage");
    assert_eq!(phase(&h.sim, Kind::Backup, "b1"), "InProgress");
}
