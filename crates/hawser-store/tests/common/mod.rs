//! Shared fixtures of the integration tests: artifact bytes, an S3 test server, a TCP proxy
//! that can cut the connection to it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hawser_store::{Location, LocationOptions, LocationSpec};
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
/// started with `scripts/start-s3.sh` and stopped on drop.
pub struct S3Server {
    pub endpoint: String,
    pid: Option<u32>,
    _dir: tempfile::TempDir,
}

impl S3Server {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        if let Ok(endpoint) = std::env::var("HAWSER_TEST_S3_ENDPOINT") {
            return Self {
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                pid: None,
                _dir: dir,
            };
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/start-s3.sh");
        let pidfile = dir.path().join("s3.pid");
        let output = Command::new("bash")
            .arg(&script)
            .env("HAWSER_S3_PIDFILE", &pidfile)
            .env("HAWSER_S3_LOG", dir.path().join("s3.log"))
            .output();
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
            _dir: dir,
        }
    }

    /// Creates a bucket with an unsigned `PUT /<bucket>` (moto accepts it).
    pub fn create_bucket(&self, bucket: &str) {
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
/// connection is closed and new ones are refused.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
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
                connections.spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        () = wait_cut(flag) => {}
                    }
                });
            }
            // Dropping the listener refuses new connections; aborting closes the open ones.
            connections.abort_all();
        });
        Self { addr, cut, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
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
