//! Checks shared by the server tests that are not setup: waiting for metrics that a run updates
//! right after its final status.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::server_support::Server;

/// Waits (up to 5 s) until `/metrics` shows every line: the counters of a run are updated right
/// after its final status lands, so a test that saw the status may be a moment early.
pub async fn assert_metrics(server: &Server, lines: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = server.metrics().await;
        let missing: Vec<&&str> = lines.iter().filter(|l| !metrics.contains(**l)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "missing {missing:?} in\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
