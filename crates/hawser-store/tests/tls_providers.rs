//! object_store's TLS stack and kube's share one rustls crypto provider (aws-lc-rs): an S3 client
//! and a kube `Client` in the same process must both complete real TLS handshakes (with two
//! providers compiled in and none installed, rustls panics at the first one).
//!
//! The server is a tokio-rustls listener on the loopback interface with a test certificate
//! (`tests/fixtures/tls`, signed by a test CA that both clients are given); it counts the
//! handshakes that completed and answers each request with a fixed HTTP answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hawser_store::{Location, LocationOptions, LocationSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

const CA: &str = include_str!("fixtures/tls/ca.pem");
const SERVER_CERT: &str = include_str!("fixtures/tls/server.pem");
const SERVER_KEY: &str = include_str!("fixtures/tls/server.key");

/// What the listener saw: completed handshakes and the request lines that followed them.
#[derive(Default)]
struct Seen {
    handshakes: AtomicUsize,
    requests: std::sync::Mutex<Vec<String>>,
}

/// A TLS server on 127.0.0.1 answering `GET /version` like an API server and everything else
/// (an S3 `HEAD` of an object) with 404.
async fn tls_server() -> (u16, Arc<Seen>) {
    let certs = vec![CertificateDer::from_pem_slice(SERVER_CERT.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).unwrap();
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, record) = (acceptor.clone(), record.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                record.handshakes.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let line = head.lines().next().unwrap_or_default().to_owned();
                let answer = if line.starts_with("GET /version") {
                    let body = r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"test","gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z","goVersion":"go1.24","compiler":"gc","platform":"linux/amd64"}"#;
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_owned()
                };
                record.requests.lock().unwrap().push(line);
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_and_kube_clients_in_one_process_both_complete_tls_handshakes() {
    let (port, seen) = tls_server().await;

    // The S3 client trusts the test CA through the BSL's caCert, as a user would configure it.
    let spec = LocationSpec::new("aws", "b")
        .with_config("s3Url", format!("https://127.0.0.1:{port}"))
        .with_config("s3ForcePathStyle", "true")
        .with_ca_cert(CA.as_bytes().to_vec())
        .with_credentials("[default]\naws_access_key_id=a\naws_secret_access_key=b\n");
    let options = LocationOptions {
        max_retries: 0,
        ..LocationOptions::default()
    };
    let location = Location::with_options(&spec, options).unwrap();
    // A HEAD over TLS, answered 404: the object does not exist (not a transport failure).
    let exists = location.exists("backups/b1/velero-backup.json").await;
    assert!(
        matches!(exists, Ok(false)),
        "{:?}",
        exists.map_err(|e| e.full_message())
    );
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 1);

    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(vec![
        CertificateDer::from_pem_slice(CA.as_bytes())
            .unwrap()
            .to_vec(),
    ]);
    let client = kube::Client::try_from(config).expect("kube client over rustls");
    let version = client
        .apiserver_version()
        .await
        .expect("GET /version over TLS");
    assert_eq!(version.git_version, "v1.33.0");
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 2);

    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[0].starts_with("HEAD /b/backups/b1/velero-backup.json "),
        "{requests:?}"
    );
    assert!(requests[1].starts_with("GET /version "), "{requests:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_the_handshake_fails_as_unreachable_unless_told_to_skip_verification() {
    let (port, seen) = tls_server().await;
    let spec = LocationSpec::new("aws", "b")
        .with_config("s3Url", format!("https://127.0.0.1:{port}"))
        .with_config("s3ForcePathStyle", "true")
        .with_credentials("[default]\naws_access_key_id=a\naws_secret_access_key=b\n");
    let options = LocationOptions {
        max_retries: 0,
        ..LocationOptions::default()
    };
    let location = Location::with_options(&spec, options.clone()).unwrap();
    let err = location
        .exists("backups/b1/velero-backup.json")
        .await
        .unwrap_err();
    assert_eq!(
        err.category(),
        "Unreachable",
        "an untrusted certificate: {}",
        err.full_message()
    );
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 0);
    assert!(seen.requests.lock().unwrap().is_empty());

    // `insecureSkipTLSVerify: "true"` (Velero's AWS plugin key) accepts the certificate it
    // cannot verify: the same request now completes its handshake and is answered.
    let insecure = spec.with_config("insecureSkipTLSVerify", "true");
    let location = Location::with_options(&insecure, options).unwrap();
    let exists = location.exists("backups/b1/velero-backup.json").await;
    assert!(
        matches!(exists, Ok(false)),
        "{:?}",
        exists.map_err(|e| e.full_message())
    );
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 1);
}
