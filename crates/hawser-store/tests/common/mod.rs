//! Shared fixtures of the integration tests: artifact bytes, storage test servers (S3, Azure,
//! and S3 serving GCS's XML API), a TCP proxy that can cut the connection to one, and a listing of a directory as it is
//! on disk.
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

/// The storage test servers, one per provider protocol (`scripts/start-storage.sh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// moto's server mode: S3, any credentials accepted.
    Moto,
    /// s3s-fs: S3, every request's SigV4 signature checked.
    S3sFs,
    /// Azurite's blob service: Azure, SharedKey and SAS signatures checked.
    Azurite,
    /// moto again, for the `gcp` provider: GCS's XML API, which hawser's GCS client speaks, is
    /// S3's protocol (Google documents it as interoperable), so moto serves it. It checks no
    /// token and no signature, and is no GCS: see docs/storage.md.
    GcsOnMoto,
}

impl Kind {
    /// The S3 server of this run: s3s-fs with `HAWSER_TEST_S3_SERVER=s3s-fs`, else moto.
    pub fn s3() -> Self {
        if std::env::var("HAWSER_TEST_S3_SERVER").as_deref() == Ok("s3s-fs") {
            Self::S3sFs
        } else {
            Self::Moto
        }
    }

    /// The server's name for `scripts/start-storage.sh`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Moto | Self::GcsOnMoto => "moto",
            Self::S3sFs => "s3s-fs",
            Self::Azurite => "azurite",
        }
    }

    /// The location provider that speaks this server's protocol.
    pub fn provider(self) -> &'static str {
        match self {
            Self::Moto | Self::S3sFs => "aws",
            Self::Azurite => "azure",
            Self::GcsOnMoto => "gcp",
        }
    }
}

/// Azurite's account and its well-known key (published with the emulator).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A storage server for a test, stopped on drop. For S3 (`StorageServer::start`) it is
/// `HAWSER_TEST_S3_ENDPOINT` when set, else a moto server started with `scripts/start-storage.sh`;
/// with `HAWSER_TEST_S3_SERVER=s3s-fs` always an s3s-fs server of the test's own. The others
/// (`StorageServer::of`) are always the test's own.
pub struct StorageServer {
    pub kind: Kind,
    pub endpoint: String,
    pid: Option<u32>,
    /// s3s-fs only: the directory its buckets live in.
    s3s_root: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

/// The S3 test server, by its older name.
pub type S3Server = StorageServer;

impl StorageServer {
    /// The S3 server of this run (see [`Kind::s3`]).
    pub fn start() -> Self {
        let kind = Kind::s3();
        if kind == Kind::Moto
            && let Ok(endpoint) = std::env::var("HAWSER_TEST_S3_ENDPOINT")
        {
            return Self {
                kind,
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                pid: None,
                s3s_root: None,
                _dir: tempfile::tempdir().unwrap(),
            };
        }
        Self::of(kind)
    }

    /// A server of `kind` for one test: the run's S3 server (see [`start`](Self::start)) for
    /// the S3 kinds, else one of the test's own.
    pub fn for_test(kind: Kind) -> Self {
        match kind {
            Kind::Moto | Kind::S3sFs => Self::start(),
            Kind::Azurite | Kind::GcsOnMoto => Self::of(kind),
        }
    }

    /// A server of `kind` of the test's own.
    pub fn of(kind: Kind) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/start-storage.sh");
        let pidfile = dir.path().join("server.pid");
        let s3s_root = (kind == Kind::S3sFs).then(|| dir.path().join("root"));
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .arg(kind.name())
            .env("HAWSER_STORAGE_PIDFILE", &pidfile)
            .env("HAWSER_STORAGE_LOG", dir.path().join("server.log"));
        if let Some(root) = &s3s_root {
            command.env("HAWSER_STORAGE_ROOT", root);
        }
        let output = match command.output() {
            Ok(o) => o,
            Err(e) => panic!(
                "{}",
                how_to_provide(kind, &format!("running {} failed: {e}", script.display()))
            ),
        };
        if !output.status.success() {
            panic!(
                "{}",
                how_to_provide(
                    kind,
                    &format!(
                        "{} {} exited with {}:\n{}",
                        script.display(),
                        kind.name(),
                        output.status,
                        String::from_utf8_lossy(&output.stderr)
                    )
                )
            );
        }
        let endpoint = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Self {
            kind,
            endpoint,
            pid: Some(pid),
            s3s_root,
            _dir: dir,
        }
    }

    /// Whether this is an s3s-fs server (signatures checked).
    pub fn is_s3s(&self) -> bool {
        self.kind == Kind::S3sFs
    }

    /// `host:port` of the server.
    pub fn host(&self) -> &str {
        let rest = self.endpoint.trim_start_matches("http://");
        rest.split('/').next().unwrap()
    }

    /// Creates a bucket (a container on Azurite), as the test's setup rather than through what
    /// is under test: with an unsigned `PUT /<bucket>` on moto, as s3s-fs's directory, with a
    /// SharedKey-signed `PUT ?restype=container` on Azurite.
    pub fn create_bucket(&self, bucket: &str) {
        let (request, created) = match self.kind {
            Kind::S3sFs => {
                std::fs::create_dir_all(self.s3s_root.as_ref().unwrap().join(bucket)).unwrap();
                return;
            }
            Kind::Moto | Kind::GcsOnMoto => (
                format!(
                    "PUT /{bucket} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n",
                    self.host()
                ),
                "HTTP/1.1 200",
            ),
            Kind::Azurite => (
                azurite_create_container(self.host(), bucket),
                "HTTP/1.1 201",
            ),
        };
        let request = format!("{request}Connection: close\r\n\r\n");
        let mut stream = std::net::TcpStream::connect(self.host()).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with(created),
            "creating bucket {bucket} on {} failed: {answer}",
            self.kind.name()
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
        assert!(
            matches!(self.kind, Kind::Moto | Kind::GcsOnMoto),
            "uploads are listed on moto and s3s-fs"
        );
        let host = self.host();
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

    /// What a second, independent S3 client sees of an object: boto3 (which moto brings),
    /// signing with the test keys (`s3_inspect.py`). `what` is `tags` (`key=value` lines) or
    /// `encryption` (the `ServerSideEncryption` and `SSEKMSKeyId` of a HEAD, one line each).
    pub fn inspect(&self, what: &str, bucket: &str, key: &str) -> Vec<String> {
        const INSPECT: &str = include_str!("s3_inspect.py");
        let output = Command::new("python3")
            .args(["-c", INSPECT, &self.endpoint, what, bucket, key])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "reading the {what} of {key} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A bucket name of this test process: a server given through `HAWSER_TEST_S3_ENDPOINT`
    /// outlives one run, so a fixed name would meet the previous run's objects.
    pub fn bucket(&self, base: &str) -> String {
        format!("{base}-{}", std::process::id())
    }

    /// A location spec for `bucket` on this server with working credentials, in the form a
    /// Velero user writes for that provider.
    pub fn spec(&self, bucket: &str) -> LocationSpec {
        match self.kind {
            Kind::Moto | Kind::S3sFs => spec_for(&self.endpoint, bucket),
            Kind::Azurite => azurite_spec(&self.endpoint, bucket, AZURITE_KEY),
            Kind::GcsOnMoto => LocationSpec::new("gcp", bucket)
                .with_config("storeEndpoint", &self.endpoint)
                .with_credentials(GCP_SERVICE_ACCOUNT),
        }
    }

    /// The spec with credentials this server refuses, where it checks any (s3s-fs, Azurite).
    pub fn spec_with_wrong_credentials(&self, bucket: &str) -> Option<LocationSpec> {
        match self.kind {
            Kind::S3sFs => Some(spec_for(&self.endpoint, bucket).with_credentials(
                "[default]\naws_access_key_id = testing\naws_secret_access_key = not-the-secret\n",
            )),
            // A key of the right form (64 bytes, base64) that is not the account's.
            Kind::Azurite => Some(azurite_spec(
                &self.endpoint,
                bucket,
                &AZURITE_KEY.replace('E', "F"),
            )),
            Kind::Moto | Kind::GcsOnMoto => None,
        }
    }

    /// The spec of a location on this server's protocol at `endpoint` (e.g. a closed port).
    pub fn spec_at(&self, endpoint: &str, bucket: &str) -> LocationSpec {
        let mut spec = self.spec(bucket);
        let key = match self.kind {
            Kind::Moto | Kind::S3sFs => "s3Url",
            Kind::Azurite => "storageAccountURI",
            Kind::GcsOnMoto => "storeEndpoint",
        };
        let path = self.endpoint.trim_start_matches("http://");
        let path = path.find('/').map_or("", |at| &path[at..]);
        spec.config
            .insert(key.to_owned(), format!("{endpoint}{path}"));
        spec
    }
}

/// The test service-account key file (`tests/fixtures/README.md`).
pub const GCP_SERVICE_ACCOUNT: &str = include_str!("../fixtures/gcp-service-account.json");

/// An `azure` spec for Azurite at `endpoint`, the account key given as Velero's plugin reads it:
/// a variable of the credentials file named by `storageAccountKeyEnvVar`.
pub fn azurite_spec(endpoint: &str, container: &str, key: &str) -> LocationSpec {
    LocationSpec::new("azure", container)
        .with_config("storageAccount", AZURITE_ACCOUNT)
        .with_config("storageAccountURI", endpoint)
        .with_config(
            "storageAccountKeyEnvVar",
            "AZURE_STORAGE_ACCOUNT_ACCESS_KEY",
        )
        .with_credentials(format!(
            "AZURE_STORAGE_ACCOUNT_ACCESS_KEY={key}\nAZURE_CLOUD_NAME=AzurePublicCloud\n"
        ))
}

/// The head of a Create Container request for Azurite, signed with the account's SharedKey
/// (the string to sign as the Blob service documents it: verb, eleven empty standard headers,
/// the `x-ms-` headers, then `/<account>/<path>` and the query parameters).
fn azurite_create_container(host: &str, container: &str) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let date = jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&jiff::Timestamp::now())
        .unwrap();
    let version = "2021-08-06";
    let path = format!("/{AZURITE_ACCOUNT}/{container}");
    let to_sign = format!(
        "PUT{}x-ms-date:{date}\nx-ms-version:{version}\n/{AZURITE_ACCOUNT}{path}\nrestype:container",
        "\n".repeat(12)
    );
    let engine = base64::engine::general_purpose::STANDARD;
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(&engine.decode(AZURITE_KEY).unwrap()).unwrap();
    mac.update(to_sign.as_bytes());
    let signature = engine.encode(mac.finalize().into_bytes());
    format!(
        "PUT {path}?restype=container HTTP/1.1\r\nHost: {host}\r\nx-ms-date: {date}\r\n\
         x-ms-version: {version}\r\nAuthorization: SharedKey {AZURITE_ACCOUNT}:{signature}\r\n\
         Content-Length: 0\r\n"
    )
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

fn how_to_provide(kind: Kind, problem: &str) -> String {
    let how = match kind {
        Kind::Moto | Kind::GcsOnMoto => {
            "`pip install 'moto[server]'` (then the tests start moto_server themselves), \
             or run `scripts/start-s3.sh` and export HAWSER_TEST_S3_ENDPOINT=<the URL it prints>"
        }
        Kind::S3sFs => "`scripts/install-s3s-fs.sh` (cargo install of s3s-fs 0.14.1)",
        Kind::Azurite => "`scripts/install-azurite.sh` (npm install of Azurite)",
    };
    format!(
        "the {} tests need a {} server and could not start one: {problem}\nProvide it with {how}.",
        kind.provider(),
        kind.name()
    )
}

impl Drop for StorageServer {
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
