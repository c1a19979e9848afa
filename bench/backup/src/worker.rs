//! The measured side, run in a child process so that its peak RSS is its own: either a part of
//! the floor (see [`Part`]: the least work that lists the same objects and compresses the bytes
//! the archive holds) or a hawser backup into a filesystem location (its archive sealed with
//! `--sealed`) plus the commit of `velero-backup.json`.

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
use hawser_engine::backup::{self, BackupOptions, ValidatedBackup};
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

/// Which part of the floor a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The four paged LISTs at once, each page split into its items and every item's head
    /// decoded; each page's items as the archive's tar entries (each item twice: under its
    /// group's directory and under the preferred version's, with a header and padding) go to a
    /// gzip thread writing a file.
    Full,
    /// The LISTs and the decoding only: nothing compressed.
    ListOnly,
    /// The compression only: the bytes `full` compresses, listed and written to a file before
    /// the clock starts, read back and gzipped into another file by one thread.
    GzipOnly,
}

/// A LIST page: its items left as text, and the continue token.
#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    items: Vec<&'a serde_json::value::RawValue>,
    #[serde(default)]
    metadata: PageMeta,
}

#[derive(serde::Deserialize, Default)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    token: Option<String>,
}

/// The head of an item: what names its archive entry.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    metadata: HeadMeta<'a>,
}

#[derive(serde::Deserialize)]
struct HeadMeta<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow, default)]
    namespace: Option<&'a str>,
}

/// Appends the tar entry of `data` at `path` to `out`: a ustar header as the archive writes it,
/// the bytes, zeros to the next 512-byte block.
fn tar_entry(out: &mut Vec<u8>, path: &str, data: &[u8]) -> Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o755);
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(data.len() as u64);
    header.set_path(path).context("an entry path")?;
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().next_multiple_of(512), 0);
    Ok(())
}

/// Pages through `PATHS[which]` with [`PAGE`]-sized LISTs; for every page, its items' tar
/// entries are handed to `out` when given. Returns the number of items.
async fn list_path(
    client: kube::Client,
    which: usize,
    out: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
) -> Result<u64> {
    let (path, group_resource) = (PATHS[which], GROUP_RESOURCES[which]);
    let mut objects = 0u64;
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
        let page: Page<'_> = serde_json::from_str(&body).context("LIST body")?;
        let mut bytes = Vec::new();
        for item in &page.items {
            let head: Head<'_> = serde_json::from_str(item.get()).context("an item's head")?;
            let (name, namespace) = (head.metadata.name, head.metadata.namespace);
            anyhow::ensure!(!name.is_empty(), "an item without a name");
            if out.is_some() {
                let within = namespace.map_or_else(
                    || format!("cluster/{name}.json"),
                    |ns| format!("namespaces/{ns}/{name}.json"),
                );
                let json = item.get().as_bytes();
                tar_entry(
                    &mut bytes,
                    &format!("resources/{group_resource}/{within}"),
                    json,
                )?;
                tar_entry(
                    &mut bytes,
                    &format!("resources/{group_resource}/v1-preferredversion/{within}"),
                    json,
                )?;
            }
        }
        objects += page.items.len() as u64;
        if let Some(out) = &out {
            out.send(bytes).await.context("the gzip thread stopped")?;
        }
        token = page.metadata.token.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(objects);
        }
    }
}

/// The four LISTs at once; each page's item bytes to `out` when given.
async fn list_all(url: &str, out: Option<tokio::sync::mpsc::Sender<Vec<u8>>>) -> Result<u64> {
    let client = client(url)?;
    let tasks: Vec<_> = (0..PATHS.len())
        .map(|which| tokio::spawn(list_path(client.clone(), which, out.clone())))
        .collect();
    drop(out);
    let mut objects = 0;
    for task in tasks {
        objects += task.await.context("a LIST task")??;
    }
    Ok(objects)
}

/// The sending end of a gzip thread, and the thread.
type GzipThread = (
    tokio::sync::mpsc::Sender<Vec<u8>>,
    std::thread::JoinHandle<Result<()>>,
);

/// A thread gzipping what arrives on the returned channel into `file` at [`GZIP_LEVEL`].
fn gzip_thread(file: &Path) -> Result<GzipThread> {
    let file = std::fs::File::create(file).context("the floor's output file")?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let thread = std::thread::spawn(move || {
        let mut gz = GzEncoder::new(std::io::BufWriter::new(file), Compression::new(GZIP_LEVEL));
        while let Some(chunk) = rx.blocking_recv() {
            gz.write_all(&chunk).context("gzip")?;
        }
        gz.finish()
            .context("gzip finish")?
            .flush()
            .context("flush")?;
        Ok(())
    });
    Ok((tx, thread))
}

/// The floor's `part`, writing into `dir`.
pub async fn floor(url: &str, part: Part, dir: &Path) -> Result<()> {
    let output = dir.join("floor.gz");
    match part {
        Part::ListOnly => {
            let started = Instant::now();
            let objects = list_all(url, None).await?;
            report(objects, started)
        }
        Part::Full => {
            let started = Instant::now();
            let (tx, thread) = gzip_thread(&output)?;
            let objects = list_all(url, Some(tx)).await?;
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("the gzip thread panicked"))??;
            report(objects, started)
        }
        Part::GzipOnly => {
            // Not timed: the bytes `full` compresses, into a file.
            let raw = dir.join("floor.raw");
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
            let writer = {
                let raw = raw.clone();
                tokio::task::spawn_blocking(move || -> Result<()> {
                    let mut file = std::io::BufWriter::new(
                        std::fs::File::create(raw).context("the raw bytes' file")?,
                    );
                    while let Some(chunk) = rx.blocking_recv() {
                        file.write_all(&chunk).context("writing the raw bytes")?;
                    }
                    file.flush().context("flush")?;
                    Ok(())
                })
            };
            let objects = list_all(url, Some(tx)).await?;
            writer.await.context("the writer")??;

            let started = Instant::now();
            let (tx, thread) = gzip_thread(&output)?;
            let reader = tokio::task::spawn_blocking(move || -> Result<()> {
                let mut file = std::fs::File::open(raw).context("the raw bytes' file")?;
                loop {
                    let mut chunk = vec![0u8; 1 << 20];
                    let read = std::io::Read::read(&mut file, &mut chunk).context("reading")?;
                    if read == 0 {
                        return Ok(());
                    }
                    chunk.truncate(read);
                    tx.blocking_send(chunk).context("the gzip thread stopped")?;
                }
            });
            reader.await.context("the reader")??;
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("the gzip thread panicked"))??;
            report(objects, started)
        }
    }
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
    // Checked inside the clock, as the server checks a Backup before it runs it.
    let valid = ValidatedBackup::check(&client, object.clone(), options.api_retry)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let outcome = backup::run(client, &location, &valid, options)
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
