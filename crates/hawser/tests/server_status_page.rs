//! `hawser server --status-page` as a process against kube-sim: `/status` shows the Backups,
//! Restores and Schedules with their phases, the phases the server stored (live timelines) and
//! the statuses it still owes, also while the API server is out; everything from the cluster is
//! escaped. One test loads the page in a headless Chromium (Debian's package; `CHROMIUM` or
//! `chromium` on the PATH) and takes the screenshot in `docs/status-page.png`; `scripts/test`
//! skips it without Chromium.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;
mod server_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Command;

use cli_support::{Cluster, NS};
use serde_json::json;
use server_support::{
    FAST, Server, backup_record, create_backup, create_restore, filesystem_location, phase, poll,
    seed, slow_reads, wait_final,
};

async fn page(server: &Server) -> String {
    let (code, body) = server.try_get("/status").await.expect("/status answers");
    assert_eq!(code, 200, "{body}");
    body
}

/// A Backup, a Restore of it, a Schedule, one Backup that fails validation with markup in its
/// reason and one that does not parse; all final.
async fn objects(cluster: &Cluster, server: &Server) {
    seed(cluster, 3);
    create_backup(cluster, "nightly", json!({"includedNamespaces": ["shop"]}));
    let done = wait_final(cluster, server, "Backup", "nightly").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    create_restore(
        cluster,
        "nightly-copy",
        json!({"backupName": "nightly", "namespaceMapping": {"shop": "shop-copy"}}),
    );
    let done = wait_final(cluster, server, "Restore", "nightly-copy").await;
    assert_eq!(phase(&done), "Completed", "{}", server.log_text());
    create_backup(
        cluster,
        "elsewhere",
        json!({"storageLocation": "<b>gone</b>"}),
    );
    let done = wait_final(cluster, server, "Backup", "elsewhere").await;
    assert_eq!(phase(&done), "FailedValidation", "{}", server.log_text());
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": "daily", "namespace": NS},
            "spec": {"schedule": "0 3 * * *", "paused": true, "template": {}}
        }))
        .unwrap();
    // Stored as is (kube-sim's store is not the API's validation): `ttl` must be a string.
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "garbled", "namespace": NS},
            "spec": {"ttl": 5},
            "status": {"phase": "Completed"}
        }))
        .unwrap();
}

#[tokio::test]
async fn the_status_page_shows_phases_timelines_and_escapes_what_it_shows() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.push("--status-page");
    let server = Server::start(&cluster, root.path(), &args).await;
    objects(&cluster, &server).await;

    let html = page(&server).await;
    for shown in [
        "<h1>hawser in namespace velero</h1>",
        "ready: leading",
        "None: every status this server wrote is stored.",
        "<h2>Backups (2)</h2>",
        "<h2>Restores (1)</h2>",
        "<h2>Schedules (1)</h2>",
        "<td><code>0 3 * * *</code></td>",
        // The timelines: the phases this server stored, in order.
        ">InProgress</span>",
        ">Completed</span>",
        "garbled cannot be read:",
        // Markup from the cluster is text.
        "&lt;b&gt;gone&lt;/b&gt;",
    ] {
        assert!(html.contains(shown), "{shown:?} not in\n{html}");
    }
    assert!(!html.contains("<b>gone"), "{html}");
    let row = |name: &str| {
        html.lines()
            .find(|l| l.starts_with(&format!("<tr><td>{name}")))
            .unwrap_or_else(|| panic!("no row of {name} in\n{html}"))
            .to_owned()
    };
    let nightly = row("nightly<");
    assert!(
        nightly.contains("class=\"phase ok\">Completed"),
        "{nightly}"
    );
    let timeline = nightly.split("class=\"timeline\"").nth(1).unwrap();
    let (in_progress, completed) = (
        timeline.find(">InProgress<").unwrap(),
        timeline.find(">Completed<").unwrap(),
    );
    assert!(in_progress < completed, "{timeline}");
    // 3 ConfigMaps, 2 Secrets and the Namespace.
    assert!(nightly.contains("<td>6 / 6</td>"), "{nightly}");
    let copy = row("nightly-copy");
    assert!(copy.contains("<td>nightly</td>"), "{copy}");
    assert!(copy.contains(">Completed</span>"), "{copy}");
    let daily = row("daily");
    assert!(daily.contains("<td>yes</td>"), "paused: {daily}");
}

#[tokio::test]
async fn during_an_api_outage_the_page_shows_the_statuses_owed() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    seed(&cluster, 3);
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.extend([
        "--status-page",
        "--resource-timeout",
        "1s",
        "--status-patch-max-backoff",
        "250ms",
    ]);
    let server = Server::start(&cluster, root.path(), &args).await;
    // Reads of the Backup take a while, so the final write is under way when the API goes.
    slow_reads(&cluster, "backups");
    create_backup(&cluster, "outage", json!({"includedNamespaces": ["shop"]}));
    poll(&server, "storing the record of outage", || {
        backup_record(root.path(), "outage")
    })
    .await;
    let outage = Duration::from_secs(6);
    cluster.sim.faults().refuse(Some(outage));
    let began = Instant::now();

    // The final status goes to the re-driver after --resource-timeout; the page says so.
    let owed = loop {
        let html = page(&server).await;
        if html.contains("<h2>Statuses owed</h2>\n<p>Written by finished work") {
            break html;
        }
        assert!(
            began.elapsed() < outage,
            "the page never showed the owed status:\n{html}\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(began.elapsed() < outage, "seen after the outage");
    assert!(
        owed.contains("<tr><td>Backup</td><td>outage</td><td class=\"phase ok\">Completed</td>"),
        "{owed}"
    );
    assert!(owed.contains("Reading the cluster failed:"), "{owed}");

    let done = wait_final(&cluster, &server, "Backup", "outage").await;
    assert_eq!(phase(&done), "Completed");
    let after = page(&server).await;
    assert!(
        after.contains("None: every status this server wrote is stored."),
        "{after}"
    );
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("chromium"), PathBuf::from)
}

/// Runs headless Chromium on `url` with `args` (as root it needs `--no-sandbox`; the other
/// flags keep it off the network, which this page does not need). Awaited, so that kube-sim,
/// which runs on this test's runtime, answers the server meanwhile.
async fn headless(profile: &Path, url: &str, args: &[&str]) -> std::process::Output {
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .await
        .expect("chromium starts");
    assert!(
        output.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test]
async fn the_status_page_renders_in_headless_chromium() {
    let cluster = Cluster::start().await;
    let root = tempfile::tempdir().unwrap();
    filesystem_location(&cluster, "default", root.path());
    let mut args = FAST.to_vec();
    args.push("--status-page");
    let server = Server::start(&cluster, root.path(), &args).await;
    objects(&cluster, &server).await;
    let url = format!("http://{}/status", server.metrics_addr);

    // The DOM as the browser built it: the tables are there, with their rows.
    let dom = headless(&root.path().join("profile-dom"), &url, &["--dump-dom"]).await;
    let dom = String::from_utf8(dom.stdout).unwrap();
    for shown in [
        "hawser in namespace velero",
        "nightly-copy",
        "0 3 * * *",
        "&lt;b&gt;gone",
    ] {
        assert!(dom.contains(shown), "{shown:?} not in the DOM:\n{dom}");
    }
    assert_eq!(dom.matches("<table>").count(), 3, "{dom}");

    let shot = root.path().join("status-page.png");
    headless(
        &root.path().join("profile-shot"),
        &url,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1440,760",
        ],
    )
    .await;
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 10_000,
        "a {}-byte screenshot is blank",
        png.len()
    );
    // HAWSER_STATUS_SCREENSHOT=PATH keeps it (docs/status-page.png is one).
    if let Some(keep) = std::env::var_os("HAWSER_STATUS_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
