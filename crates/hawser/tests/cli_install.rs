//! `hawser install`, run as a process: `--dry-run` output, and a real install into an empty
//! kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::Cluster;
use serde::Deserialize;
use serde_json::Value;

/// `Kind/name` of every object install makes with a location and a credentials file, in order.
const EXPECTED: [&str; 15] = [
    "CustomResourceDefinition/backups.velero.io",
    "CustomResourceDefinition/backupstoragelocations.velero.io",
    "CustomResourceDefinition/deletebackuprequests.velero.io",
    "CustomResourceDefinition/downloadrequests.velero.io",
    "CustomResourceDefinition/restores.velero.io",
    "CustomResourceDefinition/schedules.velero.io",
    "CustomResourceDefinition/serverstatusrequests.velero.io",
    "Namespace/velero",
    "ServiceAccount/velero",
    "ClusterRoleBinding/velero",
    "Role/hawser-leader-election",
    "RoleBinding/hawser-leader-election",
    "Secret/cloud-credentials",
    "Deployment/velero",
    "BackupStorageLocation/default",
];

fn label(object: &Value) -> String {
    format!(
        "{}/{}",
        object["kind"].as_str().unwrap(),
        object["metadata"]["name"].as_str().unwrap()
    )
}

fn install_args(secret: &str) -> Vec<String> {
    [
        "install",
        "--provider",
        "aws",
        "--bucket",
        "backups",
        "--prefix",
        "cluster-a",
        "--backup-location-config",
        "region=eu-west-1",
        "--secret-file",
        secret,
        "--image",
        "registry.example/hawser:test",
        "--default-backup-ttl",
        "48h",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn secret_file(cluster: &Cluster) -> String {
    let path = cluster.dir().join("credentials");
    std::fs::write(&path, "[default]\naws_access_key_id=x\n").unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_prints_every_object_and_touches_nothing() {
    let cluster = Cluster::empty().await;
    let secret = secret_file(&cluster);
    let mut args = install_args(&secret);
    args.extend(["--dry-run".to_owned(), "-o".to_owned(), "yaml".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let before = cluster.sim.last_request_seq();
    let run = cluster.hawser(&args).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&run.stdout)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect();
    let labels: Vec<String> = docs.iter().map(label).collect();
    assert_eq!(labels, EXPECTED);
    let deployment = &docs[13];
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/hawser:test");
    assert_eq!(
        container["args"],
        serde_json::json!(["server", "--default-backup-ttl=48h0m0s"])
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "velero"
    );
    let binding = &docs[9];
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    assert_eq!(binding["subjects"][0]["namespace"], "velero");
    // One server at a time: the old Pod stops (and releases the Lease) before the new starts,
    // with time to finish its work; probes on the metrics port; the Leases it elects on.
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 90);
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let role = &docs[10];
    assert_eq!(role["kind"], "Role");
    assert_eq!(role["metadata"]["namespace"], "velero");
    assert_eq!(
        role["rules"][0]["apiGroups"],
        serde_json::json!(["coordination.k8s.io"])
    );
    assert_eq!(role["rules"][0]["resources"], serde_json::json!(["leases"]));
    for verb in ["get", "create", "update", "patch", "delete"] {
        assert!(
            role["rules"][0]["verbs"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(verb)),
            "{verb} missing from {role:#}"
        );
    }
    let role_binding = &docs[11];
    assert_eq!(role_binding["roleRef"]["kind"], "Role");
    assert_eq!(role_binding["roleRef"]["name"], "hawser-leader-election");
    assert_eq!(role_binding["subjects"][0]["name"], "velero");
    assert_eq!(role_binding["subjects"][0]["namespace"], "velero");
    let bsl = &docs[14]["spec"];
    assert_eq!(bsl["objectStorage"]["prefix"], "cluster-a");
    assert_eq!(bsl["config"]["region"], "eu-west-1");
    assert_eq!(bsl["credential"]["key"], "cloud");
    assert_eq!(
        cluster.sim.last_request_seq(),
        before,
        "dry run sent requests"
    );

    let run = cluster
        .hawser(&["install", "--dry-run", "-o", "json", "-n", "backups"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    let labels: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(label)
        .collect();
    assert_eq!(labels.len(), 13, "{labels:?}");
    assert!(labels.contains(&"Namespace/backups".to_owned()));
    assert!(labels.contains(&"ClusterRoleBinding/velero-backups".to_owned()));
    assert!(labels.contains(&"RoleBinding/hawser-leader-election".to_owned()));
    assert!(
        !labels
            .iter()
            .any(|l| l.starts_with("Secret/") || l.starts_with("BackupStorage"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_creates_everything_and_a_second_install_changes_nothing() {
    let cluster = Cluster::empty().await;
    let secret = secret_file(&cluster);
    let args = install_args(&secret);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = cluster.hawser(&args).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    for expected in EXPECTED {
        assert!(
            run.stdout.contains(&format!("{expected}: created")),
            "{expected}: {}",
            run.stdout
        );
    }
    let store = cluster.sim.store();
    let crd = store
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "backups.velero.io",
        )
        .expect("CRD created");
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert!(store.get("v1", "Namespace", "", "velero").is_some());
    assert!(
        store
            .get("v1", "ServiceAccount", "velero", "velero")
            .is_some()
    );
    assert!(
        store
            .get(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "",
                "velero"
            )
            .is_some()
    );
    let secret = store
        .get("v1", "Secret", "velero", "cloud-credentials")
        .unwrap();
    assert!(secret["data"]["cloud"].is_string());
    let deployment = store
        .get("apps/v1", "Deployment", "velero", "velero")
        .unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/hawser:test"
    );
    let bsl = cluster
        .get("velero.io/v1", "BackupStorageLocation", "default")
        .unwrap();
    assert_eq!(bsl["spec"]["objectStorage"]["bucket"], "backups");
    assert_eq!(bsl["spec"]["default"], true);

    let run = cluster.hawser(&args).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    for expected in EXPECTED {
        assert!(
            run.stdout.contains(&format!("{expected}: unchanged")),
            "{expected}: {}",
            run.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_install_flags_exit_2_before_touching_the_cluster() {
    let cluster = Cluster::empty().await;
    let before = cluster.sim.last_request_seq();
    let cases: [(&[&str], &str); 5] = [
        (&["--provider", "aws"], "--bucket"),
        (&["--bucket", "b"], "--provider"),
        (&["--provider", "aws", "--bucket", "b/c"], "--prefix"),
        (&["--default-backup-ttl", "forever"], "--default-backup-ttl"),
        (&["-o", "yaml"], "--dry-run"),
    ];
    for (extra, said) in cases {
        let args: Vec<&str> = ["install"].iter().chain(extra).copied().collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    }
    let run = cluster
        .hawser(&["install", "--secret-file", "/nonexistent/credentials"])
        .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("could not read /nonexistent/credentials"),
        "{}",
        run.stderr
    );
    assert_eq!(cluster.sim.last_request_seq(), before);
}
