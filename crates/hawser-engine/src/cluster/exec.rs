//! A command run in a container through the API server's `pods/exec` (WebSocket, kube-rs's
//! client), for the backup and restore hooks: its exit, and the first [`OUTPUT_KEPT`] bytes of
//! its stdout and stderr for the log. Never retried: a command is not idempotent.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::request;

/// Bytes of a command's stdout and of its stderr kept for the log; the rest is counted.
pub const OUTPUT_KEPT: usize = 4096;

/// Where and what to run.
pub(crate) struct Command<'a> {
    pub namespace: &'a str,
    pub pod: &'a str,
    pub container: &'a str,
    pub command: &'a [String],
    /// Bounds the whole exec; on timeout the connection is closed (the command may go on in
    /// the container).
    pub timeout: Duration,
}

/// Runs `command`: `Ok` with its output for the log (`; stdout: "…"`, empty when it printed
/// nothing) when it exits 0, else why it failed (the exit, the output, the timeout, or why the
/// exec did not start).
pub(crate) async fn run(client: &kube::Client, command: &Command<'_>) -> Result<String, String> {
    if command.command.is_empty() {
        return Err("the hook has no command".to_owned());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), command.namespace);
    let params = AttachParams::default()
        .container(command.container)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let run = async {
        let mut process = pods
            .exec(command.pod, command.command.to_vec(), &params)
            .await
            .map_err(|e| format!("the exec could not start: {}", request::text(&e)))?;
        let status = process.take_status();
        let (stdout, stderr) = tokio::join!(kept(process.stdout()), kept(process.stderr()));
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        let _ = process.join().await;
        let output = format!("{}{}", shown("stdout", &stdout), shown("stderr", &stderr));
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(output),
            Some(s) => Err(format!(
                "{}{output}",
                s.message.unwrap_or_else(|| "the command failed".to_owned())
            )),
            None => Err(format!(
                "the exec ended without the command's status{output}"
            )),
        }
    };
    match tokio::time::timeout(command.timeout, run).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "timed out after {}",
            hawser_core::duration::GoDuration::from(command.timeout)
        )),
    }
}

/// The first [`OUTPUT_KEPT`] bytes of a stream (lossy UTF-8) and how many more there were.
async fn kept(stream: Option<impl AsyncRead + Unpin>) -> (String, u64) {
    let Some(mut stream) = stream else {
        return (String::new(), 0);
    };
    let mut buf = vec![0u8; 8192];
    let mut kept = Vec::new();
    let mut more = 0u64;
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_KEPT.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
        more += (n - room) as u64;
    }
    (String::from_utf8_lossy(&kept).into_owned(), more)
}

fn shown(name: &str, (text, more): &(String, u64)) -> String {
    let text = text.trim_end();
    match (text.is_empty(), *more) {
        (true, 0) => String::new(),
        (_, 0) => format!("; {name}: {text:?}"),
        _ => format!("; {name}: {text:?} and {more} more bytes"),
    }
}
