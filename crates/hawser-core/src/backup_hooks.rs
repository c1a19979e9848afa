//! Velero's backup hooks: which commands run in which container of a backed-up Pod, before
//! (`pre`) and after (`post`) its volumes are snapshotted. What runs them is the engine's
//! (`hawser_engine::backup::hooks`); this module only decides.
//!
//! As Velero's item hook handler does:
//!
//! * a Pod's annotations come first: `pre.hook.backup.velero.io/{command,container,on-error,
//!   timeout}` (for `pre`, the phase-less `hook.backup.velero.io/*` when the `pre.` ones are
//!   absent) and `post.hook.backup.velero.io/*`; a command annotation is a JSON array of
//!   strings, or else one word; when a Pod has an annotation hook for a phase, the spec's hooks
//!   for that phase are not run on it;
//! * otherwise every `spec.hooks.resources[]` entry whose selection takes the Pod runs its
//!   hooks of the phase, in order: namespaces (Velero's includes and excludes, globs allowed),
//!   resources (the entry must take `pods`), then the label selector ([`HookSelection`], which
//!   restore hooks select with too);
//! * a hook without a container runs in the Pod's first container; a named one must be a
//!   container of the Pod or a sidecar (an init container with `restartPolicy: Always`);
//!   a hook without a timeout gets 30 s.
//!
//! One difference: Velero documents `onError: Fail` as the default and its code acts on a
//! hook's failure as `Continue` when the field is unset; hawser does what the documentation
//! says.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::duration::GoDuration;
use crate::selection::{CompiledSelector, IncludesExcludes, LabelSelector, object_labels};

/// How long a hook may run when it names no timeout (Velero's).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The annotation keys of a hook, after the phase prefix (`pre.`, `post.`, or none).
const COMMAND: &str = "hook.backup.velero.io/command";
/// The command annotations of the three phases (`pre.`, `post.`, none).
const COMMAND_KEYS: [&str; 3] = [
    "pre.hook.backup.velero.io/command",
    "post.hook.backup.velero.io/command",
    COMMAND,
];
const CONTAINER: &str = "hook.backup.velero.io/container";
const ON_ERROR: &str = "hook.backup.velero.io/on-error";
const TIMEOUT: &str = "hook.backup.velero.io/timeout";

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the Pod's volumes are snapshotted.
    Pre,
    /// After.
    Post,
}

impl Phase {
    /// `pre` or `post`, as Velero's logs name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pre => "pre",
            Self::Post => "post",
        }
    }
}

/// A command of a hook spec, as `spec.hooks.resources[].pre|post[].exec` holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecHook {
    /// The container; `None` for the Pod's first.
    pub container: Option<String>,
    pub command: Vec<String>,
    /// `onError: Continue`; otherwise a failure fails the Pod.
    pub continue_on_error: bool,
    /// `None` or zero for [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
}

/// The name and the Pods a `spec.hooks.resources[]` entry selects (backup and restore hooks
/// alike).
#[derive(Debug, Clone, Default)]
pub struct HookSelection {
    pub name: String,
    pub included_namespaces: Vec<String>,
    pub excluded_namespaces: Vec<String>,
    pub included_resources: Vec<String>,
    pub excluded_resources: Vec<String>,
    pub label_selector: Option<LabelSelector>,
}

impl HookSelection {
    /// Compiled; `what` names the kind of entry in the error (`backup hook spec`).
    pub(crate) fn compile(self, what: &str) -> Result<CompiledSelection, String> {
        let selector = self
            .label_selector
            .as_ref()
            .map(|l| {
                l.compile()
                    .map_err(|e| format!("{what} {}: {e}", self.name))
            })
            .transpose()?;
        Ok(CompiledSelection {
            namespaces: IncludesExcludes::new(&self.included_namespaces, &self.excluded_namespaces),
            takes_pods: takes_pods(&self.included_resources, &self.excluded_resources),
            selector,
            name: self.name,
        })
    }
}

/// A [`HookSelection`] ready to match Pods.
#[derive(Debug)]
pub(crate) struct CompiledSelection {
    pub(crate) name: String,
    namespaces: IncludesExcludes,
    takes_pods: bool,
    selector: Option<CompiledSelector>,
}

impl CompiledSelection {
    /// Whether the entry takes `pod` (its namespace as it stands in it, its labels).
    pub(crate) fn takes(&self, pod: &Value) -> bool {
        let namespace = pod
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.takes_pods
            && self.namespaces.should_include(namespace)
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&object_labels(pod)))
    }
}

/// One `spec.hooks.resources[]` entry of a Backup.
#[derive(Debug, Clone, Default)]
pub struct HookSpec {
    pub selection: HookSelection,
    pub pre: Vec<ExecHook>,
    pub post: Vec<ExecHook>,
}

/// A hook to run in one Pod, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHook {
    /// The hook spec's name, or `<from-annotation>` (Velero's name for annotation hooks).
    pub name: String,
    /// The container it runs in, or why it cannot run (no such container, no containers).
    pub container: Result<String, String>,
    pub command: Vec<String>,
    pub continue_on_error: bool,
    pub timeout: Duration,
}

/// The name Velero gives a hook read from annotations.
pub const ANNOTATION_HOOK_NAME: &str = "<from-annotation>";

/// The hook specs of one backup, compiled.
#[derive(Debug, Default)]
pub struct BackupHooks {
    specs: Vec<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    selection: CompiledSelection,
    pre: Vec<ExecHook>,
    post: Vec<ExecHook>,
}

impl BackupHooks {
    /// Compiles `specs`.
    ///
    /// # Errors
    /// A label selector that does not parse, naming its spec.
    pub fn new(specs: Vec<HookSpec>) -> Result<Self, String> {
        let specs = specs
            .into_iter()
            .map(|spec| {
                Ok(Compiled {
                    selection: spec.selection.compile("backup hook spec")?,
                    pre: spec.pre,
                    post: spec.post,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self { specs })
    }

    /// Whether `pod` has a hook of either phase (asked of every backed-up Pod, so it reads
    /// only what decides it: three annotations, and the specs' selections).
    #[must_use]
    pub fn any(&self, pod: &Value) -> bool {
        let annotations = pod.pointer("/metadata/annotations");
        let annotated = COMMAND_KEYS.iter().any(|key| {
            annotations
                .and_then(|a| a.get(*key))
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        });
        annotated
            || self
                .specs
                .iter()
                .any(|c| (!c.pre.is_empty() || !c.post.is_empty()) && c.selection.takes(pod))
    }

    /// The hooks `pod` runs in `phase`, in order, and a note for each annotation that was read
    /// with its default instead (a timeout that is no duration).
    #[must_use]
    pub fn of_pod(&self, pod: &Value, phase: Phase) -> (Vec<PodHook>, Vec<String>) {
        let annotations = annotations(pod);
        let from_annotations = annotation_hook(&annotations, Some(phase)).or_else(|| {
            (phase == Phase::Pre)
                .then(|| annotation_hook(&annotations, None))
                .flatten()
        });
        if let Some((hook, notes)) = from_annotations {
            return (vec![resolve(pod, ANNOTATION_HOOK_NAME, &hook)], notes);
        }
        let hooks = self
            .specs
            .iter()
            .filter(|c| c.selection.takes(pod))
            .flat_map(|c| {
                let hooks = match phase {
                    Phase::Pre => &c.pre,
                    Phase::Post => &c.post,
                };
                hooks.iter().map(|h| resolve(pod, &c.selection.name, h))
            })
            .collect();
        (hooks, Vec::new())
    }
}

/// Whether a hook spec's `includedResources` and `excludedResources` take Pods (an empty
/// include list, or `*`, takes every type; names are compared as Velero's users write Pods:
/// `pods`, `pod`, `po`).
fn takes_pods(included: &[String], excluded: &[String]) -> bool {
    let names_pods = |r: &String| matches!(r.as_str(), "pods" | "pod" | "po" | "pods.");
    let taken = included.is_empty() || included.iter().any(|r| r == "*" || names_pods(r));
    taken && !excluded.iter().any(names_pods)
}

fn annotations(pod: &Value) -> BTreeMap<String, String> {
    pod.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The hook the annotations of `phase` (`None`: the phase-less keys) describe, with notes.
fn annotation_hook(
    annotations: &BTreeMap<String, String>,
    phase: Option<Phase>,
) -> Option<(ExecHook, Vec<String>)> {
    let key = |name: &str| match phase {
        Some(p) => format!("{}.{name}", p.as_str()),
        None => name.to_owned(),
    };
    let get = |name: &str| {
        annotations
            .get(&key(name))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let command = get(COMMAND)?;
    let mut notes = Vec::new();
    let timeout = get(TIMEOUT).and_then(|t| match GoDuration::parse(t) {
        Ok(d) => d.to_std(),
        Err(e) => {
            notes.push(format!(
                "annotation {} {t:?} is no duration ({e}); the default of {} is used",
                key(TIMEOUT),
                GoDuration::from(DEFAULT_TIMEOUT)
            ));
            None
        }
    });
    let hook = ExecHook {
        container: get(CONTAINER).map(str::to_owned),
        command: command_of(command),
        continue_on_error: get(ON_ERROR) == Some("Continue"),
        timeout,
    };
    Some((hook, notes))
}

/// A command annotation as Velero reads it: a JSON array of strings, or else one word (the
/// backup and restore hooks' annotations alike).
pub(crate) fn command_of(value: &str) -> Vec<String> {
    if value.starts_with('[')
        && let Ok(command) = serde_json::from_str::<Vec<String>>(value)
    {
        return command;
    }
    vec![value.to_owned()]
}

/// `hook` as it runs in `pod`: its container checked or chosen, its timeout defaulted.
fn resolve(pod: &Value, name: &str, hook: &ExecHook) -> PodHook {
    PodHook {
        name: name.to_owned(),
        container: container(pod, hook.container.as_deref()),
        command: hook.command.clone(),
        continue_on_error: hook.continue_on_error,
        timeout: hook
            .timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_TIMEOUT),
    }
}

fn container(pod: &Value, asked: Option<&str>) -> Result<String, String> {
    let list = |key: &str| {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let containers = list("containers");
    let name = |c: &Value| c["name"].as_str().unwrap_or_default().to_owned();
    let Some(asked) = asked.filter(|a| !a.is_empty()) else {
        return containers
            .first()
            .map(name)
            .ok_or_else(|| "the pod has no containers".to_owned());
    };
    let sidecar = |c: &&Value| c["restartPolicy"] == "Always";
    let found = containers.iter().any(|c| name(c) == asked)
        || list("initContainers")
            .iter()
            .filter(sidecar)
            .any(|c| name(c) == asked);
    if found {
        Ok(asked.to_owned())
    } else {
        Err(format!("no such container: {asked:?}"))
    }
}

#[cfg(test)]
#[path = "backup_hooks_tests.rs"]
mod tests;
