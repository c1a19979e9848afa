//! The checked-in CRDs served by an API server (the loopback simulator), used through kube-rs and
//! kubectl as Velero's clients use them.
//!
//! kubectl is found through the `KUBECTL` environment variable, else `kubectl` on `PATH`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hawser_api::{
    Backup, BackupPhase, BackupStatus, BackupStorageLocation, BackupStorageLocationPhase,
    DataUpload, DataUploadSpec,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use kube_sim::{KubeSim, SimConfig};
use serde_json::json;

fn crds_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds/velero.io.yaml")
}

fn kubectl_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("kubectl"))
                .find(|c| c.is_file())
        })
        .expect("kubectl not found: set KUBECTL to a kubectl binary")
}

/// Runs kubectl against `sim` with its own kubeconfig and discovery cache; returns stdout.
async fn kubectl(sim: &KubeSim, dir: &Path, args: &[&str]) -> String {
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(kubectl_binary())
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("KUBECACHEDIR", dir.join("cache"))
            .env("HOME", dir)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl finishes within 60s")
    .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn header(table: &str) -> Vec<String> {
    let first = table.lines().next().unwrap_or_default();
    // Columns are separated by at least two spaces ("LAST VALIDATED" has one).
    first
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn velero_objects_are_served_as_velero_serves_them() {
    let sim = KubeSim::start(SimConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let applied = kubectl(
        &sim,
        dir.path(),
        &["apply", "-f", crds_path().to_str().unwrap()],
    )
    .await;
    assert_eq!(applied.lines().count(), 13, "{applied}");
    kubectl(&sim, dir.path(), &["create", "namespace", "velero"]).await;

    let client = Client::try_from(Config::new(sim.api_url().parse().unwrap())).unwrap();

    // Without a status subresource a create keeps the status it carries (backup sync relies on
    // this), and a merge patch of the main resource changes it.
    let bsls: Api<BackupStorageLocation> = Api::namespaced(client.clone(), "velero");
    let bsl = BackupStorageLocation::named("default")
        .with_bucket("aws", "velero")
        .as_default()
        .in_phase(BackupStorageLocationPhase::Available);
    let mut created = None;
    for _ in 0..50 {
        // The CRDs become Established asynchronously.
        match bsls.create(&PostParams::default(), &bsl).await {
            Ok(c) => {
                created = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let created = created.expect("BSL created once the CRD is established");
    assert!(created.is_available());

    let backups: Api<Backup> = Api::namespaced(client.clone(), "velero");
    let synced = Backup::named("b1")
        .in_location("default")
        .with_status(BackupStatus {
            phase: BackupPhase::Completed,
            warnings: Some(1),
            ..BackupStatus::default()
        });
    let stored = backups
        .create(&PostParams::default(), &synced)
        .await
        .unwrap();
    assert_eq!(stored.phase(), BackupPhase::Completed);
    assert_eq!(stored.status.as_ref().unwrap().warnings, Some(1));

    let patch = json!({"status": {"phase": "Deleting"}});
    let patched = backups
        .patch("b1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.phase(), BackupPhase::Deleting);
    assert_eq!(
        backups.get("b1").await.unwrap().phase(),
        BackupPhase::Deleting
    );

    // Short names and printer columns as `velero` users see them with kubectl.
    let table = kubectl(&sim, dir.path(), &["get", "bsl", "-n", "velero"]).await;
    assert_eq!(
        header(&table),
        ["NAME", "PHASE", "LAST VALIDATED", "AGE", "DEFAULT"],
        "{table}"
    );
    assert!(
        table.lines().nth(1).unwrap().starts_with("default "),
        "{table}"
    );
    assert!(table.contains("Available"), "{table}");
    let table = kubectl(
        &sim,
        dir.path(),
        &["get", "backups.velero.io", "-n", "velero"],
    )
    .await;
    assert_eq!(header(&table), ["NAME", "AGE"], "{table}");
    let none = kubectl(
        &sim,
        dir.path(),
        &["get", "ssr", "-n", "velero", "-o", "name"],
    )
    .await;
    assert_eq!(none.trim(), "");

    // The kinds Velero's node agent and snapshotters use are served too, the data movers' at
    // velero.io/v2alpha1, so that tools listing them do not fail.
    for resource in [
        "vsl",
        "podvolumebackups",
        "podvolumerestores",
        "backuprepositories",
        "datauploads.velero.io",
        "datadownloads.velero.io",
    ] {
        let none = kubectl(
            &sim,
            dir.path(),
            &["get", resource, "-n", "velero", "-o", "name"],
        )
        .await;
        assert_eq!(none.trim(), "", "{resource}");
    }
    let uploads: Api<DataUpload> = Api::namespaced(client.clone(), "velero");
    let upload = DataUpload::new(
        "b1-x7k2p",
        DataUploadSpec {
            snapshot_type: "CSI".into(),
            source_pvc: "data".into(),
            source_namespace: "shop".into(),
            backup_storage_location: "default".into(),
            operation_timeout: "10m0s".into(),
            ..DataUploadSpec::default()
        },
    );
    uploads
        .create(&PostParams::default(), &upload)
        .await
        .unwrap();
    let listed = uploads.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.source_pvc, "data");
    let table = kubectl(&sim, dir.path(), &["get", "datauploads", "-n", "velero"]).await;
    assert_eq!(
        header(&table),
        [
            "NAME",
            "STATUS",
            "STARTED",
            "BYTES DONE",
            "TOTAL BYTES",
            "STORAGE LOCATION",
            "AGE",
            "NODE"
        ],
        "{table}"
    );

    sim.shutdown().await;
}
