use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;

static NO_PVS: BTreeSet<String> = BTreeSet::new();
static NO_SNAPSHOTS: BTreeMap<(String, String), String> = BTreeMap::new();
static NO_CLASSES: BTreeMap<String, String> = BTreeMap::new();
static NO_IMAGES: ImageNames = ImageNames::EMPTY;
static NO_HOOKS: InitHooks = InitHooks::EMPTY;

fn ctx(mapping: &BTreeMap<String, String>) -> CleanContext<'_> {
    CleanContext {
        backup_name: "nightly",
        restore_name: "nightly-20261203",
        restore_uid: "",
        preserve_node_ports: false,
        namespace_mapping: mapping,
        reprovisioned_pvs: &NO_PVS,
        snapshots: &NO_SNAPSHOTS,
        storage_classes: &NO_CLASSES,
        image_names: &NO_IMAGES,
        modifiers: None,
        init_hooks: &NO_HOOKS,
    }
}

#[path = "clean_service_tests.rs"]
mod service;

fn no_mapping() -> BTreeMap<String, String> {
    BTreeMap::new()
}

#[test]
fn server_metadata_and_status_are_removed_and_labels_added() {
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "cm", "namespace": "shop", "generateName": "cm-", "selfLink": "/x",
            "uid": "u", "resourceVersion": "7", "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-02T00:00:00Z",
            "deletionGracePeriodSeconds": 30, "ownerReferences": [{"name": "o"}],
            "managedFields": [{"manager": "kubectl"}], "labels": {"app": "a"},
            "annotations": {"note": "kept"}
        },
        "data": {"k": "v"},
        "status": {"x": 1}
    });
    let m = no_mapping();
    let out = clean("configmaps", obj, Some("shop"), &ctx(&m), false);
    assert_eq!(out.status, None);
    assert_eq!(
        out.object,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "cm", "namespace": "shop",
                "managedFields": [{"manager": "kubectl"}],
                "labels": {"app": "a", BACKUP_NAME_LABEL: "nightly", RESTORE_NAME_LABEL: "nightly-20261203"},
                "annotations": {"note": "kept"}
            },
            "data": {"k": "v"}
        })
    );
}

#[test]
fn status_is_handed_back_only_when_asked() {
    let obj = json!({"kind": "Widget", "metadata": {"name": "w"}, "status": {"ready": true}});
    let m = no_mapping();
    let with = clean("widgets.example.com", obj.clone(), None, &ctx(&m), true);
    assert_eq!(with.status, Some(json!({"ready": true})));
    assert!(with.object.get("status").is_none());
    let without = clean("widgets.example.com", obj, None, &ctx(&m), false);
    assert_eq!(without.status, None);
}

#[test]
fn namespace_is_mapped_and_cluster_items_have_none() {
    let mut m = BTreeMap::new();
    m.insert("shop".to_string(), "shop-copy".to_string());
    let obj = json!({"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "shop"}});
    let out = clean("configmaps", obj, Some("shop"), &ctx(&m), false);
    assert_eq!(
        out.object.pointer("/metadata/namespace"),
        Some(&json!("shop-copy"))
    );
    let unmapped = json!({"kind": "ConfigMap", "metadata": {"name": "cm"}});
    let out = clean("configmaps", unmapped, Some("other"), &ctx(&m), false);
    assert_eq!(
        out.object.pointer("/metadata/namespace"),
        Some(&json!("other"))
    );
    let cluster = json!({"kind": "ClusterRole", "metadata": {"name": "r", "namespace": "stray"}});
    let out = clean(
        "clusterroles.rbac.authorization.k8s.io",
        cluster,
        None,
        &ctx(&m),
        false,
    );
    assert_eq!(out.object.pointer("/metadata/namespace"), None);
}

#[test]
fn pod_node_name_priority_and_legacy_token_volumes_are_dropped() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
        "spec": {
            "nodeName": "node-1", "priority": 100, "serviceAccountName": "app",
            "volumes": [{"name": "app-token-abcde"}, {"name": "data"}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "app-token-abcde", "mountPath": "/var/run"}, {"name": "data", "mountPath": "/data"}]}]
        },
        "status": {"phase": "Running"}});
    let m = no_mapping();
    assert_eq!(skip_reason("pods", &pod), None);
    let out = clean("pods", pod, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out.pointer("/spec/nodeName"), None);
    assert_eq!(out.pointer("/spec/priority"), None);
    assert_eq!(
        out.pointer("/spec/volumes"),
        Some(&json!([{"name": "data"}]))
    );
    assert_eq!(
        out.pointer("/spec/containers/0/volumeMounts"),
        Some(&json!([{"name": "data", "mountPath": "/data"}]))
    );
}

#[test]
fn skip_rules() {
    let cases = [
        (
            "pods",
            json!({"metadata": {"name": "p"}, "status": {"phase": "Succeeded"}}),
            Some(ItemSkip::FinishedPod),
        ),
        (
            "pods",
            json!({"metadata": {"name": "p"}, "status": {"phase": "Failed"}}),
            Some(ItemSkip::FinishedPod),
        ),
        (
            "pods",
            json!({"metadata": {"name": "p"}, "status": {"phase": "Pending"}}),
            None,
        ),
        (
            "pods",
            json!({"metadata": {"name": "p", "annotations": {"kubernetes.io/config.mirror": "x"}}}),
            Some(ItemSkip::MirrorPod),
        ),
        (
            "jobs.batch",
            json!({"metadata": {"name": "j"}, "status": {"completionTime": "2026-01-01T00:00:00Z"}}),
            Some(ItemSkip::CompletedJob),
        ),
        (
            "jobs.batch",
            json!({"metadata": {"name": "j"}, "status": {"active": 1}}),
            None,
        ),
        (
            "secrets",
            json!({"type": "kubernetes.io/service-account-token", "metadata": {"name": "app-token-x1y2z", "annotations": {"kubernetes.io/service-account.name": "app"}}}),
            Some(ItemSkip::ServiceAccountToken),
        ),
        (
            "secrets",
            json!({"type": "kubernetes.io/service-account-token", "metadata": {"name": "app-long-lived", "annotations": {"kubernetes.io/service-account.name": "app"}}}),
            None,
        ),
        (
            "secrets",
            json!({"type": "Opaque", "metadata": {"name": "app-token-x1y2z"}}),
            None,
        ),
        (
            "configmaps",
            json!({"metadata": {"name": "c"}, "status": {"phase": "Failed"}}),
            None,
        ),
    ];
    for (gr, obj, want) in cases {
        assert_eq!(skip_reason(gr, &obj), want, "{gr} {obj}");
    }
}

#[test]
fn kept_service_account_token_secret_loses_uid_token_and_ca() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "app-long-lived", "namespace": "shop", "annotations": {
            "kubernetes.io/service-account.name": "app", "kubernetes.io/service-account.uid": "u-1"}},
        "data": {"token": "dG9r", "ca.crt": "Y2E=", "namespace": "c2hvcA=="}});
    let m = no_mapping();
    let out = clean("secrets", secret, Some("shop"), &ctx(&m), false).object;
    assert_eq!(
        out.pointer("/metadata/annotations"),
        Some(&json!({"kubernetes.io/service-account.name": "app"}))
    );
    assert_eq!(out.get("data"), Some(&json!({"namespace": "c2hvcA=="})));
}

#[test]
fn crds_and_webhooks_archived_in_forms_v1_refuses_are_mended() {
    let m = no_mapping();
    let crd = |api: &str, preserve: bool| {
        json!({"apiVersion": api, "kind": "CustomResourceDefinition",
            "metadata": {"name": "carts.shop.example.com"},
            "spec": {"preserveUnknownFields": preserve, "versions": [
                {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2"}]}})
    };
    let gr = "customresourcedefinitions.apiextensions.k8s.io";
    let out = clean(
        gr,
        crd("apiextensions.k8s.io/v1", true),
        None,
        &ctx(&m),
        false,
    )
    .object;
    assert_eq!(out["spec"]["preserveUnknownFields"], false);
    assert_eq!(
        out["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(out["spec"]["versions"][1], json!({"name": "v2"}));
    for unchanged in [
        crd("apiextensions.k8s.io/v1", false),
        crd("apiextensions.k8s.io/v1beta1", true),
    ] {
        let spec = unchanged["spec"].clone();
        assert_eq!(
            clean(gr, unchanged, None, &ctx(&m), false).object["spec"],
            spec
        );
    }

    let hooks = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "shop"},
        "webhooks": [{"name": "a", "sideEffects": "Unknown"}, {"name": "b", "sideEffects": "NoneOnDryRun"},
                     {"name": "c"}]});
    let out = clean(
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
        hooks,
        None,
        &ctx(&m),
        false,
    )
    .object;
    let effects: Vec<&Value> = out["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["sideEffects"])
        .collect();
    assert_eq!(
        effects,
        [&json!("None"), &json!("NoneOnDryRun"), &json!("None")]
    );
}

#[test]
fn apiservices_the_api_server_registers_are_skipped() {
    let service = |labels: Value| {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1.apps", "labels": labels}})
    };
    let gr = "apiservices.apiregistration.k8s.io";
    assert_eq!(
        skip_reason(
            gr,
            &service(json!({"kube-aggregator.kubernetes.io/automanaged": "onstart"}))
        ),
        Some(ItemSkip::AutomanagedApiService)
    );
    assert_eq!(skip_reason(gr, &service(json!({"app": "metrics"}))), None);
}

#[test]
fn job_controller_uid_labels_are_removed() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"controller-uid": "u", "batch.kubernetes.io/controller-uid": "u", "app": "j"}},
            "template": {"metadata": {"labels": {"controller-uid": "u", "job-name": "j"}}}}});
    let m = no_mapping();
    let out = clean("jobs.batch", job, Some("shop"), &ctx(&m), false).object;
    assert_eq!(
        out.pointer("/spec/selector/matchLabels"),
        Some(&json!({"app": "j"}))
    );
    assert_eq!(
        out.pointer("/spec/template/metadata/labels"),
        Some(&json!({"job-name": "j"}))
    );
}

#[test]
fn pv_and_pvc_bind_state_is_removed_and_claim_namespace_mapped() {
    let mut m = BTreeMap::new();
    m.insert("shop".to_string(), "shop-copy".to_string());
    let bind = json!({"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes", "keep": "1"});
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv", "annotations": bind},
        "spec": {"claimRef": {"namespace": "shop", "name": "data", "uid": "u", "resourceVersion": "9"}}});
    let out = clean("persistentvolumes", pv, None, &ctx(&m), false).object;
    assert_eq!(
        out.pointer("/metadata/annotations"),
        Some(&json!({"keep": "1"}))
    );
    assert_eq!(
        out.pointer("/spec/claimRef"),
        Some(&json!({"namespace": "shop-copy", "name": "data"}))
    );
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "shop", "annotations": bind}});
    let out = clean("persistentvolumeclaims", pvc, Some("shop"), &ctx(&m), false).object;
    assert_eq!(
        out.pointer("/metadata/annotations"),
        Some(&json!({"keep": "1"}))
    );
}

#[test]
fn service_account_drops_its_legacy_token_secret() {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": "shop"},
        "secrets": [{"name": "app-token-abcde"}, {"name": "other"}]});
    let m = no_mapping();
    let out = clean("serviceaccounts", sa, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out.get("secrets"), Some(&json!([{"name": "other"}])));
}

#[test]
fn namespace_object_keeps_archived_labels_annotations_and_spec() {
    let archived = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "uid": "u", "labels": {"team": "a", "kubernetes.io/metadata.name": "shop"},
            "annotations": {"owner": "x"}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    let m = no_mapping();
    let ns = namespace_object("shop-copy", Some(&archived), &ctx(&m));
    assert_eq!(
        ns,
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop-copy",
            "labels": {"team": "a", BACKUP_NAME_LABEL: "nightly", RESTORE_NAME_LABEL: "nightly-20261203"},
            "annotations": {"owner": "x"}},
        "spec": {"finalizers": ["kubernetes"]}})
    );
    let bare = namespace_object("fresh", None, &ctx(&m));
    assert_eq!(bare.pointer("/metadata/name"), Some(&json!("fresh")));
    assert!(bare.get("spec").is_none());
}

#[test]
fn role_binding_subjects_follow_the_namespace_mapping() {
    let mut m = BTreeMap::new();
    m.insert("shop".to_string(), "shop-copy".to_string());
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "b"},
    "subjects": [
        {"kind": "ServiceAccount", "name": "app", "namespace": "shop"},
        {"kind": "ServiceAccount", "name": "x", "namespace": "elsewhere"},
        {"kind": "User", "name": "alice"}
    ]});
    for gr in [
        "clusterrolebindings.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
    ] {
        let out = clean(gr, binding.clone(), None, &ctx(&m), false).object;
        assert_eq!(
            out.get("subjects"),
            Some(&json!([
                {"kind": "ServiceAccount", "name": "app", "namespace": "shop-copy"},
                {"kind": "ServiceAccount", "name": "x", "namespace": "elsewhere"},
                {"kind": "User", "name": "alice"}
            ])),
            "{gr}"
        );
    }
}

#[test]
fn claim_of_a_reprovisioned_volume_loses_its_volume_name() {
    let m = no_mapping();
    let pvs: BTreeSet<String> = ["pv-gone".to_string()].into();
    let mut c = ctx(&m);
    c.reprovisioned_pvs = &pvs;
    for (volume, kept) in [("pv-gone", false), ("pv-kept", true)] {
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop"},
            "spec": {"volumeName": volume, "resources": {"requests": {"storage": "1Gi"}}}});
        let out = clean("persistentvolumeclaims", pvc, Some("shop"), &c, false).object;
        assert_eq!(out.pointer("/spec/volumeName").is_some(), kept, "{volume}");
        assert!(out.pointer("/spec/resources").is_some());
    }
}

#[test]
fn a_restore_with_a_uid_labels_what_it_creates_with_it() {
    let m = no_mapping();
    let c = CleanContext {
        restore_uid: "7d1c2f4e-0b5a-4c55-9e3f-2b8a6f9e1d20",
        ..ctx(&m)
    };
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cm", "namespace": "shop", "labels": {"app": "a"}}});
    let out = clean("configmaps", obj, Some("shop"), &c, false).object;
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "a", BACKUP_NAME_LABEL: "nightly", RESTORE_NAME_LABEL: "nightly-20261203",
               RESTORE_UID_LABEL: "7d1c2f4e-0b5a-4c55-9e3f-2b8a6f9e1d20"})
    );
}

#[test]
fn a_claim_with_a_snapshot_is_provisioned_from_it_and_the_snapshot_from_a_new_content() {
    let mapping = BTreeMap::from([("shop".to_owned(), "shop-copy".to_owned())]);
    let snapshots = BTreeMap::from([(
        ("shop".to_owned(), "data".to_owned()),
        "velero-data-abcde".to_owned(),
    )]);
    let c = CleanContext {
        snapshots: &snapshots,
        ..ctx(&mapping)
    };
    let pvc = json!({"metadata": {"name": "data", "namespace": "shop"},
                     "spec": {"volumeName": "pvc-1", "storageClassName": "fast"}});
    let out = clean("persistentvolumeclaims", pvc, Some("shop"), &c, false).object;
    assert_eq!(out.pointer("/spec/volumeName"), None);
    let source = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "velero-data-abcde"});
    assert_eq!(out["spec"]["dataSource"], source);
    assert_eq!(out["spec"]["dataSourceRef"], source);
    assert_eq!(out["metadata"]["namespace"], "shop-copy");

    let other =
        json!({"metadata": {"name": "logs", "namespace": "shop"}, "spec": {"volumeName": "pvc-2"}});
    let out = clean("persistentvolumeclaims", other, Some("shop"), &c, false).object;
    assert_eq!(
        out["spec"]["volumeName"], "pvc-2",
        "no snapshot: bound as archived"
    );
    assert_eq!(out["spec"].get("dataSource"), None);

    let snapshot = json!({"metadata": {"name": "velero-data-abcde", "namespace": "shop"},
                          "spec": {"volumeSnapshotClassName": "c", "source": {"persistentVolumeClaimName": "data"}},
                          "status": {"readyToUse": true}});
    let out = clean(
        crate::csi::VOLUME_SNAPSHOTS,
        snapshot,
        Some("shop"),
        &c,
        false,
    )
    .object;
    assert_eq!(
        out["spec"]["source"],
        json!({"volumeSnapshotContentName": crate::csi::restored_content_name("nightly-20261203", "shop-copy", "velero-data-abcde")})
    );
    assert_eq!(out.get("status"), None);
    assert_eq!(
        skip_reason(crate::csi::VOLUME_SNAPSHOT_CONTENTS, &json!({})),
        Some(ItemSkip::SnapshotContent)
    );
}

#[test]
fn a_claim_loses_the_annotations_of_the_old_cluster_and_keeps_the_others() {
    let m = no_mapping();
    let pvc = json!({"metadata": {"name": "data", "namespace": "shop", "annotations": {
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
        "volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
        "volume.kubernetes.io/selected-node": "ip-10-0-1-5",
        "velero.io/volume-snapshot-name": "velero-data-abcde",
        "velero.io/data-upload-name": "nightly-x7k2p",
        "team": "storage"
    }}, "spec": {"storageClassName": "gp3"}});
    let out = clean("persistentvolumeclaims", pvc, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out["metadata"]["annotations"], json!({"team": "storage"}));
}

#[test]
fn the_storage_class_mapping_changes_claims_volumes_and_claim_templates() {
    let m = no_mapping();
    let classes = BTreeMap::from([("gp2".to_owned(), "gp3".to_owned())]);
    let c = CleanContext {
        storage_classes: &classes,
        ..ctx(&m)
    };
    let pvc = json!({"metadata": {"name": "a", "namespace": "shop"},
                     "spec": {"storageClassName": "gp2"}});
    let out = clean("persistentvolumeclaims", pvc, Some("shop"), &c, false).object;
    assert_eq!(out["spec"]["storageClassName"], "gp3");
    let pv = json!({"metadata": {"name": "pv-1"}, "spec": {"storageClassName": "gp2"}});
    let out = clean("persistentvolumes", pv, None, &c, false).object;
    assert_eq!(out["spec"]["storageClassName"], "gp3");
    let set = json!({"metadata": {"name": "db", "namespace": "shop"}, "spec": {
    "volumeClaimTemplates": [
        {"metadata": {"name": "data"}, "spec": {"storageClassName": "gp2"}},
        {"metadata": {"name": "logs"}, "spec": {"storageClassName": "standard"}},
        {"metadata": {"name": "none"}, "spec": {}}
    ]}});
    let out = clean("statefulsets.apps", set, Some("shop"), &c, false).object;
    let templates = &out["spec"]["volumeClaimTemplates"];
    assert_eq!(templates[0]["spec"]["storageClassName"], "gp3");
    assert_eq!(templates[1]["spec"]["storageClassName"], "standard");
    assert!(templates[2]["spec"].get("storageClassName").is_none());
    let other = json!({"metadata": {"name": "b", "namespace": "shop"},
                       "spec": {"storageClassName": "standard"}});
    let out = clean("persistentvolumeclaims", other, Some("shop"), &c, false).object;
    assert_eq!(out["spec"]["storageClassName"], "standard");
}

#[test]
fn modifiers_see_the_archived_namespace_and_labels_and_keep_no_restore_label_from_being_set() {
    let yaml = r"
version: v1
resourceModifierRules:
- conditions:
    groupResource: configmaps
    namespaces: [shop]
    labelSelector:
      matchExpressions: [{key: velero.io/restore-name, operator: DoesNotExist}]
  mergePatches:
  - patchData: '{metadata: {labels: null}, data: {moved: here}}'
";
    let data = BTreeMap::from([("rules".to_owned(), yaml.to_owned())]);
    let modifiers = ResourceModifiers::from_config_map("velero", "m", &data).unwrap();
    let mapping = BTreeMap::from([("shop".to_owned(), "shop-copy".to_owned())]);
    let c = CleanContext {
        modifiers: Some(&modifiers),
        ..ctx(&mapping)
    };
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cm", "namespace": "shop", "labels": {"app": "a"}}});
    let out = clean("configmaps", obj, Some("shop"), &c, false);
    assert!(out.modifier_errors.is_empty(), "{:?}", out.modifier_errors);
    assert_eq!(out.object["data"]["moved"], "here");
    assert_eq!(out.object["metadata"]["namespace"], "shop-copy");
    assert_eq!(
        out.object["metadata"]["labels"],
        json!({BACKUP_NAME_LABEL: "nightly", RESTORE_NAME_LABEL: "nightly-20261203"})
    );
}
