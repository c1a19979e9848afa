//! Velero's restore init-container hooks: init containers put in front of a restored Pod's
//! own, from the Pod's `init.hook.restore.velero.io/*` annotations or, when it has none, from
//! the `init` hooks of the Restore's `spec.hooks.resources` whose selection takes the Pod.
//!
//! As Velero's `velero.io/init-restore-hook` action does:
//!
//! * annotations: `container-image` (required: without it the annotations are not a hook),
//!   `container-name` (else `velero-restore-init-<8 hex digits>`, a name made from the restore
//!   and the Pod here, a random one in Velero) and `command` (a JSON array, or one word; the
//!   image's entrypoint when absent);
//! * a hook spec applies when the Pod's target namespace is included (`includedNamespaces`
//!   empty or `*`, globs allowed, as Velero's `IncludesExcludes`) and not excluded, and its labels match `labelSelector`; the
//!   spec's resource filters are not read (the hooks apply to Pods only); each init container
//!   must have a name, an image and a command, else the Pod is an error and is not restored;
//! * the new containers come first, after a `restore-wait` container that is already first.

use serde_json::{Value, json};

use crate::backup_hooks::command_of;
use crate::selection::{CompiledSelector, IncludesExcludes, LabelSelector, object_labels};

/// The annotation naming the image of a Pod's init hook.
pub const IMAGE_ANNOTATION: &str = "init.hook.restore.velero.io/container-image";
/// The annotation naming the container of a Pod's init hook.
pub const NAME_ANNOTATION: &str = "init.hook.restore.velero.io/container-name";
/// The annotation holding the command of a Pod's init hook.
pub const COMMAND_ANNOTATION: &str = "init.hook.restore.velero.io/command";
/// The init container Velero's pod volume restores put first, which stays first.
const RESTORE_WAIT: &str = "restore-wait";

/// One `spec.hooks.resources[]` entry's init hooks.
#[derive(Debug, Clone, Default)]
pub struct InitHookSpec {
    /// The entry's name.
    pub name: String,
    /// `includedNamespaces`.
    pub included_namespaces: Vec<String>,
    /// `excludedNamespaces`.
    pub excluded_namespaces: Vec<String>,
    /// `labelSelector`.
    pub label_selector: Option<LabelSelector>,
    /// The `initContainers` of its `postHooks[].init`, in order.
    pub containers: Vec<Value>,
}

/// The init hooks of one restore, ready to apply to its Pods.
#[derive(Debug, Default)]
pub struct InitHooks {
    specs: Vec<Compiled>,
    /// Makes the names of annotation hooks without a name: the restore's uid.
    seed: String,
}

#[derive(Debug)]
struct Compiled {
    name: String,
    namespaces: IncludesExcludes,
    selector: Option<CompiledSelector>,
    containers: Vec<Value>,
}

impl InitHooks {
    /// No hooks.
    pub const EMPTY: Self = Self {
        specs: Vec::new(),
        seed: String::new(),
    };

    /// Compiles the specs that have init containers; `seed` (the restore's uid) names the
    /// annotation hooks that give no name.
    ///
    /// # Errors
    /// A label selector of a spec that does not parse, naming the spec.
    pub fn new(specs: Vec<InitHookSpec>, seed: &str) -> Result<Self, String> {
        let specs = specs
            .into_iter()
            .filter(|s| !s.containers.is_empty())
            .map(|s| {
                Ok(Compiled {
                    namespaces: IncludesExcludes::new(
                        &s.included_namespaces,
                        &s.excluded_namespaces,
                    ),
                    selector: s
                        .label_selector
                        .as_ref()
                        .map(|l| {
                            l.compile()
                                .map_err(|e| format!("hook spec {}: {e}", s.name))
                        })
                        .transpose()?,
                    name: s.name,
                    containers: s.containers,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            specs,
            seed: seed.to_owned(),
        })
    }

    /// Puts the Pod's init hooks in front of its init containers (see the module docs); how
    /// many were added.
    ///
    /// # Errors
    /// An init container of a matching hook spec without a name, an image or a command.
    pub fn apply(&self, pod: &mut Value, target_namespace: &str) -> Result<usize, String> {
        let added = match self.annotation_hook(pod, target_namespace) {
            Some(container) => vec![container],
            None => self.spec_hooks(pod, target_namespace)?,
        };
        if added.is_empty() {
            return Ok(0);
        }
        let count = added.len();
        let spec = &mut pod["spec"];
        let mut own = match spec.get_mut("initContainers").map(Value::take) {
            Some(Value::Array(own)) => own,
            _ => Vec::new(),
        };
        let mut containers = Vec::with_capacity(own.len() + count);
        if own
            .first()
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            == Some(RESTORE_WAIT)
        {
            containers.push(own.remove(0));
        }
        containers.extend(added);
        containers.extend(own);
        spec["initContainers"] = Value::Array(containers);
        Ok(count)
    }

    fn annotation_hook(&self, pod: &Value, target_namespace: &str) -> Option<Value> {
        let annotation = |key: &str| {
            pod.pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
        };
        let image = annotation(IMAGE_ANNOTATION)?;
        let name = annotation(NAME_ANNOTATION).map_or_else(
            || {
                let pod_name = pod.pointer("/metadata/name").and_then(Value::as_str);
                let key = format!(
                    "{}/{target_namespace}/{}",
                    self.seed,
                    pod_name.unwrap_or("")
                );
                format!("velero-restore-init-{:08x}", fnv32(key.as_bytes()))
            },
            str::to_owned,
        );
        let mut container = json!({"name": name, "image": image});
        if let Some(command) = annotation(COMMAND_ANNOTATION) {
            container["command"] = json!(command_of(command));
        }
        Some(container)
    }

    fn spec_hooks(&self, pod: &Value, target_namespace: &str) -> Result<Vec<Value>, String> {
        let labels = object_labels(pod);
        let mut added = Vec::new();
        for spec in &self.specs {
            let selected = spec.selector.as_ref().is_none_or(|s| s.matches(&labels));
            if !spec.namespaces.should_include(target_namespace) || !selected {
                continue;
            }
            for container in &spec.containers {
                let missing = ["command", "name", "image"].into_iter().find(|field| {
                    container.get(*field).is_none_or(|v| match v {
                        Value::String(s) => s.is_empty(),
                        Value::Array(a) => a.is_empty(),
                        _ => true,
                    })
                });
                if let Some(field) = missing {
                    return Err(format!(
                        "invalid init container in restore hook spec {}: it has no {field} (a command, a name and an image are required)",
                        spec.name
                    ));
                }
                added.push(container.clone());
            }
        }
        Ok(added)
    }
}

/// FNV-1a, 32 bits: a short stable name part (not a security measure).
fn fnv32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod(annotations: Value, labels: Value, init: Value) -> Value {
        json!({"metadata": {"name": "db-0", "annotations": annotations, "labels": labels},
               "spec": {"initContainers": init, "containers": [{"name": "db", "image": "postgres"}]}})
    }

    fn names(pod: &Value) -> Vec<&str> {
        pod["spec"]["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    fn spec(
        name: &str,
        namespaces: &[&str],
        selector: Option<LabelSelector>,
        containers: Value,
    ) -> InitHookSpec {
        InitHookSpec {
            name: name.to_owned(),
            included_namespaces: namespaces.iter().map(|s| (*s).to_owned()).collect(),
            label_selector: selector,
            containers: containers.as_array().unwrap().clone(),
            ..InitHookSpec::default()
        }
    }

    #[test]
    fn annotations_win_over_specs_and_keep_restore_wait_first() {
        let hooks = InitHooks::new(
            vec![spec(
                "prepare",
                &[],
                None,
                json!([{"name": "s", "image": "i", "command": ["x"]}]),
            )],
            "uid-1",
        )
        .unwrap();
        let mut annotated = pod(
            json!({IMAGE_ANNOTATION: "busybox", COMMAND_ANNOTATION: "[\"/bin/sh\", \"-c\", \"echo hi\"]"}),
            json!({}),
            json!([{"name": "restore-wait", "image": "w"}, {"name": "own", "image": "o"}]),
        );
        assert_eq!(hooks.apply(&mut annotated, "shop").unwrap(), 1);
        let names_now = names(&annotated);
        assert_eq!(names_now[0], "restore-wait");
        assert!(names_now[1].starts_with("velero-restore-init-") && names_now[1].len() == 28);
        assert_eq!(names_now[2], "own");
        assert_eq!(
            annotated["spec"]["initContainers"][1]["command"],
            json!(["/bin/sh", "-c", "echo hi"])
        );
        // The same pod of the same restore gets the same name.
        let mut again = pod(json!({IMAGE_ANNOTATION: "busybox"}), json!({}), json!([]));
        hooks.apply(&mut again, "shop").unwrap();
        assert_eq!(names(&again)[0], names_now[1]);
        assert!(again["spec"]["initContainers"][0].get("command").is_none());

        let mut named = pod(
            json!({IMAGE_ANNOTATION: "busybox", NAME_ANNOTATION: "warm", COMMAND_ANNOTATION: "prepare.sh"}),
            json!({}),
            json!([]),
        );
        hooks.apply(&mut named, "shop").unwrap();
        assert_eq!(
            named["spec"]["initContainers"][0],
            json!({"name": "warm", "image": "busybox", "command": ["prepare.sh"]})
        );
    }

    #[test]
    fn specs_apply_by_target_namespace_and_labels_in_order() {
        let hooks = InitHooks::new(
            vec![
                spec("first", &["shop-*"], Some(LabelSelector::matching([("app", "db")])), json!([{"name": "a", "image": "i", "command": ["x"]}, {"name": "b", "image": "i", "command": ["y"]}])),
                spec("other", &["elsewhere"], None, json!([{"name": "c", "image": "i", "command": ["z"]}])),
                spec("exec-only", &[], None, json!([])),
            ],
            "uid-1",
        )
        .unwrap();
        let mut db = pod(
            json!({}),
            json!({"app": "db"}),
            json!([{"name": "own", "image": "o"}]),
        );
        assert_eq!(hooks.apply(&mut db, "shop-copy").unwrap(), 2);
        assert_eq!(names(&db), ["a", "b", "own"]);
        let mut web = pod(json!({}), json!({"app": "web"}), json!([]));
        assert_eq!(hooks.apply(&mut web, "shop-copy").unwrap(), 0);
        assert_eq!(web["spec"]["initContainers"], json!([]));
        let mut elsewhere = pod(json!({}), json!({"app": "db"}), json!(null));
        assert_eq!(hooks.apply(&mut elsewhere, "shop").unwrap(), 0);
    }

    #[test]
    fn an_init_container_without_a_command_name_or_image_is_an_error() {
        for (container, missing) in [
            (json!({"name": "a", "image": "i"}), "command"),
            (json!({"image": "i", "command": ["x"]}), "name"),
            (json!({"name": "a", "command": ["x"], "image": ""}), "image"),
        ] {
            let hooks =
                InitHooks::new(vec![spec("bad", &[], None, json!([container]))], "u").unwrap();
            let mut p = pod(json!({}), json!({}), json!([]));
            let err = hooks.apply(&mut p, "shop").unwrap_err();
            assert!(
                err.contains("hook spec bad") && err.contains(missing),
                "{err}"
            );
        }
        let bad_selector = LabelSelector {
            match_expressions: vec![crate::selection::LabelSelectorRequirement {
                key: "app".into(),
                operator: "Near".into(),
                values: vec![],
            }],
            ..LabelSelector::default()
        };
        let broken = InitHooks::new(
            vec![spec(
                "sel",
                &[],
                Some(bad_selector),
                json!([{"name": "a", "image": "i", "command": ["x"]}]),
            )],
            "u",
        );
        assert!(broken.unwrap_err().contains("hook spec sel"));
    }
}
