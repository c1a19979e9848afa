//! kopia's CLI as the tests run it, and opening its repositories here.

use std::path::{Path, PathBuf};
use std::process::Command;

use hawser_kopia::{Blobs, KopiaError, Repository, VELERO_DEFAULT_PASSWORD};
use hawser_store::Location;

use crate::store_common::StorageServer;

fn kopia_binary() -> PathBuf {
    std::env::var_os("KOPIA")
        .map(PathBuf::from)
        .expect("KOPIA is not set: run KOPIA=$(scripts/build-kopia.sh) scripts/test")
}

/// kopia's CLI (`binary`) with a configuration of its own in `home`.
pub struct Kopia {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Kopia {
    /// The CLI `KOPIA` names (the version Velero 1.18 pins).
    pub fn new() -> Self {
        Self::with_binary(kopia_binary())
    }

    pub fn with_binary(binary: PathBuf) -> Self {
        Self {
            binary,
            home: tempfile::tempdir().unwrap(),
        }
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.binary)
            .args(args)
            .env("KOPIA_PASSWORD", VELERO_DEFAULT_PASSWORD)
            .env(
                "KOPIA_CONFIG_PATH",
                self.home.path().join("repository.config"),
            )
            .env("KOPIA_CACHE_DIRECTORY", self.home.path().join("cache"))
            .env("KOPIA_LOG_DIR", self.home.path().join("logs"))
            .env("KOPIA_CHECK_FOR_UPDATES", "false")
            .output()
            .expect("kopia starts");
        assert!(
            out.status.success(),
            "kopia {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Creates the repository of namespace `ns` in `bucket`, as Velero lays it out.
    pub fn create(&self, server: &StorageServer, bucket: &str, ns: &str) {
        self.repository("create", server, bucket, ns, &[]);
    }

    /// [`Kopia::create`] with the splitter `splitter` instead of the default.
    pub fn create_split(&self, server: &StorageServer, bucket: &str, ns: &str, splitter: &str) {
        self.repository(
            "create",
            server,
            bucket,
            ns,
            &["--object-splitter", splitter],
        );
    }

    /// Connects to the repository of namespace `ns` in `bucket`, as Velero does.
    pub fn connect(&self, server: &StorageServer, bucket: &str, ns: &str) {
        self.repository("connect", server, bucket, ns, &[]);
    }

    /// `kopia repository VERB s3` on Velero's prefix of namespace `ns`, as user and host
    /// `default`, with `extra` arguments.
    fn repository(
        &self,
        verb: &str,
        server: &StorageServer,
        bucket: &str,
        ns: &str,
        extra: &[&str],
    ) {
        let prefix = format!("kopia/{ns}/");
        #[rustfmt::skip]
        let mut args = vec![
            "repository", verb, "s3", "--bucket", bucket, "--prefix", &prefix,
            "--endpoint", server.host(), "--disable-tls",
            "--access-key", "testing", "--secret-access-key", "testing", "--region", "us-east-1",
            "--override-hostname", "default", "--override-username", "default",
        ];
        args.extend_from_slice(extra);
        self.run(&args);
    }

    /// Snapshots `dir`; returns the snapshot's ID.
    pub fn snapshot(&self, dir: &Path) -> String {
        self.run(&["snapshot", "create", dir.to_str().unwrap()]);
        let list: serde_json::Value =
            serde_json::from_str(&self.run(&["snapshot", "list", "--json", dir.to_str().unwrap()]))
                .unwrap();
        let last = list.as_array().unwrap().last().unwrap();
        last["id"].as_str().unwrap().to_owned()
    }
}

pub async fn open(
    server: &StorageServer,
    bucket: &str,
    ns: &str,
    password: &str,
) -> Result<Repository, KopiaError> {
    let location = Location::new(&server.spec(bucket)).unwrap();
    Repository::open(Blobs::new(location, &format!("kopia/{ns}")), password).await
}
