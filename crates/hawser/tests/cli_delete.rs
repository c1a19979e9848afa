//! The commands that remove or change existing objects — `backup delete`, `restore delete`,
//! `schedule delete`, `backup-location delete` and `backup-location set` — run as a process
//! against kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::{Cluster, NS};
use serde_json::{Value, json};

const BACKUP: (&str, &str) = ("velero.io/v1", "Backup");
const RESTORE: (&str, &str) = ("velero.io/v1", "Restore");
const SCHEDULE: (&str, &str) = ("velero.io/v1", "Schedule");
const BSL: (&str, &str) = ("velero.io/v1", "BackupStorageLocation");
const DBR: (&str, &str) = ("velero.io/v1", "DeleteBackupRequest");

const PROMPT: &str = "Are you sure you want to continue (Y/N)? ";

fn backup_deleted_message(name: &str) -> String {
    format!(
        "Request to delete backup \"{name}\" submitted successfully.\nThe backup will be fully \
         deleted after all associated data (disk snapshots, backup files, restores) are \
         removed.\n"
    )
}

/// Stores a Backup with labels and returns it as stored (with its uid).
fn add_backup(cluster: &Cluster, name: &str, labels: Value) -> Value {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1",
            "kind": "Backup",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"includedNamespaces": ["*"]},
            "status": {"phase": "Completed"},
        }))
        .expect("backup stored")
}

fn add_restore(cluster: &Cluster, name: &str, labels: Value) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1",
            "kind": "Restore",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"backupName": "b"},
        }))
        .expect("restore stored");
}

fn requests(cluster: &Cluster) -> Vec<Value> {
    cluster.store().list(DBR.0, DBR.1, Some(NS))
}

/// The request for `backup`, checked field by field against Velero's.
fn assert_request_for(request: &Value, backup: &Value, label_value: &str) {
    let name = backup["metadata"]["name"].as_str().unwrap();
    let uid = backup["metadata"]["uid"].as_str().unwrap();
    assert!(!uid.is_empty());
    let meta = &request["metadata"];
    assert_eq!(meta["generateName"], format!("{name}-"));
    // The API server keeps at most 58 characters of generateName, then adds 5 random ones.
    let generate_name = format!("{name}-");
    let base = &generate_name[..generate_name.len().min(58)];
    let generated = meta["name"].as_str().unwrap();
    let suffix = generated.strip_prefix(base).expect(generated);
    assert_eq!(suffix.len(), 5, "{generated}");
    assert_eq!(meta["namespace"], NS);
    assert_eq!(
        meta["labels"],
        json!({"velero.io/backup-name": label_value, "velero.io/backup-uid": uid})
    );
    assert_eq!(request["spec"], json!({"backupName": name}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_delete_requests_each_backup_and_reports_a_missing_one() {
    let cluster = Cluster::start().await;
    let b1 = add_backup(&cluster, "b1", json!({}));
    let b2 = add_backup(&cluster, "b2", json!({}));
    add_backup(&cluster, "b3", json!({}));
    let run = cluster
        .hawser(&["backup", "delete", "b1", "missing", "b2", "--confirm"])
        .await;
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr
            .contains("error: Backup velero/missing not found"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stdout,
        format!(
            "{}{}",
            backup_deleted_message("b1"),
            backup_deleted_message("b2")
        )
    );
    let mut requests = requests(&cluster);
    requests.sort_by_key(|r| r["spec"]["backupName"].as_str().unwrap().to_owned());
    assert_eq!(requests.len(), 2);
    assert_request_for(&requests[0], &b1, "b1");
    assert_request_for(&requests[1], &b2, "b2");
    // The CLI only asks: the Backups are the server's to delete.
    assert_eq!(cluster.store().count(BACKUP.0, BACKUP.1), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_delete_labels_a_long_name_with_its_valid_label_value() {
    let cluster = Cluster::start().await;
    // Dots keep each part of the name within kube-sim's 63-character limit per DNS label.
    let name = format!("nightly-{}.{}", "x".repeat(40), "y".repeat(40));
    let backup = add_backup(&cluster, &name, json!({}));
    let run = cluster
        .hawser(&["backup", "delete", &name, "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let requests = requests(&cluster);
    assert_eq!(requests.len(), 1);
    let label = requests[0]["metadata"]["labels"]["velero.io/backup-name"]
        .as_str()
        .unwrap()
        .to_owned();
    // Velero's GetValidName: the first 57 characters and 6 hex digits of the SHA-256.
    assert_eq!(label.len(), 63);
    assert_eq!(label[..57], name[..57]);
    assert!(
        label[57..].chars().all(|c| c.is_ascii_hexdigit()),
        "{label}"
    );
    assert_request_for(&requests[0], &backup, &label);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_delete_by_all_or_selector() {
    let cluster = Cluster::start().await;
    let keep = add_backup(&cluster, "keep", json!({"tier": "gold"}));
    let old = add_backup(&cluster, "old", json!({"velero.io/schedule-name": "daily"}));
    let run = cluster
        .hawser(&[
            "backup",
            "delete",
            "-l",
            "velero.io/schedule-name=daily",
            "--confirm",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, backup_deleted_message("old"));
    let found = requests(&cluster);
    assert_eq!(found.len(), 1);
    assert_request_for(&found[0], &old, "old");

    let run = cluster
        .hawser(&["backup", "delete", "--all", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let mut found = requests(&cluster);
    assert_eq!(found.len(), 3);
    found.retain(|r| r["spec"]["backupName"] == "keep");
    assert_request_for(&found[0], &keep, "keep");

    let run = cluster
        .hawser(&["backup", "delete", "-l", "nothing=here", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "No backups found\n");
    assert_eq!(requests(&cluster).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_needs_exactly_one_of_names_all_and_selector() {
    let cluster = Cluster::start().await;
    add_backup(&cluster, "b1", json!({}));
    for command in ["backup", "restore", "schedule", "backup-location"] {
        for extra in [
            &["--confirm"][..],
            &["b1", "--all", "--confirm"][..],
            &["--all", "-l", "a=b", "--confirm"][..],
        ] {
            let args: Vec<&str> = [command, "delete"].iter().chain(extra).copied().collect();
            let run = cluster.hawser(&args).await;
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            assert!(
                run.stderr.contains("exactly one of"),
                "{args:?}: {}",
                run.stderr
            );
        }
    }
    assert!(requests(&cluster).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_confirm_only_a_y_on_stdin_deletes() {
    let cluster = Cluster::start().await;
    add_backup(&cluster, "b1", json!({}));
    add_restore(&cluster, "r1", json!({}));
    let run = cluster
        .hawser(&["schedule", "create", "s1", "--schedule", "@daily"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    cluster.add_location("loc");

    let targets = [
        ("backup", "b1"),
        ("restore", "r1"),
        ("schedule", "s1"),
        ("backup-location", "loc"),
    ];
    let still_there = |cluster: &Cluster| {
        requests(cluster).is_empty()
            && cluster.get(RESTORE.0, RESTORE.1, "r1").is_some()
            && cluster.get(SCHEDULE.0, SCHEDULE.1, "s1").is_some()
            && cluster.get(BSL.0, BSL.1, "loc").is_some()
    };
    // An empty (non-terminal) stdin, an `n`, and answers that are not a single Y all refuse.
    for input in ["", "n\n", "yes\nok\n"] {
        for (command, name) in targets {
            let run = cluster
                .hawser_with_input(&[command, "delete", name], input)
                .await;
            assert_eq!(run.code, 1, "{command} {input:?}: {}", run.stderr);
            assert!(run.stdout.starts_with(PROMPT), "{}", run.stdout);
            assert!(
                run.stderr.contains("the deletion was not confirmed"),
                "{}",
                run.stderr
            );
            assert!(run.stderr.contains("--confirm"), "{}", run.stderr);
        }
        assert!(still_there(&cluster), "{input:?} deleted something");
    }

    for (command, name) in targets {
        let run = cluster
            .hawser_with_input(&[command, "delete", name], "Y\n")
            .await;
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        assert!(run.stdout.starts_with(PROMPT), "{}", run.stdout);
    }
    assert_eq!(requests(&cluster).len(), 1);
    assert!(cluster.get(RESTORE.0, RESTORE.1, "r1").is_none());
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "s1").is_none());
    assert!(cluster.get(BSL.0, BSL.1, "loc").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_delete_removes_the_named_or_selected_restores() {
    let cluster = Cluster::start().await;
    add_restore(&cluster, "r1", json!({}));
    add_restore(&cluster, "r2", json!({"drill": "yes"}));
    add_restore(&cluster, "r3", json!({"drill": "yes"}));
    add_restore(&cluster, "r4", json!({}));
    let run = cluster
        .hawser(&["restore", "delete", "missing", "r1", "--confirm"])
        .await;
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("Restore velero/missing not found"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stdout,
        "Request to delete restore \"r1\" submitted successfully.\nThe restore will be fully \
         deleted after all associated data (restore files in object storage) are removed.\n"
    );
    assert!(cluster.get(RESTORE.0, RESTORE.1, "r1").is_none());

    let run = cluster
        .hawser(&["restore", "delete", "-l", "drill=yes", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let left: Vec<Value> = cluster
        .store()
        .list(RESTORE.0, RESTORE.1, Some(NS))
        .into_iter()
        .map(|r| r["metadata"]["name"].clone())
        .collect();
    assert_eq!(left, [json!("r4")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_delete_removes_the_schedules_and_keeps_their_backups() {
    let cluster = Cluster::start().await;
    for (name, labels) in [("a", "team=x"), ("b", "team=x"), ("c", "team=y")] {
        let run = cluster
            .hawser(&[
                "schedule",
                "create",
                name,
                "--schedule",
                "@daily",
                "--labels",
                labels,
            ])
            .await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    add_backup(&cluster, "a-1", json!({"velero.io/schedule-name": "a"}));
    let run = cluster
        .hawser(&["schedule", "delete", "-l", "team=x", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "Schedule deleted: a\nSchedule deleted: b\n");
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "a").is_none());
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "b").is_none());
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "c").is_some());
    assert!(cluster.get(BACKUP.0, BACKUP.1, "a-1").is_some());

    let run = cluster
        .hawser(&["schedule", "delete", "c", "gone", "--confirm"])
        .await;
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("Schedule velero/gone not found"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "Schedule deleted: c\n");
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "c").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_delete_removes_only_the_location() {
    let cluster = Cluster::start().await;
    cluster.add_location("old");
    cluster.add_location("new");
    add_backup(
        &cluster,
        "on-old",
        json!({"velero.io/storage-location": "old"}),
    );
    let run = cluster
        .hawser(&["backup-location", "delete", "old", "--confirm"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout,
        "Backup storage location \"old\" deleted successfully.\n"
    );
    assert!(cluster.get(BSL.0, BSL.1, "old").is_none());
    assert!(cluster.get(BSL.0, BSL.1, "new").is_some());
    assert!(cluster.get(BACKUP.0, BACKUP.1, "on-old").is_some());
    assert!(requests(&cluster).is_empty());
}

fn add_location(cluster: &Cluster, name: &str, default: bool, object_storage: Value) {
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1",
            "kind": "BackupStorageLocation",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"provider": "aws", "objectStorage": object_storage, "default": default},
        }))
        .expect("location stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_set_changes_only_the_given_fields() {
    let cluster = Cluster::start().await;
    add_location(&cluster, "a", true, json!({"bucket": "ba", "prefix": "p"}));
    add_location(&cluster, "b", false, json!({"bucket": "bb"}));
    let spec = |name: &str| cluster.get(BSL.0, BSL.1, name).unwrap()["spec"].clone();
    let before_b = spec("b");

    // Another location is the default: refused, nothing changed.
    let run = cluster
        .hawser(&["backup-location", "set", "b", "--default"])
        .await;
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains(
            "could not set --default on BackupStorageLocation velero/b: \
                 BackupStorageLocation \"a\" is already the default"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("`hawser backup-location set a --default=false`"),
        "{}",
        run.stderr
    );
    assert_eq!(spec("b"), before_b);

    let run = cluster
        .hawser(&["backup-location", "set", "a", "--default=false"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout,
        "Backup storage location \"a\" configured successfully.\n"
    );
    assert_eq!(spec("a")["default"], false);
    assert_eq!(
        spec("a")["objectStorage"],
        json!({"bucket": "ba", "prefix": "p"})
    );

    let cert = cluster.dir().join("ca.pem");
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nabc\n").unwrap();
    let run = cluster
        .hawser(&[
            "backup-location",
            "set",
            "b",
            "--default",
            "--credential",
            "cloud-credentials=cloud",
            "--cacert",
            cert.to_str().unwrap(),
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let b = spec("b");
    assert_eq!(b["default"], true);
    assert_eq!(
        b["credential"],
        json!({"name": "cloud-credentials", "key": "cloud"})
    );
    use base64::Engine as _;
    let expected =
        base64::engine::general_purpose::STANDARD.encode("-----BEGIN CERTIFICATE-----\nabc\n");
    assert_eq!(
        b["objectStorage"],
        json!({"bucket": "bb", "caCert": expected})
    );
    assert_eq!(b["provider"], "aws");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_set_refuses_bad_input() {
    let cluster = Cluster::start().await;
    add_location(
        &cluster,
        "ref",
        false,
        json!({"bucket": "b", "caCertRef": {"name": "ca", "key": "ca.pem"}}),
    );
    let before = cluster.get(BSL.0, BSL.1, "ref").unwrap()["spec"].clone();
    let cert = cluster.dir().join("ca.pem");
    std::fs::write(&cert, "pem").unwrap();
    let missing_file = cluster.dir().join("nope.pem");
    // (arguments after `backup-location set`, exit code, what stderr must say)
    let cases: [(Vec<&str>, i32, &[&str]); 5] = [
        (vec!["ref"], 2, &["nothing to set"]),
        (
            vec!["ref", "--credential", "novalue"],
            2,
            &["--credential", "secret-name=key"],
        ),
        (
            vec!["ref", "--cacert", missing_file.to_str().unwrap()],
            1,
            &["could not read", "nope.pem"],
        ),
        (
            vec!["ref", "--cacert", cert.to_str().unwrap()],
            1,
            &["caCertRef"],
        ),
        (
            vec!["missing", "--default"],
            1,
            &["BackupStorageLocation velero/missing not found"],
        ),
    ];
    for (extra, code, said) in cases {
        let args: Vec<&str> = ["backup-location", "set"]
            .iter()
            .copied()
            .chain(extra)
            .collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        for words in said {
            assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        }
    }
    assert_eq!(cluster.get(BSL.0, BSL.1, "ref").unwrap()["spec"], before);
}
