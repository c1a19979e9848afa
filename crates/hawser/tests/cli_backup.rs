//! `hawser backup create|get|describe`, run as a process against kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use std::time::Duration;

use cli_support::{Cluster, ctrl_c_at_terminal, finished};
use serde_json::{Value, json};

const BACKUP: (&str, &str) = ("velero.io/v1", "Backup");
const RESTORE_KIND: (&str, &str) = ("velero.io/v1", "Restore");

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
async fn create_with_the_old_filters_sends_exactly_those_fields() {
    let cluster = Cluster::start().await;
    cluster.add_location("primary");
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "b1",
            "--include-namespaces",
            "app-*,db",
            "--exclude-namespaces",
            "db-scratch",
            "--include-resources",
            "deployments.apps,configmaps",
            "--exclude-resources",
            "secrets",
            "--include-cluster-resources=false",
            "-l",
            "app=web,tier in (front,back)",
            "--ttl",
            "36h",
            "--storage-location",
            "primary",
            "--labels",
            "team=a",
            "--annotations",
            "note=nightly",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.stdout.contains("\"b1\" submitted"), "{}", run.stdout);
    let backup = cluster
        .get(BACKUP.0, BACKUP.1, "b1")
        .expect("backup created");
    let spec = &backup["spec"];
    assert_eq!(
        spec_keys(spec),
        [
            "excludedNamespaces",
            "excludedResources",
            "includeClusterResources",
            "includedNamespaces",
            "includedResources",
            "labelSelector",
            "storageLocation",
            "ttl",
        ]
    );
    assert_eq!(spec["includedNamespaces"], json!(["app-*", "db"]));
    assert_eq!(spec["excludedNamespaces"], json!(["db-scratch"]));
    assert_eq!(
        spec["includedResources"],
        json!(["deployments.apps", "configmaps"])
    );
    assert_eq!(spec["excludedResources"], json!(["secrets"]));
    assert_eq!(spec["includeClusterResources"], false);
    assert_eq!(
        spec["labelSelector"],
        json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]}
        ]})
    );
    assert_eq!(spec["ttl"], "36h0m0s");
    assert_eq!(spec["storageLocation"], "primary");
    assert_eq!(backup["metadata"]["labels"]["team"], "a");
    assert_eq!(backup["metadata"]["annotations"]["note"], "nightly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_the_new_filters_leaves_unset_fields_absent() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "b2",
            "--include-cluster-scoped-resources",
            "persistentvolumes,storageclasses",
            "--exclude-cluster-scoped-resources",
            "nodes",
            "--include-namespace-scoped-resources",
            "*",
            "--exclude-namespace-scoped-resources",
            "events",
            "--or-selector",
            "a=b or c=d",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let spec = cluster.get(BACKUP.0, BACKUP.1, "b2").unwrap()["spec"].clone();
    assert_eq!(
        spec_keys(&spec),
        [
            "excludedClusterScopedResources",
            "excludedNamespaceScopedResources",
            "includedClusterScopedResources",
            "includedNamespaceScopedResources",
            "includedNamespaces",
            "orLabelSelectors",
        ]
    );
    assert_eq!(spec["includedNamespaces"], json!(["*"]));
    assert_eq!(
        spec["includedClusterScopedResources"],
        json!(["persistentvolumes", "storageclasses"])
    );
    assert_eq!(spec["excludedClusterScopedResources"], json!(["nodes"]));
    assert_eq!(spec["includedNamespaceScopedResources"], json!(["*"]));
    assert_eq!(spec["excludedNamespaceScopedResources"], json!(["events"]));
    assert_eq!(
        spec["orLabelSelectors"],
        json!([{"matchLabels": {"a": "b"}}, {"matchLabels": {"c": "d"}}])
    );

    // The bare flag means true.
    let run = cluster
        .hawser(&["backup", "create", "--include-cluster-resources", "b3"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let spec = cluster.get(BACKUP.0, BACKUP.1, "b3").unwrap()["spec"].clone();
    assert_eq!(spec["includeClusterResources"], true);

    // The volume flags, and the resource policies.
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "b4",
            "--snapshot-volumes=false",
            "--csi-snapshot-timeout",
            "90s",
            "--item-operation-timeout",
            "2h",
            "--resource-policies-configmap",
            "skip-nfs",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let spec = cluster.get(BACKUP.0, BACKUP.1, "b4").unwrap()["spec"].clone();
    assert_eq!(
        spec["resourcePolicy"],
        json!({"apiGroup": "", "kind": "configmap", "name": "skip-nfs"})
    );
    assert_eq!(spec["snapshotVolumes"], false);
    assert_eq!(spec["csiSnapshotTimeout"], "1m30s");
    assert_eq!(spec["itemOperationTimeout"], "2h0m0s");
    let described = cluster.hawser(&["backup", "describe", "b4"]).await;
    for line in [
        "Resource policies:\n  Type:  configmap\n  Name:  skip-nfs",
        "Velero-Native Snapshot PVs:  false",
        "CSISnapshotTimeout:    1m30s",
        "ItemOperationTimeout:  2h0m0s",
    ] {
        assert!(
            described.stdout.contains(line),
            "{line}: {}",
            described.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_clearly_and_creates_nothing() {
    let cluster = Cluster::start().await;
    // (extra arguments, exit code, what stderr must say)
    let cases: [(&[&str], i32, &[&str]); 8] = [
        (
            &["--storage-location", "nowhere"],
            1,
            &[
                "BackupStorageLocation velero/nowhere not found",
                "hint:",
                "hawser backup-location create nowhere",
            ],
        ),
        (&["--ttl", "a week"], 2, &["--ttl", "duration"]),
        (&["--ttl=-1h"], 2, &["--ttl", "negative"]),
        (
            &["--item-operation-timeout", "4 hours"],
            2,
            &["--item-operation-timeout", "duration"],
        ),
        (
            &[
                "--include-resources",
                "pods",
                "--include-cluster-scoped-resources",
                "nodes",
            ],
            2,
            &["cannot be combined", "--include-resources"],
        ),
        (
            &["-l", "a=b", "--or-selector", "c=d or e=f"],
            2,
            &["--or-selector", "--selector"],
        ),
        (&["-l", "a in (x"], 2, &["--selector", "unclosed"]),
        (&["--labels", "novalue"], 2, &["--labels", "key=value"]),
    ];
    for (extra, code, said) in cases {
        let args: Vec<&str> = ["backup", "create", "x"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        for words in said {
            assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        }
        assert!(
            cluster.get(BACKUP.0, BACKUP.1, "x").is_none(),
            "{args:?} created x"
        );
    }
}

/// A selector `create` refuses is refused by the commands that list with one too, with the same
/// message and before any request (Kubernetes' grammar everywhere, as Velero's CLI); `get` and
/// `describe` also take the list grammar's `<`/`>` and an empty selector, as Velero's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_commands_refuse_the_selectors_create_refuses() {
    let cluster = Cluster::start().await;
    cluster.add_backup("nightly");
    // Still running: its description reads nothing from a storage location (no server here).
    cluster.set_status(
        BACKUP.0,
        BACKUP.1,
        "nightly",
        json!({"phase": "InProgress"}),
    );
    for bad in ["a in (x", "a=b,,c=d", "a=b,", "!"] {
        let created = cluster.hawser(&["backup", "create", "x", "-l", bad]).await;
        assert_eq!(created.code, 2, "{bad}: {}", created.stderr);
        let reason = created.stderr.lines().next().unwrap().to_owned();
        for command in [
            &["backup", "get", "-l", bad][..],
            &["backup", "describe", "-l", bad],
            &["backup", "delete", "-l", bad, "--confirm"],
            &["restore", "get", "-l", bad],
            &["schedule", "describe", "-l", bad],
            &["get", "backups", "-l", bad],
        ] {
            let before = cluster.sim.last_request_seq();
            let run = cluster.hawser(command).await;
            assert_eq!(run.code, 2, "{command:?}: {}", run.stderr);
            assert_eq!(
                run.stderr.lines().next(),
                Some(reason.as_str()),
                "{command:?}"
            );
            assert_eq!(
                cluster.sim.last_request_seq(),
                before,
                "{command:?} sent a request"
            );
        }
    }
    assert!(cluster.get(BACKUP.0, BACKUP.1, "nightly").is_some());
    // Good ones select; `<`/`>` and an empty selector list (not in a spec, not to delete).
    for (selector, listed) in [("app notin (web)", true), ("gen>1", false), ("", true)] {
        for command in [
            &["backup", "get", "-l", selector][..],
            &["backup", "describe", "-l", selector],
        ] {
            let run = cluster.hawser(command).await;
            assert_eq!(run.code, 0, "{command:?}: {}", run.stderr);
            assert_eq!(
                run.stdout.contains("nightly"),
                listed,
                "{command:?}: {}",
                run.stdout
            );
        }
    }
    for refused in [
        &["backup", "create", "x", "-l", "gen>1"][..],
        &["backup", "delete", "-l", "gen>1", "--confirm"],
        &["backup", "delete", "-l", "", "--confirm"],
        &["backup", "get", "-l", "gen>x"],
    ] {
        let run = cluster.hawser(refused).await;
        assert_eq!(run.code, 2, "{refused:?}: {}", run.stderr);
    }
    assert!(cluster.get(BACKUP.0, BACKUP.1, "nightly").is_some());
    // Velero's `describe -o json` is refused by name; `-o plaintext` is the text.
    let run = cluster
        .hawser(&["backup", "describe", "nightly", "-o", "json"])
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--output json asks for"),
        "{}",
        run.stderr
    );
    let run = cluster
        .hawser(&["backup", "describe", "-o", "plaintext", "-l", "none=here"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flag_prints_without_creating() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&["backup", "create", "dry", "--ttl", "1h", "-o", "yaml"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_yaml::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "Backup");
    assert_eq!(value["apiVersion"], "velero.io/v1");
    assert_eq!(value["metadata"]["namespace"], "velero");
    assert_eq!(value["spec"]["ttl"], "1h0m0s");
    assert!(cluster.get(BACKUP.0, BACKUP.1, "dry").is_none());

    // `-o table`, as Velero's: the `get` table of the object that was not created.
    for (command, header) in [
        (&["backup", "create", "dry", "-o", "table"][..], "NAME"),
        (
            &[
                "restore",
                "create",
                "dry",
                "--from-backup",
                "b",
                "-o",
                "table",
            ][..],
            "BACKUP",
        ),
        (
            &[
                "schedule",
                "create",
                "dry",
                "--schedule",
                "@daily",
                "-o",
                "table",
            ][..],
            "SCHEDULE",
        ),
        (
            &[
                "snapshot-location",
                "create",
                "dry",
                "--provider",
                "aws",
                "-o",
                "table",
            ][..],
            "PROVIDER",
        ),
    ] {
        let run = cluster.hawser(command).await;
        assert_eq!(run.code, 0, "{command:?}: {}", run.stderr);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{command:?}: {}", run.stdout);
        assert!(
            lines[0].starts_with("NAME") && lines[0].contains(header),
            "{command:?}: {}",
            run.stdout
        );
        assert!(lines[1].starts_with("dry "), "{command:?}: {}", run.stdout);
    }
    let created = cluster.store().list("velero.io/v1", "Backup", None).len()
        + cluster.store().list("velero.io/v1", "Restore", None).len()
        + cluster.store().list("velero.io/v1", "Schedule", None).len()
        + cluster
            .store()
            .list("velero.io/v1", "VolumeSnapshotLocation", None)
            .len();
    assert_eq!(created, 0, "nothing is created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_describe_show_phase_counts_and_filters() {
    let cluster = Cluster::start().await;
    for args in [
        &["backup", "create", "one", "-l", "app=web"][..],
        &[
            "backup",
            "create",
            "two",
            "--exclude-namespaces",
            "kube-system",
        ][..],
    ] {
        let run = cluster.hawser(args).await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    cluster.set_status(
        BACKUP.0,
        BACKUP.1,
        "two",
        json!({
            "phase": "PartiallyFailed", "errors": 2, "warnings": 5,
            "expiration": "2999-01-01T00:00:00Z",
            "failureReason": "one namespace could not be listed",
            "progress": {"totalItems": 12, "itemsBackedUp": 10},
        }),
    );

    let run = cluster.hawser(&["backup", "get"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    for column in [
        "NAME",
        "STATUS",
        "ERRORS",
        "WARNINGS",
        "CREATED",
        "EXPIRES",
        "STORAGE LOCATION",
        "QUEUE POSITION",
        "SELECTOR",
    ] {
        assert!(lines[0].contains(column), "{}", lines[0]);
    }
    let one: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(one[0], "one");
    assert_eq!(one[1], "New");
    assert_eq!(one.last(), Some(&"app=web"));
    let two: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&two[..4], ["two", "PartiallyFailed", "2", "5"]);
    // CREATED is the start, which this hand-made backup lacks: Velero's `<nil>`. EXPIRES
    // follows, in years as Velero rounds it (Kubernetes' short duration).
    assert_eq!(two[4], "<nil>", "{}", lines[2]);
    let expires = two[5];
    let years = expires.strip_suffix('y').expect(lines[2]);
    assert!(years.parse::<u64>().unwrap() > 900, "{}", lines[2]);

    let run = cluster
        .hawser(&["backup", "get", "two", "-o", "json"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(value["status"]["errors"], 2);

    let run = cluster
        .hawser(&["backup", "get", "one", "two", "-o", "yaml"])
        .await;
    let value: Value = serde_yaml::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "List");
    assert_eq!(value["items"].as_array().unwrap().len(), 2);

    let run = cluster.hawser(&["backup", "describe", "two"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    for expected in [
        "Phase:",
        "PartiallyFailed",
        "Errors:",
        "Warnings:",
        "Failure reason:  one namespace could not be listed",
        "Excluded:  kube-system",
        "Items backed up:",
    ] {
        assert!(run.stdout.contains(expected), "{expected}: {}", run.stdout);
    }

    let run = cluster.hawser(&["backup", "describe", "missing"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("Backup velero/missing not found"),
        "{}",
        run.stderr
    );

    // Velero's --show-labels: a last LABELS column, `key=value` sorted by key.
    let run = cluster
        .hawser(&["backup", "create", "three", "--labels", "team=shop,app=web"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let run = cluster
        .hawser(&["backup", "get", "three", "--show-labels"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].ends_with("   LABELS"), "{}", run.stdout);
    let labels = lines[1].split_whitespace().last().unwrap();
    let pairs: Vec<&str> = labels.split(',').collect();
    assert!(
        pairs.windows(2).all(|w| w[0] < w[1])
            && pairs.contains(&"app=web")
            && pairs.contains(&"team=shop"),
        "{}",
        run.stdout
    );
    let run = cluster.hawser(&["backup", "get", "three"]).await;
    assert!(!run.stdout.contains("LABELS"), "{}", run.stdout);
    // describe, like get: every backup without names, those -l selects with it. (A finished
    // backup would have its volume infos read through a DownloadRequest, which no server
    // answers here; one still running has none yet.)
    cluster.set_status(BACKUP.0, BACKUP.1, "two", json!({"phase": "InProgress"}));
    let described = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .filter(|l| l.starts_with("Name:"))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .collect()
    };
    let run = cluster.hawser(&["backup", "describe"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        described(&run.stdout),
        ["one", "three", "two"],
        "{}",
        run.stdout
    );
    let run = cluster
        .hawser(&["backup", "describe", "-l", "team=shop"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(described(&run.stdout), ["three"], "{}", run.stdout);

    // Velero's verb-first forms print what the kind-first ones print.
    for (verb_first, kind_first) in [
        (&["get", "backups"][..], &["backup", "get"][..]),
        (&["get", "backup", "two"][..], &["backup", "get", "two"][..]),
        (
            &["describe", "backups", "one"][..],
            &["backup", "describe", "one"][..],
        ),
    ] {
        let (a, b) = (
            cluster.hawser(verb_first).await,
            cluster.hawser(kind_first).await,
        );
        assert_eq!(
            (a.code, &a.stdout),
            (0, &b.stdout),
            "{verb_first:?}: {}",
            a.stderr
        );
    }
}

/// Starts `backup create NAME --wait`, plays the server (InProgress with progress, then
/// `final_phase`) and returns the finished run.
async fn wait_through(cluster: &Cluster, name: &str, final_phase: &str) -> cli_support::Run {
    let child = cluster.spawn(&["backup", "create", name, "--wait"]);
    cluster.until_exists(BACKUP.0, BACKUP.1, name).await;
    cluster.set_status(
        BACKUP.0,
        BACKUP.1,
        name,
        json!({"phase": "InProgress", "progress": {"totalItems": 10, "itemsBackedUp": 3}}),
    );
    // Long enough for one progress line (printed at most once per second).
    tokio::time::sleep(Duration::from_millis(1300)).await;
    cluster.set_status(
        BACKUP.0,
        BACKUP.1,
        name,
        json!({"phase": final_phase, "progress": {"totalItems": 10, "itemsBackedUp": 10}}),
    );
    finished(child).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_prints_progress_and_exits_0_when_completed() {
    let cluster = Cluster::start().await;
    let run = wait_through(&cluster, "w1", "Completed").await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.stderr
            .contains("Backup w1: InProgress, 3 of 10 items backed up"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("Backup w1: Completed, 10 of 10 items backed up"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains(
            "Backup completed with status: Completed. You may check for more information"
        ),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_wait_says_the_phase_it_read_and_exits_130() {
    let cluster = Cluster::start().await;
    let child = cluster.spawn(&["backup", "create", "slow1", "--wait"]);
    cluster.until_exists(BACKUP.0, BACKUP.1, "slow1").await;
    cluster.set_status(BACKUP.0, BACKUP.1, "slow1", json!({"phase": "Queued"}));
    // Time for the watch to read it.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let run = finished(child).await;
    assert_eq!(
        run.code, 130,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert!(
        !run.stdout.contains("completed with status"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "Stopped waiting: Backup slow1 was last seen Queued; it goes on in the background."
        ),
        "{}",
        run.stderr
    );
}

/// Ctrl-C typed at a terminal during `--wait`: what the terminal shows names the phase read
/// and never a final one, and the exit code is 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_a_terminal_during_a_wait_stops_waiting_only() {
    let cluster = Cluster::start().await;
    let child = cluster.spawn_on_terminal(&["backup", "create", "slow2", "--wait"]);
    cluster.until_exists(BACKUP.0, BACKUP.1, "slow2").await;
    cluster.set_status(BACKUP.0, BACKUP.1, "slow2", json!({"phase": "InProgress"}));
    // Time for the watch to read it.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let run = ctrl_c_at_terminal(child).await;
    assert_eq!(run.code, 130, "terminal: {}", run.stdout);
    assert!(
        run.stdout.contains(
            "Stopped waiting: Backup slow2 was last seen InProgress; it goes on in the background."
        ),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("completed with status"),
        "{}",
        run.stdout
    );
    let backup = cluster.get(BACKUP.0, BACKUP.1, "slow2").unwrap();
    assert_eq!(
        backup["status"]["phase"], "InProgress",
        "the backup goes on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_exits_3_when_the_backup_fails() {
    let cluster = Cluster::start().await;
    let run = wait_through(&cluster, "w2", "Failed").await;
    assert_eq!(run.code, 3, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("Backup w2: Failed"), "{}", run.stderr);
}

/// Each failure is one readable line (the API server's message, never a debug dump or the
/// same message again as a cause) and a hint, and a sick API server ends the command at once
/// instead of minutes of hidden retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_readable_line_with_a_hint_and_never_wait_on_a_sick_api_server() {
    let lines = |run: &cli_support::Run| -> Vec<String> {
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            !run.stderr.contains("Status {")
                && !run.stderr.contains("Some(")
                && !run.stderr.contains("caused by")
                && !run.stderr.contains("ERROR"),
            "{}",
            run.stderr
        );
        run.stderr.lines().map(str::to_owned).collect()
    };

    // No CRDs installed.
    let bare = Cluster::empty().await;
    let out = lines(&bare.hawser(&["backup", "get"]).await);
    assert_eq!(out.len(), 2, "{out:#?}");
    assert!(out[1].contains("run `hawser install`"), "{out:#?}");

    let cluster = Cluster::start().await;
    // A name taken.
    assert_eq!(cluster.hawser(&["backup", "create", "b1"]).await.code, 0);
    let out = lines(&cluster.hawser(&["backup", "create", "b1"]).await);
    assert!(
        out[0].ends_with("already exists") && out[1].contains("choose another name"),
        "{out:#?}"
    );
    // A namespace that does not exist.
    let out = lines(
        &cluster
            .hawser(&["backup", "create", "b2", "-n", "nowhere"])
            .await,
    );
    assert!(
        out[0].contains("\"nowhere\" not found") && out[1].contains("pass -n NAMESPACE"),
        "{out:#?}"
    );

    // An API server answering 503 to everything: the command ends at once, saying so.
    cluster
        .sim
        .faults()
        .status(kube_sim::StatusFault::new(503).resources(&["backups"]));
    let started = std::time::Instant::now();
    let out = lines(&cluster.hawser(&["backup", "get"]).await);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        out[0].contains("the API server answered 503") && out[1].contains("overloaded"),
        "{out:#?}"
    );

    // An API server that cannot be reached: the innermost cause, once.
    let closed = cluster.dir().join("closed.kubeconfig");
    let text = std::fs::read_to_string(&cluster.kubeconfig).unwrap();
    let url = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_owned();
    std::fs::write(&closed, text.replace(&url, "http://127.0.0.1:1")).unwrap();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"))
        .args(["backup", "get"])
        .env("KUBECONFIG", &closed)
        .output()
        .await
        .unwrap();
    let run = cli_support::Run {
        code: run.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&run.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&run.stderr).into_owned(),
    };
    let out = lines(&run);
    assert_eq!(out.len(), 2, "{out:#?}");
    assert!(
        out[0].contains("cannot reach the API server (") && out[1].contains("reachable"),
        "{out:#?}"
    );
}

/// Input is checked the same way everywhere and refused with the flag's own message: a
/// negative duration reaches the duration check (not the parser's "unexpected argument"), and
/// a `--log-level` that is no level is refused instead of silently logging nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_get_their_flags_message_and_completion_scripts_print() {
    let cluster = Cluster::start().await;
    for (args, said) in [
        (
            &["backup", "create", "b", "--ttl", "-5h"][..],
            "invalid value for --ttl: it must not be negative",
        ),
        (
            &["backup", "create", "b", "--csi-snapshot-timeout", "-1m"][..],
            "invalid value for --csi-snapshot-timeout: it must not be negative",
        ),
        (
            &["--log-level", "bogus", "backup", "get"][..],
            "invalid value for --log-level: \"bogus\" is not a level",
        ),
    ] {
        let run = cluster.hawser(args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    }
    assert!(cluster.get(BACKUP.0, BACKUP.1, "b").is_none());

    for (shell, start) in [
        ("bash", "_hawser() {"),
        ("zsh", "#compdef hawser"),
        ("fish", "# Print an optspec"),
    ] {
        let run = cluster.hawser(&["completion", shell]).await;
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(
            run.stdout.starts_with(start),
            "{shell}: {}",
            &run.stdout[..run.stdout.len().min(200)]
        );
        assert!(run.stdout.contains("backup-location"), "{shell}");
    }
}

/// Velero's flags: `--ordered-resources` and the defaults of what is not built are written as
/// Velero writes them; a flag that asks for what hawser does not do yet is refused (exit 2)
/// naming it, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn velero_flags_are_written_or_refused_by_name() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "ordered",
            "--ordered-resources",
            "pods=ns1/pod1,ns1/pod2; persistentvolumes=pv4,pv8",
            "--snapshot-move-data=false",
            "--default-volumes-to-fs-backup=false",
        ])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let spec = &cluster.get(BACKUP.0, BACKUP.1, "ordered").unwrap()["spec"];
    assert_eq!(
        spec["orderedResources"],
        json!({"pods": "ns1/pod1,ns1/pod2", "persistentvolumes": "pv4,pv8"})
    );
    assert_eq!(spec["snapshotMoveData"], false);
    assert_eq!(spec["defaultVolumesToFsBackup"], false);
    let run = cluster
        .hawser(&[
            "restore",
            "create",
            "back",
            "--from-backup",
            "ordered",
            "--item-operation-timeout",
            "2h",
        ])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let spec = &cluster.get(RESTORE_KIND.0, RESTORE_KIND.1, "back").unwrap()["spec"];
    assert_eq!(spec["itemOperationTimeout"], "2h0m0s");

    for (command, flag) in [
        (
            &["backup", "create", "r1", "--snapshot-move-data"][..],
            "--snapshot-move-data",
        ),
        (
            &["backup", "create", "r2", "--default-volumes-to-fs-backup"][..],
            "--default-volumes-to-fs-backup",
        ),
        (
            &["backup", "create", "r3", "--data-mover", "velero"][..],
            "--data-mover",
        ),
        (
            &["backup", "create", "r4", "--parallel-files-upload", "4"][..],
            "--parallel-files-upload",
        ),
        (
            &[
                "schedule",
                "create",
                "r5",
                "--schedule",
                "@daily",
                "--volume-snapshot-locations",
                "aws-1",
            ][..],
            "--volume-snapshot-locations",
        ),
        (
            &[
                "restore",
                "create",
                "r6",
                "--from-backup",
                "ordered",
                "--write-sparse-files",
            ][..],
            "--write-sparse-files",
        ),
        (
            &[
                "restore",
                "create",
                "r7",
                "--from-backup",
                "ordered",
                "--parallel-files-download",
                "2",
            ][..],
            "--parallel-files-download",
        ),
        (
            &[
                "restore",
                "create",
                "r8",
                "--from-schedule",
                "s",
                "--allow-partially-failed",
            ][..],
            "--allow-partially-failed",
        ),
        (
            &[
                "restore",
                "create",
                "r9",
                "--from-backup",
                "ordered",
                "--resource-policies-configmap",
                "p",
            ][..],
            "--resource-policies-configmap",
        ),
        (
            &["backup", "create", "r10", "--ordered-resources", "pods"][..],
            "--ordered-resources",
        ),
    ] {
        let run = cluster.hawser(command).await;
        assert_eq!(run.code, 2, "{command:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with(&format!("error: {flag} "))
                || run
                    .stderr
                    .starts_with(&format!("error: invalid value for {flag}")),
            "{command:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("use '--"), "{}", run.stderr);
    }
    assert_eq!(cluster.store().list(BACKUP.0, BACKUP.1, None).len(), 1);
    assert_eq!(
        cluster
            .store()
            .list(RESTORE_KIND.0, RESTORE_KIND.1, None)
            .len(),
        1
    );
    assert!(
        cluster
            .store()
            .list("velero.io/v1", "Schedule", None)
            .is_empty()
    );
}
