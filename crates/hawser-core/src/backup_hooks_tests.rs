#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

fn pod(namespace: &str, annotations: Value, labels: Value) -> Value {
    json!({
        "metadata": {"name": "db-0", "namespace": namespace,
                     "annotations": annotations, "labels": labels},
        "spec": {
            "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "setup"}],
            "containers": [{"name": "db"}, {"name": "metrics"}]
        }
    })
}

fn exec(command: &str) -> ExecHook {
    ExecHook {
        command: vec![command.to_owned()],
        ..ExecHook::default()
    }
}

fn spec(name: &str) -> HookSpec {
    HookSpec {
        selection: HookSelection {
            name: name.to_owned(),
            ..HookSelection::default()
        },
        pre: vec![exec(&format!("{name}-pre"))],
        post: vec![exec(&format!("{name}-post"))],
    }
}

fn commands(hooks: &[PodHook]) -> Vec<String> {
    hooks.iter().map(|h| h.command.join(" ")).collect()
}

#[test]
fn annotations_win_over_the_spec_per_phase() {
    let hooks = BackupHooks::new(vec![spec("all")]).unwrap();
    let annotated = pod(
        "shop",
        json!({"pre.hook.backup.velero.io/command": "[\"fsfreeze\", \"--freeze\", \"/data\"]",
               "pre.hook.backup.velero.io/container": "metrics",
               "pre.hook.backup.velero.io/on-error": "Continue",
               "pre.hook.backup.velero.io/timeout": "2m"}),
        json!({}),
    );
    let (pre, notes) = hooks.of_pod(&annotated, Phase::Pre);
    assert!(notes.is_empty());
    assert_eq!(
        pre,
        [PodHook {
            name: ANNOTATION_HOOK_NAME.to_owned(),
            container: Ok("metrics".to_owned()),
            command: vec!["fsfreeze".into(), "--freeze".into(), "/data".into()],
            continue_on_error: true,
            timeout: Duration::from_secs(120),
        }]
    );
    // No post annotation: the spec's post hooks run.
    let (post, _) = hooks.of_pod(&annotated, Phase::Post);
    assert_eq!(commands(&post), ["all-post"]);
    assert_eq!(
        post[0].container,
        Ok("db".to_owned()),
        "the first container"
    );
    assert_eq!(post[0].timeout, DEFAULT_TIMEOUT);
    assert!(
        !post[0].continue_on_error,
        "Fail unless Continue is asked for"
    );
}

#[test]
fn the_phase_less_annotations_are_pre_hooks_only() {
    let hooks = BackupHooks::default();
    let legacy = pod(
        "shop",
        json!({"hook.backup.velero.io/command": "sync", "hook.backup.velero.io/timeout": "soon"}),
        json!({}),
    );
    let (pre, notes) = hooks.of_pod(&legacy, Phase::Pre);
    assert_eq!(commands(&pre), ["sync"], "one word is the whole command");
    assert_eq!(pre[0].timeout, DEFAULT_TIMEOUT);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("hook.backup.velero.io/timeout \"soon\" is no duration"),
        "{notes:?}"
    );
    assert!(hooks.of_pod(&legacy, Phase::Post).0.is_empty());
    assert!(hooks.any(&legacy));

    // The phased key wins over the legacy one.
    let both = pod(
        "shop",
        json!({"hook.backup.velero.io/command": "old", "pre.hook.backup.velero.io/command": "new"}),
        json!({}),
    );
    assert_eq!(commands(&hooks.of_pod(&both, Phase::Pre).0), ["new"]);
}

#[test]
fn spec_entries_select_by_namespace_resource_and_labels() {
    let mut by_ns = spec("by-ns");
    by_ns.selection.included_namespaces = vec!["shop*".into()];
    by_ns.selection.excluded_namespaces = vec!["shop-test".into()];
    let mut by_labels = spec("by-labels");
    by_labels.selection.label_selector =
        Some(serde_json::from_value(json!({"matchLabels": {"app": "db"}})).unwrap());
    let mut not_pods = spec("not-pods");
    not_pods.selection.included_resources = vec!["deployments".into()];
    let mut pods_excluded = spec("pods-excluded");
    pods_excluded.selection.excluded_resources = vec!["po".into()];
    let mut pods_named = spec("pods-named");
    pods_named.selection.included_resources = vec!["pods".into()];
    let hooks =
        BackupHooks::new(vec![by_ns, by_labels, not_pods, pods_excluded, pods_named]).unwrap();

    let db = pod("shop", json!({}), json!({"app": "db"}));
    assert_eq!(
        commands(&hooks.of_pod(&db, Phase::Pre).0),
        ["by-ns-pre", "by-labels-pre", "pods-named-pre"]
    );
    let web_in_test = pod("shop-test", json!({}), json!({"app": "web"}));
    assert_eq!(
        commands(&hooks.of_pod(&web_in_test, Phase::Post).0),
        ["pods-named-post"]
    );
}

#[test]
fn a_named_container_must_be_the_pods_or_a_sidecar() {
    let hook = |container: &str| ExecHook {
        container: Some(container.to_owned()),
        ..exec("x")
    };
    let mut s = spec("s");
    s.pre = vec![hook("proxy"), hook("setup"), hook("nope")];
    let hooks = BackupHooks::new(vec![s]).unwrap();
    let (pre, _) = hooks.of_pod(&pod("shop", json!({}), json!({})), Phase::Pre);
    let containers: Vec<_> = pre.iter().map(|h| h.container.clone()).collect();
    assert_eq!(
        containers,
        [
            Ok("proxy".to_owned()),
            Err("no such container: \"setup\"".to_owned()),
            Err("no such container: \"nope\"".to_owned()),
        ]
    );
    let bare = json!({"metadata": {"name": "p", "namespace": "shop"}, "spec": {}});
    let (pre, _) = BackupHooks::new(vec![spec("s")])
        .unwrap()
        .of_pod(&bare, Phase::Pre);
    assert_eq!(
        pre[0].container,
        Err("the pod has no containers".to_owned())
    );
}

#[test]
fn a_bad_selector_names_its_spec() {
    let mut s = spec("broken");
    s.selection.label_selector = Some(
        serde_json::from_value(json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}))
            .unwrap(),
    );
    let e = BackupHooks::new(vec![s]).unwrap_err();
    assert!(e.starts_with("backup hook spec broken: "), "{e}");
}

#[test]
fn any_is_true_for_a_hook_of_either_phase_only() {
    let mut shop_only = spec("shop-only");
    shop_only.selection.included_namespaces = vec!["shop".into()];
    let hooks = BackupHooks::new(vec![shop_only]).unwrap();
    assert!(hooks.any(&pod("shop", json!({}), json!({}))));
    assert!(!hooks.any(&pod("other", json!({}), json!({}))));
    let post_only = pod(
        "other",
        json!({"post.hook.backup.velero.io/command": "thaw"}),
        json!({}),
    );
    assert!(hooks.any(&post_only));
    assert!(!hooks.any(&pod(
        "other",
        json!({"pre.hook.backup.velero.io/command": ""}),
        json!({})
    )));
    let mut empty = spec("empty");
    empty.pre.clear();
    empty.post.clear();
    assert!(
        !BackupHooks::new(vec![empty])
            .unwrap()
            .any(&pod("shop", json!({}), json!({})))
    );
}
