#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn the_plan_lists_every_object_in_apply_order() {
    let plan = InstallPlan {
        namespace: "backups".into(),
        image: "example/hawser:1".into(),
        server_args: vec!["--default-backup-ttl=48h".into()],
        credentials: Some(b"[default]\n".to_vec()),
        location: Some(LocationPlan {
            provider: "aws".into(),
            bucket: "b".into(),
            prefix: None,
            config: BTreeMap::from([("region".into(), "eu-west-1".into())]),
            ca_cert: None,
        }),
        ..InstallPlan::default()
    };
    let all = manifests(&plan).unwrap();
    let crds = hawser_api::crd::crds().len();
    let labels: Vec<String> = all.iter().skip(crds).map(Manifest::label).collect();
    assert_eq!(
        labels,
        [
            "Namespace/backups",
            "ServiceAccount/velero",
            "ClusterRoleBinding/velero-backups",
            "Role/hawser-leader-election",
            "RoleBinding/hawser-leader-election",
            "Secret/cloud-credentials",
            "Deployment/velero",
            "BackupStorageLocation/default",
        ]
    );
    assert!(
        all[..crds]
            .iter()
            .all(|m| m.resource.kind == "CustomResourceDefinition")
    );
    let deployment = &all[crds + 6].object;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["args"],
        serde_json::json!(["server", "--default-backup-ttl=48h"])
    );
    assert_eq!(container["image"], "example/hawser:1");
    let bsl = &all[crds + 7].object["spec"];
    assert_eq!(bsl["credential"]["name"], "cloud-credentials");
    assert_eq!(bsl["default"], true);

    let bare = InstallPlan {
        namespace: "velero".into(),
        image: DEFAULT_IMAGE.into(),
        ..InstallPlan::default()
    };
    let all = manifests(&bare).unwrap();
    assert_eq!(all.len(), crds + 6);
    assert_eq!(all[crds + 2].label(), "ClusterRoleBinding/velero");
    // No credentials: the scratch volume only, mounted as TMPDIR.
    let pod = &all[crds + 5].object["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        serde_json::json!([{"name": "scratch", "emptyDir": {}}])
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["volumeMounts"],
        serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}])
    );
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"name": "TMPDIR", "value": "/scratch"}))
    );
}

#[test]
fn the_deployment_is_recreated_probed_and_given_time_to_finish() {
    let plan = InstallPlan {
        namespace: "velero".into(),
        image: DEFAULT_IMAGE.into(),
        ..InstallPlan::default()
    };
    let all = manifests(&plan).unwrap();
    let find = |label: &str| {
        all.iter()
            .find(|m| m.label() == label)
            .map(|m| m.object.clone())
            .unwrap()
    };
    let deployment = find("Deployment/velero");
    assert_eq!(
        deployment["spec"]["strategy"],
        serde_json::json!({"type": "Recreate"})
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 90);
    let container = &pod["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(container["ports"][0]["name"], "metrics");

    let role = find("Role/hawser-leader-election");
    assert_eq!(role["metadata"]["namespace"], "velero");
    assert_eq!(
        role["rules"],
        serde_json::json!([{
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update", "patch", "delete"]
        }])
    );
    let binding = find("RoleBinding/hawser-leader-election");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["subjects"][0]["name"], "velero");
}
