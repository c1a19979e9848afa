//! `pods/exec` over WebSocket, through kube-rs's own exec client (both subprotocols it offers):
//! scripted output and exit codes, the checks before the upgrade, a hanging command ended by the client, discovery, and the exec log.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, PostParams};
use kube::{Client, Config};
use kube_sim::{ExecReply, ExecRule, KubeSim, SimConfig};
use serde_json::json;
use tokio::io::AsyncReadExt;

async fn start() -> (KubeSim, Api<Pod>) {
    let sim = KubeSim::start(SimConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = json!({
        "metadata": {"name": "db"},
        "spec": {"containers": [{"name": "main", "image": "db"}, {"name": "side", "image": "s"}]}
    });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    (sim, pods)
}

/// Runs `command` in `container` of pod `db`: stdout, stderr and the closing status.
async fn exec(
    pods: &Api<Pod>,
    container: &str,
    command: &[&str],
) -> kube::Result<(
    String,
    String,
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Status,
)> {
    let params = AttachParams::default()
        .container(container)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let mut process = pods.exec("db", command.to_vec(), &params).await?;
    let mut stdout = String::new();
    let mut stderr = String::new();
    let status = process.take_status().unwrap();
    let mut out_pipe = process.stdout().unwrap();
    let mut err_pipe = process.stderr().unwrap();
    let out = out_pipe.read_to_string(&mut stdout);
    let err = err_pipe.read_to_string(&mut stderr);
    let (a, b) = tokio::join!(out, err);
    a.unwrap();
    b.unwrap();
    let status = status.await.unwrap();
    process.join().await.unwrap();
    Ok((stdout, stderr, status))
}

#[tokio::test]
async fn exec_answers_as_scripted_and_logs_every_command() {
    let (sim, pods) = start().await;
    sim.execs().script(ExecRule {
        pod: Some("db".into()),
        container: Some("main".into()),
        command: Some("--freeze".into()),
        reply: ExecReply {
            exit_code: 3,
            stdout: "freezing\n".into(),
            stderr: "busy\n".into(),
            ..ExecReply::default()
        },
        ..ExecRule::default()
    });

    let (out, err, status) = exec(&pods, "main", &["fsfreeze", "--freeze", "/data"])
        .await
        .unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("freezing\n", "busy\n"));
    assert_eq!(status.status.as_deref(), Some("Failure"));
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = status.details.unwrap().causes.unwrap();
    assert_eq!(causes[0].reason.as_deref(), Some("ExitCode"));
    assert_eq!(causes[0].message.as_deref(), Some("3"));

    // Unscripted: exits 0, prints nothing.
    let (out, err, status) = exec(&pods, "side", &["true"]).await.unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("", ""));
    assert_eq!(status.status.as_deref(), Some("Success"));

    let log = sim.execs().log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].container, "main");
    assert_eq!(log[0].command, ["fsfreeze", "--freeze", "/data"]);
    assert_eq!(log[0].exit_code, Some(3));
    assert_eq!(
        (log[1].container.as_str(), log[1].exit_code),
        ("side", Some(0))
    );
    assert!(log.iter().all(|r| r.ended_ms.unwrap() >= r.started_ms));
    let execs: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.subresource == "exec")
        .collect();
    assert_eq!(execs.len(), 2, "each exec is one request in the log");
    assert!(execs.iter().all(|r| r.verb == "create" && r.code == 101));
}

#[tokio::test]
async fn a_bad_exec_is_refused_before_the_upgrade() {
    let (sim, pods) = start().await;
    let refused = |r: kube::Result<_>| match r {
        Err(kube::Error::UpgradeConnection(e)) => e.to_string(),
        Err(e) => e.to_string(),
        Ok(_) => panic!("the exec ran"),
    };
    let missing = refused(exec(&pods, "nope", &["true"]).await);
    assert!(missing.contains("400"), "{missing}");

    let params = || {
        AttachParams::default()
            .stdin(false)
            .stdout(true)
            .stderr(true)
    };
    let unnamed = pods.exec("db", ["true"], &params()).await.err().unwrap();
    assert!(unnamed.to_string().contains("400"), "{unnamed}");

    let gone = Api::<Pod>::namespaced(pods.clone().into_client(), "default")
        .exec("ghost", ["true"], &params().container("main"))
        .await
        .err()
        .unwrap();
    assert!(gone.to_string().contains("404"), "{gone}");

    // A container that is not running.
    let mut pod = sim.store().get("v1", "Pod", "default", "db").unwrap();
    pod["status"] = json!({"phase": "Running", "containerStatuses": [
        {"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        {"name": "side", "state": {"running": {}}}
    ]});
    sim.store().set_status(&pod).unwrap();
    let stopped = refused(exec(&pods, "main", &["true"]).await);
    assert!(stopped.contains("400"), "{stopped}");
    exec(&pods, "side", &["true"]).await.unwrap();
    assert_eq!(
        sim.execs().log().len(),
        1,
        "only the exec that ran is logged"
    );
}

#[tokio::test]
async fn a_hanging_command_ends_when_the_client_leaves() {
    let (sim, pods) = start().await;
    sim.execs().script(ExecRule {
        command: Some("sleep".into()),
        reply: ExecReply::hang(),
        ..ExecRule::default()
    });
    let ran = tokio::time::timeout(
        Duration::from_millis(300),
        exec(&pods, "main", &["sleep", "infinity"]),
    )
    .await;
    assert!(ran.is_err(), "a hanging command does not answer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while sim.execs().log()[0].ended_ms.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the exec never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sim.execs().log()[0].exit_code,
        None,
        "no exit code was sent"
    );
}

#[tokio::test]
async fn discovery_lists_pods_exec() {
    let (sim, pods) = start().await;
    let list = kube::Client::try_from(Config::new(sim.api_url().parse().unwrap()))
        .unwrap()
        .list_core_api_resources("v1")
        .await
        .unwrap();
    let exec = list
        .resources
        .iter()
        .find(|r| r.name == "pods/exec")
        .expect("pods/exec is listed");
    assert_eq!(exec.kind, "PodExecOptions");
    assert_eq!(exec.verbs, ["create", "get"]);
    drop(pods);
}
