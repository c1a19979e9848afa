//! The gate of tests that need a real API server: `HAWSER_TEST_REAL_KUBE` names a directory made
//! by `scripts/real-cluster.sh up DIR` (it holds `kubeconfig` and `etcd-url`). Without it such a
//! test prints one line and returns, unless `HAWSER_TEST_REQUIRE_REAL=1`, which makes it fail.
#![allow(dead_code, clippy::panic)] // a missing required server is a test failure

use std::path::PathBuf;

/// A running real API server.
pub struct RealKube {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

/// The real server to run `test` against, or `None` (after saying so) when there is none.
pub fn real_kube(test: &str) -> Option<RealKube> {
    let dir = std::env::var_os("HAWSER_TEST_REAL_KUBE").filter(|d| !d.is_empty());
    let Some(dir) = dir else {
        if std::env::var("HAWSER_TEST_REQUIRE_REAL").as_deref() == Ok("1") {
            panic!(
                "{test}: HAWSER_TEST_REQUIRE_REAL=1 but HAWSER_TEST_REAL_KUBE is not set; run \
                 `scripts/real-cluster.sh up DIR` and set HAWSER_TEST_REAL_KUBE=DIR"
            );
        }
        println!(
            "{test}: not run: HAWSER_TEST_REAL_KUBE is not set (a directory made by \
             `scripts/real-cluster.sh up DIR`)"
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    let kubeconfig = dir.join("kubeconfig");
    assert!(
        kubeconfig.is_file(),
        "{test}: HAWSER_TEST_REAL_KUBE={} has no kubeconfig; is the server up?",
        dir.display()
    );
    Some(RealKube { dir, kubeconfig })
}
