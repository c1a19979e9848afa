//! Two `hawser server` processes with leader election against one kube-sim: only the holder of
//! the Lease works and is ready; a follower takes over from a leader killed with SIGKILL within
//! a lease duration and runs its interrupted backup again; a leader stopped with SIGTERM
//! finishes its backup, then releases the Lease; a leader that cannot renew steps down and
//! keeps running.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_support::{
    Server, backup_record as record, create_backup, filesystem_location, is_final, phase, seed,
    wait_final, wait_in_progress,
};

/// The Lease's name (the server's default).
const LEASE_NAME: &str = "hawser-server";
/// The owner annotation of a claimed Backup.
const OWNER: &str = "hawser.io/owner";

/// Fast periodic work, a short Lease (`lease` is `--leader-elect-lease-duration`), and the
/// server's own info lines in its log.
fn args(lease: &'static str, extra: &[&'static str]) -> Vec<&'static str> {
    let mut all = vec![
        "--log-level",
        "warn,hawser_server=info",
        "--status-resync-period",
        "1s",
        "--store-validation-frequency",
        "1s",
        "--leader-elect-lease-duration",
        lease,
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "250ms",
    ];
    all.extend_from_slice(extra);
    all
}

fn lease_holder(cluster: &Cluster) -> Option<String> {
    let lease = cluster
        .store()
        .get("coordination.k8s.io/v1", "Lease", NS, LEASE_NAME)?;
    lease
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
}

fn owner(object: &Value) -> String {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(OWNER))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The value of one series in a Prometheus text page (0 when absent).
fn series(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// The holder a follower's `/readyz` names, if it answers as a follower.
async fn follows(server: &Server) -> Option<String> {
    let (code, body) = server.try_get("/readyz").await?;
    let holder = body
        .trim()
        .strip_prefix("not ready: follower: ")?
        .strip_suffix(" leads")?;
    (code == 503).then(|| holder.to_owned())
}

/// Waits until exactly one of `servers` is ready and the other follows it; returns their
/// indexes (leader, follower) and the leader's identity.
async fn elected(servers: [&Server; 2]) -> (usize, usize, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (leader, follower) in [(0, 1), (1, 0)] {
            if servers[leader].is_ready().await
                && let Some(holder) = follows(servers[follower]).await
            {
                return (leader, follower, holder);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no leader with a follower in 30 s:\n--- first:\n{}\n--- second:\n{}",
            servers[0].log_text(),
            servers[1].log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_elected_servers_run_each_backup_once_and_the_follower_takes_over_from_a_killed_leader()
{
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    let slow = cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(1))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let lease = Duration::from_secs(4);
    let flags = args("4s", &["--concurrent-backups", "3"]);
    let mut servers = vec![
        Server::spawn(&cluster, root.path(), &flags),
        Server::spawn(&cluster, root.path(), &flags),
    ];
    let (l, f, leader_id) = elected([&servers[0], &servers[1]]).await;
    assert_eq!(lease_holder(&cluster).as_deref(), Some(leader_id.as_str()));
    // It stays that way: never two ready servers, never the follower.
    for _ in 0..10 {
        assert!(servers[l].is_ready().await);
        assert_eq!(
            follows(&servers[f]).await.as_deref(),
            Some(leader_id.as_str())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(servers[f].try_get("/livez").await.map(|r| r.0), Some(200));

    let names = ["first", "second", "third"];
    for name in names {
        create_backup(&cluster, name, json!({"includedNamespaces": ["shop"]}));
    }
    for name in names {
        let done = wait_final(&cluster, &servers[l], "Backup", name).await;
        assert_eq!(phase(&done), "Completed", "{name}: {done:#}");
        let stored = record(root.path(), name).expect("velero-backup.json stored");
        assert_eq!(stored["status"]["phase"], done["status"]["phase"], "{name}");
        assert_eq!(owner(&done), leader_id, "{name} was run by the follower");
    }
    // Each backup was claimed (and run) once, by the leader only.
    let attempts = r#"velero_backup_attempt_total{schedule=""}"#;
    assert_eq!(series(&servers[l].metrics().await, attempts), 3.0);
    assert_eq!(series(&servers[f].metrics().await, attempts), 0.0);

    // The leader dies mid-backup.
    cluster.sim.faults().remove(slow);
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(6))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    create_backup(
        &cluster,
        "interrupted",
        json!({"includedNamespaces": ["shop"]}),
    );
    wait_in_progress(&cluster, &servers[l], "Backup", "interrupted").await;
    servers[l].kill().await;
    let killed = Instant::now();
    let successor = servers.remove(f);
    successor.wait_ready(lease + Duration::from_secs(10)).await;
    let took = killed.elapsed();
    assert!(
        took < lease + Duration::from_secs(3),
        "the follower took {took:?} to lead (lease duration {lease:?})"
    );
    let successor_id = lease_holder(&cluster).unwrap();
    assert_ne!(successor_id, leader_id);

    // The successor runs the interrupted backup again, once, and it ends with every item.
    let done = wait_final(&cluster, &successor, "Backup", "interrupted").await;
    assert_eq!(
        phase(&done),
        "Completed",
        "{done:#}\n{}",
        successor.log_text()
    );
    assert_eq!(owner(&done), successor_id);
    assert_eq!(done["metadata"]["annotations"]["hawser.io/attempt"], "2");
    assert_eq!(done["status"]["progress"]["itemsBackedUp"], 8, "{done:#}");
    let stored = record(root.path(), "interrupted").expect("velero-backup.json stored");
    assert_eq!(stored["status"]["phase"], "Completed");
    assert_eq!(
        series(&successor.metrics().await, attempts),
        1.0,
        "the successor ran the interrupted backup other than once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_backup_lets_it_complete_then_releases_the_lease() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 5);
    filesystem_location(&cluster, "default", root.path());
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(3))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    // A long lease: the follower leads at once only if the leader releases it.
    let lease = Duration::from_secs(20);
    let flags = args("20s", &["--shutdown-grace-period", "30s"]);
    let mut leader = Server::start(&cluster, root.path(), &flags).await;
    let leader_id = lease_holder(&cluster).unwrap();
    let follower = Server::spawn(&cluster, root.path(), &flags);
    let deadline = Instant::now() + Duration::from_secs(20);
    while follows(&follower).await.as_deref() != Some(leader_id.as_str()) {
        assert!(Instant::now() < deadline, "{}", follower.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    create_backup(
        &cluster,
        "graceful",
        json!({"includedNamespaces": ["shop"]}),
    );
    wait_in_progress(&cluster, &leader, "Backup", "graceful").await;
    leader.terminate();
    // Not ready at once, and still answering while it finishes.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if let Some((503, body)) = leader.try_get("/readyz").await
            && body.contains("stopping")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{}", leader.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(leader.try_get("/livez").await.map(|r| r.0), Some(200));
    // Work created now is the next leader's.
    create_backup(&cluster, "after", json!({"includedNamespaces": ["shop"]}));

    // While the backup finishes the Lease stays with the leader: the follower never leads
    // before the backup is final (readiness is read first, so a ready follower would have
    // needed the final status to be stored already).
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let follower_ready = follower.is_ready().await;
        let object = cluster.get("velero.io/v1", "Backup", "graceful").unwrap();
        if is_final(&object) {
            break object;
        }
        assert!(
            !follower_ready,
            "the follower leads while the backup runs:\n{}",
            follower.log_text()
        );
        assert!(Instant::now() < deadline, "{}", leader.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", leader.log_text());
    assert_eq!(owner(&done), leader_id);
    let stored = record(root.path(), "graceful").expect("velero-backup.json stored");
    assert_eq!(stored["status"]["phase"], "Completed");

    assert_eq!(
        leader.wait_exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        leader.log_text()
    );
    let exited = Instant::now();
    assert!(
        leader.log_text().contains("released the Lease"),
        "{}",
        leader.log_text()
    );
    // Released: empty, or already taken by the follower.
    let holder = lease_holder(&cluster);
    assert!(
        holder.as_deref() != Some(leader_id.as_str()),
        "the stopped leader still holds the Lease"
    );
    follower.wait_ready(Duration::from_secs(10)).await;
    let took = exited.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the follower took {took:?} to lead; a released Lease is taken at the next try, not after {lease:?}"
    );
    let follower_id = lease_holder(&cluster).unwrap();
    assert_ne!(follower_id, leader_id);

    let after = wait_final(&cluster, &follower, "Backup", "after").await;
    assert_eq!(phase(&after), "Completed", "{after:#}");
    assert_eq!(
        owner(&after),
        follower_id,
        "the stopping leader took new work"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_its_lease_steps_down_in_process_and_its_backup_is_run_again() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let slow = cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(8))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let flags = args("4s", &[]);
    let leader = Server::start(&cluster, root.path(), &flags).await;
    let leader_id = lease_holder(&cluster).unwrap();
    let follower = Server::spawn(&cluster, root.path(), &flags);
    let deadline = Instant::now() + Duration::from_secs(20);
    while follows(&follower).await.as_deref() != Some(leader_id.as_str()) {
        assert!(Instant::now() < deadline, "{}", follower.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    create_backup(&cluster, "cut-off", json!({"includedNamespaces": ["shop"]}));
    wait_in_progress(&cluster, &leader, "Backup", "cut-off").await;

    // No Lease write lands for longer than the renew deadline (3 s).
    let blocked = cluster.sim.faults().status(
        StatusFault::new(503)
            .verbs(&["update", "create"])
            .resources(&["leases"]),
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(10);
    while !leader.log_text().contains("stepped down") {
        assert!(Instant::now() < deadline, "{}", leader.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the leader led on for {:?} without its Lease",
        started.elapsed()
    );
    let log = leader.log_text();
    assert!(
        log.contains("could not be renewed within --leader-elect-renew-deadline"),
        "{log}"
    );
    // Alive and answering, not ready, and nobody leads while the Lease cannot be written.
    assert!(leader.is_running(), "{log}");
    assert_eq!(leader.try_get("/livez").await.map(|r| r.0), Some(200));
    assert!(!leader.is_ready().await);
    assert!(
        !follower.is_ready().await,
        "the follower led without the Lease"
    );
    cluster.sim.faults().remove(blocked);
    cluster.sim.faults().remove(slow);

    // One of the two leads again (the stepped-down leader still named in the Lease, or the
    // follower once it saw the Lease unchanged for its duration) and runs the backup again.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (now_leading, other) = loop {
        if leader.is_ready().await {
            break (&leader, &follower);
        }
        if follower.is_ready().await {
            break (&follower, &leader);
        }
        assert!(
            Instant::now() < deadline,
            "nobody leads:\n{}",
            follower.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let holder = lease_holder(&cluster).unwrap();
    assert_eq!(follows(other).await.as_deref(), Some(holder.as_str()));
    let done = wait_final(&cluster, now_leading, "Backup", "cut-off").await;
    assert_eq!(
        phase(&done),
        "Completed",
        "{done:#}\n{}",
        now_leading.log_text()
    );
    assert_eq!(owner(&done), holder);
    assert_eq!(done["metadata"]["annotations"]["hawser.io/attempt"], "2");
    assert_eq!(
        record(root.path(), "cut-off").unwrap()["status"]["phase"],
        "Completed"
    );
    assert!(leader.is_running() && follower.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_stopped_with_sigterm_exits_at_once_and_leaves_the_lease_alone() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let flags = args("4s", &[]);
    let leader = Server::start(&cluster, root.path(), &flags).await;
    let leader_id = lease_holder(&cluster).unwrap();
    let mut follower = Server::spawn(&cluster, root.path(), &flags);
    let deadline = Instant::now() + Duration::from_secs(20);
    while follows(&follower).await.as_deref() != Some(leader_id.as_str()) {
        assert!(Instant::now() < deadline, "{}", follower.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    follower.terminate();
    assert_eq!(
        follower.wait_exit(Duration::from_secs(5)).await,
        Some(0),
        "{}",
        follower.log_text()
    );
    assert_eq!(lease_holder(&cluster), Some(leader_id));
    assert!(leader.is_ready().await);
}
