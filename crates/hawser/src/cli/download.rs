//! The download protocol (velero-compat §9): how the CLI reads a file of a backup or restore
//! from its storage location without credentials for it.
//!
//! 1. Create a DownloadRequest `<name>-<uuid>` for the file's kind.
//! 2. Watch it until the server has put a signed URL in `status.downloadURL` (Velero's CLI
//!    polls every 25 ms; a watch answers as soon as the server does), up to `--timeout`.
//! 3. `GET` the URL: 404 is "file not found"; the body is streamed, gunzipped for every kind but
//!    the archive ([`DownloadTargetKind::is_gzipped_for_cli`]).
//!
//! The server deletes the request once the URL has expired (10 minutes). `logs`, `download` and
//! (later) `describe --details` all go through [`download`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use hawser_api::{DownloadRequest, DownloadRequestSpec, DownloadTarget};
use hawser_core::layout::DownloadTargetKind;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};

use super::error::CliError;

/// Flags of the commands that download (`logs`, `download`): Velero's.
#[derive(Args, Debug, Clone, Default)]
pub struct DownloadFlags {
    /// Accept any TLS certificate of the storage service for the download (insecure: open to
    /// man-in-the-middle attacks).
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
    /// Path of a PEM certificate bundle trusted for the download, besides the system's.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
}

/// Downloads the `kind` file of `name` (a backup, or a restore for the `Restore*` kinds)
/// through a DownloadRequest in `namespace`, waiting at most `timeout` for the server's URL, and
/// writes it to `out`; returns the number of bytes written.
///
/// # Errors
/// [`CliError::Api`] (the request cannot be created or watched), [`CliError::Timeout`] (no URL
/// in time: the server is not running or cannot reach the storage location),
/// [`CliError::NotFound`] (the location has no such file), [`CliError::Download`].
pub async fn download(
    client: &kube::Client,
    namespace: &str,
    kind: DownloadTargetKind,
    name: &str,
    timeout: Duration,
    flags: &DownloadFlags,
    out: &mut (dyn Write + Send),
) -> Result<u64, CliError> {
    let url = request_url(client, namespace, kind, name, timeout).await?;
    let http = http_client(flags)?;
    let what = format!("the {} file of {name}", kind.as_str());
    let download_error = |source: anyhow::Error| CliError::Download {
        what: what.clone(),
        source,
    };
    let response = http
        .get(&url)
        .send()
        .await
        .map_err(|e| download_error(tls_hint(e)))?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Err(CliError::NotFound {
            object: format!("file ({} of {name})", kind.as_str()),
            hint: "the storage location has no such file: the backup or restore may predate \
                   it, or its files were removed"
                .to_owned(),
        });
    }
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        return Err(download_error(anyhow::anyhow!(
            "request failed: {status}: {}",
            body.trim()
        )));
    }
    let mut written = Counting {
        inner: out,
        count: 0,
    };
    {
        let mut sink: Box<dyn Write + Send + '_> = if kind.is_gzipped_for_cli() {
            Box::new(flate2::write::GzDecoder::new(&mut written))
        } else {
            Box::new(&mut written)
        };
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| download_error(anyhow::Error::new(e)))?;
            sink.write_all(&chunk)
                .map_err(|e| download_error(anyhow::Error::new(e)))?;
        }
        sink.flush()
            .map_err(|e| download_error(anyhow::Error::new(e)))?;
    }
    Ok(written.count)
}

/// Steps 1 and 2: the request, and the URL the server signed for it.
async fn request_url(
    client: &kube::Client,
    namespace: &str,
    kind: DownloadTargetKind,
    name: &str,
    timeout: Duration,
) -> Result<String, CliError> {
    let api: Api<DownloadRequest> = Api::namespaced(client.clone(), namespace);
    let request_name = format!("{name}-{}", uuid::Uuid::new_v4());
    let object = format!("DownloadRequest {namespace}/{request_name}");
    let request = DownloadRequest::new(
        &request_name,
        DownloadRequestSpec {
            target: DownloadTarget {
                kind: api_kind(kind),
                name: name.to_owned(),
            },
        },
    );
    api.create(&PostParams::default(), &request)
        .await
        .map_err(|e| CliError::api("create", object.clone(), e))?;
    let hint = "is hawser server running, and is the backup storage location available? see \
                the server's log";
    answer_of(
        api,
        &request_name,
        object,
        timeout,
        hint,
        |r: DownloadRequest| {
            r.status
                .and_then(|s| s.download_url)
                .filter(|u| !u.is_empty())
        },
    )
    .await
}

/// Watches the request `name` of `api` until `answer` finds the server's answer in it, for at
/// most `timeout`; `object` names it in errors, `hint` says what to check when no answer came.
pub(super) async fn answer_of<K, T>(
    api: Api<K>,
    name: &str,
    object: String,
    timeout: Duration,
    hint: &str,
    answer: impl Fn(K) -> Option<T> + Copy + Send + Sync + 'static,
) -> Result<T, CliError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut answers = watcher(api, config)
        .applied_objects()
        .filter_map(|event| async move {
            match event {
                Ok(r) => answer(r).map(Ok),
                // The watcher restarts itself; an error it cannot get past ends the wait.
                Err(e) => Some(Err(e)),
            }
        })
        .boxed();
    match tokio::time::timeout(timeout, answers.next()).await {
        Ok(Some(Ok(found))) => Ok(found),
        Ok(Some(Err(e))) => Err(CliError::Watch {
            object,
            source: anyhow::Error::new(e),
        }),
        Ok(None) | Err(_) => Err(CliError::Timeout {
            what: format!("the server to answer {object} ({hint})"),
            after: timeout,
        }),
    }
}

/// The API's name of a kind (the two enums name the same strings).
fn api_kind(kind: DownloadTargetKind) -> hawser_api::DownloadTargetKind {
    hawser_api::DownloadTargetKind::parse(kind.as_str())
}

fn http_client(flags: &DownloadFlags) -> Result<reqwest::Client, CliError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .tls_danger_accept_invalid_certs(flags.insecure_skip_tls_verify);
    if let Some(path) = &flags.cacert {
        let pem = std::fs::read(path).map_err(|source| CliError::File {
            path: path.display().to_string(),
            source,
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            CliError::usage("--cacert", format!("not a PEM certificate bundle: {e}"))
        })?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| CliError::Download {
        what: "an HTTP client".to_owned(),
        source: anyhow::Error::new(e),
    })
}

fn tls_hint(e: reqwest::Error) -> anyhow::Error {
    let connect = e.is_connect();
    let error = anyhow::Error::new(e);
    if connect {
        error.context(
            "connecting to the storage service failed (for a certificate error: --cacert FILE, \
             or --insecure-skip-tls-verify, which is open to man-in-the-middle attacks)",
        )
    } else {
        error
    }
}

/// Counts what passes through.
struct Counting<'a> {
    inner: &'a mut (dyn Write + Send),
    count: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_api_name() {
        for kind in DownloadTargetKind::ALL {
            assert_eq!(api_kind(kind).as_str(), kind.as_str());
        }
    }

    #[test]
    fn the_log_gate_is_velero_s() {
        use hawser_api::phase::{BackupPhase, LifecyclePhase, RestorePhase};
        let gate = |phase: &str| {
            let (backup, restore) = (BackupPhase::parse(phase), RestorePhase::parse(phase));
            assert_eq!(backup.has_log(), restore.has_log(), "{phase}");
            backup.has_log()
        };
        for phase in [
            "Completed",
            "PartiallyFailed",
            "Failed",
            "WaitingForPluginOperations",
            "WaitingForPluginOperationsPartiallyFailed",
        ] {
            assert!(gate(phase), "{phase}");
        }
        for phase in ["", "New", "InProgress", "Finalizing", "FailedValidation"] {
            assert!(!gate(phase), "{phase}");
        }
        assert!(!BackupPhase::Deleting.has_log());
    }
}
