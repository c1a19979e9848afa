//! object_store's TLS stack and kube's share one rustls crypto provider (aws-lc-rs): building
//! an S3 client over https and a kube `Client` in the same process must both work (with two
//! providers compiled in and none installed, rustls panics on the second).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hawser_store::{FailureKind, Location, LocationOptions, LocationSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_over_https_and_kube_client_coexist() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spec = LocationSpec::new("aws", "b")
        .with_config("s3Url", format!("https://127.0.0.1:{port}"))
        .with_config("s3ForcePathStyle", "true")
        .with_credentials("[default]\naws_access_key_id=a\naws_secret_access_key=b\n");
    let options = LocationOptions {
        max_retries: 0,
        ..LocationOptions::default()
    };
    let location = Location::with_options(&spec, options).unwrap();
    // A real https request attempt (refused): the TLS client config was built and used.
    let err = location.list_backups().await.unwrap_err();
    assert!(
        matches!(
            err,
            hawser_store::StoreError::Storage {
                kind: FailureKind::Unreachable,
                ..
            }
        ),
        "{}",
        err.full_message()
    );

    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = false;
    let client = kube::Client::try_from(config).expect("kube client over rustls");
    // The request fails (nothing listens) but must fail as a connection error, not a panic.
    let version = client.apiserver_version().await;
    assert!(version.is_err());
}
