//! What a server's [`LocationPolicy`] refuses: `filesystem` roots outside its directories and
//! ambient credentials when they are off; and the modes of what the filesystem provider writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use bytes::Bytes;
use hawser_store::{Location, LocationOptions, LocationPolicy, LocationSpec};

fn fs_spec(root: &Path) -> LocationSpec {
    LocationSpec::new("filesystem", "velero").with_config("root", root.to_str().unwrap())
}

fn open(spec: &LocationSpec, policy: &LocationPolicy) -> Result<Location, String> {
    Location::with_policy(spec, LocationOptions::default(), policy).map_err(|e| e.to_string())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn filesystem_roots_must_be_under_an_allowed_directory() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(allowed.join("team-a")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("escape")).unwrap();
    let policy = LocationPolicy::default().with_filesystem_roots([allowed.clone()]);

    open(&fs_spec(&allowed), &policy).unwrap();
    open(&fs_spec(&allowed.join("team-a")), &policy).unwrap();
    for root in [
        outside.clone(),
        allowed.join("../outside"),
        allowed.join("escape"),
    ] {
        let err = open(&fs_spec(&root), &policy).unwrap_err();
        assert!(
            err.starts_with(&format!("spec.config.root `{}`", root.display())),
            "{err}"
        );
        assert!(err.contains("add --filesystem-root DIR"), "{err}");
        assert!(!outside.join("velero").exists(), "nothing created outside");
    }

    // A bucket directory that is a link out of the allowed root is refused too.
    std::os::unix::fs::symlink(&outside, allowed.join("team-a/linked")).unwrap();
    let linked = LocationSpec::new("filesystem", "linked")
        .with_config("root", allowed.join("team-a").to_str().unwrap());
    let err = open(&linked, &policy).unwrap_err();
    assert!(
        err.contains("is not under a directory this server allows"),
        "{err}"
    );

    let none = LocationPolicy::default().with_filesystem_roots([]);
    let err = open(&fs_spec(&allowed), &none).unwrap_err();
    assert!(
        err.starts_with(
            "filesystem locations are disabled on this server: start it with --filesystem-root DIR"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn what_the_filesystem_provider_creates_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let policy = LocationPolicy::default().with_filesystem_roots([dir.path().to_owned()]);
    let location = open(&fs_spec(dir.path()), &policy).unwrap();
    location
        .put("backups/b1/velero-backup.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let bucket = dir.path().join("velero");
    assert_eq!(mode(&bucket), 0o700);
    assert_eq!(mode(&bucket.join("backups")), 0o700);
    assert_eq!(mode(&bucket.join("backups/b1")), 0o700);
    assert_eq!(mode(&bucket.join("backups/b1/velero-backup.json")), 0o600);
}

#[test]
fn ambient_credentials_are_used_only_when_allowed() {
    let no_credential = [
        LocationSpec::new("aws", "b").with_config("region", "eu-west-1"),
        LocationSpec::new("gcp", "b"),
        LocationSpec::new("azure", "b").with_config("storageAccount", "acct"),
    ];
    let strict = LocationPolicy::default().with_ambient_credentials(false);
    for spec in &no_credential {
        open(spec, &LocationPolicy::default()).unwrap();
        let err = open(spec, &strict).unwrap_err();
        assert_eq!(
            err,
            format!(
                "provider `{}`: spec.credential is not set, so credentials from the server's \
                 environment or instance metadata would be used, and this server does not allow \
                 that (--allow-ambient-credentials=false): set spec.credential to a Secret key \
                 holding the location's credentials",
                spec.provider
            )
        );
    }
    // A managed identity picked by client ID alone is ambient too.
    let identity = LocationSpec::new("azure", "b")
        .with_config("storageAccount", "acct")
        .with_credentials("AZURE_CLIENT_ID=c\n");
    let err = open(&identity, &strict).unwrap_err();
    assert!(err.contains("names only AZURE_CLIENT_ID"), "{err}");

    // With the location's own credentials the policy has nothing to refuse.
    let with_secret = LocationSpec::new("aws", "b")
        .with_config("region", "eu-west-1")
        .with_credentials("[default]\naws_access_key_id=a\naws_secret_access_key=b\n");
    open(&with_secret, &strict).unwrap();
}
