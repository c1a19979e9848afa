//! The measured side, run in a child process so that its peak RSS is its own: either the floor
//! (bare paged LISTs plus gzip of the listed bytes) or a hawser backup into a filesystem
//! location (its archive sealed with `--sealed`) plus the commit of `velero-backup.json`.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use bench_common::client;
use bench_common::worker::report;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use hawser_api::Backup;
use hawser_core::archive::{ArchiveReader, ReaderOptions};
use hawser_core::layout::Layout;
use hawser_engine::backup::{self, BackupOptions};
use hawser_store::crypt::{ArchiveKey, Opener};
use hawser_store::{Location, LocationSpec};

/// The LIST paths of the objects the cluster holds (the floor lists exactly these).
pub const PATHS: [&str; 4] = [
    "/api/v1/configmaps",
    "/api/v1/secrets",
    "/apis/apps/v1/deployments",
    "/apis/bench.example.com/v1/widgets",
];

/// Group resources whose items the archive must hold, one per path above.
pub const GROUP_RESOURCES: [&str; 4] = [
    "configmaps",
    "secrets",
    "deployments.apps",
    "widgets.bench.example.com",
];

/// Page size and gzip level shared by the floor and the backup.
pub const PAGE: u32 = 500;
pub const GZIP_LEVEL: u32 = 6;

/// Paged LISTs of every path, each response body gzipped at [`GZIP_LEVEL`] (output discarded).
pub async fn floor(url: &str) -> Result<()> {
    let client = client(url)?;
    let started = Instant::now();
    let mut objects = 0u64;
    let mut gz = GzEncoder::new(std::io::sink(), Compression::new(GZIP_LEVEL));
    for path in PATHS {
        let mut token: Option<String> = None;
        loop {
            let mut uri = format!("{path}?limit={PAGE}");
            if let Some(t) = &token {
                uri.push_str("&continue=");
                uri.push_str(t);
            }
            let request = http::Request::get(&uri)
                .body(Vec::new())
                .context("LIST request")?;
            let body = client
                .request_text(request)
                .await
                .with_context(|| format!("LIST {uri}"))?;
            let list: serde_json::Value = serde_json::from_str(&body).context("LIST body")?;
            let items = list["items"].as_array().map_or(0, Vec::len);
            objects += items as u64;
            gz.write_all(body.as_bytes()).context("gzip")?;
            token = list
                .pointer("/metadata/continue")
                .and_then(serde_json::Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
    }
    gz.finish().context("gzip finish")?;
    report(objects, started)
}

/// The archive key of `--sealed` runs (a fixed key: the bench measures the work, not the key).
fn bench_key() -> ArchiveKey {
    ArchiveKey::from_secret(&[7u8; 32]).unwrap_or_else(|_| unreachable!("32 bytes are a key"))
}

/// A backup of the whole cluster into a filesystem location under `root` (its archive sealed
/// when `sealed`), then the commit of `velero-backup.json`. Afterwards (not timed) the
/// archive's items of the benchmark's types are counted and printed as `archive items=<n>`.
pub async fn backup(url: &str, root: &Path, sealed: bool) -> Result<()> {
    let client = client(url)?;
    let root = root.to_str().context("temporary directory is not UTF-8")?;
    let mut location =
        Location::new(&LocationSpec::new("filesystem", "bench").with_config("root", root))
            .context("filesystem location")?;
    if sealed {
        location = location.with_archive_key(bench_key());
    }
    let mut object = Backup::new("bench", hawser_api::BackupSpec::default());
    object.metadata.namespace = Some("velero".to_owned());
    let options = BackupOptions::default()
        .with_page_size(PAGE)
        .with_concurrency(4);
    let options = BackupOptions {
        gzip_level: GZIP_LEVEL,
        ..options
    };

    let started = Instant::now();
    let outcome = backup::run(client, &location, &object, options)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let record = backup::record(&object, &outcome).context("velero-backup.json body")?;
    let body = serde_json::to_vec(&record).context("serialising velero-backup.json")?;
    location
        .commit_backup("bench", Bytes::from(body), true)
        .await
        .context("committing velero-backup.json")?;
    report(outcome.items_backed_up, started)?;
    anyhow::ensure!(
        outcome.errors() == 0,
        "backup had {} errors",
        outcome.errors()
    );

    let bytes = location
        .get(&Layout::new(None).backup_contents("bench"))
        .await
        .context("reading the archive back")?;
    let stored: Box<dyn std::io::Read> = if sealed {
        Box::new(Opener::new(std::io::Cursor::new(bytes), &bench_key()).context("opening")?)
    } else {
        Box::new(std::io::Cursor::new(bytes))
    };
    let mut reader = ArchiveReader::new(stored, ReaderOptions::default());
    let mut counted = 0u64;
    for item in reader.items().context("opening the archive")? {
        let item = item.context("reading an archive entry")?;
        if GROUP_RESOURCES.contains(&item.location.group_resource.as_str()) {
            counted += 1;
        }
    }
    println!("archive items={counted}");
    Ok(())
}
