//! `hawser restore create|get|describe`, run as a process against kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use std::time::Duration;

use cli_support::{Cluster, ctrl_c_at_terminal, finished};
use serde_json::{Value, json};

const RESTORE: (&str, &str) = ("velero.io/v1", "Restore");

fn spec_keys(spec: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = spec
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sends_exactly_the_fields_of_the_flags() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    let run = cluster
        .hawser(&[
            "restore",
            "create",
            "r1",
            "--from-backup",
            "nightly",
            "--include-namespaces",
            "shop,db",
            "--exclude-namespaces",
            "db",
            "--include-resources",
            "deployments,services",
            "--exclude-resources",
            "secrets",
            "--include-cluster-resources=false",
            "--or-selector",
            "app=web or app=api",
            "--namespace-mappings",
            "shop:shop-copy,db:db-copy",
            "--existing-resource-policy",
            "update",
            "--status-include-resources",
            "deployments",
            "--status-exclude-resources",
            "pods",
            "--preserve-nodeports",
            "--restore-volumes=false",
            "--resource-modifier-configmap",
            "move-to-new-registry",
            "--labels",
            "why=drill",
            "--annotations",
            "ticket=42",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.stdout.contains("\"r1\" submitted"), "{}", run.stdout);
    let restore = cluster.get(RESTORE.0, RESTORE.1, "r1").expect("created");
    let spec = &restore["spec"];
    assert_eq!(
        spec_keys(spec),
        [
            "backupName",
            "excludedNamespaces",
            "excludedResources",
            "existingResourcePolicy",
            "includeClusterResources",
            "includedNamespaces",
            "includedResources",
            "namespaceMapping",
            "orLabelSelectors",
            "preserveNodePorts",
            "resourceModifier",
            "restorePVs",
            "restoreStatus",
        ]
    );
    assert_eq!(spec["backupName"], "nightly");
    assert_eq!(spec["includedNamespaces"], json!(["shop", "db"]));
    assert_eq!(spec["excludedNamespaces"], json!(["db"]));
    assert_eq!(
        spec["includedResources"],
        json!(["deployments", "services"])
    );
    assert_eq!(spec["excludedResources"], json!(["secrets"]));
    assert_eq!(spec["includeClusterResources"], false);
    assert_eq!(
        spec["orLabelSelectors"],
        json!([{"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "api"}}])
    );
    assert_eq!(
        spec["namespaceMapping"],
        json!({"shop": "shop-copy", "db": "db-copy"})
    );
    assert_eq!(spec["existingResourcePolicy"], "update");
    assert_eq!(
        spec["restoreStatus"],
        json!({"includedResources": ["deployments"], "excludedResources": ["pods"]})
    );
    assert_eq!(spec["preserveNodePorts"], true);
    assert_eq!(spec["restorePVs"], false);
    assert_eq!(
        spec["resourceModifier"],
        json!({"apiGroup": "", "kind": "configmap", "name": "move-to-new-registry"})
    );
    let described = cluster.hawser(&["restore", "describe", "r1"]).await;
    assert!(
        described
            .stdout
            .contains("Resource modifier:\n  Type:  configmap\n  Name:  move-to-new-registry"),
        "{}",
        described.stdout
    );
    assert_eq!(restore["metadata"]["labels"]["why"], "drill");
    assert_eq!(restore["metadata"]["annotations"]["ticket"], "42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_name_the_restore_is_named_after_the_backup_and_the_time() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    let run = cluster
        .hawser(&["restore", "create", "--from-backup", "nightly"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let restores = cluster
        .store()
        .list(RESTORE.0, RESTORE.1, Some(cli_support::NS));
    assert_eq!(restores.len(), 1);
    let name = restores[0]["metadata"]["name"].as_str().unwrap();
    let stamp = name.strip_prefix("nightly-").expect(name);
    assert_eq!(stamp.len(), 14, "{name}");
    assert!(stamp.chars().all(|c| c.is_ascii_digit()), "{name}");
    // Only what was asked for: the backup and the default namespace filter.
    assert_eq!(
        spec_keys(&restores[0]["spec"]),
        ["backupName", "includedNamespaces"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_clearly_and_creates_nothing() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    // (arguments after `restore create x`, exit code, what stderr must say)
    let cases: [(&[&str], i32, &[&str]); 7] = [
        (
            &["--from-backup", "missing"],
            1,
            &["Backup velero/missing not found", "hawser backup get"],
        ),
        (
            &["--from-backup", "nightly", "--namespace-mappings", "a-b"],
            2,
            &["--namespace-mappings", "source:target"],
        ),
        (
            &[
                "--from-backup",
                "nightly",
                "--namespace-mappings",
                "a:x,b:x",
            ],
            2,
            &["--namespace-mappings", "both map to"],
        ),
        (
            &[
                "--from-backup",
                "nightly",
                "--existing-resource-policy",
                "replace",
            ],
            2,
            &["--existing-resource-policy"],
        ),
        (
            &[
                "--from-backup",
                "nightly",
                "--status-exclude-resources",
                "pods",
            ],
            2,
            &["--status-include-resources"],
        ),
        (
            &[
                "--from-backup",
                "nightly",
                "-l",
                "a=b",
                "--or-selector",
                "c=d",
            ],
            2,
            &["--or-selector"],
        ),
        (&[], 2, &["--from-backup"]),
    ];
    for (extra, code, said) in cases {
        let args: Vec<&str> = ["restore", "create", "x"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        for words in said {
            assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        }
        assert_eq!(
            cluster.store().count(RESTORE.0, RESTORE.1),
            0,
            "{args:?} created a restore"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flag_prints_without_creating_or_needing_the_backup() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "restore",
            "create",
            "dry",
            "--from-backup",
            "b",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "Restore");
    assert_eq!(value["spec"]["backupName"], "b");
    assert_eq!(cluster.store().count(RESTORE.0, RESTORE.1), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_describe_show_backup_phase_and_counts() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    for name in ["r1", "r2"] {
        let run = cluster
            .hawser(&["restore", "create", name, "--from-backup", "nightly"])
            .await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    cluster.set_status(
        RESTORE.0,
        RESTORE.1,
        "r2",
        json!({
            "phase": "FailedValidation", "errors": 1, "warnings": 4,
            "validationErrors": ["backup nightly is still in progress"],
        }),
    );
    let run = cluster.hawser(&["restore", "get"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    for column in ["NAME", "BACKUP", "STATUS", "ERRORS", "WARNINGS", "CREATED"] {
        assert!(lines[0].contains(column), "{}", lines[0]);
    }
    assert!(lines[1].starts_with("r1 ") && lines[1].contains("New"));
    assert!(lines[2].contains("FailedValidation") && lines[2].contains("nightly"));

    // describe reads the messages of a restore with warnings or errors from its storage
    // location; without them (no server answers here) it reads nothing.
    cluster.set_status(
        RESTORE.0,
        RESTORE.1,
        "r2",
        json!({
            "phase": "FailedValidation",
            "validationErrors": ["backup nightly is still in progress"],
        }),
    );
    let run = cluster.hawser(&["restore", "describe", "r2"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    for expected in [
        "Phase:  FailedValidation\n",
        "Validation errors:  backup nightly is still in progress\n",
        "\nBackup:  nightly\n",
        "Restore PVs:  auto\n",
    ] {
        assert!(run.stdout.contains(expected), "{expected}: {}", run.stdout);
    }
    assert!(!run.stdout.contains("Warnings:"), "{}", run.stdout);
}

/// Ctrl-C typed at a terminal during a restore's `--wait` stops the waiting only (exit 130),
/// naming the phase read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_a_terminal_during_a_wait_stops_waiting_only() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    let child = cluster.spawn_on_terminal(&[
        "restore",
        "create",
        "rt",
        "--from-backup",
        "nightly",
        "--wait",
    ]);
    cluster.until_exists(RESTORE.0, RESTORE.1, "rt").await;
    cluster.set_status(
        RESTORE.0,
        RESTORE.1,
        "rt",
        json!({"phase": "InProgress", "progress": {"totalItems": 8, "itemsRestored": 2}}),
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let run = ctrl_c_at_terminal(child).await;
    assert_eq!(run.code, 130, "terminal: {}", run.stdout);
    assert!(
        run.stdout
            .contains("Restore rt: InProgress, 2 of 8 items restored")
            && run
                .stdout
                .contains("Stopped waiting: Restore rt was last seen InProgress"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("completed with status"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_the_restore_and_exits_3_when_partially_failed() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    let child = cluster.spawn(&["restore", "create", "rw", "--from-backup", "nightly", "-w"]);
    cluster.until_exists(RESTORE.0, RESTORE.1, "rw").await;
    cluster.set_status(
        RESTORE.0,
        RESTORE.1,
        "rw",
        json!({"phase": "InProgress", "progress": {"totalItems": 8, "itemsRestored": 2}}),
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    cluster.set_status(
        RESTORE.0,
        RESTORE.1,
        "rw",
        json!({"phase": "PartiallyFailed", "errors": 1,
               "progress": {"totalItems": 8, "itemsRestored": 7}}),
    );
    let run = finished(child).await;
    assert_eq!(run.code, 3, "stderr: {}", run.stderr);
    assert!(
        run.stderr
            .contains("Restore rw: InProgress, 2 of 8 items restored"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Restore rw: PartiallyFailed"),
        "{}",
        run.stderr
    );
}

/// `--from-schedule`, as Velero's: the Restore names the Schedule (`spec.scheduleName`) for the
/// server to pick its newest completed backup, and is named after it; the Schedule must exist;
/// one source is needed, not both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_schedule_names_the_schedule_for_the_server() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly-20261206000000");
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": "nightly", "namespace": cli_support::NS},
            "spec": {"schedule": "@daily", "template": {}}
        }))
        .unwrap();
    let run = cluster
        .hawser(&["restore", "create", "--from-schedule", "nightly"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let restores = cluster
        .store()
        .list(RESTORE.0, RESTORE.1, Some(cli_support::NS));
    assert_eq!(restores.len(), 1);
    let restore = &restores[0];
    assert!(
        restore["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("nightly-"),
        "{restore:#}"
    );
    assert_eq!(
        spec_keys(&restore["spec"]),
        ["includedNamespaces", "scheduleName"]
    );
    assert_eq!(restore["spec"]["scheduleName"], "nightly");

    for (args, code, said) in [
        (
            &["restore", "create", "r2", "--from-schedule", "weekly"][..],
            1,
            "Schedule velero/weekly not found",
        ),
        (&["restore", "create", "r3"][..], 2, "--from-schedule"),
        (
            &[
                "restore",
                "create",
                "r4",
                "--from-schedule",
                "nightly",
                "--from-backup",
                "x",
            ][..],
            2,
            "cannot be used with",
        ),
    ] {
        let run = cluster.hawser(args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    }
    assert_eq!(
        cluster
            .store()
            .list(RESTORE.0, RESTORE.1, Some(cli_support::NS))
            .len(),
        1
    );
}
