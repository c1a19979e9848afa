//! `hawser server` processes through a whole-API outage longer than the leader's renew deadline
//! (the server steps down in-process and lands its statuses once the API answers, without a
//! restart), and interrupted work run again: a server killed mid-backup or mid-restore, its
//! successor taking the work up again, and the bound of `--resume-attempts`.
//!
//! With `HAWSER_TEST_KUBE=real` the outage is the real kube-apiserver process stopped for 30 s
//! and started again on the same address ([`Cluster::api_outage`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::Cluster;
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_support::{
    Server, backup_record, create_backup, create_restore, filesystem_location, gunzip, passes,
    phase, poll, restore_record, seed, wait_final, wait_for, wait_in_progress,
};

/// The leader's renew deadline in these tests.
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
/// `--leader-elect-retry-period`.
const RETRY_PERIOD: Duration = Duration::from_millis(250);
/// `--status-patch-max-backoff`: the default. (A restarting kube-apiserver answers 503 with a
/// `Retry-After` of a few seconds while it starts, which the engine honours.)
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A short Lease, status writes that give up after 1 s, fast resyncs, and `extra`.
fn args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut all = vec![
        "--log-level",
        "warn,hawser_server=info",
        "--status-resync-period",
        "1s",
        "--store-validation-frequency",
        "1s",
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "5s",
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "250ms",
    ];
    all.extend_from_slice(extra);
    all
}

/// `hawser.io/attempt` of an object (absent: it ran once).
fn attempt(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("hawser.io/attempt"))
        .and_then(Value::as_str)
}

/// The value of one series in a Prometheus text page (0 when absent).
fn series(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

const BACKUP_ATTEMPTS: &str = r#"velero_backup_attempt_total{schedule=""}"#;
const RESTORE_ATTEMPTS: &str = r#"velero_restore_attempt_total{schedule=""}"#;

/// A cluster with `shop` seeded (`configmaps` ConfigMaps) and a filesystem location.
async fn seeded(configmaps: usize) -> (Cluster, tempfile::TempDir) {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, configmaps);
    filesystem_location(&cluster, "default", root.path());
    (cluster, root)
}

/// Runs the Backup `base` of `shop` to `Completed` through `server`.
async fn base_backup(cluster: &Cluster, server: &Server) {
    create_backup(cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(cluster, server, "Backup", "base").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
}

/// Starts the Backup `during` and the Restore `during-r` (of `base`, into `shop-two`), holds
/// their final status writes off once both are `InProgress` (every write of them answers 503),
/// waits for both records, and returns the faults to lift once the API is down (so that no
/// status lands before the outage).
async fn both_records_stored_with_statuses_pending(
    cluster: &Cluster,
    server: &Server,
    root: &Path,
) -> Vec<u64> {
    let faults = cluster.sim.faults();
    let mut ids = vec![
        faults.latency(
            LatencyFault::new(Duration::from_secs(2))
                .verbs(&["list"])
                .resources(&["configmaps"]),
        ),
        faults.latency(
            LatencyFault::new(Duration::from_secs(2))
                .verbs(&["create"])
                .resources(&["configmaps"]),
        ),
    ];
    create_backup(cluster, "during", json!({"includedNamespaces": ["shop"]}));
    create_restore(
        cluster,
        "during-r",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-two"}}),
    );
    wait_in_progress(cluster, server, "Backup", "during").await;
    wait_in_progress(cluster, server, "Restore", "during-r").await;
    ids.push(
        faults.status(
            StatusFault::new(503)
                .verbs(&["patch", "update"])
                .resources(&["backups", "restores"]),
        ),
    );
    poll(server, "both records stored", || {
        let backup = backup_record(root, "during")?;
        let restore = restore_record(root, "during-r")?;
        Some((backup, restore))
    })
    .await;
    for (kind, name) in [("Backup", "during"), ("Restore", "during-r")] {
        let object = cluster.get("velero.io/v1", kind, name).unwrap();
        assert_eq!(phase(&object), "InProgress", "{object:#}");
    }
    ids
}

/// How long the whole API is down: three renew deadlines against kube-sim, 30 s when the real
/// API server process is stopped.
fn outage(cluster: &Cluster) -> Duration {
    if cluster.is_real() {
        Duration::from_secs(30)
    } else {
        RENEW_DEADLINE * 3
    }
}

/// The longest a final status may take to land once the API answers again: one backoff cap
/// (the re-driver) plus one retry period (the server leads again and its recovery writes the
/// record), plus a second for the requests and this test's polling.
const LANDING_BOUND: Duration = MAX_BACKOFF
    .saturating_add(RETRY_PERIOD)
    .saturating_add(Duration::from_secs(1));

/// Waits for the final phase of `kind`/`name` and returns it with the time it took from `since`.
async fn landed(
    cluster: &Cluster,
    servers: &[&Server],
    kind: &str,
    name: &str,
    since: Instant,
) -> (Value, Duration) {
    let logs = || {
        servers
            .iter()
            .map(|s| s.log_text())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(o) = cluster.get("velero.io/v1", kind, name)
            && server_support::is_final(&o)
        {
            return (o, since.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "{kind} {name} never final:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_api_outage_past_the_renew_deadline_lands_both_statuses_without_a_restart() {
    let (cluster, root) = seeded(3).await;
    let mut server = Server::start(&cluster, root.path(), &args(&[])).await;
    base_backup(&cluster, &server).await;
    let held = both_records_stored_with_statuses_pending(&cluster, &server, root.path()).await;
    let outage = outage(&cluster);
    assert!(outage >= RENEW_DEADLINE * 3);
    cluster.api_outage(outage, &held).await;
    let back = Instant::now();

    let (backup, backup_took) = landed(&cluster, &[&server], "Backup", "during", back).await;
    let (restore, restore_took) = landed(&cluster, &[&server], "Restore", "during-r", back).await;
    println!(
        "outage {outage:?}: the Backup landed {backup_took:?} and the Restore {restore_took:?} after the API answered again"
    );
    let log = server.log_text();
    assert_eq!(phase(&backup), "Completed", "{backup:#}\n{log}");
    assert_eq!(phase(&restore), "Completed", "{restore:#}\n{log}");
    assert_eq!(
        backup_record(root.path(), "during").unwrap()["status"]["phase"],
        "Completed"
    );
    assert_eq!(
        restore_record(root.path(), "during-r").unwrap()["status"]["phase"],
        "Completed"
    );
    for took in [backup_took, restore_took] {
        assert!(
            took <= LANDING_BOUND,
            "landed {took:?} after the API answered; the bound is {LANDING_BOUND:?}\n{log}"
        );
    }
    // The same process, still serving, stepped down and leads again.
    assert!(log.contains("stepped down"), "{log}");
    assert_eq!(server.try_get("/livez").await.map(|r| r.0), Some(200));
    server.wait_ready(Duration::from_secs(10)).await;
    assert!(server.is_running(), "{log}");
    // Nothing ran twice: the interrupted term's work was committed before the outage.
    let metrics = server.metrics().await;
    assert_eq!(series(&metrics, BACKUP_ATTEMPTS), 2.0, "{metrics}");
    assert_eq!(series(&metrics, RESTORE_ATTEMPTS), 1.0, "{metrics}");
    assert!(attempt(&backup).is_none() && attempt(&restore).is_none());
    server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_servers_through_the_outage_each_object_is_finished_once_and_matches_its_record() {
    let (cluster, root) = seeded(3).await;
    let flags = args(&[]);
    let first = Server::start(&cluster, root.path(), &flags).await;
    let second = Server::spawn(&cluster, root.path(), &flags);
    base_backup(&cluster, &first).await;
    let held = both_records_stored_with_statuses_pending(&cluster, &first, root.path()).await;
    cluster.api_outage(outage(&cluster), &held).await;
    let back = Instant::now();
    let servers = [&first, &second];
    let (backup, backup_took) = landed(&cluster, &servers, "Backup", "during", back).await;
    let (restore, restore_took) = landed(&cluster, &servers, "Restore", "during-r", back).await;
    println!(
        "the Backup landed {backup_took:?} and the Restore {restore_took:?} after the API answered again"
    );
    for (object, record) in [
        (&backup, backup_record(root.path(), "during").unwrap()),
        (&restore, restore_record(root.path(), "during-r").unwrap()),
    ] {
        assert_eq!(phase(object), "Completed", "{object:#}");
        assert_eq!(object["status"]["phase"], record["status"]["phase"]);
        assert_eq!(
            object["status"]["completionTimestamp"],
            record["status"]["completionTimestamp"]
        );
    }
    // One of them leads again, the other follows; both processes run on.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(first.is_ready().await ^ second.is_ready().await) {
        assert!(
            Instant::now() < deadline,
            "no single leader after the outage"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(first.is_running() && second.is_running());
    // Each object was run once, by the first server, and not again by either.
    let mut backups = 0.0;
    let mut restores = 0.0;
    for server in servers {
        let metrics = server.metrics().await;
        backups += series(&metrics, BACKUP_ATTEMPTS);
        restores += series(&metrics, RESTORE_ATTEMPTS);
    }
    assert_eq!((backups, restores), (2.0, 1.0));
    // Landed once: the objects do not change any more, through two passes of the leader's
    // storage-location controller (one a second).
    passes(&cluster, &first, "backupstoragelocations", 2).await;
    for (kind, name, object) in [
        ("Backup", "during", &backup),
        ("Restore", "during-r", &restore),
    ] {
        let now = cluster.get("velero.io/v1", kind, name).unwrap();
        assert_eq!(
            now["metadata"]["resourceVersion"], object["metadata"]["resourceVersion"],
            "{name} was written again"
        );
    }
}

/// Creates the Backup `interrupted` of `shop` and the Restore `interrupted-r` of `base` into
/// `shop-two`.
fn create_interrupted_pair(cluster: &Cluster) {
    create_backup(
        cluster,
        "interrupted",
        json!({"includedNamespaces": ["shop"]}),
    );
    create_restore(
        cluster,
        "interrupted-r",
        json!({"backupName": "base", "namespaceMapping": {"shop": "shop-two"}}),
    );
}

/// The ConfigMaps restored into `namespace`.
fn restored(cluster: &Cluster, namespace: &str) -> usize {
    cluster
        .store()
        .list("v1", "ConfigMap", Some(namespace))
        .iter()
        .filter(|c| {
            c["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("cm-"))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_backup_and_mid_restore_is_resumed_by_the_next_one() {
    let (cluster, root) = seeded(5).await;
    let first_flags = args(&[]);
    let mut first = Server::start(&cluster, root.path(), &first_flags).await;
    base_backup(&cluster, &first).await;
    let slow = [
        // The backup's LIST of `shop` (not the restore's look for plugin ConfigMaps in the
        // server's namespace).
        cluster.sim.faults().latency(
            LatencyFault::new(Duration::from_secs(5))
                .verbs(&["list"])
                .resources(&["configmaps"])
                .namespace("shop"),
        ),
        // The restore creates the Secrets (restored before ConfigMaps), then waits.
        cluster.sim.faults().latency(
            LatencyFault::new(Duration::from_secs(8))
                .verbs(&["create"])
                .resources(&["configmaps"]),
        ),
    ];
    create_interrupted_pair(&cluster);
    let started = wait_in_progress(&cluster, &first, "Backup", "interrupted").await;
    wait_for(
        &cluster,
        Some(&first),
        "Restore",
        "interrupted-r",
        Duration::from_secs(20),
        |_| cluster.store().list("v1", "Secret", Some("shop-two")).len() == 2,
    )
    .await;
    first.kill().await;
    for id in slow {
        cluster.sim.faults().remove(id);
    }
    assert!(backup_record(root.path(), "interrupted").is_none());

    let second = Server::start(&cluster, root.path(), &args(&[])).await;
    let done = wait_final(&cluster, &second, "Backup", "interrupted").await;
    let log = second.log_text();
    assert_eq!(phase(&done), "Completed", "{done:#}\n{log}");
    assert_eq!(attempt(&done), Some("2"), "{done:#}");
    assert_eq!(
        done["status"]["startTimestamp"], started["status"]["startTimestamp"],
        "the resumed backup keeps its start"
    );
    // 5 ConfigMaps, 2 Secrets and the Namespace: every item.
    assert_eq!(done["status"]["progress"]["itemsBackedUp"], 8, "{done:#}");
    let reasons: Vec<String> = serde_json::from_str(
        done["metadata"]["annotations"]["hawser.io/interrupted-attempts"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("attempt 1 ended when its server"),
        "{reasons:?}"
    );
    let archive = server_support::artifact(root.path(), "interrupted", "interrupted.tar.gz");
    assert_eq!(
        server_support::archive_paths(&archive)
            .iter()
            .filter(|p| p.contains("/configmaps/"))
            .count(),
        5
    );
    let backup_log = gunzip(&server_support::artifact(
        root.path(),
        "interrupted",
        "interrupted-logs.gz",
    ));
    assert!(
        backup_log
            .contains("this backup was interrupted and is run again from the start (attempt 2)"),
        "{backup_log}"
    );

    let done = wait_final(&cluster, &second, "Restore", "interrupted-r").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{log}");
    assert_eq!(attempt(&done), Some("2"));
    // The objects the first attempt created count as restored (created), without warnings.
    assert!(
        done["status"].get("warnings").is_none_or(|w| w == 0),
        "{done:#}"
    );
    assert_eq!(restored(&cluster, "shop-two"), 5);
    let list = root
        .path()
        .join(server_support::BUCKET)
        .join("restores/interrupted-r/restore-interrupted-r-resource-list.json.gz");
    let list: Value = serde_json::from_str(&gunzip(&list)).unwrap();
    let secrets = list["v1/Secret"].as_array().expect("Secrets restored");
    assert_eq!(secrets.len(), 2, "{list:#}");
    for entry in list
        .as_object()
        .unwrap()
        .values()
        .flat_map(|e| e.as_array().unwrap())
    {
        assert!(entry.as_str().unwrap().ends_with("(created)"), "{list:#}");
    }
    let metrics = second.metrics().await;
    assert_eq!(series(&metrics, BACKUP_ATTEMPTS), 1.0, "{metrics}");
    assert_eq!(series(&metrics, RESTORE_ATTEMPTS), 1.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resume_attempts_zero_interrupted_work_ends_failed_as_before() {
    let (cluster, root) = seeded(3).await;
    let flags = args(&["--resume-attempts", "0"]);
    let mut first = Server::start(&cluster, root.path(), &flags).await;
    base_backup(&cluster, &first).await;
    for verb in ["list", "create"] {
        cluster.sim.faults().latency(
            LatencyFault::new(Duration::from_secs(30))
                .verbs(&[verb])
                .resources(&["configmaps"]),
        );
    }
    create_interrupted_pair(&cluster);
    wait_in_progress(&cluster, &first, "Backup", "interrupted").await;
    wait_in_progress(&cluster, &first, "Restore", "interrupted-r").await;
    first.kill().await;
    let second = Server::start(&cluster, root.path(), &flags).await;
    for (kind, name, server_kind) in [
        ("Backup", "interrupted", hawser_status::Kind::Backup),
        ("Restore", "interrupted-r", hawser_status::Kind::Restore),
    ] {
        let done = wait_final(&cluster, &second, kind, name).await;
        assert_eq!(phase(&done), "Failed", "{done:#}");
        assert_eq!(
            done["status"]["failureReason"],
            json!(hawser_status::restart_failure_reason(server_kind))
        );
        assert!(attempt(&done).is_none());
    }
    let metrics = second.metrics().await;
    assert_eq!(series(&metrics, BACKUP_ATTEMPTS), 0.0);
    assert_eq!(series(&metrics, RESTORE_ATTEMPTS), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_backup_killed_again_past_the_bound_is_failed_with_each_attempts_reason() {
    let (cluster, root) = seeded(3).await;
    let flags = args(&["--resume-attempts", "1"]);
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(60))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let mut first = Server::start(&cluster, root.path(), &flags).await;
    create_backup(&cluster, "doomed", json!({"includedNamespaces": ["shop"]}));
    wait_in_progress(&cluster, &first, "Backup", "doomed").await;
    first.kill().await;

    let mut second = Server::start(&cluster, root.path(), &flags).await;
    wait_for(
        &cluster,
        Some(&second),
        "Backup",
        "doomed",
        Duration::from_secs(30),
        |o| attempt(o) == Some("2"),
    )
    .await;
    second.kill().await;

    let third = Server::start(&cluster, root.path(), &flags).await;
    let done = wait_final(&cluster, &third, "Backup", "doomed").await;
    assert_eq!(phase(&done), "Failed", "{done:#}");
    let reason = done["status"]["failureReason"].as_str().unwrap();
    let restarted = hawser_status::restart_failure_reason(hawser_status::Kind::Backup);
    assert!(reason.starts_with(&restarted), "{reason}");
    assert!(
        reason
            .contains("it was run 2 times (--resume-attempts 1): attempt 1 ended when its server"),
        "{reason}"
    );
    assert!(
        reason.contains("; attempt 2 ended when its server"),
        "{reason}"
    );
    assert_eq!(series(&third.metrics().await, BACKUP_ATTEMPTS), 0.0);
}
