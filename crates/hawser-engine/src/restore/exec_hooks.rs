//! Restore exec hooks run ([`hawser_core::restore::exec_hooks`] decides which), once every item
//! is restored and the claims have settled, for [`Restorer::concurrency`] Pods at a time, as
//! Velero's wait handler runs them:
//!
//! * the Pod is read again and again (after 50 ms, doubling up to 1 s) until each container
//!   with hooks is running, or ready when one of its hooks asks `waitForReady`; then that
//!   container's hooks run in order through `pods/exec` ([`crate::cluster::exec`]), each bounded
//!   by its exec timeout;
//! * a container's wait is bounded by the largest `waitTimeout` of its hooks when each has one,
//!   else by the resource timeout (Velero waits without end then); a hook whose own
//!   `waitTimeout` passed before its container came up does not run;
//! * a failed hook is an error of the restore in the Pod's namespace; with `onError: Fail` the
//!   Pod's other hooks are not run; a Pod deleted, or ended (`Succeeded`, `Failed`), before its
//!   hooks ran, and a wait that ran out, leave an error per hook not run;
//! * the counts go to `status.hookStatus` as Velero counts them: every hook found is attempted;
//!   failed are those that failed or were not run.
//!
//! The Restore shows Velero's `Finalizing` meanwhile ([`super::results::Progress::finalizing`]).

use std::time::{Duration, Instant};

use futures::StreamExt;
use hawser_core::backoff::Backoff;
use hawser_core::duration::GoDuration;
use hawser_core::restore::PodExecHook;
use serde_json::Value;

use super::apply::Restorer;
use super::results::Scope;
use crate::backup::hooks::Tally;
use crate::cluster::path::encode;
use crate::cluster::{exec, request};

/// A restored Pod and its exec hooks.
pub(crate) struct HookedPod {
    pub namespace: String,
    pub name: String,
    pub hooks: Vec<PodExecHook>,
}

/// Runs the exec hooks of `pods` (see the module docs); `bound` is the resource timeout.
pub(crate) async fn run(restorer: &Restorer, pods: Vec<HookedPod>, bound: Duration) -> Tally {
    let tallies: Vec<Tally> = futures::stream::iter(pods)
        .map(|pod| run_pod(restorer, pod, bound))
        .buffer_unordered(restorer.concurrency.max(1))
        .collect()
        .await;
    tallies.into_iter().fold(Tally::default(), |a, b| Tally {
        attempted: a.attempted + b.attempted,
        failed: a.failed + b.failed,
    })
}

/// The hooks of one container, in order.
struct Group {
    container: String,
    hooks: Vec<PodExecHook>,
    /// Wait for the container to be ready, not only running.
    ready: bool,
    /// The largest wait timeout of its hooks, `None` when one has none (then the resource
    /// timeout bounds the wait).
    wait: Option<Duration>,
}

async fn run_pod(restorer: &Restorer, pod: HookedPod, bound: Duration) -> Tally {
    let full = format!("{}/{}", pod.namespace, pod.name);
    let mut tally = Tally {
        attempted: pod.hooks.len() as u64,
        failed: 0,
    };
    // The containers in the order their first hook names them (a Pod has few).
    let mut pending: Vec<Group> = Vec::new();
    for hook in pod.hooks {
        let i = match pending.iter().position(|g| g.container == hook.container) {
            Some(i) => i,
            None => {
                pending.push(Group {
                    container: hook.container.clone(),
                    hooks: Vec::new(),
                    ready: false,
                    wait: Some(Duration::ZERO),
                });
                pending.len() - 1
            }
        };
        let group = &mut pending[i];
        group.ready |= hook.wait_for_ready;
        group.wait = group.wait.zip(hook.wait_timeout).map(|(a, b)| a.max(b));
        group.hooks.push(hook);
    }
    let path = format!(
        "/api/v1/namespaces/{}/pods/{}",
        encode(&pod.namespace),
        encode(&pod.name)
    );
    let started = Instant::now();
    let backoff = Backoff {
        initial: Duration::from_millis(50),
        ..Backoff::with_max(Duration::from_secs(1))
    };
    let mut polls = 0;
    let stopped = loop {
        // Sent once per poll: the poll is the retry.
        let current = match request::get_opt(&restorer.client, &path, Duration::ZERO).await {
            Ok(Some(p)) => Some(p),
            Ok(None) => break Some("the pod was deleted".to_owned()),
            Err(_) => None,
        };
        if let Some(current) = &current {
            if let Some(done @ ("Succeeded" | "Failed")) =
                current.pointer("/status/phase").and_then(Value::as_str)
            {
                break Some(format!("the pod entered phase {done}"));
            }
            let mut i = 0;
            let mut failed = false;
            while i < pending.len() {
                if !container_up(current, &pending[i].container, pending[i].ready) {
                    i += 1;
                    continue;
                }
                let group = pending.remove(i);
                let mut hooks = group.hooks.into_iter();
                if run_group(restorer, &full, &mut hooks, started, &mut tally).await {
                    // The hooks left are reported as not run.
                    let hooks = hooks.collect();
                    pending.insert(0, Group { hooks, ..group });
                    failed = true;
                    break;
                }
            }
            if failed {
                break Some("a hook before it with onError Fail failed".to_owned());
            }
            if pending.is_empty() {
                break None;
            }
        }
        polls += 1;
        let delay = backoff.delay(polls, &mut rand::rng());
        let (expired, waiting): (Vec<Group>, Vec<Group>) = pending
            .into_iter()
            .partition(|g| started.elapsed() + delay > g.wait.unwrap_or(bound));
        pending = waiting;
        for group in expired {
            let wait = GoDuration::from(group.wait.unwrap_or(bound));
            let state = if group.ready { "ready" } else { "running" };
            not_run(
                restorer,
                &full,
                group,
                &format!("its container was not {state} within {wait}"),
                &mut tally,
            );
        }
        if pending.is_empty() {
            break None;
        }
        tokio::time::sleep(delay).await;
    };
    if let Some(why) = stopped {
        for group in pending {
            not_run(restorer, &full, group, &why, &mut tally);
        }
    }
    tally
}

/// An error for each hook of `group`, not run because of `why`.
fn not_run(restorer: &Restorer, full: &str, group: Group, why: &str, tally: &mut Tally) {
    let namespace = full.split_once('/').map_or(full, |(ns, _)| ns);
    for hook in group.hooks {
        tally.failed += 1;
        restorer.report.error(
            Scope::Namespace(namespace.to_owned()),
            format!(
                "The restore exec hook {} in pod {full} (container {}) was not run: {why}",
                hook.name, group.container
            ),
        );
    }
}

/// Runs the hooks of a container that is up; whether one with `onError: Fail` failed (the rest
/// stay in `hooks`).
async fn run_group(
    restorer: &Restorer,
    full: &str,
    hooks: &mut impl Iterator<Item = PodExecHook>,
    started: Instant,
    tally: &mut Tally,
) -> bool {
    let (namespace, name) = full.split_once('/').unwrap_or_default();
    let scope = || Scope::Namespace(namespace.to_owned());
    for hook in hooks.by_ref() {
        let what = format!(
            "restore exec hook {} in pod {full} (container {})",
            hook.name, hook.container
        );
        let result = match hook.wait_timeout {
            Some(w) if started.elapsed() > w => Err(format!(
                "its wait timeout ({}) passed before the container was up",
                GoDuration::from(w)
            )),
            _ => {
                let command = exec::Command {
                    namespace,
                    pod: name,
                    container: &hook.container,
                    command: &hook.command,
                    timeout: hook.exec_timeout,
                };
                exec::run(&restorer.client, &command).await
            }
        };
        match result {
            Ok(output) => restorer
                .report
                .info(&format!("The {what} ran: exit code 0{output}")),
            Err(why) => {
                tally.failed += 1;
                let then = if hook.fail_on_error {
                    "; onError is Fail: the pod's other hooks are not run"
                } else {
                    "; onError is Continue"
                };
                restorer
                    .report
                    .error(scope(), format!("The {what} failed: {why}{then}"));
                if hook.fail_on_error {
                    return true;
                }
            }
        }
    }
    false
}

/// Whether `container` of `pod` runs (or is ready, when `ready`).
fn container_up(pod: &Value, container: &str, ready: bool) -> bool {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == container)
        .any(|s| {
            if ready {
                s["ready"] == true
            } else {
                s.pointer("/state/running").is_some()
            }
        })
}
