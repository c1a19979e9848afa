//! Shared fixtures of the integration tests: artifact bytes, an S3 test server, a TCP proxy
//! that can cut the connection to it, and a listing of a directory as it is on disk.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hawser_store::{Location, LocationOptions, LocationSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `len` bytes that do not repeat within a part (xorshift), so a misplaced part is detected.
pub fn artifact(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Options for tests: the smallest part size S3 accepts, failures surface within seconds.
pub fn test_options() -> LocationOptions {
    LocationOptions {
        part_size: 5 * 1024 * 1024,
        max_in_flight_parts: 2,
        max_retries: 2,
        retry_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
    }
}

/// Writes `data` through the blocking bridge from a blocking thread, as the archive writer does.
pub async fn write_blocking(location: &Location, key: &str, data: Vec<u8>) -> Result<u64, String> {
    let mut writer = location
        .blocking_writer(key)
        .map_err(|e| e.full_message())?;
    tokio::task::spawn_blocking(move || {
        for chunk in data.chunks(100_000) {
            writer.write_all(chunk).map_err(|e| e.to_string())?;
        }
        writer.finish().map_err(|e| e.full_message())
    })
    .await
    .unwrap()
}

/// Reads an object whole through the blocking bridge.
pub async fn read_blocking(location: &Location, key: &str) -> Vec<u8> {
    let mut reader = location.blocking_reader(key).await.unwrap();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        out
    })
    .await
    .unwrap()
}

/// An S3-protocol server for a test: `HAWSER_TEST_S3_ENDPOINT` when set, else a moto server
/// started with `scripts/start-s3.sh` and stopped on drop. With `HAWSER_TEST_S3_SERVER=s3s-fs`
/// it is always an s3s-fs server of the test's own, which checks every request's signature.
pub struct S3Server {
    pub endpoint: String,
    pid: Option<u32>,
    /// s3s-fs only: the directory its buckets live in.
    s3s_root: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

impl S3Server {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let s3s = std::env::var("HAWSER_TEST_S3_SERVER").as_deref() == Ok("s3s-fs");
        if !s3s && let Ok(endpoint) = std::env::var("HAWSER_TEST_S3_ENDPOINT") {
            return Self {
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                pid: None,
                s3s_root: None,
                _dir: dir,
            };
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/start-s3.sh");
        let pidfile = dir.path().join("s3.pid");
        let s3s_root = s3s.then(|| dir.path().join("root"));
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .env("HAWSER_S3_PIDFILE", &pidfile)
            .env("HAWSER_S3_LOG", dir.path().join("s3.log"));
        if let Some(root) = &s3s_root {
            command
                .env("HAWSER_S3_SERVER", "s3s-fs")
                .env("HAWSER_S3_ROOT", root);
        }
        let output = command.output();
        let output = match output {
            Ok(o) => o,
            Err(e) => panic!(
                "{}",
                how_to_provide(&format!("running {} failed: {e}", script.display()))
            ),
        };
        if !output.status.success() {
            panic!(
                "{}",
                how_to_provide(&format!(
                    "{} exited with {}:\n{}",
                    script.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ))
            );
        }
        let endpoint = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Self {
            endpoint,
            pid: Some(pid),
            s3s_root,
            _dir: dir,
        }
    }

    /// Whether this is an s3s-fs server (signatures checked).
    pub fn is_s3s(&self) -> bool {
        self.s3s_root.is_some()
    }

    /// Creates a bucket: with an unsigned `PUT /<bucket>` (moto accepts it), or on s3s-fs as
    /// the directory it keeps a bucket in (the test's setup, not what is under test).
    pub fn create_bucket(&self, bucket: &str) {
        if let Some(root) = &self.s3s_root {
            std::fs::create_dir_all(root.join(bucket)).unwrap();
            return;
        }
        let host = self.endpoint.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        write!(stream, "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "creating bucket {bucket} failed: {answer}"
        );
    }

    /// Multipart uploads of `bucket` that were started and neither completed nor aborted
    /// (`GET /<bucket>?uploads`, unsigned: moto accepts it; s3s-fs keeps one `.upload-ID.json`
    /// file per upload in its root, for all buckets, and they are listed instead).
    pub fn incomplete_uploads(&self, bucket: &str) -> Vec<String> {
        if let Some(root) = &self.s3s_root {
            return std::fs::read_dir(root)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(".upload-") && name.ends_with(".json"))
                .collect();
        }
        let host = self.endpoint.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        write!(
            stream,
            "GET /{bucket}?uploads HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "listing the uploads of {bucket} failed: {answer}"
        );
        answer
            .split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key.to_owned()))
            .collect()
    }

    /// A bucket name of this test process: a server given through `HAWSER_TEST_S3_ENDPOINT`
    /// outlives one run, so a fixed name would meet the previous run's objects.
    pub fn bucket(&self, base: &str) -> String {
        format!("{base}-{}", std::process::id())
    }

    /// A path-style `aws` spec for `bucket` on this server with `[default]` credentials.
    pub fn spec(&self, bucket: &str) -> LocationSpec {
        spec_for(&self.endpoint, bucket)
    }
}

pub fn spec_for(endpoint: &str, bucket: &str) -> LocationSpec {
    LocationSpec::new("aws", bucket)
        .with_config("region", "us-east-1")
        .with_config("s3Url", endpoint)
        .with_config("s3ForcePathStyle", "true")
        .with_credentials(
            "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
        )
}

fn how_to_provide(problem: &str) -> String {
    format!(
        "the S3 tests need an S3-protocol server and could not start one: {problem}\n\
         Provide one of: `pip install 'moto[server]'` (then the tests start moto_server themselves), \
         or run `scripts/start-s3.sh` and export HAWSER_TEST_S3_ENDPOINT=<the URL it prints>."
    )
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// A TCP forwarder in front of a server that a test can cut: after [`Proxy::cut`] every open
/// connection is closed and new ones are refused. [`Proxy::cutting_after`] cuts by itself once
/// a number of bytes went upstream.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Bytes forwarded from clients to the server, over every connection.
    pub sent: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Self {
        Self::cutting_after(upstream, u64::MAX).await
    }

    /// A proxy that forwards exactly `limit` bytes from clients to the server (over all
    /// connections together), then cuts: the request that crosses the mark is broken off
    /// mid-way, as when the network to the storage goes away mid-upload.
    pub async fn cutting_after(upstream: &str, limit: u64) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let flag = cut.clone();
        let counter = sent.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = wait_cut(flag.clone()) => break,
                };
                let Ok((mut inbound, _)) = accepted else {
                    break;
                };
                let upstream = upstream.clone();
                let flag = flag.clone();
                let counter = counter.clone();
                connections.spawn(async move {
                    let Ok(outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut from_client, mut to_client) = inbound.split();
                    let (mut from_server, mut to_server) = outbound.into_split();
                    let up =
                        forward_counted(&mut from_client, &mut to_server, &counter, limit, &flag);
                    let down = tokio::io::copy(&mut from_server, &mut to_client);
                    tokio::select! {
                        _ = up => {}
                        _ = down => {}
                        () = wait_cut(flag.clone()) => {}
                    }
                });
            }
            // Dropping the listener refuses new connections; aborting closes the open ones.
            connections.abort_all();
        });
        Self {
            addr,
            cut,
            sent,
            task,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }
}

/// Copies client bytes upstream until `limit` bytes went up in total, then raises `cut`.
async fn forward_counted(
    from: &mut (impl AsyncReadExt + Unpin),
    to: &mut (impl AsyncWriteExt + Unpin),
    counter: &AtomicU64,
    limit: u64,
    cut: &AtomicBool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        let before = counter.fetch_add(n as u64, Ordering::SeqCst);
        let allowed = usize::try_from(limit.saturating_sub(before))
            .unwrap_or(usize::MAX)
            .min(n);
        if allowed > 0 && to.write_all(&buf[..allowed]).await.is_err() {
            return;
        }
        if allowed < n {
            counter.fetch_sub((n - allowed) as u64, Ordering::SeqCst);
            cut.store(true, Ordering::SeqCst);
            return;
        }
    }
}

async fn wait_cut(flag: Arc<AtomicBool>) {
    while !flag.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every file under `dir`, recursively, as it is on disk (paths relative to `dir`, sorted).
/// Unlike a location's listing this shows what object_store hides: staging files of unfinished
/// uploads (`<name>#<n>`).
pub fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// `GET url` (plain `http://`) over a bare TCP connection, with no HTTP client in between:
/// (status, body).
pub fn plain_get(url: &str) -> (u16, Vec<u8>) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, answer[split + 4..].to_vec())
}
