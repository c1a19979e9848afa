//! `pods/exec` over WebSocket, as a real API server answers it with a kubelet behind: the
//! `v5.channel.k8s.io` and `v4.channel.k8s.io` subprotocols (binary frames whose first byte is the
//! channel: 1 stdout, 2 stderr, 3 the closing `Status`). No process runs: what a command does is
//! scripted per pod, container and command through [`Execs`], and every exec is logged.
//!
//! Checked before the upgrade, with the real server's messages: the pod exists, the container
//! is one of the pod's (or the pod's only one when none is named), a command is given, the
//! container is running (a pod whose status lists no container states counts as running, so a
//! test need not write one), and the client asked for a WebSocket with one of the two
//! subprotocols. SPDY (`POST` without a WebSocket upgrade) is answered 400, as a server that
//! only speaks WebSocket would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Request, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::http::{self as h, Resp};
use crate::shared::{ResourceRequest, Shared};
use crate::status::ApiError;

/// The subprotocols served, in the order of preference.
const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;

/// What one scripted command does.
#[derive(Debug, Clone, Default)]
pub struct ExecReply {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// How long the command runs before it answers.
    pub delay: Duration,
    /// Never answers: the exec ends only when the client goes.
    pub hang: bool,
}

impl ExecReply {
    /// A command that exits with `code`, printing `stderr`.
    pub fn exit(code: i32, stderr: &str) -> Self {
        Self {
            exit_code: code,
            stderr: stderr.to_owned(),
            ..Self::default()
        }
    }

    /// A command that never ends.
    pub fn hang() -> Self {
        Self {
            hang: true,
            ..Self::default()
        }
    }
}

/// A script line: the reply of the execs it matches. Unset fields match anything; `command`
/// matches an exec whose command, joined by spaces, contains it.
#[derive(Debug, Clone, Default)]
pub struct ExecRule {
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    pub command: Option<String>,
    pub reply: ExecReply,
}

/// One exec as run: where, what, and how it ended (`None` while it runs, or when the client
/// left first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub command: Vec<String>,
    /// When it began and ended, in milliseconds since the epoch.
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    pub exit_code: Option<i32>,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<ExecRule>,
    log: Vec<ExecRecord>,
}

/// The exec script and log of one kube-sim ([`crate::KubeSim::execs`]). Without a matching
/// rule a command exits 0 and prints nothing.
#[derive(Debug, Clone, Default)]
pub struct Execs {
    state: Arc<Mutex<State>>,
}

impl Execs {
    /// Adds `rule`; later rules win over earlier ones.
    pub fn script(&self, rule: ExecRule) {
        self.lock().rules.push(rule);
    }

    /// Every exec so far, in the order they began.
    pub fn log(&self) -> Vec<ExecRecord> {
        self.lock().log.clone()
    }

    fn reply(&self, namespace: &str, pod: &str, container: &str, command: &str) -> ExecReply {
        let fits = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.lock()
            .rules
            .iter()
            .rev()
            .find(|r| {
                fits(&r.namespace, namespace)
                    && fits(&r.pod, pod)
                    && fits(&r.container, container)
                    && r.command.as_deref().is_none_or(|c| command.contains(c))
            })
            .map(|r| r.reply.clone())
            .unwrap_or_default()
    }

    fn begin(&self, record: ExecRecord) -> usize {
        let mut state = self.lock();
        state.log.push(record);
        state.log.len() - 1
    }

    fn end(&self, index: usize, exit_code: Option<i32>) {
        if let Some(record) = self.lock().log.get_mut(index) {
            record.ended_ms = Some(epoch_ms());
            record.exit_code = exit_code;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Serves `GET|POST .../pods/{name}/exec` (see the module docs).
pub fn serve(shared: &Arc<Shared>, r: &ResourceRequest, req: Request<Incoming>) -> Resp {
    match start(shared, r, req) {
        Ok(resp) => resp,
        Err(e) => h::error(&e),
    }
}

fn start(
    shared: &Arc<Shared>,
    r: &ResourceRequest,
    mut req: Request<Incoming>,
) -> Result<Resp, ApiError> {
    let namespace = r.namespace.clone().unwrap_or_default();
    let name = r.name.clone().unwrap_or_default();
    let pod = shared
        .store
        .read()
        .get(&r.served.storage, &namespace, &name)
        .map(|p| (**p).clone())
        .ok_or_else(|| ApiError::not_found(&r.served.info, &name))?;
    let params: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let container = container(&pod, &name, params.iter().find(|(k, _)| k == "container"))?;
    let command: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    if !running(&pod, &container) {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade connection: container not found (\"{container}\")"
        )));
    }
    let (protocol, accept) = handshake(req.headers())?;
    let execs = shared.execs.clone();
    let reply = execs.reply(&namespace, &name, &container, &command.join(" "));
    let index = execs.begin(ExecRecord {
        namespace,
        pod: name,
        container,
        command,
        started_ms: epoch_ms(),
        ended_ms: None,
        exit_code: None,
    });
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        let exit = run(socket, &reply).await;
        execs.end(index, exit);
    });
    let mut resp = Resp::new(h::full(Vec::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(protocol),
    );
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(resp)
}

/// The container the exec runs in: the named one, or the pod's only one.
fn container(
    pod: &Value,
    name: &str,
    asked: Option<&(String, String)>,
) -> Result<String, ApiError> {
    let names: Vec<&str> = [
        "/spec/containers",
        "/spec/initContainers",
        "/spec/ephemeralContainers",
    ]
    .iter()
    .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
    .flatten()
    .filter_map(|c| c["name"].as_str())
    .collect();
    match asked.map(|(_, v)| v.as_str()).filter(|v| !v.is_empty()) {
        Some(c) if names.contains(&c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => {
            let main: Vec<&str> = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str())
                .collect();
            match main.as_slice() {
                [only] => Ok((*only).to_owned()),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    main.join(" ")
                ))),
            }
        }
    }
}

/// Whether the pod's status says `container` runs (or says nothing of its containers).
fn running(pod: &Value, container: &str) -> bool {
    let statuses: Vec<&Value> = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| pod["status"][k].as_array())
        .flatten()
        .collect();
    if statuses.is_empty() {
        return !matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
    }
    statuses
        .iter()
        .any(|s| s["name"] == container && s["state"].get("running").is_some())
}

/// The subprotocol chosen and the `Sec-WebSocket-Accept` value, or why the request is no
/// WebSocket exec.
fn handshake(headers: &http::HeaderMap) -> Result<(&'static str, String), ApiError> {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let key = headers.get(header::SEC_WEBSOCKET_KEY);
    let (true, Some(key)) = (upgrade, key) else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_owned()))
        .collect();
    let protocol = PROTOCOLS
        .iter()
        .find(|p| offered.iter().any(|o| o == *p))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "none of the offered subprotocols {offered:?} is served; kube-sim serves {PROTOCOLS:?}"
            ))
        })?;
    Ok((protocol, derive_accept_key(key.as_bytes())))
}

/// Plays `reply` on the socket; the exit code sent, `None` when the client left first.
async fn run<S>(mut socket: WebSocketStream<S>, reply: &ExecReply) -> Option<i32>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let wait = async {
        if reply.hang {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(reply.delay).await;
    };
    // The client's frames (none are expected without stdin) are read so that its leaving ends
    // the exec.
    tokio::select! {
        () = wait => {}
        () = async { while let Some(Ok(_)) = socket.next().await {} } => return None,
    }
    for (channel, text) in [(STDOUT, &reply.stdout), (STDERR, &reply.stderr)] {
        if !text.is_empty() {
            socket.send(frame(channel, text.as_bytes())).await.ok()?;
        }
    }
    let status = exit_status(reply.exit_code);
    socket
        .send(frame(ERROR, status.to_string().as_bytes()))
        .await
        .ok()?;
    let _ = socket.close(None).await;
    Some(reply.exit_code)
}

fn frame(channel: u8, bytes: &[u8]) -> Message {
    let mut data = Vec::with_capacity(bytes.len() + 1);
    data.push(channel);
    data.extend_from_slice(bytes);
    Message::binary(data)
}

/// The `Status` a kubelet sends on the error channel when a command ends.
fn exit_status(code: i32) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command, exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}
    })
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
