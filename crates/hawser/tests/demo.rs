//! `hawser demo` and `hawser dev` as processes: the demo's story and exit code, and the dev
//! environment driven by the `hawser` CLI through the kubeconfig it writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

fn hawser() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hawser"));
    command
        .env_remove("KUBECONFIG")
        .env_remove("VELERO_NAMESPACE")
        .env_remove("HAWSER_LOG_LEVEL")
        .kill_on_drop(true);
    command
}

async fn demo(args: &[&str]) -> (i32, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        hawser().arg("demo").args(args).output(),
    )
    .await
    .expect("the demo exits in time")
    .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), stdout)
}

fn line_index(stdout: &str, needle: &str) -> usize {
    stdout
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{stdout}"))
}

#[tokio::test]
async fn the_demo_survives_the_outage_restores_and_every_object_matches() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = demo(&["--dir", dir.path().to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stdout}");
    for line in [
        "✓ the API went away with the Backup still Finalizing",
        "✓ PersistentVolumeClaim shop-data bound to a volume of kube-sim's CSI driver",
        "✓ PersistentVolumeClaim shop-data was restored from the CSI snapshot snap-",
        "✓ the Backup ended Completed",
        "✓ the record in storage agrees: Completed",
        "✓ the Restore ended Completed",
        "✓ Deployment shop matches",
        "✓ RoleBinding shop-reader matches",
        "✓ Storefront main matches",
        "✓ 11 of 11 objects match their originals",
        "✓ Pod shop-db-0 matches",
        "✓ Pod demo-shop/shop-db-0 was frozen by its pre hook before its claim's snapshot was created and thawed by its post hook after",
        "deleted by its request: gone from the cluster and from the storage location",
        "expired and collected: gone from the cluster and from the storage location",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert!(!stdout.contains('✗'), "{stdout}");
    assert!(stdout.contains("checks passed."), "{stdout}");

    // The timeline: the Backup's Completed lands only after the API is back.
    let refused = line_index(&stdout, "refusing connections");
    let back = line_index(&stdout, "accepting connections again");
    let completed = line_index(&stdout, "Backup velero/demo-backup             Completed");
    let restored = line_index(&stdout, "Restore velero/demo-restore           Completed");
    assert!(
        refused < back && back < completed && completed < restored,
        "{stdout}"
    );
    let waiting = line_index(
        &stdout,
        "Backup velero/demo-backup             WaitingForPluginOperations",
    );
    let finalizing = line_index(&stdout, "Backup velero/demo-backup             Finalizing");
    assert!(waiting < finalizing && finalizing < completed, "{stdout}");
    // The hooks around the snapshot, while the backup is InProgress.
    let frozen = line_index(&stdout, "frozen (pre hook: fsfreeze --freeze)");
    let thawed = line_index(&stdout, "thawed (post hook: fsfreeze --unfreeze)");
    assert!(frozen < thawed && thawed < waiting, "{stdout}");

    // The final status went through the re-driver, as the outage outlasted the resource timeout.
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(log.contains("re-driver"), "{log}");
    assert!(
        dir.path()
            .join("storage/hawser/backups/demo-backup/demo-backup.tar.gz")
            .exists()
    );
}

#[tokio::test]
async fn a_demo_that_runs_out_of_time_fails_and_keeps_its_directory() {
    let (code, stdout) = demo(&["--timeout", "1s"]).await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("✗ the demo did not finish within --timeout 1s"),
        "{stdout}"
    );
    assert!(stdout.contains("checks failed."), "{stdout}");
    let kept = stdout
        .lines()
        .find_map(|l| l.strip_prefix("The kubeconfig, storage and server log are kept in "))
        .expect("the directory is named");
    let kept = std::path::Path::new(kept.trim_end_matches('.'));
    assert!(kept.join("server.log").exists(), "{stdout}");
    std::fs::remove_dir_all(kept).unwrap();
}

#[tokio::test]
async fn dev_serves_a_cluster_the_cli_can_back_up_and_restore_until_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = hawser()
        .args(["dev", "--dir", dir.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push_str(&line);
            printed.push('\n');
            if line.contains("Press Ctrl-C to stop.") {
                return;
            }
        }
        panic!("hawser dev ended early:\n{printed}");
    })
    .await
    .expect("hawser dev starts in time");
    let kubeconfig = dir.path().join("kubeconfig");
    assert!(
        printed.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{printed}"
    );

    let run = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let output = hawser()
                .args(args)
                .env("KUBECONFIG", &kubeconfig)
                .output()
                .await
                .unwrap();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
            )
        }
    };
    let (code, stdout) = run(&["backup-location", "get"]).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("default"), "{stdout}");
    assert!(stdout.contains("filesystem"), "{stdout}");

    let (code, stdout) = tokio::time::timeout(
        Duration::from_secs(30),
        run(&[
            "backup",
            "create",
            "b1",
            "--include-namespaces",
            "default",
            "--wait",
        ]),
    )
    .await
    .expect("the backup finishes in time");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("Completed"), "{stdout}");
    assert!(
        dir.path()
            .join("storage/hawser/backups/b1/velero-backup.json")
            .exists()
    );

    let (code, stdout) = tokio::time::timeout(
        Duration::from_secs(30),
        run(&[
            "restore",
            "create",
            "r1",
            "--from-backup",
            "b1",
            "--namespace-mappings",
            "default:default-copy",
            "--wait",
        ]),
    )
    .await
    .expect("the restore finishes in time");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("Completed"), "{stdout}");

    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("hawser dev stops on SIGINT")
        .unwrap();
    assert_eq!(exit.code(), Some(0));
}
