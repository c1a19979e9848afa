//! `hawser server` as a process against kube-sim: Backups and Restores whose patterns are
//! hostile or broken end `FailedValidation` naming the pattern, and the server, with the
//! ordinary work running beside them, carries on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use cli_support::Cluster;
use serde_json::{Value, json};
use server_support::{
    FAST, Server, create_backup, create_restore, filesystem_location, peak_rss_kib, phase, seed,
    wait_final,
};

/// The object's `status.validationErrors`, joined.
fn validation_errors(object: &Value) -> String {
    object["status"]["validationErrors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Inserts the Secret `name` holding AWS credentials (key `cloud`), annotated as meant for the
/// location `location`.
fn credentials_for(cluster: &Cluster, name: &str, location: &str) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": cli_support::NS,
                "annotations": {"hawser.io/locations": location}},
            "data": {"cloud": "W2RlZmF1bHRdCmF3c19hY2Nlc3Nfa2V5X2lkPXgKYXdzX3NlY3JldF9hY2Nlc3Nfa2V5PXkK"}
        }))
        .unwrap();
}

/// An `aws` BackupStorageLocation `name` with `config`, naming the credentials in `secret`.
fn aws_location(name: &str, secret: &str, config: Value) -> Value {
    json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": name, "namespace": cli_support::NS},
        "spec": {"provider": "aws", "objectStorage": {"bucket": "b"}, "config": config,
                 "credential": {"name": secret, "key": "cloud"}}
    })
}

#[tokio::test]
async fn hostile_patterns_fail_validation_and_the_server_carries_on() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "base", json!({"includedNamespaces": ["shop"]}));
    let base = wait_final(&cluster, &server, "Backup", "base").await;
    assert_eq!(phase(&base), "Completed", "{}", server.log_text());

    // A brace bomb: 100 000 nested '{'. Compiled by a recursive parser it overflows the stack
    // of whichever thread compiles it, which aborts the whole process.
    let bomb = "{".repeat(100_000);
    create_backup(&cluster, "bomb", json!({"excludedResources": [bomb]}));
    create_restore(
        &cluster,
        "bomb",
        json!({"backupName": "base", "excludedResources": [bomb]}),
    );
    // A pattern that does not compile must not turn its list into one that matches nothing
    // (which would back up and restore every Secret).
    create_backup(
        &cluster,
        "broken",
        json!({"includedNamespaces": ["shop"], "excludedResources": ["secrets", "[x"]}),
    );
    create_restore(
        &cluster,
        "broken",
        json!({"backupName": "base", "excludedResources": ["secrets", "[x"]}),
    );
    // Names no object can have (no request can even be built for some): they do not exist.
    create_backup(
        &cluster,
        "nowhere",
        json!({"storageLocation": "<b>x y</b>"}),
    );
    create_restore(&cluster, "nothing", json!({"backupName": "a b/c"}));
    create_backup(
        &cluster,
        "ordinary",
        json!({"includedNamespaces": ["shop"]}),
    );

    let nowhere = wait_final(&cluster, &server, "Backup", "nowhere").await;
    assert_eq!(
        validation_errors(&nowhere),
        "BackupStorageLocation <b>x y</b> named in spec.storageLocation does not exist in namespace velero; create it (hawser backup-location create) or name an existing one"
    );
    let nothing = wait_final(&cluster, &server, "Restore", "nothing").await;
    assert_eq!(
        validation_errors(&nothing),
        "Backup a b/c does not exist in namespace velero; list them with `hawser backup get`"
    );
    for kind in ["Backup", "Restore"] {
        let done = wait_final(&cluster, &server, kind, "bomb").await;
        assert_eq!(phase(&done), "FailedValidation", "{kind}: {done:#}");
        let errors = validation_errors(&done);
        assert!(
            errors.contains("excludedResources[0]: invalid glob pattern \"{{{{")
                && errors.contains("(100000 bytes): longer than 1024 bytes"),
            "{kind}: {errors}"
        );
        assert!(errors.len() < 1000, "{kind}: the message is cut short");

        let done = wait_final(&cluster, &server, kind, "broken").await;
        assert_eq!(phase(&done), "FailedValidation", "{kind}: {done:#}");
        assert_eq!(
            validation_errors(&done),
            "Invalid included/excluded resource lists: excludedResources[1]: invalid glob pattern \"[x\": unclosed '['",
            "{kind}"
        );
    }
    let ordinary = wait_final(&cluster, &server, "Backup", "ordinary").await;
    assert_eq!(phase(&ordinary), "Completed", "{}", server.log_text());
    assert!(server.is_ready().await, "the server is still serving");
    assert!(
        cluster
            .store()
            .get("v1", "Secret", "shop", "db-password")
            .is_some(),
        "nothing was restored over the cluster"
    );
}

#[tokio::test]
async fn nesting_locations_are_unavailable_and_reserved_names_are_refused() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    // Two locations on one bucket: one without a prefix, one under `backups`.
    for (name, prefix) in [("outer", None), ("inner", Some("backups"))] {
        let mut bsl = server_support::filesystem_location_object(name, shared.path());
        bsl["spec"]["objectStorage"]["prefix"] = json!(prefix);
        cluster.store().insert(bsl).unwrap();
    }
    let mut args = FAST.to_vec();
    args.extend(["--filesystem-root", shared.path().to_str().unwrap()]);
    let server = Server::start(&cluster, root.path(), &args).await;

    for (name, other) in [("outer", "inner"), ("inner", "outer")] {
        let bsl = server_support::wait_for(
            &cluster,
            Some(&server),
            "BackupStorageLocation",
            name,
            std::time::Duration::from_secs(15),
            |o| o["status"]["phase"] == "Unavailable",
        )
        .await;
        let message = bsl["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("BackupStorageLocation {other} "))
                && message.contains("nests"),
            "{message}"
        );
    }
    create_backup(
        &cluster,
        "into-inner",
        json!({"includedNamespaces": ["shop"], "storageLocation": "inner"}),
    );
    create_backup(&cluster, "backups", json!({"includedNamespaces": ["shop"]}));
    create_backup(
        &cluster,
        "ordinary",
        json!({"includedNamespaces": ["shop"]}),
    );

    let refused = wait_final(&cluster, &server, "Backup", "into-inner").await;
    assert_eq!(phase(&refused), "FailedValidation", "{refused:#}");
    assert!(validation_errors(&refused).contains("nests"), "{refused:#}");
    let reserved = wait_final(&cluster, &server, "Backup", "backups").await;
    assert_eq!(phase(&reserved), "FailedValidation", "{reserved:#}");
    assert!(
        validation_errors(&reserved).contains("is reserved"),
        "{reserved:#}"
    );
    let ordinary = wait_final(&cluster, &server, "Backup", "ordinary").await;
    assert_eq!(phase(&ordinary), "Completed", "{}", server.log_text());
}

#[tokio::test]
async fn credentials_go_only_to_endpoints_the_server_or_their_secret_trusts() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    // The installed credentials, for location `default` only.
    credentials_for(&cluster, "cloud-credentials", "default");
    // Someone who may write locations points one with the installed credentials elsewhere.
    for (name, endpoint) in [
        ("exfil", "https://collector.example"),
        ("listed", "https://minio.internal:9000"),
    ] {
        let config = json!({"s3Url": endpoint});
        cluster
            .store()
            .insert(aws_location(name, "cloud-credentials", config))
            .unwrap();
    }
    let mut args = FAST.to_vec();
    args.push("--trusted-endpoint=https://minio.internal:9000");
    let server = Server::start(&cluster, root.path(), &args).await;

    let exfil = server_support::wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "exfil",
        std::time::Duration::from_secs(15),
        |o| o["status"]["phase"] == "Unavailable",
    )
    .await;
    let message = exfil["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.config.s3Url `https://collector.example` is not trusted"),
        "{message}"
    );
    // The listed endpoint is only unreachable here: its refusal is not about trust.
    let listed = server_support::wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "listed",
        std::time::Duration::from_secs(15),
        |o| o["status"]["phase"].is_string(),
    )
    .await;
    assert!(
        !listed["status"]["message"]
            .to_string()
            .contains("not trusted"),
        "{listed:#}"
    );
    create_backup(
        &cluster,
        "ordinary",
        json!({"includedNamespaces": ["shop"]}),
    );
    let ordinary = wait_final(&cluster, &server, "Backup", "ordinary").await;
    assert_eq!(phase(&ordinary), "Completed", "{}", server.log_text());
}

/// How far admitting and refusing the 100 000-pattern Backup may raise the server's peak
/// memory: the object itself (about 1 MB of JSON; each parsed copy, as the watch, the queue and
/// validation hold it, about 6 MB) and the allocator's slack across threads. Measured: 30 to
/// 50 MiB. Without validation's limits first, the backup was not even refused within 30 s.
const PATTERN_FLOOD_BOUND_KIB: u64 = 96 << 10;

#[tokio::test]
async fn a_backup_with_100k_namespace_patterns_is_refused_before_it_costs_memory() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    for i in 0..50 {
        cluster
            .store()
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("team-{i}")}}))
            .unwrap();
    }
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(&cluster, "warm", json!({"includedNamespaces": ["shop"]}));
    assert_eq!(
        phase(&wait_final(&cluster, &server, "Backup", "warm").await),
        "Completed"
    );
    let pid = server.pid().unwrap();
    let before = peak_rss_kib(pid);

    let flood: Vec<String> = (0..100_000).map(|i| format!("t{i}*")).collect();
    create_backup(&cluster, "flood", json!({"includedNamespaces": flood}));
    create_backup(
        &cluster,
        "ordinary",
        json!({"includedNamespaces": ["shop"]}),
    );
    let refused = wait_final(&cluster, &server, "Backup", "flood").await;
    assert_eq!(phase(&refused), "FailedValidation");
    assert!(
        validation_errors(&refused).contains("holds 100000 patterns, more than the 1024 allowed"),
        "{}",
        validation_errors(&refused)
    );
    assert_eq!(server.try_get("/livez").await.map(|r| r.0), Some(200));
    let ordinary = wait_final(&cluster, &server, "Backup", "ordinary").await;
    assert_eq!(phase(&ordinary), "Completed", "{}", server.log_text());
    let after = peak_rss_kib(pid);
    assert!(
        after.saturating_sub(before) < PATTERN_FLOOD_BOUND_KIB,
        "peak memory rose by {} KiB (from {before} KiB), bound {PATTERN_FLOOD_BOUND_KIB} KiB",
        after - before
    );
}

/// A JSON value nested `depth` levels deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(1), |inner, _| json!({"a": inner}))
}

#[tokio::test]
async fn an_object_nested_too_deep_to_parse_fails_alone() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    // Stored as the API server stores what an unpruned field lets through (a restore hook's
    // init containers are kept whole): 300 levels, beyond the JSON parser's 128.
    for (kind, name, spec) in [
        (
            "Backup",
            "deep",
            json!({"includedNamespaces": ["shop"], "x": nested(300)}),
        ),
        (
            "Restore",
            "deep",
            json!({"backupName": "ordinary", "hooks": {"resources": [{"name": "h", "postHooks": [{"init": {"initContainers": [nested(300)]}}]}]}}),
        ),
    ] {
        cluster
            .store()
            .insert(json!({"apiVersion": "velero.io/v1", "kind": kind,
                "metadata": {"name": name, "namespace": cli_support::NS}, "spec": spec}))
            .unwrap();
    }
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "ordinary",
        json!({"includedNamespaces": ["shop"]}),
    );
    let ordinary = wait_final(&cluster, &server, "Backup", "ordinary").await;
    assert_eq!(phase(&ordinary), "Completed", "{}", server.log_text());
    create_restore(&cluster, "ordinary", json!({"backupName": "ordinary"}));
    let restored = wait_final(&cluster, &server, "Restore", "ordinary").await;
    assert_eq!(phase(&restored), "Completed", "{}", server.log_text());
    for kind in ["Backup", "Restore"] {
        let deep = wait_final(&cluster, &server, kind, "deep").await;
        assert_eq!(phase(&deep), "FailedValidation", "{kind}");
        let errors = validation_errors(&deep);
        assert!(
            errors.starts_with(&format!(
                "the {kind} cannot be read: recursion limit exceeded"
            )),
            "{kind}: {errors}"
        );
    }
    // The server never logs the object's text.
    let log = server.log_text();
    let leaked: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(r#"{"a":{"a":{"a""#))
        .map(|l| &l[..l.len().min(300)])
        .collect();
    assert!(leaked.is_empty(), "{leaked:#?}");
}

#[tokio::test]
async fn a_location_that_never_answers_holds_up_no_other() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    filesystem_location(&cluster, "default", root.path());
    credentials_for(&cluster, "creds", "a-silent");
    let config = json!({"s3Url": endpoint, "region": "us-east-1", "s3ForcePathStyle": "true"});
    let store = cluster.store();
    store
        .insert(aws_location("a-silent", "creds", config))
        .unwrap();
    // Validated after the silent one in a pass that took them in turn.
    store
        .insert(server_support::filesystem_location_object(
            "z-other",
            other.path(),
        ))
        .unwrap();
    let mut args = FAST.to_vec();
    let root_flag = format!("--filesystem-root={}", other.path().display());
    args.push(&root_flag);
    let server = Server::start(&cluster, root.path(), &args).await;

    let started = std::time::Instant::now();
    let z = server_support::wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "z-other",
        std::time::Duration::from_secs(10),
        |o| o["status"]["phase"] == "Available",
    )
    .await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{z:#}"
    );
    let silent_bsl = cluster
        .get("velero.io/v1", "BackupStorageLocation", "a-silent")
        .unwrap();
    assert!(silent_bsl["status"]["phase"].is_null(), "{silent_bsl:#}");
    drop(silent);
}

/// How far a thousand idle connections may raise the server's peak memory: at most 128 are
/// held (each a task and its buffers), the rest closed as they come.
const IDLE_SOCKETS_BOUND_KIB: u64 = 32 << 10;

#[tokio::test]
async fn a_thousand_idle_connections_neither_stop_livez_nor_the_next_backup() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    let pid = server.pid().unwrap();
    let before = peak_rss_kib(pid);
    // Each sends half a request line and nothing more.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        if let Ok(mut socket) = tokio::net::TcpStream::connect(&server.metrics_addr).await {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut socket, b"GET /metr").await;
            idle.push(socket);
        }
    }
    assert!(idle.len() >= 900, "only {} connections opened", idle.len());
    assert_eq!(server.try_get("/livez").await.map(|r| r.0), Some(200));
    create_backup(
        &cluster,
        "after-the-flood",
        json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "after-the-flood").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    let after = peak_rss_kib(pid);
    assert!(
        after.saturating_sub(before) < IDLE_SOCKETS_BOUND_KIB,
        "peak memory rose by {} KiB with 1000 idle connections",
        after - before
    );
    // The log says so at a bounded rate, not once per connection.
    let log = server.log_text();
    assert!(
        log.lines().count() < 500,
        "{} log lines",
        log.lines().count()
    );
    drop(idle);
}
