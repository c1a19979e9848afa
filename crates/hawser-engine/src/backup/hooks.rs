//! Backup hooks run ([`hawser_core::backup_hooks`] decides which): a Pod's pre hooks, then the
//! work done for it (its claims' CSI snapshots cut), then its post hooks, for
//! `Lister::concurrency` Pods at a time.
//!
//! * A command runs through the API server's `pods/exec` (WebSocket), bounded by the hook's
//!   timeout (`crate::cluster::exec`); its exit code, and the first 4 KiB of its stdout and
//!   stderr, go into the backup's log. A Pod in phase `Succeeded` or `Failed` runs none
//!   (Velero's rule).
//! * A failed hook is an error of the backup in the Pod's namespace (the backup ends
//!   `PartiallyFailed`). A failed pre hook with `onError: Fail` stops the Pod's other pre
//!   hooks and leaves the Pod out of the archive; its claims are still snapshotted, as in
//!   Velero. A Pod's post hooks run after its snapshots whatever its pre hooks did (it may
//!   have none): a freeze that failed or timed out may still have taken hold, and an
//!   application is never left frozen (Velero skips them after a failed pre hook).
//! * Recovery: before the first pre hook runs, the Pods with post hooks are recorded on the
//!   Backup (annotation [`PENDING_ANNOTATION`]), and the record is removed once every post hook
//!   ran. A backup taken up again after the server died in between first runs the post hooks
//!   of the recorded Pods, so the next leader thaws what the last one froze (a new Backup that
//!   carries the annotation from its creator is not acted on). When the record
//!   cannot be written, no hook runs (each counts as failed): a freeze nobody would undo is
//!   worse than none.
//! * `status.hookStatus` counts the hooks attempted and failed ([`Tally`]), as Velero does:
//!   hooks not run after a failed `Fail` hook count as attempted.

use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use hawser_core::backup_hooks::{BackupHooks, Phase, PodHook};
use serde_json::{Value, json};

use super::collect::Lister;
use super::results::{BackupLog, Messages, Scope};
use crate::cluster::{exec, request};

/// The Backup annotation listing the Pods whose post hooks are owed (`namespace/name`, one
/// JSON array).
pub const PENDING_ANNOTATION: &str = "hawser.io/pending-post-hooks";

/// The hooks attempted and failed, for `status.hookStatus` (of Backups and Restores).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub attempted: u64,
    pub failed: u64,
}

impl Tally {
    /// `status.hookStatus`, when a hook was attempted (a count of zero is left out, as Velero's
    /// `omitempty` leaves it).
    #[must_use]
    pub fn status(self) -> Option<hawser_api::HookStatus> {
        let count = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX)).filter(|n| *n > 0);
        (self.attempted > 0).then(|| hawser_api::HookStatus {
            hooks_attempted: count(self.attempted),
            hooks_failed: count(self.failed),
        })
    }
}

/// What running hooks left for the backup's log and results.
#[derive(Debug, Default)]
struct Notes {
    tally: Tally,
    lines: Vec<(&'static str, String)>,
    errors: Vec<(String, String)>,
}

/// Runs the hooks of one backup.
pub(crate) struct Runner<'a> {
    client: &'a kube::Client,
    hooks: &'a BackupHooks,
    backup_path: String,
    api_retry: Duration,
    notes: Mutex<Notes>,
}

/// A Pod after its hooks: whether it goes into the archive, and what was done for it.
pub(crate) struct Hooked<T> {
    pub pod: Value,
    pub kept: bool,
    pub done: T,
}

impl<'a> Runner<'a> {
    pub(crate) fn new(
        client: &'a kube::Client,
        hooks: &'a BackupHooks,
        backup: &hawser_api::Backup,
        api_retry: Duration,
    ) -> Self {
        let meta = &backup.metadata;
        let backup_path = format!(
            "/apis/velero.io/v1/namespaces/{}/backups/{}",
            crate::cluster::path::encode(meta.namespace.as_deref().unwrap_or_default()),
            crate::cluster::path::encode(meta.name.as_deref().unwrap_or_default()),
        );
        Self {
            client,
            hooks,
            backup_path,
            api_retry,
            notes: Mutex::new(Notes::default()),
        }
    }

    /// Runs the post hooks an earlier run of `backup` recorded as owed (see the module docs).
    /// Only a backup taken up again (read `InProgress`) has an earlier run: on one that starts
    /// now the annotation is whoever created it, and is not acted on.
    pub(crate) async fn settle_pending(&self, backup: &hawser_api::Backup) {
        if backup.phase() != hawser_api::BackupPhase::InProgress {
            return;
        }
        let Some(pods) = backup
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PENDING_ANNOTATION))
            .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
        else {
            return;
        };
        for full in pods {
            let Some((namespace, name)) = full.split_once('/') else {
                continue;
            };
            let path = format!(
                "/api/v1/namespaces/{}/pods/{}",
                crate::cluster::path::encode(namespace),
                crate::cluster::path::encode(name)
            );
            match request::get_opt(self.client, &path, self.api_retry).await {
                Ok(Some(pod)) => {
                    self.note("info", format!("Running the post hooks of pod {full}, which an earlier run of this backup owed it"));
                    self.run_phase(&pod, Phase::Post).await;
                }
                Ok(None) => self.note("info", format!("Pod {full}, owed its post hooks by an earlier run of this backup, is gone")),
                Err(e) => self.error(namespace, format!("the post hooks owed to pod {full} by an earlier run of this backup were not run: it could not be read: {}", request::text(&e))),
            }
        }
        self.record(None).await;
    }

    /// For each of `pods`: its pre hooks, `work(pod)`, its post hooks (see the module docs).
    pub(crate) async fn around<T, F, Fut>(
        &self,
        lister: &Lister<'_>,
        pods: Vec<Value>,
        work: F,
    ) -> Vec<Hooked<T>>
    where
        F: Fn(&Value) -> Fut,
        Fut: Future<Output = T>,
    {
        if pods.is_empty() {
            return Vec::new();
        }
        let owed: Vec<String> = pods
            .iter()
            .filter(|p| !self.hooks.of_pod(p, Phase::Post).0.is_empty())
            .map(full_name)
            .collect();
        let recorded = owed.is_empty() || self.record(Some(&owed)).await;
        let work = &work;
        let hooked = futures::stream::iter(pods)
            .map(|pod| async move {
                if !recorded {
                    let (pre, _) = self.hooks.of_pod(&pod, Phase::Pre);
                    let (post, _) = self.hooks.of_pod(&pod, Phase::Post);
                    let n = (pre.len() + post.len()) as u64;
                    self.count(n, n);
                    self.error(namespace(&pod), format!("the hooks of pod {} were not run: the post hooks it would be owed could not be recorded on the Backup", full_name(&pod)));
                    let done = work(&pod).await;
                    return Hooked { pod, kept: true, done };
                }
                let left_out = self.run_phase(&pod, Phase::Pre).await;
                let done = work(&pod).await;
                self.run_phase(&pod, Phase::Post).await;
                Hooked {
                    kept: !left_out,
                    pod,
                    done,
                }
            })
            .buffered(lister.concurrency.max(1))
            .collect()
            .await;
        if recorded && !owed.is_empty() {
            self.record(None).await;
        }
        hooked
    }

    /// The hooks attempted and failed; the log lines and errors go to `log` and `messages`.
    pub(crate) fn finish(self, log: &mut BackupLog, messages: &mut Messages) -> Tally {
        let notes = self
            .notes
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (level, line) in &notes.lines {
            log.line(level, line);
        }
        for (namespace, message) in notes.errors {
            log.line("error", &message);
            messages.error(Scope::Namespace(namespace), message);
        }
        notes.tally
    }

    /// Runs `pod`'s hooks of `phase` in order, until one with `onError: Fail` fails; whether
    /// that left the Pod out of the backup (a failed `Fail` pre hook).
    async fn run_phase(&self, pod: &Value, phase: Phase) -> bool {
        let (hooks, read_notes) = self.hooks.of_pod(pod, phase);
        for line in read_notes {
            self.note("warning", format!("pod {}: {line}", full_name(pod)));
        }
        if hooks.is_empty() {
            return false;
        }
        let pod_phase = pod.pointer("/status/phase").and_then(Value::as_str);
        if let Some(done @ ("Succeeded" | "Failed")) = pod_phase {
            self.note(
                "info",
                format!(
                    "Pod {} is {done}: its {} hooks were not run",
                    full_name(pod),
                    phase.as_str()
                ),
            );
            return false;
        }
        self.count(hooks.len() as u64, 0);
        for hook in &hooks {
            let what = format!(
                "{} hook {} in pod {} (container {})",
                phase.as_str(),
                hook.name,
                full_name(pod),
                hook.container.as_deref().unwrap_or("?")
            );
            match self.exec(pod, hook).await {
                Ok(output) => self.note("info", format!("The {what} ran: exit code 0{output}")),
                Err(why) => {
                    self.count(0, 1);
                    let fails = !hook.continue_on_error;
                    let then = match (phase, fails) {
                        (Phase::Pre, true) => {
                            "; onError is Fail: the pod is left out of the backup and its other pre hooks are not run"
                        }
                        (Phase::Post, true) => {
                            "; onError is Fail: its other post hooks are not run"
                        }
                        (_, false) => "; onError is Continue",
                    };
                    self.error(namespace(pod), format!("The {what} failed: {why}{then}"));
                    if fails {
                        return phase == Phase::Pre;
                    }
                }
            }
        }
        false
    }

    /// Runs one hook: `Ok` with its output for the log, or why it failed.
    async fn exec(&self, pod: &Value, hook: &PodHook) -> Result<String, String> {
        let container = hook.container.clone()?;
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let command = exec::Command {
            namespace: namespace(pod),
            pod: name,
            container: &container,
            command: &hook.command,
            timeout: hook.timeout,
        };
        exec::run(self.client, &command).await
    }

    /// Writes (or, with `None`, removes) the record of owed post hooks; whether it was written.
    async fn record(&self, pods: Option<&[String]>) -> bool {
        let value = pods.map(|p| json!(p).to_string());
        let patch = json!({"metadata": {"annotations": {PENDING_ANNOTATION: value}}});
        match request::merge_patch(self.client, &self.backup_path, &patch, self.api_retry).await {
            Ok(_) => true,
            Err(e) => {
                let what = if pods.is_some() {
                    "recorded"
                } else {
                    "cleared"
                };
                self.note(
                    "warning",
                    format!(
                        "the pods owed post hooks could not be {what} on the Backup: {}",
                        request::text(&e)
                    ),
                );
                false
            }
        }
    }

    fn count(&self, attempted: u64, failed: u64) {
        let mut notes = self.lock();
        notes.tally.attempted += attempted;
        notes.tally.failed += failed;
    }

    fn note(&self, level: &'static str, line: String) {
        self.lock().lines.push((level, line));
    }

    fn error(&self, namespace: &str, message: String) {
        self.lock().errors.push((namespace.to_owned(), message));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Notes> {
        self.notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn namespace(pod: &Value) -> &str {
    pod.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn full_name(pod: &Value) -> String {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{}/{name}", namespace(pod))
}
