//! Velero's restore exec hooks: commands run in a restored Pod's containers once they run (or
//! are ready). This module decides which; the engine waits and runs them
//! (`hawser_engine::restore::exec_hooks`).
//!
//! As Velero's `GroupRestoreExecHooks` and its wait handler:
//!
//! * a Pod's annotations come first: `post.hook.restore.velero.io/command` (a JSON array, or one
//!   word), `…/container`, `…/on-error`, `…/exec-timeout`, `…/wait-timeout` and
//!   `…/wait-for-ready`; a value that does not parse is a note and is ignored;
//! * otherwise every `spec.hooks.resources[]` entry whose selection takes the Pod (its target
//!   namespace, that the entry takes `pods`, its labels) runs its `postHooks[].exec` in order;
//! * a hook without a container runs in the Pod's first; a hook naming a container the Pod does
//!   not have is dropped with a note (Velero's "discarding post-restore exec hooks");
//! * `onError` unset is `Continue` (Velero's documented default for restore hooks), an exec
//!   timeout unset or zero is 30 s, a wait timeout unset or zero means the engine's own bound.

use std::time::Duration;

use serde_json::Value;

use crate::backup_hooks::{
    ANNOTATION_HOOK_NAME, CompiledSelection, DEFAULT_TIMEOUT, HookSelection, command_of,
};
use crate::duration::GoDuration;

const PREFIX: &str = "post.hook.restore.velero.io/";

/// One `postHooks[].exec` of a restore hook spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecHook {
    pub container: Option<String>,
    pub command: Vec<String>,
    /// `onError: Fail`: a failure stops the Pod's other hooks.
    pub fail_on_error: bool,
    pub exec_timeout: Option<Duration>,
    pub wait_timeout: Option<Duration>,
    pub wait_for_ready: bool,
}

/// One `spec.hooks.resources[]` entry's exec hooks.
#[derive(Debug, Clone, Default)]
pub struct ExecHookSpec {
    pub selection: HookSelection,
    pub hooks: Vec<ExecHook>,
}

/// An exec hook to run in one restored Pod, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodExecHook {
    /// The spec entry's name, or `<from-annotation>`.
    pub name: String,
    pub container: String,
    pub command: Vec<String>,
    pub fail_on_error: bool,
    pub exec_timeout: Duration,
    /// `None`: wait as long as the engine allows.
    pub wait_timeout: Option<Duration>,
    pub wait_for_ready: bool,
}

/// The exec hook specs of one restore, compiled.
#[derive(Debug, Default)]
pub struct ExecHooks {
    specs: Vec<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    selection: CompiledSelection,
    hooks: Vec<ExecHook>,
}

impl ExecHooks {
    /// Compiles the specs that have exec hooks.
    ///
    /// # Errors
    /// A label selector that does not parse, naming its spec.
    pub fn new(specs: Vec<ExecHookSpec>) -> Result<Self, String> {
        let specs = specs
            .into_iter()
            .filter(|s| !s.hooks.is_empty())
            .map(|spec| {
                Ok(Compiled {
                    selection: spec.selection.compile("hook spec")?,
                    hooks: spec.hooks,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self { specs })
    }

    /// The exec hooks of a restored `pod` (as created, in its target namespace), in order, and
    /// the notes of what was read with a default or dropped.
    #[must_use]
    pub fn of_pod(&self, pod: &Value) -> (Vec<PodExecHook>, Vec<String>) {
        let containers: Vec<&str> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        let Some(first) = containers.first().copied() else {
            return (Vec::new(), Vec::new());
        };
        let mut notes = Vec::new();
        let named: Vec<(String, ExecHook)> = match annotation_hook(pod, &mut notes) {
            Some(hook) => vec![(ANNOTATION_HOOK_NAME.to_owned(), hook)],
            None => self
                .specs
                .iter()
                .filter(|c| c.selection.takes(pod))
                .flat_map(|c| {
                    c.hooks
                        .iter()
                        .map(|h| (c.selection.name.clone(), h.clone()))
                })
                .collect(),
        };
        let mut hooks = Vec::new();
        for (name, hook) in named {
            let container = hook
                .container
                .clone()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| first.to_owned());
            if !containers.contains(&container.as_str()) {
                notes.push(format!(
                    "the pod has no container {container:?}: its exec hook {name} is not run"
                ));
                continue;
            }
            let positive = |d: Option<Duration>| d.filter(|d| !d.is_zero());
            hooks.push(PodExecHook {
                name,
                container,
                command: hook.command,
                fail_on_error: hook.fail_on_error,
                exec_timeout: positive(hook.exec_timeout).unwrap_or(DEFAULT_TIMEOUT),
                wait_timeout: positive(hook.wait_timeout),
                wait_for_ready: hook.wait_for_ready,
            });
        }
        (hooks, notes)
    }
}

/// The hook a Pod's `post.hook.restore.velero.io/*` annotations describe.
fn annotation_hook(pod: &Value, notes: &mut Vec<String>) -> Option<ExecHook> {
    let get = |key: &str| {
        pod.pointer("/metadata/annotations")
            .and_then(|a| a.get(format!("{PREFIX}{key}")))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let command = get("command")?;
    let mut duration = |key: &str| {
        let text = get(key)?;
        match GoDuration::parse(text) {
            Ok(d) => d.to_std(),
            Err(e) => {
                notes.push(format!(
                    "annotation {PREFIX}{key} {text:?} is no duration ({e}); it is ignored"
                ));
                None
            }
        }
    };
    let exec_timeout = duration("exec-timeout");
    let wait_timeout = duration("wait-timeout");
    let wait_for_ready = match get("wait-for-ready") {
        None => false,
        // Go's `strconv.ParseBool`.
        Some("1" | "t" | "T" | "TRUE" | "true" | "True") => true,
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => false,
        Some(v) => {
            notes.push(format!(
                "annotation {PREFIX}wait-for-ready {v:?} is no boolean; it is ignored"
            ));
            false
        }
    };
    Some(ExecHook {
        container: get("container").map(str::to_owned),
        command: command_of(command),
        fail_on_error: get("on-error") == Some("Fail"),
        exec_timeout,
        wait_timeout,
        wait_for_ready,
    })
}

#[cfg(test)]
#[path = "exec_hooks_tests.rs"]
mod tests;
