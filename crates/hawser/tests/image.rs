//! The container image (`scripts/build-image.sh`, `image/Containerfile`), built with buildah
//! from this test's binary, run by unpacking it (buildah's mount of a container of the image)
//! and starting its entrypoint under a chroot as the image's user: `hawser version` and
//! Velero's `/velero server --help` answer with nothing but the image's files. Needs `buildah`
//! (Debian's package) and root for the chroot; `scripts/test` leaves it out without buildah.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("the command starts");
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn the_image_runs_hawser_as_velero_from_its_own_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let image = format!("localhost/hawser-test:{}", std::process::id());
    let built = run(Command::new(repo().join("scripts/build-image.sh"))
        .arg(env!("CARGO_BIN_EXE_hawser"))
        .env("HAWSER_IMAGE", &image)
        .env("HAWSER_IMAGE_DIR", dir.path()));
    assert_eq!(text(&built), image);
    let buildah = |args: &[&str]| {
        let mut command = Command::new("buildah");
        command
            .arg("--root")
            .arg(dir.path().join("storage"))
            .arg("--runroot")
            .arg(dir.path().join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args);
        run(&mut command)
    };

    let config: serde_json::Value =
        serde_json::from_slice(&buildah(&["inspect", "--type", "image", &image]).stdout).unwrap();
    let oci = &config["OCIv1"]["config"];
    assert_eq!(oci["User"], "65532:65532", "{oci:#}");
    assert_eq!(oci["Entrypoint"], serde_json::json!(["/hawser"]), "{oci:#}");

    let container = text(&buildah(&["from", &image]));
    let root = PathBuf::from(text(&buildah(&["mount", &container])));
    assert_eq!(
        std::fs::read_link(root.join("velero")).unwrap(),
        Path::new("hawser")
    );
    let tmp = std::fs::metadata(root.join("tmp")).unwrap();
    assert_eq!(tmp.permissions().mode() & 0o7777, 0o1777);
    assert!(root.join("etc/ssl/certs/ca-certificates.crt").is_file());

    // The entrypoint under the image's root and user: only the image's files are there.
    let in_image = |args: &[&str]| {
        run(Command::new("chroot")
            .arg("--userspec=65532:65532")
            .arg(&root)
            .args(args)
            // Nothing of the test's environment but the PATH chroot is found on.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default()))
    };
    let version = text(&in_image(&["/hawser", "version", "--client-only"]));
    assert!(
        version.contains(&format!("v{}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    let help = text(&in_image(&["/velero", "server", "--help"]));
    assert!(help.contains("--default-backup-storage-location"), "{help}");

    buildah(&["umount", &container]);
    buildah(&["rm", &container]);
    buildah(&["rmi", &image]);
}
