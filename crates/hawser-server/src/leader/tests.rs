//! Candidates against an in-process kube-sim, in real time (the API is a loopback socket, so
//! tokio's paused clock cannot drive it); durations are short and bounds generous.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{KubeSim, SimConfig, StatusFault};
use serde_json::json;

use super::*;
use crate::config::DEFAULT_LEASE_NAME;

const NS: &str = "velero";

async fn sim() -> KubeSim {
    let sim = KubeSim::start(SimConfig::default())
        .await
        .expect("kube-sim starts");
    sim.store()
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .unwrap();
    sim
}

async fn candidate(sim: &KubeSim, identity: &str, lease_duration: Duration) -> Elector {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client =
        hawser_engine::cluster::client::client_without_retries(config, Duration::from_secs(2))
            .unwrap();
    Elector::new(
        client,
        NS,
        identity,
        LeaderElectionSettings {
            lease_name: DEFAULT_LEASE_NAME.to_owned(),
            lease_duration,
            renew_deadline: lease_duration / 2,
            retry_period: Duration::from_millis(100),
        },
        Clock::system(),
    )
}

fn holder_in(sim: &KubeSim) -> Option<String> {
    let lease = sim
        .store()
        .get("coordination.k8s.io/v1", "Lease", NS, DEFAULT_LEASE_NAME)?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

/// The holders a follower reported, in order.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// Runs `acquire` of `elector` in a task, which ends (with the time) once it leads.
fn compete(mut elector: Elector) -> (tokio::task::JoinHandle<(Elector, Instant)>, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let task = tokio::spawn(async move {
        elector
            .acquire(|holder| log.lock().unwrap().push(holder.map(str::to_owned)))
            .await;
        (elector, Instant::now())
    });
    (task, seen)
}

#[tokio::test]
async fn one_candidate_leads_and_a_release_hands_the_lease_over_at_once() {
    let sim = sim().await;
    let lease_duration = Duration::from_secs(10);
    let mut first = candidate(&sim, "first", lease_duration).await;
    first.acquire(|_| {}).await;
    assert_eq!(holder_in(&sim).as_deref(), Some("first"));

    let (second, seen) = compete(candidate(&sim, "second", lease_duration).await);
    let stop = CancellationToken::new();
    let holding = tokio::spawn(first.hold(stop.clone()));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!second.is_finished(), "two candidates lead");
    assert_eq!(*seen.lock().unwrap(), [Some("first".to_owned())]);

    let released_at = Instant::now();
    stop.cancel();
    holding.await.unwrap().unwrap();
    let (_, acquired_at) = tokio::time::timeout(lease_duration, second)
        .await
        .expect("the follower takes a released Lease")
        .unwrap();
    assert!(
        acquired_at.duration_since(released_at) < Duration::from_secs(2),
        "the follower waited {:?} for a released Lease",
        acquired_at.duration_since(released_at)
    );
    assert_eq!(holder_in(&sim).as_deref(), Some("second"));
    let lease = sim
        .store()
        .get("coordination.k8s.io/v1", "Lease", NS, DEFAULT_LEASE_NAME)
        .unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 2, "{lease:#}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 10);
}

#[tokio::test]
async fn a_leader_that_stops_renewing_is_replaced_after_one_lease_duration() {
    let sim = sim().await;
    let lease_duration = Duration::from_secs(1);
    let mut dead = candidate(&sim, "dead", lease_duration).await;
    dead.acquire(|_| {}).await;
    let started = Instant::now();
    // `dead` never renews: as a process killed with SIGKILL.
    let (follower, seen) = compete(candidate(&sim, "follower", lease_duration).await);
    let (_, acquired_at) = tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .expect("the follower takes an expired Lease")
        .unwrap();
    let waited = acquired_at.duration_since(started);
    assert!(
        waited >= lease_duration,
        "taken after {waited:?}, before it expired"
    );
    assert!(
        waited < lease_duration + Duration::from_secs(2),
        "taken only after {waited:?}"
    );
    assert_eq!(seen.lock().unwrap().first(), Some(&Some("dead".to_owned())));
    assert_eq!(holder_in(&sim).as_deref(), Some("follower"));
}

#[tokio::test]
async fn a_leader_that_cannot_renew_within_the_deadline_loses_the_lease() {
    let sim = sim().await;
    let lease_duration = Duration::from_secs(2);
    let mut leader = candidate(&sim, "leader", lease_duration).await;
    leader.acquire(|_| {}).await;
    let holding = tokio::spawn(leader.hold(CancellationToken::new()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!holding.is_finished(), "renewals work");
    let outage = Instant::now();
    sim.faults()
        .status(StatusFault::new(503).resources(&["leases"]));
    let lost = tokio::time::timeout(lease_duration, holding)
        .await
        .expect("the leader gives up before the Lease expires")
        .unwrap()
        .unwrap_err();
    assert!(matches!(lost, LeaseLost::NotRenewed { .. }), "{lost:?}");
    // The renew deadline (1 s) counts from the last renewal, at most a retry period before.
    assert!(
        outage.elapsed() < Duration::from_millis(1800),
        "gave up only after {:?}",
        outage.elapsed()
    );
    assert!(lost.to_string().contains("--leader-elect-renew-deadline"));
}

#[tokio::test]
async fn a_leader_whose_lease_names_another_holder_stops_at_once() {
    let sim = sim().await;
    let mut leader = candidate(&sim, "leader", Duration::from_secs(10)).await;
    leader.acquire(|_| {}).await;
    let holding = tokio::spawn(leader.hold(CancellationToken::new()));
    let mut lease = sim
        .store()
        .get("coordination.k8s.io/v1", "Lease", NS, DEFAULT_LEASE_NAME)
        .unwrap();
    lease["spec"]["holderIdentity"] = json!("intruder");
    sim.store().insert(lease).unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(2), holding)
        .await
        .expect("the leader notices at its next renewal")
        .unwrap()
        .unwrap_err();
    match lost {
        LeaseLost::TakenOver { holder, .. } => assert_eq!(holder.as_deref(), Some("intruder")),
        other => panic!("{other:?}"),
    }
    assert_eq!(holder_in(&sim).as_deref(), Some("intruder"), "taken back");
}

#[tokio::test]
async fn candidates_racing_for_a_new_lease_elect_exactly_one() {
    let sim = sim().await;
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (task, _) = compete(candidate(&sim, &format!("c{i}"), Duration::from_secs(10)).await);
        tasks.push(task);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaders = tasks.iter().filter(|t| t.is_finished()).count();
    assert_eq!(leaders, 1);
    let holder = holder_in(&sim).unwrap();
    for (i, task) in tasks.into_iter().enumerate() {
        if task.is_finished() {
            assert_eq!(holder, format!("c{i}"));
        } else {
            task.abort();
        }
    }
}
