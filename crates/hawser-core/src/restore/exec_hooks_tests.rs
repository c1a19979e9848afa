#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;
use crate::backup_hooks::HookSelection;

fn pod(namespace: &str, annotations: Value, labels: Value) -> Value {
    json!({
        "metadata": {"name": "db-0", "namespace": namespace,
                     "annotations": annotations, "labels": labels},
        "spec": {"containers": [{"name": "db"}, {"name": "metrics"}]}
    })
}

fn spec(name: &str, hooks: Vec<ExecHook>) -> ExecHookSpec {
    ExecHookSpec {
        selection: HookSelection {
            name: name.to_owned(),
            ..HookSelection::default()
        },
        hooks,
    }
}

fn exec(command: &str, container: Option<&str>) -> ExecHook {
    ExecHook {
        container: container.map(str::to_owned),
        command: vec![command.to_owned()],
        ..ExecHook::default()
    }
}

#[test]
fn annotations_are_read_with_veleros_defaults() {
    let hooks = ExecHooks::new(vec![spec("s", vec![exec("from-spec", None)])]).unwrap();
    let annotated = pod(
        "shop-copy",
        json!({"post.hook.restore.velero.io/command": "[\"/bin/migrate\", \"--up\"]",
               "post.hook.restore.velero.io/container": "metrics",
               "post.hook.restore.velero.io/on-error": "Fail",
               "post.hook.restore.velero.io/exec-timeout": "2m",
               "post.hook.restore.velero.io/wait-timeout": "forever",
               "post.hook.restore.velero.io/wait-for-ready": "T"}),
        json!({}),
    );
    let (found, notes) = hooks.of_pod(&annotated);
    assert_eq!(
        found,
        [PodExecHook {
            name: ANNOTATION_HOOK_NAME.to_owned(),
            container: "metrics".to_owned(),
            command: vec!["/bin/migrate".into(), "--up".into()],
            fail_on_error: true,
            exec_timeout: Duration::from_secs(120),
            wait_timeout: None,
            wait_for_ready: true,
        }],
        "the annotation wins over the spec"
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("wait-timeout \"forever\" is no duration"),
        "{notes:?}"
    );

    let plain = pod(
        "shop-copy",
        json!({"post.hook.restore.velero.io/command": "/bin/check"}),
        json!({}),
    );
    let (found, notes) = hooks.of_pod(&plain);
    assert!(notes.is_empty());
    assert_eq!(found[0].container, "db", "the first container");
    assert_eq!(found[0].command, ["/bin/check"]);
    assert!(!found[0].fail_on_error, "Continue by default");
    assert_eq!(found[0].exec_timeout, DEFAULT_TIMEOUT);
    assert!(!found[0].wait_for_ready);
}

#[test]
fn spec_entries_select_by_target_namespace_resources_and_labels_and_missing_containers_are_dropped()
{
    let mut by_ns = spec("by-ns", vec![exec("a", None), exec("b", Some("nope"))]);
    by_ns.selection.included_namespaces = vec!["shop-*".into()];
    let mut by_labels = spec("by-labels", vec![exec("c", Some("metrics"))]);
    by_labels.selection.label_selector =
        Some(serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap());
    let mut not_pods = spec("not-pods", vec![exec("d", None)]);
    not_pods.selection.excluded_resources = vec!["pods".into()];
    let init_only = spec("init-only", Vec::new());
    let hooks = ExecHooks::new(vec![by_ns, by_labels, not_pods, init_only]).unwrap();

    let (found, notes) = hooks.of_pod(&pod("shop-copy", json!({}), json!({"app": "db"})));
    let summary: Vec<(String, String, String)> = found
        .iter()
        .map(|h| (h.name.clone(), h.container.clone(), h.command.join(" ")))
        .collect();
    assert_eq!(
        summary,
        [
            ("by-ns".into(), "db".into(), "a".into()),
            ("by-labels".into(), "metrics".into(), "c".into()),
        ]
    );
    assert_eq!(
        notes,
        ["the pod has no container \"nope\": its exec hook by-ns is not run"]
    );
    let (found, _) = hooks.of_pod(&pod("other", json!({}), json!({"app": "web"})));
    assert!(found.is_empty());
    let bare = json!({"metadata": {"name": "p", "namespace": "shop-copy"}, "spec": {}});
    assert!(
        hooks.of_pod(&bare).0.is_empty(),
        "a pod without containers runs nothing"
    );
}
