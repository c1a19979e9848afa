//! The guarantee under real operations, through the `hawser server` process: object identity
//! (a status never lands on a re-created object of the same name), recovery that waits for a
//! location it cannot read instead of guessing, and malformed neighbours that block nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::time::{Duration, Instant};

use cli_support::{Cluster, NS};
use kube_sim::{LatencyFault, StatusFault};
use serde_json::{Value, json};
use server_support::backup_record as record;
use server_support::*;

/// Flags of a server whose status writes give up after 1 s (`--resource-timeout`), with the
/// periodic resync every `resync`.
fn impatient(resync: &str) -> [&str; 8] {
    [
        "--status-resync-period",
        resync,
        "--store-validation-frequency",
        "1s",
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "300ms",
    ]
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_malformed_backup_and_location_next_to_good_ones_block_nothing() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    // `1d` is not a Go duration: the BSL does not parse.
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "broken", "namespace": NS},
            "spec": {
                "provider": "filesystem",
                "objectStorage": {"bucket": BUCKET},
                "config": {"root": root.path().to_str().unwrap()},
                "validationFrequency": "1d"
            }
        }))
        .unwrap();
    create_backup(&cluster, "bad-ttl", json!({"ttl": "30d"}));
    create_backup(&cluster, "to-broken", json!({"storageLocation": "broken"}));
    create_backup(&cluster, "good", json!({"includedNamespaces": ["shop"]}));
    let server = Server::start(&cluster, root.path(), FAST).await;

    let good = wait_final(&cluster, &server, "Backup", "good").await;
    assert_eq!(phase(&good), "Completed", "{good:#}");
    let bad_ttl = wait_final(&cluster, &server, "Backup", "bad-ttl").await;
    assert_eq!(phase(&bad_ttl), "FailedValidation", "{bad_ttl:#}");
    assert!(
        bad_ttl["status"]["validationErrors"]
            .to_string()
            .contains("30d"),
        "{bad_ttl:#}"
    );
    let to_broken = wait_final(&cluster, &server, "Backup", "to-broken").await;
    assert_eq!(phase(&to_broken), "FailedValidation", "{to_broken:#}");
    assert!(
        to_broken["status"]["validationErrors"]
            .to_string()
            .contains("BackupStorageLocation broken cannot be read"),
        "{to_broken:#}"
    );
    let broken = wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "broken",
        Duration::from_secs(20),
        |o| phase(o) == "Unavailable",
    )
    .await;
    assert!(
        broken["status"]["message"].to_string().contains("1d"),
        "{broken:#}"
    );
}

#[tokio::test]
async fn a_committed_backup_waits_for_its_missing_credential_secret_and_then_completes() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    let store = cluster.store();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": NS},
        "data": {"cloud": "W2RlZmF1bHRdCg=="}
    });
    store.insert(secret.clone()).unwrap();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default", "namespace": NS},
            "spec": {
                "provider": "filesystem",
                "objectStorage": {"bucket": BUCKET},
                "config": {"root": root.path().to_str().unwrap()},
                "credential": {"name": "creds", "key": "cloud"}
            }
        }))
        .unwrap();
    let mut first = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "kept", json!({"includedNamespaces": ["shop"]}));
    wait_in_progress(&cluster, &first, "Backup", "kept").await;
    // No status write lands from now on: the record gets committed, the object stays InProgress.
    let blocked = cluster.sim.faults().status(
        StatusFault::new(503)
            .verbs(&["patch"])
            .resources(&["backups"]),
    );
    poll(&first, "storing the record of kept", || {
        record(root.path(), "kept")
    })
    .await;
    first.kill().await;
    store.delete("v1", "Secret", NS, "creds").unwrap();
    cluster.sim.faults().remove(blocked);

    let second = Server::start(&cluster, root.path(), FAST).await;
    // The killed server's Lease expires (3 heartbeats of 1 s), then several recovery rounds
    // run while the Secret is missing.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let waiting = cluster.get("velero.io/v1", "Backup", "kept").unwrap();
    assert_eq!(
        phase(&waiting),
        "InProgress",
        "a backup whose record cannot be read yet must not be decided: {waiting:#}\n{}",
        second.log_text()
    );
    let warned = store
        .list("events.k8s.io/v1", "Event", Some(NS))
        .into_iter()
        .any(|e| e["reason"] == "RecoveryWaiting" && e["regarding"]["name"] == "kept");
    assert!(warned, "no RecoveryWaiting Warning Event for kept");

    store.insert(secret).unwrap();
    let done = wait_final(&cluster, &second, "Backup", "kept").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    assert_eq!(
        record(root.path(), "kept").unwrap()["status"]["phase"],
        "Completed"
    );
}

#[tokio::test]
async fn a_pending_status_of_a_deleted_backup_never_lands_on_its_successor() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let store = cluster.store();
    let server = Server::start(&cluster, root.path(), &impatient("1s")).await;
    create_backup(&cluster, "twice", json!({"includedNamespaces": ["shop"]}));
    let first = wait_in_progress(&cluster, &server, "Backup", "twice").await;
    // The first run's final status meets 429s and goes to the re-driver.
    let refused = cluster.sim.faults().status(
        StatusFault::new(429)
            .retry_after(1)
            .verbs(&["patch"])
            .resources(&["backups"])
            .name("twice"),
    );
    poll(&server, "the first run's record", || {
        record(root.path(), "twice")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        phase(&cluster.get("velero.io/v1", "Backup", "twice").unwrap()),
        "InProgress"
    );

    // The object is deleted and created again while that status is pending; the new run's
    // LISTs are slow, so it is InProgress for seconds while the re-driver keeps trying.
    store.delete("velero.io/v1", "Backup", NS, "twice").unwrap();
    std::fs::remove_dir_all(root.path().join(BUCKET).join("backups").join("twice")).unwrap();
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(3))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    create_backup(&cluster, "twice", json!({"includedNamespaces": ["shop"]}));
    let second_uid = uid(&cluster.get("velero.io/v1", "Backup", "twice").unwrap());
    assert_ne!(second_uid, uid(&first));
    cluster.sim.faults().remove(refused);

    // Until the second run commits its own record, the object must never look final.
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let now = cluster.get("velero.io/v1", "Backup", "twice").unwrap();
        let committed = record(root.path(), "twice");
        if is_final(&now) {
            assert!(
                committed.is_some(),
                "the object became {} before its own run committed: the first run's status landed on it\n{now:#}",
                phase(&now)
            );
            break now;
        }
        assert!(Instant::now() < deadline, "{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(phase(&done), "Completed", "{done:#}");
    assert_eq!(uid(&done), second_uid);
    let committed = record(root.path(), "twice").unwrap();
    assert_eq!(committed["metadata"]["uid"], second_uid.as_str());
}

#[tokio::test]
async fn two_servers_without_leader_election_run_each_backup_once_and_steal_nothing() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    // Each backup stays InProgress for seconds: long enough for several recovery rounds of the
    // other server, which must see a live owner and leave it alone.
    cluster.sim.faults().latency(
        LatencyFault::new(Duration::from_secs(3))
            .verbs(&["list"])
            .resources(&["configmaps"]),
    );
    let args = [FAST, &["--leader-elect=false", "--concurrent-backups", "3"]].concat();
    let a = Server::start(&cluster, root.path(), &args).await;
    let b = Server::start(&cluster, root.path(), &args).await;
    let names = ["twin-a", "twin-b", "twin-c"];
    for name in names {
        create_backup(&cluster, name, json!({"includedNamespaces": ["shop"]}));
    }
    // Every owner each backup ever had: a second claim would change it.
    let mut owners: Vec<std::collections::BTreeSet<String>> = vec![Default::default(); 3];
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let objects: Vec<Value> = names
            .iter()
            .map(|n| cluster.get("velero.io/v1", "Backup", n).unwrap())
            .collect();
        for (o, seen) in objects.iter().zip(owners.iter_mut()) {
            if let Some(owner) = o["metadata"]["annotations"]["hawser.io/owner"].as_str() {
                seen.insert(owner.to_owned());
            }
        }
        for o in &objects {
            assert_ne!(
                phase(o),
                "Failed",
                "a live server's backup was resolved as an orphan: {o:#}\n--- a:\n{}\n--- b:\n{}",
                a.log_text(),
                b.log_text()
            );
        }
        if objects.iter().all(is_final) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}\n{}",
            a.log_text(),
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (name, seen) in names.iter().zip(&owners) {
        let done = cluster.get("velero.io/v1", "Backup", name).unwrap();
        assert_eq!(phase(&done), "Completed", "{done:#}");
        let stored = record(root.path(), name).unwrap();
        assert_eq!(stored["status"]["phase"], "Completed");
        assert_eq!(stored["metadata"]["uid"], done["metadata"]["uid"]);
        assert_eq!(seen.len(), 1, "{name} was claimed by {seen:?}");
    }
}

#[tokio::test]
async fn a_worker_that_panics_leaves_the_server_running_and_its_backup_final() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start_with_env(
        &cluster,
        root.path(),
        FAST,
        &[("HAWSER_TEST_PANIC_AFTER_CLAIM", "doomed")],
    )
    .await;
    create_backup(&cluster, "doomed", json!({"includedNamespaces": ["shop"]}));
    create_backup(&cluster, "fine", json!({"includedNamespaces": ["shop"]}));

    let doomed = wait_final(&cluster, &server, "Backup", "doomed").await;
    assert_eq!(phase(&doomed), "Failed", "{}", server.log_text());
    assert_eq!(
        doomed["status"]["failureReason"],
        json!(hawser_status::abandoned_failure_reason(
            hawser_status::Kind::Backup,
            "test fault HAWSER_TEST_PANIC_AFTER_CLAIM for doomed"
        ))
    );
    let fine = wait_final(&cluster, &server, "Backup", "fine").await;
    assert_eq!(phase(&fine), "Completed", "{}", server.log_text());

    // The server goes on: alive, ready, and taking new work.
    assert_eq!(
        server.try_get("/livez").await.map(|(code, _)| code),
        Some(200)
    );
    assert!(server.is_ready().await);
    create_backup(&cluster, "later", json!({"includedNamespaces": ["shop"]}));
    let later = wait_final(&cluster, &server, "Backup", "later").await;
    assert_eq!(phase(&later), "Completed", "{}", server.log_text());
    assert!(server.log_text().contains("a worker panicked"));
}

#[tokio::test]
async fn sigterm_waits_for_pending_statuses_and_leaves_what_cannot_land_to_the_next_start() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let flags: Vec<&str> = FAST
        .iter()
        .copied()
        .chain(["--resource-timeout", "2s", "--shutdown-grace-period", "8s"])
        .collect();
    let pending = "hawser_status_pending{kind=\"Backup\"} 1";

    // 1. A committed backup whose final status the re-driver holds when SIGTERM comes; the API
    //    takes writes again during the grace period: the status lands, then the server exits.
    // 2. The same, with writes refused through the whole grace period: the server exits with
    //    the status unwritten, and the next start completes the backup from its record.
    for (name, lands_in_grace) in [("drained", true), ("left-over", false)] {
        let mut server = Server::start(&cluster, root.path(), &flags).await;
        let slow = cluster.sim.faults().latency(
            LatencyFault::new(Duration::from_millis(1500))
                .verbs(&["list"])
                .resources(&["configmaps"]),
        );
        create_backup(&cluster, name, json!({"includedNamespaces": ["shop"]}));
        wait_in_progress(&cluster, &server, "Backup", name).await;
        let blocked = cluster.sim.faults().status(
            StatusFault::new(503)
                .verbs(&["patch"])
                .resources(&["backups"]),
        );
        cluster.sim.faults().remove(slow);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.metrics().await.contains(pending) {
            assert!(
                Instant::now() < deadline,
                "not handed over:\n{}",
                server.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            record(root.path(), name).unwrap()["status"]["phase"],
            "Completed"
        );

        server.terminate();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            server.try_get("/livez").await.map(|r| r.0),
            Some(200),
            "{name}: still finishing"
        );
        if lands_in_grace {
            cluster.sim.faults().remove(blocked);
        }
        assert_eq!(
            server.wait_exit(Duration::from_secs(15)).await,
            Some(0),
            "{}",
            server.log_text()
        );
        let object = cluster.get("velero.io/v1", "Backup", name).unwrap();
        if lands_in_grace {
            assert_eq!(phase(&object), "Completed", "{}", server.log_text());
            continue;
        }
        assert_eq!(phase(&object), "InProgress", "{}", server.log_text());
        assert!(
            server
                .log_text()
                .contains("the shutdown grace period is over"),
            "{}",
            server.log_text()
        );
        cluster.sim.faults().remove(blocked);
        let next = Server::start(&cluster, root.path(), &flags).await;
        let done = wait_final(&cluster, &next, "Backup", name).await;
        assert_eq!(phase(&done), "Completed", "{}", next.log_text());
        assert_eq!(
            done["status"]["completionTimestamp"],
            record(root.path(), name).unwrap()["status"]["completionTimestamp"]
        );
    }
}

#[tokio::test]
async fn a_backup_and_a_restore_whose_claims_were_refused_start_once_the_api_answers_again() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    // The periodic resync is far away: only the queue's own retry can start them in time.
    let server = Server::start(&cluster, root.path(), &impatient("10m")).await;
    create_backup(&cluster, "source", json!({"includedNamespaces": ["shop"]}));
    assert_eq!(
        phase(&wait_final(&cluster, &server, "Backup", "source").await),
        "Completed"
    );

    let refused = cluster.sim.faults().status(
        StatusFault::new(503)
            .verbs(&["patch", "update"])
            .resources(&["backups", "restores"]),
    );
    create_backup(&cluster, "held", json!({"includedNamespaces": ["shop"]}));
    create_restore(
        &cluster,
        "held-restore",
        json!({"backupName": "source", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    // Both claims give up (1 s each) more than once while the API refuses them.
    poll(&server, "both claims refused twice", || {
        let log = server.log_text();
        let refused = |object: &str| {
            log.lines()
                .filter(|l| l.contains("non-final status not stored") && l.contains(object))
                .count()
        };
        (refused("velero/held ") >= 2 && refused("velero/held-restore ") >= 2).then_some(())
    })
    .await;
    for (kind, name) in [("Backup", "held"), ("Restore", "held-restore")] {
        let waiting = cluster.get("velero.io/v1", kind, name).unwrap();
        assert!(
            matches!(phase(&waiting), "" | "New"),
            "{kind} {name} moved while every write was refused: {waiting:#}"
        );
    }
    cluster.sim.faults().remove(refused);

    for (kind, name) in [("Backup", "held"), ("Restore", "held-restore")] {
        let done = wait_final(&cluster, &server, kind, name).await;
        assert_eq!(phase(&done), "Completed", "{kind} {name}: {done:#}");
    }
}
