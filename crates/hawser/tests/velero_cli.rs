//! Velero's own `velero` CLI against a running `hawser server` and kube-sim: a Velero user's
//! commands, unchanged, with their real outcomes checked (exit codes, the phase printed, objects
//! restored into the mapped namespace, a backup gone after `delete`).
//!
//! The binary comes from `VELERO_CLI` (`scripts/build-velero.sh` builds it). Without it every test
//! here fails; `scripts/test` leaves them out when it is not set, and says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;
#[path = "../../hawser-store/tests/common/mod.rs"]
mod store_common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cli_support::{Cluster, NS, Run};
use serde_json::json;
use server_support::csi;
use server_support::*;

/// The `velero` binary the tests run, named by `VELERO_CLI`. Its absence fails the test:
/// `scripts/test` leaves this binary's tests out (and nextest counts them as skipped) when
/// `VELERO_CLI` is not set.
fn velero_binary() -> PathBuf {
    let path = std::env::var_os("VELERO_CLI")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .expect(
            "VELERO_CLI is not set: run VELERO_CLI=$(scripts/build-velero.sh)/velero scripts/test",
        );
    assert!(
        path.is_file(),
        "VELERO_CLI={} is not a file; scripts/build-velero.sh prints the directory that holds `velero`",
        path.display()
    );
    path
}

/// Velero's CLI pointed at a cluster, with a home of its own (Velero reads
/// `$HOME/.config/velero/config.json`) and no `VELERO_NAMESPACE`.
struct Velero<'a> {
    binary: PathBuf,
    cluster: &'a Cluster,
}

/// The lines of `text` as cells split at whitespace.
fn words(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

impl Velero<'_> {
    /// Runs `args` with Velero's CLI and with hawser's on the same objects, asserts the same
    /// rows (cells split at whitespace), and returns Velero's output.
    async fn same_rows(&self, server: &Server, args: &[&str]) -> String {
        let theirs = self.ok(server, args).await;
        let ours = self.cluster.hawser(args).await;
        assert_eq!(ours.code, 0, "hawser {args:?}: {}", ours.stderr);
        assert_eq!(
            words(&ours.stdout),
            words(&theirs),
            "hawser:\n{}\nvelero:\n{theirs}",
            ours.stdout
        );
        theirs
    }

    /// Runs `args` with Velero's CLI and with hawser's on the same objects and asserts the same
    /// text, character for character: hawser's output to a pipe is Velero's without colours,
    /// and with `--colorized=true` it is Velero's as printed (Velero colours pipes too).
    /// Returns Velero's output without colours.
    async fn same_text(&self, server: &Server, args: &[&str]) -> String {
        let theirs = self.ok(server, args).await;
        let ours = self.cluster.hawser(args).await;
        assert_eq!(ours.code, 0, "hawser {args:?}: {}", ours.stderr);
        let plain = uncoloured(&theirs);
        assert_eq!(ours.stdout, plain, "hawser {args:?}");
        let coloured: Vec<&str> = args.iter().copied().chain(["--colorized=true"]).collect();
        let ours = self.cluster.hawser(&coloured).await;
        assert_eq!(ours.stdout, theirs, "hawser {coloured:?}");
        plain
    }

    /// Runs `velero ARGS` (at most 90 s: `--wait` follows a whole backup or restore).
    async fn run(&self, args: &[&str]) -> Run {
        let child = tokio::process::Command::new(&self.binary)
            .args(args)
            .env("KUBECONFIG", &self.cluster.kubeconfig)
            .env("HOME", self.cluster.dir())
            .env_remove("VELERO_NAMESPACE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("velero starts");
        let output = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("velero {args:?} did not exit within 90 s"))
            .expect("velero output");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `velero ARGS` and requires exit 0 (the server's log in the failure message).
    async fn ok(&self, server: &Server, args: &[&str]) -> String {
        let run = self.run(args).await;
        assert_eq!(
            run.code,
            0,
            "velero {args:?}\nstdout:\n{}\nstderr:\n{}\nserver log:\n{}",
            run.stdout,
            run.stderr,
            server.log_text()
        );
        run.stdout
    }
}

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// `text` without terminal colour sequences: Velero's `describe` colours the phase even when its
/// output is not a terminal.
fn uncoloured(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ parameters, ended by a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value after `label` on the first line that starts with it (`Phase:  Completed` →
/// `Completed`), colours removed.
fn field(text: &str, label: &str) -> String {
    uncoloured(text)
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix(label)
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no line {label:?} in:\n{text}"))
}

/// The cells of the table row whose first cell is `name`.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
}

/// A cluster with namespaces `shop` (3 ConfigMaps, 2 Secrets) and `other`, a filesystem location
/// `default` under `root`, and a server.
async fn filesystem_setup(root: &Path) -> (Cluster, Server) {
    let cluster = Cluster::start().await;
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root);
    let server = Server::start(&cluster, root, FAST).await;
    (cluster, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_create_get_describe_logs_and_delete() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };

    let out = velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "nightly",
                "--include-namespaces",
                "shop",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.contains("Backup request \"nightly\" submitted successfully."),
        "{out}"
    );
    assert!(
        out.contains("Backup completed with status: Completed."),
        "{out}"
    );
    let stored = cluster.get("velero.io/v1", "Backup", "nightly").unwrap();
    assert_eq!(phase(&stored), "Completed", "{stored:#}");
    assert!(artifact(root.path(), "nightly", "nightly.tar.gz").is_file());

    // Both CLIs print the same table: CREATED is the start, as Go prints a time.
    let out = velero.same_rows(&server, &["backup", "get"]).await;
    let cells = row(&out, "nightly");
    // NAME STATUS ERRORS WARNINGS CREATED ... STORAGE LOCATION SELECTOR
    assert_eq!(&cells[..4], ["nightly", "Completed", "0", "0"], "{out}");
    assert!(cells.contains(&"default"), "{out}");

    let out = velero
        .same_text(&server, &["backup", "describe", "nightly"])
        .await;
    assert_eq!(field(&out, "Phase:"), "Completed", "{out}");
    // 3 ConfigMaps, 2 Secrets and the Namespace.
    assert_eq!(field(&out, "Items backed up:"), "6", "{out}");
    assert_eq!(field(&out, "Included:"), "shop", "{out}");
    assert!(!out.contains("Resource List:"), "{out}");

    let out = velero
        .same_text(&server, &["backup", "describe", "nightly", "--details"])
        .await;
    assert!(out.contains("Resource List:"), "{out}");
    for item in ["shop/cm-0", "shop/cm-2", "shop/db-password", "shop"] {
        assert!(
            out.lines().any(|l| l.trim() == format!("- {item}")),
            "{item} is not listed:\n{out}"
        );
    }
    assert!(!out.contains("other/elsewhere"), "{out}");

    // The log, exactly as stored.
    let stored_log =
        gunzip(&std::fs::read(artifact(root.path(), "nightly", "nightly-logs.gz")).unwrap());
    let out = velero.ok(&server, &["backup", "logs", "nightly"]).await;
    assert!(!stored_log.is_empty());
    assert_eq!(out, stored_log);

    let out = velero
        .ok(&server, &["backup", "delete", "nightly", "--confirm"])
        .await;
    assert!(
        out.contains("Request to delete backup \"nightly\" submitted successfully."),
        "{out}"
    );
    until_gone(&cluster, &server, "Backup", "nightly").await;
    assert!(!artifact(root.path(), "nightly", "nightly.tar.gz").exists());
    let run = velero.run(&["backup", "get", "nightly"]).await;
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("not found"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_create_into_a_mapped_namespace_describe_and_logs() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };
    velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "nightly",
                "--include-namespaces",
                "shop",
                "--wait",
            ],
        )
        .await;

    // Velero's CLI names a resource-modifier ConfigMap its own way (kind `configmap`, the core
    // group); its rules are applied.
    cluster
        .store()
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "relabel", "namespace": NS},
            "data": {"rules": "version: v1\nresourceModifierRules:\n- conditions: {groupResource: configmaps}\n  mergePatches: [{patchData: '{\"metadata\": {\"labels\": {\"moved\": \"yes\"}}}'}]\n"}}))
        .unwrap();
    let out = velero
        .ok(
            &server,
            &[
                "restore",
                "create",
                "copy",
                "--from-backup",
                "nightly",
                "--namespace-mappings",
                "shop:shop-copy",
                "--resource-modifier-configmap",
                "relabel",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.contains("Restore request \"copy\" submitted successfully."),
        "{out}"
    );
    assert!(
        out.contains("Restore completed with status: Completed."),
        "{out}"
    );
    let store = cluster.store();
    for i in 0..3 {
        let name = format!("cm-{i}");
        let restored = store
            .get("v1", "ConfigMap", "shop-copy", &name)
            .unwrap_or_else(|| panic!("{name} is not in shop-copy"));
        assert_eq!(restored["data"]["index"], i.to_string(), "{restored:#}");
        assert_eq!(
            restored["metadata"]["labels"]["moved"], "yes",
            "{restored:#}"
        );
    }
    assert!(
        store
            .get("v1", "Secret", "shop-copy", "db-password")
            .is_some()
    );
    assert!(store.get("v1", "Namespace", "", "shop-copy").is_some());
    assert!(
        store
            .get("v1", "ConfigMap", "shop-copy", "elsewhere")
            .is_none()
    );

    let out = velero
        .same_text(&server, &["restore", "describe", "copy"])
        .await;
    assert_eq!(field(&out, "Phase:"), "Completed", "{out}");
    assert_eq!(field(&out, "Backup:"), "nightly", "{out}");
    assert_eq!(
        field(&out, "Namespace mappings:"),
        "shop=shop-copy",
        "{out}"
    );
    assert!(!out.contains("<error"), "{out}");

    let out = velero
        .same_text(&server, &["restore", "describe", "copy", "--details"])
        .await;
    assert!(
        out.lines().any(|l| l.trim() == "- shop-copy/cm-0(created)"),
        "{out}"
    );

    let stored_log = gunzip(
        &std::fs::read(
            root.path()
                .join(BUCKET)
                .join("restores/copy/restore-copy-logs.gz"),
        )
        .unwrap(),
    );
    let out = velero.ok(&server, &["restore", "logs", "copy"]).await;
    assert!(!stored_log.is_empty());
    assert_eq!(out, stored_log);

    let out = velero.same_rows(&server, &["restore", "get"]).await;
    let cells = row(&out, "copy");
    // NAME BACKUP STATUS STARTED COMPLETED ERRORS WARNINGS CREATED SELECTOR
    assert_eq!(&cells[..3], ["copy", "nightly", "Completed"], "{out}");

    // Velero's CLI deletes the Restore object and counts on the server's finalizer to remove the
    // restore's files first: the object goes once its files are gone.
    let out = velero
        .ok(&server, &["restore", "delete", "copy", "--confirm"])
        .await;
    assert!(
        out.contains("Request to delete restore \"copy\" submitted successfully."),
        "{out}"
    );
    poll(&server, "the Restore deleted", || {
        cluster
            .get("velero.io/v1", "Restore", "copy")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        !root
            .path()
            .join(BUCKET)
            .join("restores/copy/restore-copy-logs.gz")
            .exists(),
        "the restore's files stay"
    );
}

/// What the server reports reaches Velero's `--wait`, `get` and `describe`: a warning for a flag
/// hawser does not act on, and a backup refused at validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_and_validation_failures_show_in_velero_output() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };

    velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "fsb",
                "--include-namespaces",
                "shop",
                "--default-volumes-to-fs-backup",
                "--wait",
            ],
        )
        .await;
    let out = velero.ok(&server, &["backup", "get", "fsb"]).await;
    assert_eq!(
        &row(&out, "fsb")[..4],
        ["fsb", "Completed", "0", "1"],
        "{out}"
    );
    let out = velero
        .same_text(&server, &["backup", "describe", "fsb"])
        .await;
    let warning = out
        .lines()
        .skip_while(|l| *l != "Warnings:")
        .nth(1)
        .unwrap_or_else(|| panic!("no warnings in:\n{out}"));
    assert!(
        warning.trim_start().starts_with("Velero:")
            && warning.contains("spec.defaultVolumesToFsBackup"),
        "{out}"
    );

    // A location made read-only with Velero's CLI refuses backups.
    let storage = root.path().to_str().unwrap();
    let config = format!("root={storage}");
    velero
        .ok(
            &server,
            &[
                "backup-location",
                "create",
                "archive",
                "--provider",
                "filesystem",
                "--bucket",
                "archive",
                "--access-mode",
                "ReadOnly",
                "--config",
                &config,
            ],
        )
        .await;
    let out = velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "refused",
                "--storage-location",
                "archive",
                "--wait",
            ],
        )
        .await;
    // Velero's CLI exits 0 whatever the phase; the phase is in what it prints.
    assert!(
        out.contains("Backup completed with status: FailedValidation."),
        "{out}"
    );
    let out = velero
        .same_text(&server, &["backup", "describe", "refused"])
        .await;
    assert_eq!(field(&out, "Phase:"), "FailedValidation", "{out}");
    assert!(
        field(&out, "Validation errors:").contains("read-only"),
        "{out}"
    );
    // And a location that does not exist is refused by the CLI itself.
    let run = velero
        .run(&["backup", "create", "nowhere", "--storage-location", "nope"])
        .await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(cluster.get("velero.io/v1", "Backup", "nowhere").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_create_and_get() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };

    let out = velero
        .ok(
            &server,
            &[
                "schedule",
                "create",
                "hourly",
                "--schedule",
                "@every 1h",
                "--include-namespaces",
                "shop",
                "--ttl",
                "24h",
            ],
        )
        .await;
    assert!(
        out.contains("Schedule \"hourly\" created successfully."),
        "{out}"
    );
    let stored = wait_for(
        &cluster,
        Some(&server),
        "Schedule",
        "hourly",
        Duration::from_secs(20),
        |s| phase(s) == "Enabled",
    )
    .await;
    assert_eq!(stored["spec"]["schedule"], "@every 1h", "{stored:#}");
    assert_eq!(
        stored["spec"]["template"]["includedNamespaces"],
        serde_json::json!(["shop"]),
        "{stored:#}"
    );

    velero
        .same_text(&server, &["schedule", "describe", "hourly"])
        .await;
    let out = velero.same_rows(&server, &["schedule", "get"]).await;
    let cells = row(&out, "hourly");
    assert_eq!(cells[1], "Enabled", "{out}");
    let line = out.lines().find(|l| l.starts_with("hourly")).unwrap();
    assert!(line.contains("@every 1h"), "{out}");
    assert!(line.contains("24h0m0s"), "{out}");

    // An invalid expression: Velero's CLI sends it, the server refuses it.
    velero
        .ok(
            &server,
            &["schedule", "create", "broken", "--schedule", "61 * * * *"],
        )
        .await;
    wait_for(
        &cluster,
        Some(&server),
        "Schedule",
        "broken",
        Duration::from_secs(20),
        |s| phase(s) == "FailedValidation",
    )
    .await;
    let out = velero.ok(&server, &["schedule", "get", "broken"]).await;
    assert_eq!(row(&out, "broken")[1], "FailedValidation", "{out}");
    // Both described together: two blank lines apart, the validation error in red.
    velero
        .same_text(&server, &["schedule", "describe", "broken", "hourly"])
        .await;
}

/// Specs that use most of what `describe` shows, each described by Velero's CLI and by hawser's
/// on the same objects, character for character (with and without colours): filters of both
/// families, selectors and or-selectors, labels, TTL and timeouts, ordered resources, hook
/// specs, a restore with mappings and policies, several objects at once and by label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_specs_describe_as_velero_describes_them() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };
    velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "rich",
                "--include-namespaces",
                "shop,other",
                "--exclude-namespaces",
                "kube-system",
                "--include-resources",
                "configmaps,secrets,namespaces",
                "--selector",
                "tier notin (cache)",
                "--labels",
                "team=shop,tier=gold",
                "--annotations",
                "note=nightly",
                "--ttl",
                "2h",
                "--snapshot-volumes=false",
                "--default-volumes-to-fs-backup=false",
                "--csi-snapshot-timeout",
                "5m",
                "--item-operation-timeout",
                "1h",
                "--ordered-resources",
                "configmaps=shop/cm-1,shop/cm-0",
                "--wait",
            ],
        )
        .await;
    velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "scoped",
                "--include-namespaces",
                "shop",
                "--include-cluster-scoped-resources",
                "namespaces",
                "--exclude-namespace-scoped-resources",
                "secrets",
                "--or-selector",
                "app=web or tier=db",
                "--labels",
                "team=shop",
                "--wait",
            ],
        )
        .await;
    create_backup(
        &cluster,
        "hooked",
        json!({
            "includedNamespaces": ["shop"],
            "hooks": {"resources": [{
                "name": "freeze",
                "includedNamespaces": ["shop"],
                "excludedResources": ["jobs"],
                "labelSelector": {"matchLabels": {"app": "nothing-matches"}},
                "pre": [{"exec": {"container": "db", "command": ["/bin/sh", "-c", "sync"],
                                  "onError": "Continue", "timeout": "10s"}}],
                "post": [{"exec": {"command": ["thaw"]}}],
            }]},
        }),
    );
    let done = wait_final(&cluster, &server, "Backup", "hooked").await;
    assert_eq!(phase(&done), "Completed", "{done:#}");
    // Pod volume backups of `rich` as Velero's node agent leaves them (one per phase group and
    // pod), and a deletion of it that failed: both describes list them alike.
    let store = cluster.store();
    let rich_uid =
        cluster.get("velero.io/v1", "Backup", "rich").unwrap()["metadata"]["uid"].clone();
    for (name, pod, volume, status) in [
        (
            "rich-1",
            "db-0",
            "data",
            json!({"phase": "Completed", "progress": {"totalBytes": 4096, "bytesDone": 4096}, "incrementalBytes": 1024}),
        ),
        (
            "rich-2",
            "db-0",
            "logs",
            json!({"phase": "Completed", "progress": {"totalBytes": 100, "bytesDone": 100}}),
        ),
        (
            "rich-3",
            "web-0",
            "cache",
            json!({"phase": "InProgress", "progress": {"totalBytes": 400, "bytesDone": 100}}),
        ),
        ("rich-4", "web-0", "tmp", json!({})),
    ] {
        store
            .insert(json!({
                "apiVersion": "velero.io/v1", "kind": "PodVolumeBackup",
                "metadata": {"name": name, "namespace": NS, "labels": {"velero.io/backup-name": "rich"}},
                "spec": {"node": "n1", "pod": {"kind": "Pod", "namespace": "shop", "name": pod},
                         "volume": volume, "backupStorageLocation": "default",
                         "repoIdentifier": "", "uploaderType": "kopia"},
                "status": status,
            }))
            .unwrap();
    }
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
            "metadata": {"name": "rich-x1", "namespace": NS,
                         "labels": {"velero.io/backup-name": "rich", "velero.io/backup-uid": rich_uid}},
            "spec": {"backupName": "rich"},
            "status": {"phase": "Processed", "errors": ["the bucket refused: AccessDenied"]},
        }))
        .unwrap();

    for args in [
        &["backup", "describe", "rich"][..],
        &["backup", "describe", "rich", "--details"],
        &["backup", "describe", "rich", "scoped", "hooked"],
        &["backup", "describe", "-l", "team=shop"],
        &["describe", "backups", "hooked", "--details"],
    ] {
        velero.same_text(&server, args).await;
    }
    // What the equal texts hold (so that they are not equal for lack of it).
    let brief = velero
        .same_text(&server, &["backup", "describe", "rich"])
        .await;
    for line in [
        "Labels:       team=shop\n              tier=gold\n",
        "Pod Volume Backups - kopia (specify --details for more information):\n    Completed:    2\n    In Progress:  1\n    New:          1\n",
        "Deletion Attempts (1 failed):\n",
        "Errors:\n    the bucket refused: AccessDenied\n",
        "OrderedResources:\n  configmaps: shop/cm-1,shop/cm-0\n",
    ] {
        assert!(brief.contains(line), "{line}\n{brief}");
    }
    let detailed = velero
        .same_text(&server, &["backup", "describe", "rich", "--details"])
        .await;
    for line in [
        "Completed:\n      shop/db-0: data (size: 4096, incremental size: 1024), logs (size: 100)\n",
        "In Progress:\n      shop/web-0: cache (25.00%)\n",
    ] {
        assert!(detailed.contains(line), "{line}\n{detailed}");
    }

    velero
        .ok(
            &server,
            &[
                "restore",
                "create",
                "copy",
                "--from-backup",
                "rich",
                "--namespace-mappings",
                "shop:shop-a,other:other-a",
                "--include-resources",
                "configmaps,namespaces",
                "--selector",
                "tier notin (cache)",
                "--existing-resource-policy",
                "update",
                "--restore-volumes=false",
                "--preserve-nodeports",
                "--labels",
                "ticket=42",
                "--wait",
            ],
        )
        .await;
    for (name, volume, status) in [
        (
            "copy-1",
            "data",
            json!({"phase": "Completed", "progress": {"totalBytes": 4096}}),
        ),
        ("copy-2", "logs", json!({"phase": "Failed"})),
    ] {
        store
            .insert(json!({
                "apiVersion": "velero.io/v1", "kind": "PodVolumeRestore",
                "metadata": {"name": name, "namespace": NS, "labels": {"velero.io/restore-name": "copy"}},
                "spec": {"pod": {"kind": "Pod", "namespace": "shop-a", "name": "db-0"},
                         "volume": volume, "backupStorageLocation": "default",
                         "repoIdentifier": "", "uploaderType": "kopia", "snapshotID": "s1",
                         "sourceNamespace": "shop"},
                "status": status,
            }))
            .unwrap();
    }
    for args in [
        &["restore", "describe", "copy"][..],
        &["restore", "describe", "copy", "--details"],
        &["restore", "describe", "-l", "ticket=42"],
    ] {
        velero.same_text(&server, args).await;
    }
    let restored = velero
        .same_text(&server, &["restore", "describe", "copy"])
        .await;
    for line in [
        "Namespace mappings:  other=other-a\n                     shop=shop-a\n",
        "kopia Restores (specify --details for more information):\n  Completed:  1\n  Failed:     1\n",
        "Existing Resource Policy:   update\n",
        "Preserve Service NodePorts:  true\n",
    ] {
        assert!(restored.contains(line), "{line}\n{restored}");
    }
    // A Restore naming resource policies (Velero 1.18): described as Velero describes it, and
    // refused by hawser's server, which does not apply them.
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "filtered", "namespace": NS},
            "spec": {"backupName": "rich",
                     "resourcePolicy": {"kind": "configmap", "name": "filters"}}
        }))
        .unwrap();
    let refused = wait_final(&cluster, &server, "Restore", "filtered").await;
    assert_eq!(phase(&refused), "FailedValidation", "{refused}");
    let filtered = velero
        .same_text(&server, &["restore", "describe", "filtered"])
        .await;
    assert!(
        filtered.contains("Resource policies:\n") && filtered.contains("filters"),
        "{filtered}"
    );
    assert!(filtered.contains("spec.resourcePolicy"), "{filtered}");

    velero
        .ok(
            &server,
            &[
                "schedule",
                "create",
                "daily",
                "--schedule",
                "0 3 * * *",
                "--include-namespaces",
                "shop",
                "--selector",
                "app in (web,db)",
                "--ttl",
                "72h",
                "--labels",
                "team=shop",
            ],
        )
        .await;
    wait_for(
        &cluster,
        Some(&server),
        "Schedule",
        "daily",
        Duration::from_secs(20),
        |s| phase(s) == "Enabled",
    )
    .await;
    velero
        .same_text(&server, &["schedule", "describe", "daily"])
        .await;
}

/// Every flag `velero server --help` lists (Velero's own binary) is one `hawser server` takes
/// (acted on, or accepted and logged), so that a Velero Deployment's arguments start hawser.
#[test]
fn every_flag_of_velero_server_is_taken_by_hawser_server() {
    let binary = velero_binary();
    let help = std::process::Command::new(binary)
        .args(["server", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    // Definition lines: indented, a flag first (`  -h, --help`, `      --features string`).
    let velero: std::collections::BTreeSet<String> = help
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| {
            let first = l.split_whitespace().find(|w| w.starts_with("--"))?;
            let defines = l.trim_start().starts_with("--")
                || (l.trim_start().starts_with('-') && l.trim_start().get(2..4) == Some(", "));
            defines.then(|| first.trim_start_matches("--").to_owned())
        })
        .collect();
    assert!(velero.len() > 40, "{help}");
    let mut root = <hawser::cli::Cli as clap::CommandFactory>::command();
    root.build();
    let server = root.find_subcommand("server").unwrap();
    let hawser: std::collections::BTreeSet<String> = server
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(str::to_owned)
        .collect();
    let missing: Vec<&String> = velero.difference(&hawser).collect();
    assert!(
        missing.is_empty(),
        "velero server flags hawser does not take: {missing:?}"
    );
}

/// Requires each of `lines` in `text` after its section `title`./// Requires each of `lines` in `text` after its section `title`.
fn assert_after(text: &str, title: &str, lines: &[&str]) {
    let (_, section) = text
        .split_once(title)
        .unwrap_or_else(|| panic!("no {title} in:\n{text}"));
    for line in lines {
        assert!(section.contains(line), "{line}\n{text}");
    }
}

/// Velero's `describe` reads the volume info hawser writes: the backup's CSI snapshot with its
/// handle and driver, and the restore's CSI snapshot restore into the mapped namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_snapshots_and_their_restores_show_in_velero_describe() {
    let binary = velero_binary();
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    let _csi = csi::application(&cluster, Duration::from_millis(200), "").await;
    filesystem_location(&cluster, "default", root.path());
    let server = Server::start(&cluster, root.path(), FAST).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };
    let out = velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "with-data",
                "--include-namespaces",
                "shop",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.contains("Backup completed with status: Completed."),
        "{out}"
    );
    let described = velero
        .same_text(&server, &["backup", "describe", "with-data", "--details"])
        .await;
    velero
        .same_text(&server, &["backup", "describe", "with-data"])
        .await;
    let driver = format!("CSI Driver: {}", kube_sim::csi::DRIVER);
    assert_after(
        &described,
        "CSI Snapshots:",
        &[
            "shop/data:",
            "Snapshot Content Name: snapcontent-",
            "Storage Snapshot ID: snap-",
            &driver,
            "Result: succeeded",
        ],
    );

    let out = velero
        .ok(
            &server,
            &[
                "restore",
                "create",
                "back",
                "--from-backup",
                "with-data",
                "--namespace-mappings",
                "shop:shop-copy",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.contains("Restore completed with status: Completed."),
        "{out}"
    );
    let described = velero
        .same_text(&server, &["restore", "describe", "back", "--details"])
        .await;
    velero
        .same_text(&server, &["restore", "describe", "back"])
        .await;
    assert_after(
        &described,
        "CSI Snapshot Restores:",
        &["shop-copy/data:", "Storage Snapshot ID: snap-", &driver],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_location_repo_and_plugin_get_and_version() {
    let binary = velero_binary();
    let root = tempfile::tempdir().unwrap();
    let (cluster, server) = filesystem_setup(root.path()).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };
    wait_for(
        &cluster,
        Some(&server),
        "BackupStorageLocation",
        "default",
        Duration::from_secs(20),
        |l| phase(l) == "Available",
    )
    .await;

    let out = velero.ok(&server, &["backup-location", "get"]).await;
    let cells = row(&out, "default");
    // NAME PROVIDER BUCKET/PREFIX PHASE LAST VALIDATED ACCESS MODE DEFAULT
    assert_eq!(
        &cells[..4],
        ["default", "filesystem", BUCKET, "Available"],
        "{out}"
    );
    assert!(cells.contains(&"ReadWrite"), "{out}");

    // `repo get` side by side: the same rows from both CLIs, and a name that does not exist
    // is an error naming it.
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupRepository",
            "metadata": {"name": "shop-default-kopia-ab12c", "namespace": NS},
            "spec": {"volumeNamespace": "shop", "backupStorageLocation": "default",
                     "repositoryType": "kopia", "resticIdentifier": "",
                     "maintenanceFrequency": "1h0m0s"}
        }))
        .unwrap();
    let theirs = velero.same_rows(&server, &["repo", "get"]).await;
    assert_eq!(
        words(&theirs)[1],
        ["shop-default-kopia-ab12c", "New", "<never>"]
    );
    // `plugin get` side by side: the server's plugins, through a ServerStatusRequest each.
    let theirs = velero.same_rows(&server, &["plugin", "get"]).await;
    assert!(theirs.contains("velero.io/aws"), "{theirs}");
    let missing = cluster.hawser(&["repo", "get", "nope"]).await;
    assert_ne!(missing.code, 0, "{}", missing.stdout);
    assert!(missing.stderr.contains("nope"), "{}", missing.stderr);

    let out = velero.ok(&server, &["version"]).await;
    assert!(out.starts_with("Client:\n\tVersion: v1.18.3\n"), "{out}");
    let server_version = format!("Server:\n\tVersion: v{}\n", env!("CARGO_PKG_VERSION"));
    assert!(out.contains(&server_version), "{out}");
    // hawser reports its own version, so Velero's CLI sees another major.minor.
    assert!(
        out.contains("# WARNING: the client version does not match the server version."),
        "{out}"
    );
    assert!(
        cluster
            .store()
            .list("velero.io/v1", "ServerStatusRequest", Some(NS))
            .iter()
            .any(|r| r["status"]["phase"] == "Processed"),
        "the server answered no ServerStatusRequest"
    );

    let out = velero.ok(&server, &["version", "--client-only"]).await;
    assert!(!out.contains("Server:"), "{out}");
}

/// An S3 location (moto): `backup logs` and `describe --details` read through the store's
/// pre-signed URLs rather than the server's own download listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_location_logs_and_details_through_presigned_urls() {
    let binary = velero_binary();
    let s3 = store_common::S3Server::start();
    let bucket = s3.bucket("velero-cli");
    s3.create_bucket(&bucket);
    let cluster = Cluster::start().await;
    storage_location(&cluster, &s3.spec(&bucket), "c1", None);
    seed(&cluster, 2);
    let logs = tempfile::tempdir().unwrap();
    let server = Server::start(&cluster, logs.path(), FAST).await;
    let velero = Velero {
        binary,
        cluster: &cluster,
    };

    let out = velero
        .ok(
            &server,
            &[
                "backup",
                "create",
                "s1",
                "--include-namespaces",
                "shop",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.contains("Backup completed with status: Completed."),
        "{out}"
    );

    let location = hawser_store::Location::new(
        &store_common::spec_for(&s3.endpoint, &bucket).with_prefix("c1"),
    )
    .unwrap();
    let stored = location.get("backups/s1/s1-logs.gz").await.unwrap();
    let out = velero.ok(&server, &["backup", "logs", "s1"]).await;
    assert_eq!(out, gunzip(&stored));
    let url = cluster
        .store()
        .list("velero.io/v1", "DownloadRequest", Some(NS))
        .iter()
        .find_map(|r| r["status"]["downloadURL"].as_str().map(str::to_owned))
        .unwrap();
    assert!(url.starts_with(&s3.endpoint), "{url}");

    let out = velero
        .ok(&server, &["backup", "describe", "s1", "--details"])
        .await;
    assert_eq!(field(&out, "Phase:"), "Completed", "{out}");
    assert!(out.lines().any(|l| l.trim() == "- shop/cm-1"), "{out}");
}
