//! `hawser install`, run as a process: `--dry-run` output, and a real install into an empty
//! kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use cli_support::{Cluster, NS};
use serde::Deserialize;
use serde_json::Value;

/// Every CRD Velero installs, in install's order.
const CRDS: [&str; 13] = [
    "CustomResourceDefinition/backuprepositories.velero.io",
    "CustomResourceDefinition/backups.velero.io",
    "CustomResourceDefinition/backupstoragelocations.velero.io",
    "CustomResourceDefinition/datadownloads.velero.io",
    "CustomResourceDefinition/datauploads.velero.io",
    "CustomResourceDefinition/deletebackuprequests.velero.io",
    "CustomResourceDefinition/downloadrequests.velero.io",
    "CustomResourceDefinition/podvolumebackups.velero.io",
    "CustomResourceDefinition/podvolumerestores.velero.io",
    "CustomResourceDefinition/restores.velero.io",
    "CustomResourceDefinition/schedules.velero.io",
    "CustomResourceDefinition/serverstatusrequests.velero.io",
    "CustomResourceDefinition/volumesnapshotlocations.velero.io",
];

/// `Kind/name` of every object install makes with a location and a credentials file, after the
/// CRDs, in order.
const EXPECTED: [&str; 8] = [
    "Namespace/velero",
    "ServiceAccount/velero",
    "ClusterRoleBinding/velero",
    "Role/hawser-leader-election",
    "RoleBinding/hawser-leader-election",
    "Secret/cloud-credentials",
    "Deployment/velero",
    "BackupStorageLocation/default",
];

/// Every object of a full install, in order.
fn expected() -> Vec<&'static str> {
    CRDS.iter().chain(&EXPECTED).copied().collect()
}

/// The object `Kind/name` of a list of objects.
fn find<'a>(docs: &'a [Value], wanted: &str) -> &'a Value {
    docs.iter()
        .find(|d| label(d) == wanted)
        .unwrap_or_else(|| panic!("no {wanted}"))
}

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
    assert_eq!(labels, expected());
    let deployment = find(&docs, "Deployment/velero");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/hawser:test");
    // With a credentials Secret, locations naming none do not borrow the server's identity.
    assert_eq!(
        container["args"],
        serde_json::json!([
            "server",
            "--default-backup-ttl=48h0m0s",
            "--allow-ambient-credentials=false"
        ])
    );
    // The Secret names the location it is for.
    let secret = find(&docs, "Secret/cloud-credentials");
    assert_eq!(
        secret["metadata"]["annotations"]["hawser.io/locations"],
        "default"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "velero"
    );
    let binding = find(&docs, "ClusterRoleBinding/velero");
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    assert_restricted(deployment);
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
    let role = find(&docs, "Role/hawser-leader-election");
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
    let role_binding = find(&docs, "RoleBinding/hawser-leader-election");
    assert_eq!(role_binding["roleRef"]["kind"], "Role");
    assert_eq!(role_binding["roleRef"]["name"], "hawser-leader-election");
    assert_eq!(role_binding["subjects"][0]["name"], "velero");
    assert_eq!(role_binding["subjects"][0]["namespace"], "velero");
    let bsl = &find(&docs, "BackupStorageLocation/default")["spec"];
    assert_eq!(bsl["objectStorage"]["prefix"], "cluster-a");
    assert_eq!(bsl["config"]["region"], "eu-west-1");
    assert_eq!(bsl["credential"]["key"], "cloud");
    assert_eq!(
        cluster.sim.last_request_seq(),
        before,
        "dry run sent requests"
    );

    let run = cluster
        .hawser(&[
            "install",
            "--no-default-backup-location",
            "--dry-run",
            "-o",
            "json",
            "-n",
            "backups",
        ])
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
    assert_eq!(labels.len(), CRDS.len() + 6, "{labels:?}");
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
    for expected in expected() {
        assert!(
            run.stdout.contains(&format!("{expected}: created")),
            "{expected}: {}",
            run.stdout
        );
    }
    let store = cluster.store();
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
    for expected in expected() {
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
    let cases: [(&[&str], &str); 9] = [
        (&["--provider", "aws"], "--bucket"),
        (&["--wait", "true"], "true"),
        (&["--pod-labels", "team"], "--pod-labels"),
        (
            &["--pod-volume-operation-timeout=4 hours"],
            "--pod-volume-operation-timeout",
        ),
        (&["--bucket", "b"], "--provider"),
        (&["--provider", "aws", "--bucket", "b/c"], "--prefix"),
        (&["--default-backup-ttl", "forever"], "--default-backup-ttl"),
        (&["-o", "yaml"], "--dry-run"),
        (&[], "--no-default-backup-location"),
    ];
    for (extra, said) in cases {
        let mut args = vec!["install"];
        // The cases about other flags name no location, and say so.
        if !extra.is_empty() && !extra.contains(&"--provider") && !extra.contains(&"--bucket") {
            args.push("--no-default-backup-location");
        }
        args.extend_from_slice(extra);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn velero_install_flags_are_honoured_or_reported() {
    let cluster = Cluster::empty().await;
    let secret = secret_file(&cluster);
    let ca = cluster.dir().join("ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let (docs, stderr) = cluster
        .install_dry_run(&[
            "--provider",
            "aws",
            "--plugins",
            "velero/velero-plugin-for-aws:v1.12.0",
            "--bucket",
            "backups",
            "--secret-file",
            &secret,
            "--no-secret",
            "--cacert",
            ca.to_str().unwrap(),
            "--backup-location-config",
            "region=eu-west-1",
            "--snapshot-location-config",
            "region=eu-west-1",
            "--use-volume-snapshots=false",
            "--use-node-agent",
            "--features=EnableCSI",
            "--uploader-type=kopia",
            "--pod-annotations",
            "iam.amazonaws.com/role=backup,prometheus.io/port=9000",
            "--pod-labels",
            "team=storage,deploy=other",
            "--velero-pod-cpu-request=1",
            "--velero-pod-mem-limit=0",
            "--service-account-name=backup-runner",
            "--server-priority-class-name=critical",
            "--schedule-skip-immediately",
            "--restore-only",
            "--garbage-collection-frequency=2h",
            "--concurrent-backups=3",
            "--wait=false",
            "--apply",
        ])
        .await;

    // Flags hawser has no use for: one warning each, none for the others.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    let ignored = [
        "--plugins=velero/velero-plugin-for-aws:v1.12.0",
        "--use-node-agent=true",
        "--use-volume-snapshots=false",
        "--snapshot-location-config=region=eu-west-1",
        "--uploader-type=kopia",
    ];
    assert_eq!(warnings.len(), ignored.len(), "{stderr}");
    for flag in ignored {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(flag) && w.contains("no effect")),
            "{flag}: {stderr}"
        );
    }

    let labels: Vec<String> = docs.iter().map(label).collect();
    // An existing ServiceAccount: none created and none bound to cluster-admin; no Secret.
    for absent in ["ServiceAccount/", "ClusterRoleBinding/", "Secret/"] {
        assert!(
            !labels.iter().any(|l| l.starts_with(absent)),
            "{absent}: {labels:?}"
        );
    }
    let role_binding = find(&docs, "RoleBinding/hawser-leader-election");
    assert_eq!(role_binding["subjects"][0]["name"], "backup-runner");

    let deployment = find(&docs, "Deployment/velero");
    let template = &deployment["spec"]["template"];
    let pod = &template["spec"];
    assert_eq!(pod["serviceAccountName"], "backup-runner");
    assert_eq!(pod["priorityClassName"], "critical");
    assert_eq!(
        template["metadata"]["annotations"],
        serde_json::json!({
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9000",
            "prometheus.io/path": "/metrics",
            "iam.amazonaws.com/role": "backup",
        })
    );
    // The Deployment selects on `deploy: velero`; a label given for it does not win.
    assert_eq!(
        template["metadata"]["labels"],
        serde_json::json!({"component": "velero", "deploy": "velero", "team": "storage"})
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["resources"],
        serde_json::json!({
            "requests": {"cpu": "1", "memory": "128Mi"},
            "limits": {"cpu": "1000m"},
        })
    );
    assert_eq!(
        container["args"],
        serde_json::json!([
            "server",
            "--garbage-collection-frequency=2h0m0s",
            "--concurrent-backups=3",
            "--schedule-skip-immediately=true",
            "--restore-only",
            // Velero's install passes its --features on to the server.
            "--features=EnableCSI"
        ])
    );
    // No credentials mounted: the scratch directory (TMPDIR) only.
    assert_eq!(
        container["volumeMounts"],
        serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}]),
        "{container:#}"
    );

    let bsl = &find(&docs, "BackupStorageLocation/default")["spec"];
    assert!(bsl.get("credential").is_none(), "{bsl:#}");
    // base64 of the file.
    assert_eq!(
        bsl["objectStorage"]["caCert"],
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    );

    // Velero's defaults: the scrape annotations on port 8085, its requests and limits.
    let (docs, stderr) = cluster.install_dry_run(&[]).await;
    assert_eq!(stderr, "");
    let template = &find(&docs, "Deployment/velero")["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"]["prometheus.io/port"],
        "8085"
    );
    assert_eq!(
        template["spec"]["containers"][0]["resources"],
        serde_json::json!({
            "requests": {"cpu": "500m", "memory": "128Mi"},
            "limits": {"cpu": "1000m", "memory": "512Mi"},
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_only_and_no_default_backup_location() {
    let cluster = Cluster::empty().await;
    let (docs, _) = cluster.install_dry_run(&["--crds-only"]).await;
    let labels: Vec<String> = docs.iter().map(label).collect();
    assert_eq!(labels, CRDS);

    let (docs, _) = cluster
        .install_dry_run(&[
            "--provider",
            "aws",
            "--bucket",
            "b",
            "--no-default-backup-location",
        ])
        .await;
    assert!(
        !docs.iter().any(|d| d["kind"] == "BackupStorageLocation"),
        "{docs:#?}"
    );

    let run = cluster.hawser(&["install", "--crds-only=true"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    for crd in CRDS {
        assert!(
            run.stdout.contains(&format!("{crd}: created")),
            "{}",
            run.stdout
        );
    }
    assert!(
        cluster
            .store()
            .get("apps/v1", "Deployment", "velero", "velero")
            .is_none()
    );
    assert!(
        cluster
            .store()
            .get("v1", "Namespace", "", "velero")
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_once_the_deployment_has_a_ready_pod() {
    let cluster = Cluster::empty().await;
    let child = cluster.spawn(&["install", "--wait", "--no-default-backup-location"]);
    let deployment = cluster
        .until_exists("apps/v1", "Deployment", "velero")
        .await;
    // Deployments have a status subresource: written as the Deployment controller writes it.
    let set_status = |status: Value| {
        let mut object = deployment.clone();
        object["status"] = status;
        cluster.store().set_status(&object).unwrap();
    };
    // Not ready yet: install keeps waiting.
    set_status(serde_json::json!({"replicas": 1, "readyReplicas": 0}));
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let generation = deployment["metadata"]["generation"].clone();
    set_status(serde_json::json!({
        "replicas": 1, "readyReplicas": 1, "observedGeneration": generation
    }));
    let run = cli_support::finished(child).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("Waiting for the hawser Deployment to be ready."),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("hawser is installed"), "{}", run.stdout);
}

/// The Pod runs as a non-root user with a read-only root filesystem, no privilege escalation,
/// no capabilities and the runtime's seccomp profile.
fn assert_restricted(deployment: &Value) {
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0]["securityContext"];
    assert_eq!(
        container,
        &serde_json::json!({
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}
        })
    );
}

/// Whether one RBAC rule grants `verb` on `group`/`resource` (`resource/subresource`).
fn grants(rule: &Value, verb: &str, group: &str, resource: &str) -> bool {
    let has = |field: &str, wanted: &str| {
        rule[field]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i == "*" || i == wanted))
    };
    has("verbs", verb) && has("apiGroups", group) && has("resources", resource)
}

fn rules(object: &Value) -> Vec<Value> {
    object["rules"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_minimal_replaces_cluster_admin_and_keeps_secrets_in_the_namespace() {
    let cluster = Cluster::empty().await;
    let run = cluster
        .hawser(&[
            "install",
            "--rbac",
            "minimal",
            "--no-default-backup-location",
            "--dry-run",
            "-o",
            "yaml",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&run.stdout)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect();
    let labels: Vec<String> = docs.iter().map(label).collect();
    let after_crds: Vec<&str> = labels[CRDS.len()..].iter().map(String::as_str).collect();
    assert_eq!(
        after_crds,
        [
            "Namespace/velero",
            "ServiceAccount/velero",
            "ClusterRole/velero",
            "ClusterRoleBinding/velero",
            "Role/hawser-server",
            "RoleBinding/hawser-server",
            "Role/hawser-leader-election",
            "RoleBinding/hawser-leader-election",
            "Deployment/velero",
        ]
    );
    assert_restricted(find(&docs, "Deployment/velero"));
    let binding = find(&docs, "ClusterRoleBinding/velero");
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], "velero");
    assert_eq!(binding["subjects"][0]["name"], "velero");
    let cluster_rules = rules(find(&docs, "ClusterRole/velero"));
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ] {
        assert!(
            !cluster_rules.iter().any(|r| grants(r, verb, "", "secrets")),
            "{verb} secrets cluster-wide"
        );
    }
    assert!(
        !cluster_rules
            .iter()
            .any(|r| grants(r, "delete", "apps", "deployments")),
        "restores create and update, they do not delete"
    );
    for (verb, group, resource) in [
        ("list", "", "configmaps"),
        ("watch", "apps", "deployments"),
        ("create", "", "namespaces"),
        ("patch", "apps", "deployments"),
        ("get", "apiextensions.k8s.io", "customresourcedefinitions"),
        // A CSI backup deletes its VolumeSnapshots, and its deletion the contents it kept.
        ("delete", "snapshot.storage.k8s.io", "volumesnapshots"),
        (
            "delete",
            "snapshot.storage.k8s.io",
            "volumesnapshotcontents",
        ),
    ] {
        assert!(
            cluster_rules
                .iter()
                .any(|r| grants(r, verb, group, resource)),
            "{verb} {group}/{resource}"
        );
    }
    let role = find(&docs, "Role/hawser-server");
    assert_eq!(role["metadata"]["namespace"], "velero");
    assert!(rules(role).iter().any(|r| grants(r, "get", "", "secrets")));
    assert!(
        !rules(role)
            .iter()
            .any(|r| grants(r, "create", "", "secrets"))
    );
}

/// The minimal rules allow every request the server makes while it backs up, restores and
/// deletes, except the Secrets outside its namespace, which that mode does not grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_minimal_grants_what_the_server_calls() {
    use server_support::{
        FAST, Server, create_backup, filesystem_location, phase, request_deletion, seed,
        until_gone, wait_final,
    };
    let cluster = Cluster::start().await;
    let (docs, _) = cluster.install_dry_run(&["--rbac", "minimal"]).await;
    let cluster_rules = rules(find(&docs, "ClusterRole/velero"));
    let namespace_rules: Vec<Value> = ["Role/hawser-server", "Role/hawser-leader-election"]
        .iter()
        .flat_map(|role| rules(find(&docs, role)))
        .collect();

    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 2);
    filesystem_location(&cluster, "default", root.path());
    cluster.sim.clear_requests();
    let server = Server::start(&cluster, root.path(), FAST).await;
    create_backup(
        &cluster,
        "b1",
        serde_json::json!({"includedNamespaces": ["shop"]}),
    );
    let done = wait_final(&cluster, &server, "Backup", "b1").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    cluster
        .store()
        .insert(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "r1", "namespace": NS},
            "spec": {"backupName": "b1", "namespaceMapping": {"shop": "shop-copy"}}
        }))
        .unwrap();
    let restored = wait_final(&cluster, &server, "Restore", "r1").await;
    assert_eq!(phase(&restored), "Completed", "{restored:#}");
    request_deletion(&cluster, "d1", "b1");
    until_gone(&cluster, &server, "Backup", "b1").await;

    let requests = cluster.sim.requests();
    let mut denied: Vec<String> = requests
        .iter()
        .filter(|r| !r.resource.is_empty())
        .filter(|r| {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let granted = |rules: &[Value]| {
                rules
                    .iter()
                    .any(|rule| grants(rule, &r.verb, &r.group, &resource))
            };
            !(granted(&cluster_rules) || (r.namespace == NS && granted(&namespace_rules)))
        })
        .map(|r| format!("{} {}/{} in {:?}", r.verb, r.group, r.resource, r.namespace))
        .collect();
    denied.sort();
    denied.dedup();
    assert!(requests.len() > 50, "the server's requests were logged");
    assert!(
        denied
            .iter()
            .all(|d| d.contains(" /secrets in ") && !d.ends_with(&format!("{NS:?}"))),
        "requests the minimal rules do not grant: {denied:#?}"
    );
}

#[test]
fn output_into_a_pipe_closed_early_ends_quietly() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("credentials");
    std::fs::write(&secret, "[default]\naws_access_key_id=x\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
        .args([
            "install",
            "--dry-run",
            "-o",
            "yaml",
            "--provider",
            "aws",
            "--bucket",
            "b",
        ])
        .args(["--backup-location-config", "region=x", "--secret-file"])
        .arg(&secret)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, as `| head -1` does, and close the pipe.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "apiVersion: apiextensions.k8s.io/v1\n");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// `hawser uninstall` removes what install made, releases the Restores the server holds with
/// its finalizer so that the namespace can go, and waits for the namespace; without `--force`
/// it asks first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_removes_the_installation_and_releases_restores() {
    let cluster = Cluster::empty().await;
    let run = cluster
        .hawser(&["install", "--no-default-backup-location"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    cluster.until_crds_served().await;
    let store = cluster.store();
    // A Restore the server ran: it carries the server's finalizer.
    store
        .insert(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "held", "namespace": NS,
                         "finalizers": ["restores.velero.io/external-resources-finalizer"]},
            "spec": {"backupName": "b"}
        }))
        .unwrap();

    let run = cluster.hawser_with_input(&["uninstall"], "n\n").await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        store
            .get("v1", "Namespace", "", NS)
            .is_some_and(|n| n["metadata"].get("deletionTimestamp").is_none())
    );

    let run = cluster
        .hawser(&["uninstall", "--force", "--timeout", "30s"])
        .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("hawser uninstalled"), "{}", run.stdout);
    assert!(store.get("v1", "Namespace", "", NS).is_none());
    assert!(
        store
            .get(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "",
                "velero"
            )
            .is_none()
    );
    for crd in hawser_api::crd::crds() {
        let name = crd.metadata.name.clone().unwrap();
        assert!(
            store
                .get(
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinition",
                    "",
                    &name
                )
                .is_none(),
            "{name}"
        );
    }
    // Again: nothing left, nothing fails.
    let run = cluster.hawser(&["uninstall", "--force"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// Every command that prints ends quietly (exit 141, the code of a program stopped by
/// SIGPIPE, and no panic) when its reader has gone before it writes, as `| head -0` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_printing_command_ends_quietly_on_a_closed_pipe() {
    let cluster = Cluster::start().await;
    cluster.add_location("default");
    cluster.add_backup("nightly");
    // A backup still running: its description asks the storage location for nothing (no server
    // answers here).
    cluster.add_backup("running");
    cluster.set_status(
        "velero.io/v1",
        "Backup",
        "running",
        serde_json::json!({"phase": "InProgress"}),
    );
    let commands: [&[&str]; 12] = [
        &["version", "--client-only"],
        &["completion", "bash"],
        &[
            "install",
            "--no-default-backup-location",
            "--dry-run",
            "-o",
            "yaml",
        ],
        &["backup", "get"],
        &["backup", "get", "-o", "yaml"],
        &["backup", "describe", "running"],
        &["backup", "create", "preview", "-o", "json"],
        &["restore", "get"],
        &[
            "restore",
            "create",
            "r",
            "--from-backup",
            "nightly",
            "-o",
            "yaml",
        ],
        &["schedule", "get"],
        &["backup-location", "get"],
        &["backup-location", "get", "-o", "json"],
    ];
    for args in commands {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args(args)
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env_remove("VELERO_NAMESPACE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes before the command has written anything.
        drop(child.stdout.take());
        let out =
            tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
                .await
                .expect("ends in time")
                .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
    }
}

/// Velero's `plugin add|remove` take Velero's arguments and are refused (exit 2) before any
/// request: hawser loads no plugin images, and says what it has built in instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_add_and_remove_are_refused_and_change_nothing() {
    let cluster = Cluster::empty().await;
    let before = cluster.sim.last_request_seq();
    for args in [
        &["plugin", "add", "velero/velero-plugin-for-aws:v1.14.3"][..],
        &[
            "plugin",
            "remove",
            "velero/velero-plugin-for-aws",
            "--image-pull-policy",
            "Always",
        ][..],
    ] {
        let run = cluster.hawser(args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr
                .starts_with("error: hawser runs no plugins, so `plugin ")
                && run.stderr.contains("velero.io/aws")
                && run.stderr.contains("hint: `hawser plugin get`"),
            "{}",
            run.stderr
        );
    }
    assert!(
        cluster.sim.requests_since(before).is_empty(),
        "nothing was asked of the API server"
    );
}
