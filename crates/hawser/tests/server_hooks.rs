//! Backup hooks through the `hawser server` process, with kube-sim's `pods/exec` playing the
//! commands (scripted exit codes, output, hangs) and its CSI side cutting the snapshots: a pod's
//! pre hooks run, then its claim's snapshot is cut, then its post hooks; annotations win over
//! the spec per phase; a failed `Fail` pre hook leaves the pod out, its post hook still runs;
//! a hanging hook times out; a post hook runs after a failed snapshot; a server killed between
//! a pod's pre and post hooks is followed by one that runs the owed post hooks first.
//!
//! kube-sim only (the `real` profile leaves this binary out): a command in a container needs a
//! kubelet, and the real API server of the tests has no nodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_checks;
mod server_support;

use std::time::Duration;

use cli_support::Cluster;
use kube_sim::csi::dynamic_api;
use kube_sim::{ExecRecord, ExecReply, ExecRule};
use serde_json::{Value, json};
use server_support::csi::{application, client, patch};
use server_support::*;

const FREEZE: &str = "[\"/sbin/fsfreeze\", \"--freeze\", \"/data\"]";
const THAW: &str = "[\"/sbin/fsfreeze\", \"--unfreeze\", \"/data\"]";

/// Pod `shop/db-0` of [`application`] gets `annotations`.
async fn annotate_pod(cluster: &Cluster, annotations: Value) {
    let pods = dynamic_api(&client(cluster), "", "Pod", "pods", Some("shop"));
    patch(
        &pods,
        "db-0",
        json!({"metadata": {"annotations": annotations}}),
    )
    .await;
}

fn freeze_and_thaw() -> Value {
    json!({
        "pre.hook.backup.velero.io/command": FREEZE,
        "pre.hook.backup.velero.io/container": "db",
        "post.hook.backup.velero.io/command": THAW,
    })
}

fn commands(log: &[ExecRecord]) -> Vec<String> {
    log.iter().map(|r| r.command.join(" ")).collect()
}

/// Milliseconds since the epoch of a request log time.
fn millis(time: &str) -> u64 {
    let t: jiff::Timestamp = time.parse().unwrap();
    u64::try_from(t.as_millisecond()).unwrap()
}

/// The paths of the backup's archive.
fn archive(root: &std::path::Path, name: &str) -> Vec<String> {
    archive_paths(&artifact(root, name, &format!("{name}.tar.gz")))
}

fn results(root: &std::path::Path, name: &str) -> Value {
    serde_json::from_str(&gunzip(&artifact(
        root,
        name,
        &format!("{name}-results.gz"),
    )))
    .unwrap()
}

/// kube-sim with the CSI side and [`application`] (its claim annotated with the snapshot
/// `fault`, its pod with `annotations`), a filesystem location and a server. Bind every field:
/// the CSI side stops when dropped.
struct Started {
    cluster: Cluster,
    root: tempfile::TempDir,
    _csi: kube_sim::csi::CsiSim,
    server: Server,
}

async fn start(fault: &str, annotations: Value) -> Started {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let csi = application(&cluster, Duration::from_millis(200), fault).await;
    annotate_pod(&cluster, annotations).await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    Started {
        cluster,
        root,
        _csi: csi,
        server,
    }
}

#[tokio::test]
async fn pre_hooks_run_before_the_snapshot_is_cut_and_post_hooks_after() {
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("", freeze_and_thaw()).await;
    cluster.sim.execs().script(ExecRule {
        command: Some("--freeze".into()),
        reply: ExecReply {
            stdout: "frozen\n".into(),
            delay: Duration::from_millis(300),
            ..ExecReply::default()
        },
        ..ExecRule::default()
    });

    // The spec's pre hook is not run: the pod's annotation wins for that phase. Its post
    // hook is not run either: the pod has a post annotation too. The second entry selects no
    // pod.
    create_backup(
        &cluster,
        "hooked",
        json!({
            "includedNamespaces": ["shop"],
            "hooks": {"resources": [
                {"name": "spec-hooks", "labelSelector": {"matchLabels": {"app": "db"}},
                 "pre": [{"exec": {"command": ["/bin/ignored"]}}],
                 "post": [{"exec": {"command": ["/bin/ignored-too"]}}]},
                {"name": "elsewhere", "includedNamespaces": ["other"],
                 "pre": [{"exec": {"command": ["/bin/nowhere"]}}]}
            ]}
        }),
    );
    let done = wait_final(&cluster, &server, "Backup", "hooked").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 2}),
        "{done:#}"
    );

    let log = cluster.sim.execs().log();
    assert_eq!(
        commands(&log),
        [
            "/sbin/fsfreeze --freeze /data",
            "/sbin/fsfreeze --unfreeze /data"
        ]
    );
    assert!(
        log.iter()
            .all(|r| r.namespace == "shop" && r.pod == "db-0" && r.container == "db")
    );
    // Pre hook, then the snapshot created and cut (its content made Retain), then the post hook.
    let requests = cluster.sim.requests();
    let time_of = |resource: &str, verb: &str| {
        requests
            .iter()
            .find(|r| r.resource == resource && r.verb == verb)
            .map(|r| millis(&r.time))
            .unwrap_or_else(|| panic!("no {verb} of {resource}"))
    };
    let created = time_of("volumesnapshots", "create");
    let retained = time_of("volumesnapshotcontents", "patch");
    assert!(
        log[0].ended_ms.unwrap() <= created,
        "the snapshot waited for the pre hook"
    );
    assert!(
        retained <= log[1].started_ms,
        "the post hook waited for the cut"
    );

    assert!(
        archive(root.path(), "hooked")
            .contains(&"resources/pods/namespaces/shop/db-0.json".to_owned())
    );
    let backup_log = gunzip(&artifact(root.path(), "hooked", "hooked-logs.gz"));
    assert!(
        backup_log.contains("The pre hook <from-annotation> in pod shop/db-0 (container db) ran: exit code 0; stdout: \\\"frozen\\\""),
        "{backup_log}"
    );
    let annotations = &done["metadata"]["annotations"];
    assert!(
        annotations.get("hawser.io/pending-post-hooks").is_none(),
        "no post hook is owed once they ran: {annotations:#}"
    );
    let described = cluster.hawser(&["backup", "describe", "hooked"]).await;
    for line in [
        "Hooks:\n  Resources:\n    spec-hooks:\n",
        "\n    elsewhere:\n",
        "HooksAttempted:  2",
        "HooksFailed:     0",
    ] {
        assert!(
            described.stdout.contains(line),
            "{line}\n{}",
            described.stdout
        );
    }
}

#[tokio::test]
async fn a_failed_pre_hook_leaves_the_pod_out_and_its_post_hook_still_runs() {
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("", freeze_and_thaw()).await;
    cluster.sim.execs().script(ExecRule {
        command: Some("--freeze".into()),
        reply: ExecReply::exit(1, "fsfreeze: /data: Device or resource busy\n"),
        ..ExecRule::default()
    });

    create_backup(&cluster, "busy", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(&cluster, &server, "Backup", "busy").await;
    assert_eq!(
        phase(&done),
        "PartiallyFailed",
        "{done:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 2, "hooksFailed": 1}),
        "{done:#}"
    );
    assert_eq!(done["status"]["errors"], 1, "{done:#}");
    assert_eq!(
        commands(&cluster.sim.execs().log()),
        [
            "/sbin/fsfreeze --freeze /data",
            "/sbin/fsfreeze --unfreeze /data"
        ],
        "the post hook runs although the pre hook failed"
    );
    let error = results(root.path(), "busy")["errors"]["namespaces"]["shop"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.starts_with("The pre hook <from-annotation> in pod shop/db-0 (container db) failed: command terminated with non-zero exit code")
            && error.contains("stderr: \"fsfreeze: /data: Device or resource busy\"")
            && error.ends_with("onError is Fail: the pod is left out of the backup and its other pre hooks are not run"),
        "{error}"
    );
    let paths = archive(root.path(), "busy");
    assert!(
        !paths.iter().any(|p| p.contains("resources/pods/")),
        "{paths:#?}"
    );
    assert!(
        paths.contains(&"resources/persistentvolumeclaims/namespaces/shop/data.json".to_owned()),
        "the claim is still backed up and snapshotted, as in Velero: {paths:#?}"
    );
    assert_eq!(done["status"]["csiVolumeSnapshotsCompleted"], 1, "{done:#}");
}

#[tokio::test]
async fn a_hanging_hook_times_out_and_continue_keeps_the_pod() {
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("", json!({})).await;
    cluster.sim.execs().script(ExecRule {
        command: Some("flush".into()),
        reply: ExecReply::hang(),
        ..ExecRule::default()
    });

    create_backup(
        &cluster,
        "hung",
        json!({
            "includedNamespaces": ["shop"],
            "hooks": {"resources": [{"name": "flush-db", "includedResources": ["pods"],
                "pre": [{"exec": {"command": ["/bin/flush"], "timeout": "1s", "onError": "Continue"}},
                        {"exec": {"command": ["/bin/after-flush"], "container": "nope"}}]}]}
        }),
    );
    let done = wait_final(&cluster, &server, "Backup", "hung").await;
    assert_eq!(
        phase(&done),
        "PartiallyFailed",
        "{done:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 2, "hooksFailed": 2}),
        "{done:#}"
    );
    let errors: Vec<String> = results(root.path(), "hung")["errors"]["namespaces"]["shop"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0]
            == "The pre hook flush-db in pod shop/db-0 (container db) failed: timed out after 1s; onError is Continue",
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("The pre hook flush-db in pod shop/db-0 (container ?) failed: no such container: \"nope\"; onError is Fail"),
        "{errors:#?}"
    );
    let log = cluster.sim.execs().log();
    assert_eq!(
        commands(&log),
        ["/bin/flush"],
        "the command in no container never ran"
    );
    assert!(
        !archive(root.path(), "hung")
            .contains(&"resources/pods/namespaces/shop/db-0.json".to_owned()),
        "the failing Fail hook left the pod out"
    );
}

#[tokio::test]
async fn post_hooks_run_after_a_failed_snapshot() {
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("error", freeze_and_thaw()).await;

    create_backup(
        &cluster,
        "snapfail",
        json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "snapfail").await;
    assert_eq!(
        phase(&done),
        "PartiallyFailed",
        "{done:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 2}),
        "{done:#}"
    );
    let error = results(root.path(), "snapfail")["errors"]["namespaces"]["shop"][0].to_string();
    assert!(error.contains("was not snapshotted"), "{error}");
    assert_eq!(
        commands(&cluster.sim.execs().log()),
        [
            "/sbin/fsfreeze --freeze /data",
            "/sbin/fsfreeze --unfreeze /data"
        ]
    );
}

/// The server dies after the pod was frozen and before it was thawed (its snapshot's create
/// is slowed down so that the moment is there): the next server runs the owed post hook first,
/// then backs the pod up again, freezing and thawing it.
#[tokio::test]
async fn a_server_killed_between_pre_and_post_hooks_leaves_the_thaw_to_the_next() {
    let Started {
        cluster,
        root,
        server: mut first,
        _csi,
    } = start("", freeze_and_thaw()).await;
    let slow = cluster.sim.faults().latency(
        kube_sim::LatencyFault::new(Duration::from_secs(30))
            .verbs(&["create"])
            .resources(&["volumesnapshots"]),
    );

    create_backup(&cluster, "killed", json!({"includedNamespaces": ["shop"]}));
    poll(&first, "the pre hook ran", || {
        let log = cluster.sim.execs().log();
        (log.len() == 1 && log[0].ended_ms.is_some()).then_some(())
    })
    .await;
    let owed = poll(&first, "the owed post hook recorded", || {
        cluster
            .get("velero.io/v1", "Backup", "killed")
            .and_then(|b| {
                b["metadata"]["annotations"]["hawser.io/pending-post-hooks"]
                    .as_str()
                    .map(str::to_owned)
            })
    })
    .await;
    assert_eq!(owed, r#"["shop/db-0"]"#);
    first.kill().await;
    cluster.sim.faults().remove(slow);

    let second = Server::start(&cluster, root.path(), FAST).await;
    let done = wait_final(&cluster, &second, "Backup", "killed").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", second.log_text());
    assert_eq!(
        commands(&cluster.sim.execs().log()),
        [
            "/sbin/fsfreeze --freeze /data",
            "/sbin/fsfreeze --unfreeze /data",
            "/sbin/fsfreeze --freeze /data",
            "/sbin/fsfreeze --unfreeze /data",
        ],
        "the owed thaw first, then the pod's hooks again"
    );
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 3}),
        "{done:#}"
    );
    let backup_log = gunzip(&artifact(root.path(), "killed", "killed-logs.gz"));
    assert!(
        backup_log.contains(
            "Running the post hooks of pod shop/db-0, which an earlier run of this backup owed it"
        ),
        "{backup_log}"
    );
    assert!(
        done["metadata"]["annotations"]
            .get("hawser.io/pending-post-hooks")
            .is_none()
    );
}

#[tokio::test]
async fn a_hook_spec_with_a_bad_selector_fails_validation() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "bad-hooks",
        json!({"hooks": {"resources": [{"name": "odd",
            "labelSelector": {"matchLabels": {"not a key!": "x"}},
            "pre": [{"exec": {"command": ["true"]}}]}]}}),
    );
    let done = wait_final(&cluster, &server, "Backup", "bad-hooks").await;
    assert_eq!(phase(&done), "FailedValidation", "{done:#}");
    let errors = done["status"]["validationErrors"].to_string();
    assert!(errors.contains("backup hook spec odd: "), "{errors}");
    assert!(cluster.sim.execs().log().is_empty());
}

/// Sets the containers' states of the restored pod `namespace/name` (kube-sim has no kubelet).
fn set_containers(cluster: &Cluster, namespace: &str, name: &str, statuses: Value) {
    let mut pod = cluster
        .sim
        .store()
        .get("v1", "Pod", namespace, name)
        .unwrap();
    pod["status"] = json!({"phase": "Running", "containerStatuses": statuses});
    cluster.sim.store().set_status(&pod).unwrap();
}

/// Returns once the server has read pod `namespace/name` `reads` times after this call.
async fn reads_of_pod(
    cluster: &Cluster,
    server: &Server,
    namespace: &str,
    name: &str,
    reads: usize,
) {
    let after = cluster.sim.last_request_seq();
    poll(
        server,
        &format!("{reads} reads of pod {namespace}/{name}"),
        || {
            let seen = cluster
                .sim
                .requests_since(after)
                .iter()
                .filter(|r| {
                    r.verb == "get"
                        && r.resource == "pods"
                        && r.namespace == namespace
                        && r.name == name
                })
                .count();
            (seen >= reads).then_some(())
        },
    )
    .await;
}

/// A pod's `post.hook.restore.velero.io` hook waits until its container is ready (running is
/// not enough with `wait-for-ready`), then runs in the restored pod, in its new namespace.
#[tokio::test]
async fn a_restore_exec_hook_waits_for_its_container_to_be_ready_then_runs() {
    let annotations = json!({
        "post.hook.restore.velero.io/command": "[\"/bin/check-data\", \"--quick\"]",
        "post.hook.restore.velero.io/wait-for-ready": "true"
    });
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("", annotations).await;
    create_backup(&cluster, "src", json!({"includedNamespaces": ["shop"]}));
    let backed_up = wait_final(&cluster, &server, "Backup", "src").await;
    assert_eq!(phase(&backed_up), "Completed", "{backed_up:#}");

    create_restore(
        &cluster,
        "back",
        json!({"backupName": "src", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    poll(&server, "the pod restored", || {
        cluster.sim.store().get("v1", "Pod", "shop-copy", "db-0")
    })
    .await;
    set_containers(
        &cluster,
        "shop-copy",
        "db-0",
        json!([{"name": "db", "ready": false, "state": {"running": {}}}]),
    );
    reads_of_pod(&cluster, &server, "shop-copy", "db-0", 2).await;
    assert!(
        cluster.sim.execs().log().is_empty(),
        "running but not ready: the hook waits"
    );
    // Every item is restored: the Restore waits in Velero's Finalizing.
    poll(&server, "the Restore Finalizing", || {
        cluster
            .get("velero.io/v1", "Restore", "back")
            .filter(|r| phase(r) == "Finalizing")
    })
    .await;
    set_containers(
        &cluster,
        "shop-copy",
        "db-0",
        json!([{"name": "db", "ready": true, "state": {"running": {}}}]),
    );

    let done = wait_final(&cluster, &server, "Restore", "back").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 1}),
        "{done:#}"
    );
    let log = cluster.sim.execs().log();
    assert_eq!(commands(&log), ["/bin/check-data --quick"]);
    assert_eq!(
        (
            log[0].namespace.as_str(),
            log[0].pod.as_str(),
            log[0].container.as_str()
        ),
        ("shop-copy", "db-0", "db")
    );
    let restore_log = gunzip(&restore_artifact(
        root.path(),
        "back",
        "restore-back-logs.gz",
    ));
    assert!(
        restore_log.contains("The restore exec hook <from-annotation> in pod shop-copy/db-0 (container db) ran: exit code 0"),
        "{restore_log}"
    );
    let described = cluster.hawser(&["restore", "describe", "back"]).await;
    assert!(
        described.stdout.contains("HooksAttempted:   1"),
        "{}",
        described.stdout
    );
}

/// A spec exec hook whose container never runs is not run once its wait timeout passes; a
/// failing one with the default `Continue` lets the next run.
#[tokio::test]
async fn restore_exec_hooks_from_the_spec_fail_on_a_wait_timeout_and_go_on_after_a_failure() {
    let Started {
        cluster,
        root,
        server,
        _csi,
    } = start("", json!({})).await;
    let pods = dynamic_api(&client(&cluster), "", "Pod", "pods", Some("shop"));
    server_support::csi::create(
        &pods,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": "nginx"}, {"name": "stuck", "image": "x"}]}}),
    )
    .await;
    cluster.sim.execs().script(ExecRule {
        command: Some("warm".into()),
        reply: ExecReply::exit(2, "cache cold\n"),
        ..ExecRule::default()
    });
    create_backup(&cluster, "web", json!({"includedNamespaces": ["shop"]}));
    wait_final(&cluster, &server, "Backup", "web").await;

    create_restore(
        &cluster,
        "web-back",
        json!({
            "backupName": "web",
            "namespaceMapping": {"shop": "shop-two"},
            "labelSelector": {"matchLabels": {"app": "web"}},
            "hooks": {"resources": [{"name": "web-hooks", "includedNamespaces": ["shop-two"],
                "postHooks": [
                    {"exec": {"container": "web", "command": ["/bin/warm-cache"]}},
                    {"exec": {"container": "web", "command": ["/bin/announce"]}},
                    {"exec": {"container": "stuck", "command": ["/bin/never"], "waitTimeout": "1s"}}
                ]}]}
        }),
    );
    poll(&server, "the pod restored", || {
        cluster.sim.store().get("v1", "Pod", "shop-two", "web-0")
    })
    .await;
    set_containers(
        &cluster,
        "shop-two",
        "web-0",
        json!([{"name": "web", "ready": true, "state": {"running": {}}},
               {"name": "stuck", "ready": false, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]),
    );
    let done = wait_final(&cluster, &server, "Restore", "web-back").await;
    assert_eq!(
        phase(&done),
        "PartiallyFailed",
        "{done:#}\n{}",
        server.log_text()
    );
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 3, "hooksFailed": 2}),
        "{done:#}"
    );
    assert_eq!(
        commands(&cluster.sim.execs().log()),
        ["/bin/warm-cache", "/bin/announce"],
        "Continue: the next hook runs after a failure"
    );
    let results: Value = serde_json::from_str(&gunzip(&restore_artifact(
        root.path(),
        "web-back",
        "restore-web-back-results.gz",
    )))
    .unwrap();
    let errors = results["errors"]["namespaces"]["shop-two"].to_string();
    assert!(
        errors.contains("The restore exec hook web-hooks in pod shop-two/web-0 (container web) failed: command terminated with non-zero exit code")
            && errors.contains("onError is Continue"),
        "{errors}"
    );
    assert!(
        errors.contains("The restore exec hook web-hooks in pod shop-two/web-0 (container stuck) was not run: its container was not running within 1s"),
        "{errors}"
    );
}

/// The API goes away while a restore waits for a container to run its exec hook: the wait
/// reads the pod again once the API is back, the hook runs, the Restore ends `Completed`.
#[tokio::test]
async fn an_api_outage_while_a_restore_waits_for_its_hooks_still_runs_them() {
    let annotations = json!({"post.hook.restore.velero.io/command": "/bin/check-data"});
    let Started {
        cluster,
        root: _root,
        server,
        _csi,
    } = start("", annotations).await;
    create_backup(&cluster, "src", json!({"includedNamespaces": ["shop"]}));
    wait_final(&cluster, &server, "Backup", "src").await;
    create_restore(
        &cluster,
        "through",
        json!({"backupName": "src", "namespaceMapping": {"shop": "shop-three"}}),
    );
    poll(&server, "the pod restored", || {
        cluster.sim.store().get("v1", "Pod", "shop-three", "db-0")
    })
    .await;
    reads_of_pod(&cluster, &server, "shop-three", "db-0", 1).await;

    cluster.api_outage(Duration::from_secs(3), &[]).await;
    assert!(cluster.sim.execs().log().is_empty());
    set_containers(
        &cluster,
        "shop-three",
        "db-0",
        json!([{"name": "db", "ready": false, "state": {"running": {}}}]),
    );

    let done = wait_final(&cluster, &server, "Restore", "through").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 1}),
        "{done:#}"
    );
    assert_eq!(commands(&cluster.sim.execs().log()), ["/bin/check-data"]);
}

/// The record of owed post hooks is the server's: on a new Backup its creator wrote it, and no
/// hook of the pods it names runs (the backup takes another namespace).
#[tokio::test]
async fn a_new_backup_cannot_ask_for_post_hooks_through_the_servers_annotation() {
    let Started {
        cluster,
        root: _root,
        server,
        _csi,
    } = start("", freeze_and_thaw()).await;
    cluster
        .store()
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
        .unwrap();
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "sneaky", "namespace": cli_support::NS,
                         "annotations": {"hawser.io/pending-post-hooks": "[\"shop/db-0\"]"}},
            "spec": {"includedNamespaces": ["other"]}
        }))
        .unwrap();
    let done = wait_final(&cluster, &server, "Backup", "sneaky").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert!(
        cluster.sim.execs().log().is_empty(),
        "{:?}",
        cluster.sim.execs().log()
    );
    assert!(done["status"].get("hookStatus").is_none(), "{done:#}");
}

/// The server dies while a restore waits in `Finalizing` for a container to run its exec hook:
/// the next server runs the restore again, still `Finalizing` (no phase but a final one may
/// follow it), and the hook runs once the container does.
#[tokio::test]
async fn a_restore_left_finalizing_by_a_dead_server_is_run_again_and_its_hook_runs() {
    let annotations = json!({"post.hook.restore.velero.io/command": "/bin/check-data"});
    let Started {
        cluster,
        root,
        server: mut first,
        _csi,
    } = start("", annotations).await;
    create_backup(&cluster, "src", json!({"includedNamespaces": ["shop"]}));
    wait_final(&cluster, &first, "Backup", "src").await;
    create_restore(
        &cluster,
        "again",
        json!({"backupName": "src", "namespaceMapping": {"shop": "shop-four"}}),
    );
    poll(&first, "the Restore Finalizing", || {
        cluster
            .get("velero.io/v1", "Restore", "again")
            .filter(|r| phase(r) == "Finalizing")
    })
    .await;
    first.kill().await;

    let second = Server::start(&cluster, root.path(), FAST).await;
    // Taken over: the second server reads the restored pod while it waits again.
    reads_of_pod(&cluster, &second, "shop-four", "db-0", 1).await;
    let waiting = cluster.get("velero.io/v1", "Restore", "again").unwrap();
    assert_eq!(phase(&waiting), "Finalizing", "{waiting:#}");
    set_containers(
        &cluster,
        "shop-four",
        "db-0",
        json!([{"name": "db", "ready": true, "state": {"running": {}}}]),
    );
    let done = wait_final(&cluster, &second, "Restore", "again").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", second.log_text());
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 1}),
        "{done:#}"
    );
    assert_eq!(commands(&cluster.sim.execs().log()), ["/bin/check-data"]);
}

/// A pod with a post hook and no pre hook runs it after its snapshot.
#[tokio::test]
async fn a_pod_with_only_a_post_hook_runs_it() {
    let Started {
        cluster,
        root: _root,
        server,
        _csi,
    } = start("", json!({"post.hook.backup.velero.io/command": THAW})).await;
    create_backup(
        &cluster,
        "thaw-only",
        json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "thaw-only").await;
    assert_eq!(phase(&done), "Completed", "{done:#}\n{}", server.log_text());
    assert_eq!(
        done["status"]["hookStatus"],
        json!({"hooksAttempted": 1}),
        "{done:#}"
    );
    assert_eq!(
        commands(&cluster.sim.execs().log()),
        ["/sbin/fsfreeze --unfreeze /data"]
    );
}
