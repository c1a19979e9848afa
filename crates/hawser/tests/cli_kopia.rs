//! `hawser kopia` on a repository in a local directory: create, snapshot, list, verify and
//! restore through the binary; a wrong password and a second create are refused with one
//! readable line; Velero's well-known default password is warned about. (The repository
//! format itself is tested against kopia in `crates/hawser-kopia/tests`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::path::Path;
use std::process::{Command, Output};

fn hawser(repo: &Path, password: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hawser"));
    command
        .arg("kopia")
        .arg("--directory")
        .arg(repo)
        .args(["--volume-namespace", "shop"])
        .args(args)
        .env_remove("HAWSER_KOPIA_PASSWORD");
    if let Some(password) = password {
        command.env("HAWSER_KOPIA_PASSWORD", password);
    }
    command.output().expect("hawser starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn a_directory_snapshots_and_restores_through_the_command_line() {
    let repo = tempfile::tempdir().unwrap();
    let source = tempfile::tempdir().unwrap();
    std::fs::create_dir(source.path().join("sub")).unwrap();
    std::fs::write(source.path().join("sub/data.txt"), b"volume data\n").unwrap();
    std::os::unix::fs::symlink("sub/data.txt", source.path().join("link")).unwrap();

    let created = hawser(repo.path(), Some("s3cret"), &["create"]);
    assert_eq!(ok(&created), "Repository kopia/shop created.\n");
    assert!(repo.path().join("kopia/shop/kopia.repository").is_file());
    let again = hawser(repo.path(), Some("s3cret"), &["create"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("a repository exists there already"),
        "{}",
        text(&again.stderr)
    );

    let stored = ok(&hawser(
        repo.path(),
        Some("s3cret"),
        &[
            "snapshot",
            source.path().to_str().unwrap(),
            "--source-path",
            "shop/db-0/data",
            "--tag",
            "team=storage",
        ],
    ));
    let id = stored.split_whitespace().nth(1).unwrap().to_owned();
    assert_eq!(stored, format!("Snapshot {id} of shop/db-0/data stored.\n"));
    let listed = ok(&hawser(repo.path(), Some("s3cret"), &["snapshots"]));
    assert!(listed.starts_with("ID"), "{listed}");
    assert!(
        listed.contains(&id) && listed.contains("default@default:shop/db-0/data"),
        "{listed}"
    );
    let verified = ok(&hawser(repo.path(), Some("s3cret"), &["verify", &id]));
    assert!(
        verified.contains("1 files, 2 directories, 1 links, 12 bytes read"),
        "{verified}"
    );

    let target = tempfile::tempdir().unwrap();
    let restored = ok(&hawser(
        repo.path(),
        Some("s3cret"),
        &["restore", &id, target.path().to_str().unwrap()],
    ));
    assert!(
        restored.contains("1 files, 2 directories, 1 links, 12 bytes"),
        "{restored}"
    );
    assert_eq!(
        std::fs::read(target.path().join("sub/data.txt")).unwrap(),
        b"volume data\n"
    );
    assert_eq!(
        std::fs::read_link(target.path().join("link")).unwrap(),
        Path::new("sub/data.txt")
    );

    let wrong = hawser(repo.path(), Some("guess"), &["snapshots"]);
    assert_eq!(wrong.status.code(), Some(1));
    let stderr = text(&wrong.stderr);
    assert!(
        stderr.contains("the password does not open the repository"),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains("password")).count(),
        1,
        "{stderr}"
    );
    let deleted = ok(&hawser(repo.path(), Some("s3cret"), &["delete", &id]));
    assert_eq!(deleted, format!("Snapshot {id} deleted.\n"));
    assert!(!ok(&hawser(repo.path(), Some("s3cret"), &["snapshots"])).contains(&id));
    // Quick maintenance changes nothing this young; full maintenance without margins frees
    // the deleted snapshot's data.
    let quick = ok(&hawser(repo.path(), Some("s3cret"), &["maintenance"]));
    assert!(quick.contains("Write epoch unchanged."), "{quick}");
    assert!(
        quick.contains("no garbage collection without --full"),
        "{quick}"
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let full = ok(&hawser(
        repo.path(),
        Some("s3cret"),
        &["maintenance", "--full", "--safety", "none"],
    ));
    assert!(full.contains("Snapshots: 0;"), "{full}");
    let freed = full
        .split("Blobs deleted: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(freed.is_some_and(|n| n >= 1), "{full}");
    let missing = hawser(repo.path(), Some("s3cret"), &["verify", "0123"]);
    assert!(
        text(&missing.stderr).contains("snapshot 0123 not found"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn the_well_known_default_password_is_warned_about() {
    let repo = tempfile::tempdir().unwrap();
    let out = hawser(repo.path(), None, &["create", "--hash", "BLAKE3-256-128"]);
    ok(&out);
    let bad = hawser(
        tempfile::tempdir().unwrap().path(),
        Some("p"),
        &["create", "--hash", "MD5"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    // A splitter kopia does not have is refused before anything is written.
    let empty = tempfile::tempdir().unwrap();
    let bad = hawser(
        empty.path(),
        Some("p"),
        &["create", "--object-splitter", "DYNAMIC-3M-BUZHASH"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("--object-splitter"),
        "{}",
        text(&bad.stderr)
    );
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
    assert!(
        text(&out.stderr).contains("Velero's well-known default"),
        "{}",
        text(&out.stderr)
    );
    // Velero's default opens it.
    ok(&hawser(
        repo.path(),
        Some(hawser_kopia_default()),
        &["snapshots"],
    ));
}

fn hawser_kopia_default() -> &'static str {
    "static-passw0rd"
}

#[tokio::test]
async fn a_repository_created_without_the_secret_gets_a_random_password_in_it() {
    use base64::Engine as _;
    let cluster = cli_support::Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    server_support::filesystem_location(&cluster, "default", root.path());
    let kopia = ["kopia", "--storage-location", "default"];
    let created = cluster.hawser(&[&kopia[..], &["create"]].concat()).await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert!(
        created
            .stdout
            .contains("created with a random repository password"),
        "{}",
        created.stdout
    );
    assert!(!created.stderr.contains("well-known"), "{}", created.stderr);
    let secret = cluster
        .get("v1", "Secret", "velero-repo-credentials")
        .expect("the Secret is created");
    let stored = secret["data"]["repository-password"].as_str().unwrap();
    let password = base64::engine::general_purpose::STANDARD
        .decode(stored)
        .unwrap();
    let password = String::from_utf8(password).unwrap();
    assert_ne!(password, hawser_kopia::VELERO_DEFAULT_PASSWORD);
    assert!(password.len() >= 32, "{password}");
    // The Secret's password is the repository's: the next command reads it from there.
    let listed = cluster.hawser(&[&kopia[..], &["snapshots"]].concat()).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(!listed.stderr.contains("well-known"), "{}", listed.stderr);
    let wrong = cluster
        .hawser_with(
            &[&kopia[..], &["snapshots"]].concat(),
            &[(
                "HAWSER_KOPIA_PASSWORD",
                hawser_kopia::VELERO_DEFAULT_PASSWORD,
            )],
        )
        .await;
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);
}

#[tokio::test]
async fn a_storage_location_s_repository_takes_its_password_from_velero_s_secret() {
    use base64::Engine as _;
    let cluster = cli_support::Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    server_support::filesystem_location(&cluster, "default", root.path());
    let password = base64::engine::general_purpose::STANDARD.encode("from-the-secret\n");
    cluster
        .store()
        .insert(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "velero-repo-credentials", "namespace": cli_support::NS},
            "data": {"repository-password": password}
        }))
        .unwrap();
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("f"), b"x").unwrap();
    let kopia = [
        "kopia",
        "--storage-location",
        "default",
        "--volume-namespace",
        "shop",
    ];
    fn run<'a>(kopia: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
        [kopia, args].concat()
    }
    let created = cluster.hawser(&run(&kopia, &["create"])).await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert!(!created.stderr.contains("well-known"), "{}", created.stderr);
    let stored = cluster
        .hawser(&run(&kopia, &["snapshot", source.path().to_str().unwrap()]))
        .await;
    assert_eq!(stored.code, 0, "{}", stored.stderr);
    assert!(
        root.path()
            .join(server_support::BUCKET)
            .join("kopia/shop/kopia.repository")
            .is_file()
    );
    // The Secret's password, trimmed as Velero trims it, opens it; another does not.
    let listed = cluster
        .hawser_with(
            &run(&kopia, &["snapshots"]),
            &[("HAWSER_KOPIA_PASSWORD", "from-the-secret")],
        )
        .await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let wrong = cluster
        .hawser_with(
            &run(&kopia, &["snapshots"]),
            &[("HAWSER_KOPIA_PASSWORD", "other")],
        )
        .await;
    assert_eq!(wrong.code, 1);
    let missing = cluster
        .hawser(&["kopia", "--storage-location", "nowhere", "snapshots"])
        .await;
    assert_eq!(missing.code, 2, "{}", missing.stderr);
}
