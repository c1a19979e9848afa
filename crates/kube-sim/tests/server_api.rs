//! HTTP-level behaviour of the resource API: CRUD, errors, pagination, discovery, CRDs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod server_support;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use server_support::{cm, rv, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn create_get_update_conflict_and_noop() {
    let (_sim, c) = start().await;
    let created = c
        .post(&format!("{CMS}?"), &cm("a", json!({"app": "x"})))
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.header("content-type"), Some("application/json"));
    let obj = created.json();
    assert!(!obj["metadata"]["uid"].as_str().unwrap().is_empty());
    assert!(
        obj["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(
        obj["metadata"].get("generation").is_none(),
        "ConfigMaps have no generation"
    );
    let first_rv = rv(&obj);

    let again = c.post(CMS, &cm("a", json!({}))).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let s = again.json();
    assert_eq!(s["reason"], "AlreadyExists");
    assert_eq!(s["message"], "configmaps \"a\" already exists");
    assert_eq!(s["details"], json!({"name": "a", "kind": "configmaps"}));

    let mut stale = obj.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["data"]["k"] = json!("changed");
    let conflict = c.put(&format!("{CMS}/a"), &stale).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(
        conflict.json()["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Writing back the stored object is a no-op: same RV.
    let noop = c.put(&format!("{CMS}/a"), &obj).await;
    assert_eq!(noop.status, StatusCode::OK);
    assert_eq!(rv(&noop.json()), first_rv);

    let mut changed = obj.clone();
    changed["data"]["k"] = json!("w");
    let updated = c.put(&format!("{CMS}/a"), &changed).await.json();
    assert!(rv(&updated) > first_rv);
    assert_eq!(updated["metadata"]["uid"], obj["metadata"]["uid"]);

    let got = c.get(&format!("{CMS}/a")).await.json();
    assert_eq!(got["data"]["k"], "w");
    assert_eq!(got["kind"], "ConfigMap");
}

/// Names are checked as the real server checks them: most kinds take an RFC 1123 subdomain
/// (253 characters, no 63-character cap on its parts), Namespaces an RFC 1123 label.
#[tokio::test]
async fn names_are_validated_per_kind() {
    let (_sim, c) = start().await;
    let long_part = "a".repeat(71);
    let created = c.post(CMS, &cm(&long_part, json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let dotted = format!("{}.{}", "b".repeat(100), "c".repeat(100));
    assert_eq!(
        c.post(CMS, &cm(&dotted, json!({}))).await.status,
        StatusCode::CREATED
    );

    for bad in [
        "d".repeat(254),
        "Upper".to_string(),
        "ends-".to_string(),
        "a..b".to_string(),
    ] {
        let refused = c.post(CMS, &cm(&bad, json!({}))).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    let namespace =
        |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let long_namespace = c
        .post("/api/v1/namespaces", &namespace(&"n".repeat(64)))
        .await;
    assert_eq!(long_namespace.status, StatusCode::UNPROCESSABLE_ENTITY);
    let namespace_63 = c
        .post("/api/v1/namespaces", &namespace(&"n".repeat(63)))
        .await;
    assert_eq!(namespace_63.status, StatusCode::CREATED);
}

#[tokio::test]
async fn errors_are_full_status_objects() {
    let (sim, c) = start().await;
    let nf = c.get(&format!("{CMS}/missing")).await;
    assert_eq!(nf.status, StatusCode::NOT_FOUND);
    let s = nf.json();
    for key in [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ] {
        assert!(s.get(key).is_some(), "Status lacks {key}: {s}");
    }
    assert_eq!(s["code"], 404);
    assert_eq!(s["reason"], "NotFound");

    let unknown = c.get("/apis/nope.example.com/v1/things").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.text(), "404 page not found\n");
    let unknown_res = c.get("/api/v1/nothings").await;
    assert_eq!(unknown_res.status, StatusCode::NOT_FOUND);

    let bad_json = c
        .send(
            Method::POST,
            CMS,
            &[("content-type", "application/json")],
            "{not json",
        )
        .await;
    assert_eq!(bad_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_json.json()["reason"], "BadRequest");

    let proto = c
        .send(
            Method::POST,
            CMS,
            &[("content-type", "application/vnd.kubernetes.protobuf")],
            "k8s\0",
        )
        .await;
    // kube-sim decodes protobuf for namespaces only and refuses it elsewhere; a real server
    // decodes it and finds the body malformed (docs/kube-sim.md, differences).
    if sim.real().is_some() {
        assert_eq!(proto.status, StatusCode::BAD_REQUEST);
        assert_eq!(proto.json()["reason"], "BadRequest");
    } else {
        assert_eq!(proto.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(proto.json()["reason"], "UnsupportedMediaType");
    }

    let big = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let too_large = c
        .send(
            Method::POST,
            CMS,
            &[("content-type", "application/json")],
            big,
        )
        .await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(too_large.json()["reason"], "RequestEntityTooLarge");

    let not_acceptable = c
        .get_accept(CMS, "application/vnd.kubernetes.protobuf")
        .await;
    // A real server encodes ConfigMaps in protobuf (see the protobuf body above).
    if sim.real().is_some() {
        assert_eq!(not_acceptable.status, StatusCode::OK);
    } else {
        assert_eq!(not_acceptable.status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(not_acceptable.json()["reason"], "NotAcceptable");
    }

    let with_rv = c
        .post(
            CMS,
            &json!({"metadata": {"name": "r", "resourceVersion": "5"}}),
        )
        .await;
    assert_eq!(with_rv.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        with_rv.json()["message"],
        "resourceVersion should not be set on objects to be created"
    );
    assert_eq!(
        with_rv.json()["reason"],
        json!(null),
        "an empty reason is left out"
    );

    let no_ns = c
        .post("/api/v1/namespaces/ghost/configmaps", &cm("a", json!({})))
        .await;
    assert_eq!(no_ns.status, StatusCode::NOT_FOUND);
    assert_eq!(no_ns.json()["message"], "namespaces \"ghost\" not found");

    let bad_name = c.post(CMS, &cm("Bad_Name", json!({}))).await;
    assert_eq!(bad_name.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad_name.json()["reason"], "Invalid");
    assert_eq!(
        bad_name.json()["details"]["causes"][0]["field"],
        "metadata.name"
    );

    let wrong_gv = c
        .post(
            CMS,
            &json!({"apiVersion": "apps/v1", "metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(wrong_gv.status, StatusCode::BAD_REQUEST);
    // The wording differs (docs/kube-sim.md, differences).
    let expected = if sim.real().is_some() {
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: no kind \"ConfigMap\" is \
         registered for version \"apps/v1\" in scheme \"pkg/runtime/scheme.go:111\""
    } else {
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    };
    assert_eq!(wrong_gv.json()["message"], expected);

    let wrong_ns = c
        .post(
            CMS,
            &json!({"metadata": {"name": "x", "namespace": "kube-system"}}),
        )
        .await;
    assert_eq!(wrong_ns.status, StatusCode::BAD_REQUEST);

    let bad_selector = c.get(&format!("{CMS}?labelSelector=a%20in%20(")).await;
    assert_eq!(bad_selector.status, StatusCode::BAD_REQUEST);
    let bad_field = c.get(&format!("{CMS}?fieldSelector=spec.x%3D1")).await;
    assert_eq!(bad_field.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad_field.json()["message"],
        "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
}

#[tokio::test]
async fn pagination_is_snapshot_consistent() {
    let (_sim, c) = start().await;
    for i in 0..25 {
        let r = c
            .post(CMS, &cm(&format!("cm-{i:02}"), json!({"n": i.to_string()})))
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let p1 = c.get(&format!("{CMS}?limit=10")).await.json();
    assert_eq!(p1["items"].as_array().unwrap().len(), 10);
    assert_eq!(p1["metadata"]["remainingItemCount"], 15);
    assert!(
        p1["items"][0].get("kind").is_none(),
        "built-in list items carry no kind"
    );
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    let list_rv = p1["metadata"]["resourceVersion"].clone();

    // Changes after the first page are not visible in later pages.
    c.post(CMS, &cm("cm-99", json!({}))).await;
    c.delete(&format!("{CMS}/cm-20"), "{}").await;

    let p2 = c
        .get(&format!("{CMS}?limit=10&continue={token}"))
        .await
        .json();
    assert_eq!(p2["metadata"]["resourceVersion"], list_rv);
    let token2 = p2["metadata"]["continue"].as_str().unwrap().to_string();
    let p3 = c
        .get(&format!("{CMS}?limit=10&continue={token2}"))
        .await
        .json();
    let names: Vec<&str> = p3["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["cm-20", "cm-21", "cm-22", "cm-23", "cm-24"]);
    assert!(p3["metadata"].get("continue").is_none());

    let bad = c.get(&format!("{CMS}?limit=10&continue=garbage")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let rv_and_continue = c
        .get(&format!(
            "{CMS}?limit=10&continue={token}&resourceVersion=3"
        ))
        .await;
    assert_eq!(rv_and_continue.status, StatusCode::BAD_REQUEST);

    let selected = c
        .get(&format!(
            "{CMS}?labelSelector=n%20in%20(3,4)&fieldSelector=metadata.name!%3Dcm-03"
        ))
        .await
        .json();
    let names: Vec<&str> = selected["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["cm-04"]);
}

#[tokio::test]
async fn metadata_and_table_representations() {
    let (_sim, c) = start().await;
    c.post(CMS, &cm("a", json!({}))).await;
    let meta = c
        .get_accept(
            CMS,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await
        .json();
    assert_eq!(meta["kind"], "PartialObjectMetadataList");
    assert_eq!(meta["items"][0]["kind"], "PartialObjectMetadata");
    assert!(meta["items"][0].get("data").is_none());
    assert_eq!(meta["items"][0]["metadata"]["name"], "a");
    let table = c
        .get_accept(
            CMS,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .await
        .json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], "a");
}

#[tokio::test]
async fn discovery_legacy_and_aggregated() {
    let (_sim, c) = start().await;
    let api = c.get("/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert!(api.get("serverAddressByClientCIDRs").is_some());
    let groups = c.get("/apis").await.json();
    assert_eq!(groups["kind"], "APIGroupList");
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "apps")
    );
    let core = c.get("/api/v1").await.json();
    let ns = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces")
        .unwrap();
    assert_eq!(ns["shortNames"], json!(["ns"]));
    assert_eq!(ns["namespaced"], false);
    assert!(
        !ns["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );
    assert!(
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods/status")
    );

    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let agg = c.get_accept("/apis", accept).await;
    assert_eq!(
        agg.header("content-type"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let body = agg.json();
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    assert!(
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["metadata"]["name"] == "batch")
    );
    let core_agg = c.get_accept("/api", accept).await.json();
    assert_eq!(core_agg["items"][0]["versions"][0]["version"], "v1");

    let version = c.get("/version").await.json();
    assert_eq!(version["major"], "1");
    assert_eq!(c.get("/readyz").await.text(), "ok");
    let oa = c.get("/openapi/v3").await.json();
    assert!(oa["paths"].get("api/v1").is_some());
}

fn backup_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "backups.velero.io"},
        "spec": {
            "group": "velero.io",
            "scope": "Namespaced",
            "names": {"plural": "backups", "kind": "Backup", "shortNames": ["bk"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

#[tokio::test]
async fn crd_lifecycle_and_status_subresource() {
    let (_sim, c) = start().await;
    assert_eq!(
        c.get("/apis/velero.io/v1/namespaces/default/backups")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let crd = c
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &backup_crd(),
        )
        .await;
    assert_eq!(crd.status, StatusCode::CREATED);
    // kube-sim establishes it at once, a real server within moments.
    let established = c.until_established("backups.velero.io").await;
    assert_eq!(established["status"], "True");
    assert_eq!(established["reason"], "InitialNamesAccepted");
    assert_eq!(
        established["message"],
        "the initial names have been accepted"
    );

    // A real server's discovery and handlers follow Established by a moment.
    let disc = c.until_ok("/apis/velero.io/v1").await.json();
    assert!(
        disc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "backups/status")
    );

    const BK: &str = "/apis/velero.io/v1/namespaces/default/backups";
    c.until_ok(BK).await;
    let b = c
        .post(BK, &json!({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "b1"}, "spec": {"ttl": "1h"}, "status": {"phase": "New"}}))
        .await
        .json();
    assert!(
        b.get("status").is_none(),
        "create drops status when the subresource is enabled"
    );
    assert_eq!(b["metadata"]["generation"], 1);

    let st = c
        .patch(
            &format!("{BK}/b1/status"),
            "application/merge-patch+json",
            &json!({"status": {"phase": "InProgress"}, "spec": {"ttl": "2h"}}),
        )
        .await
        .json();
    assert_eq!(st["status"]["phase"], "InProgress");
    assert_eq!(st["spec"]["ttl"], "1h", "status writes ignore spec");
    assert_eq!(st["metadata"]["generation"], 1);

    let main = c
        .patch(
            &format!("{BK}/b1"),
            "application/merge-patch+json",
            &json!({"spec": {"ttl": "3h"}, "status": {"phase": "Failed"}}),
        )
        .await
        .json();
    assert_eq!(
        main["status"]["phase"], "InProgress",
        "main writes ignore status"
    );
    assert_eq!(main["metadata"]["generation"], 2);

    let smp = c
        .patch(
            &format!("{BK}/b1"),
            "application/strategic-merge-patch+json",
            &json!({}),
        )
        .await;
    assert_eq!(smp.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        smp.json()["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );

    let del = c.delete(&format!("{BK}/b1"), "{}").await.json();
    assert_eq!(del["kind"], "Status");
    assert_eq!(del["status"], "Success");
    assert_eq!(del["details"]["kind"], "backups");

    c.post(
        BK,
        &json!({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "b2"}}),
    )
    .await;
    c.delete(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.velero.io",
        "{}",
    )
    .await;
    let mut gone = false;
    for _ in 0..100 {
        if c.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.velero.io")
            .await
            .status
            == StatusCode::NOT_FOUND
        {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(gone, "CRD deletion completes");
    assert_eq!(
        c.get(&format!("{BK}/b2")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn finalizers_and_namespace_deletion() {
    let (_sim, c) = start().await;
    let ns = c
        .post("/api/v1/namespaces", &json!({"metadata": {"name": "shop"}}))
        .await
        .json();
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "shop"
    );
    assert_eq!(ns["status"]["phase"], "Active");
    const W: &str = "/api/v1/namespaces/shop/configmaps";
    c.post(
        W,
        &json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    c.post(W, &cm("free", json!({}))).await;

    let del = c.delete("/api/v1/namespaces/shop", "{}").await.json();
    assert_eq!(del["status"]["phase"], "Terminating");
    let forbidden = c.post(W, &cm("new", json!({}))).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

    // kube-sim's namespace controller empties it at once, a real one within seconds.
    let mut held = Value::Null;
    for _ in 0..1500 {
        if c.get(&format!("{W}/free")).await.status == StatusCode::NOT_FOUND {
            held = c.get(&format!("{W}/held")).await.json();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "held object is being deleted: {held}"
    );
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    // Adding a finalizer to a deleting object is refused.
    let add = c
        .patch(
            &format!("{W}/held"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": ["example.com/hold", "b.example.com/x"]}}),
        )
        .await;
    assert_eq!(add.status, StatusCode::UNPROCESSABLE_ENTITY);
    // Removing the last finalizer deletes it, then the namespace goes away.
    let rm = c
        .patch(
            &format!("{W}/held"),
            "application/json-patch+json",
            &json!([{"op": "remove", "path": "/metadata/finalizers"}]),
        )
        .await;
    assert_eq!(rm.status, StatusCode::OK);
    let mut ns_gone = false;
    for _ in 0..1500 {
        if c.get("/api/v1/namespaces/shop").await.status == StatusCode::NOT_FOUND {
            ns_gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(ns_gone);
}

#[tokio::test]
async fn delete_preconditions_propagation_and_dry_run() {
    let (sim, c) = start().await;
    let obj = c.post(CMS, &cm("p", json!({}))).await.json();
    let wrong = c
        .delete(&format!("{CMS}/p"), r#"{"preconditions":{"uid":"nope"}}"#)
        .await;
    assert_eq!(wrong.status, StatusCode::CONFLICT);
    let dry = c.delete(&format!("{CMS}/p?dryRun=All"), "").await;
    assert_eq!(dry.status, StatusCode::OK);
    assert_eq!(c.get(&format!("{CMS}/p")).await.status, StatusCode::OK);
    let rv_before = rv(&c.get(&format!("{CMS}/p")).await.json());
    let dry_create = c
        .post(&format!("{CMS}?dryRun=All"), &cm("q", json!({})))
        .await;
    assert_eq!(dry_create.status, StatusCode::CREATED);
    assert_eq!(
        c.get(&format!("{CMS}/q")).await.status,
        StatusCode::NOT_FOUND
    );
    let list_rv: u64 = c.get(CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // A real server's list resourceVersion is the etcd revision, which every API server on
    // that etcd (the other tests') moves on: only kube-sim's can be compared.
    if sim.real().is_none() {
        assert_eq!(list_rv, rv_before, "dry runs consume no resourceVersion");
    }
    let fg = c
        .delete(&format!("{CMS}/p"), r#"{"propagationPolicy":"Foreground"}"#)
        .await;
    assert_eq!(fg.status, StatusCode::OK);
    let mut gone = false;
    for _ in 0..100 {
        if c.get(&format!("{CMS}/p")).await.status == StatusCode::NOT_FOUND {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        gone,
        "foreground deletion completes without a garbage collector: {obj}"
    );
}

#[tokio::test]
async fn delete_collection_and_pod_delete_shape() {
    let (_sim, c) = start().await;
    for n in ["a", "b", "c"] {
        c.post(
            CMS,
            &cm(n, json!({"grp": if n == "c" { "2" } else { "1" }})),
        )
        .await;
    }
    let gone = c
        .delete(&format!("{CMS}?labelSelector=grp%3D1"), "")
        .await
        .json();
    assert_eq!(gone["kind"], "ConfigMapList");
    assert_eq!(gone["items"].as_array().unwrap().len(), 2);
    let left = c.get(CMS).await.json();
    assert_eq!(left["items"].as_array().unwrap().len(), 1);

    // A real server admits a pod only once its ServiceAccount exists (made by a controller
    // that the test clusters do not run).
    c.post(
        "/api/v1/namespaces/default/serviceaccounts",
        &json!({"metadata": {"name": "default"}}),
    )
    .await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = c.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let del = c
        .delete("/api/v1/namespaces/default/pods/p", "{}")
        .await
        .json();
    assert_eq!(del["kind"], "Pod", "pods answer a delete with the object");
}

#[tokio::test]
async fn json_patch_test_semantics_and_apply() {
    let (_sim, c) = start().await;
    c.post(CMS, &cm("j", json!({}))).await;
    let ok = c
        .patch(&format!("{CMS}/j"), "application/json-patch+json", &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}, {"op": "add", "path": "/metadata/finalizers", "value": ["x.example.com/f"]}]))
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    let fail = c
        .patch(
            &format!("{CMS}/j"),
            "application/json-patch+json",
            &json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "other"}]),
        )
        .await;
    assert_eq!(fail.status, StatusCode::UNPROCESSABLE_ENTITY);

    let stale = c
        .patch(
            &format!("{CMS}/j"),
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": "1"}, "data": {"k": "z"}}),
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);

    let no_manager = c
        .patch(
            &format!("{CMS}/s"),
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}}),
        )
        .await;
    assert_eq!(no_manager.status, StatusCode::UNPROCESSABLE_ENTITY);
    let applied = c
        .patch(&format!("{CMS}/s?fieldManager=test"), "application/apply-patch+yaml", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"a": "1"}}))
        .await;
    assert_eq!(applied.status, StatusCode::CREATED);
    let mf = &applied.json()["metadata"]["managedFields"];
    assert!(
        mf.as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == "test" && e["operation"] == "Apply"),
        "{mf}"
    );
}

#[tokio::test]
async fn update_managers_take_ownership_of_the_fields_they_change() {
    let (_sim, c) = start().await;
    c.post(
        &format!("{CMS}?fieldManager=creator"),
        &json!({"metadata": {"name": "o"}, "data": {"a": "1", "b": "1"}}),
    )
    .await;
    c.patch(
        &format!("{CMS}/o?fieldManager=patcher"),
        "application/merge-patch+json",
        &json!({"data": {"a": "2"}}),
    )
    .await;
    let conflict = c
        .patch(
            &format!("{CMS}/o?fieldManager=applier"),
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o"}, "data": {"a": "3"}}),
        )
        .await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    let s = conflict.json();
    let causes = s["details"]["causes"].as_array().unwrap();
    assert_eq!(
        causes.len(),
        1,
        "only the last writer of data.a conflicts: {s}"
    );
    assert!(s["message"].as_str().unwrap().contains("patcher"), "{s}");
}

fn pb_field(n: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![n << 3 | 2, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

#[tokio::test]
async fn protobuf_namespace_create_as_kubectl_sends_it() {
    let (sim, c) = start().await;
    let type_meta = [pb_field(1, b"v1"), pb_field(2, b"Namespace")].concat();
    let raw = pb_field(1, &pb_field(1, b"from-proto"));
    let body = [
        b"k8s\x00".to_vec(),
        pb_field(1, &type_meta),
        pb_field(2, &raw),
    ]
    .concat();
    let r = c
        .send(
            Method::POST,
            "/api/v1/namespaces",
            &[
                ("content-type", "application/vnd.kubernetes.protobuf"),
                ("accept", "application/vnd.kubernetes.protobuf, */*"),
            ],
            body,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    // kube-sim answers in JSON, which kubectl also accepts; a real server in protobuf, as asked.
    if sim.real().is_some() {
        assert_eq!(
            r.header("content-type"),
            Some("application/vnd.kubernetes.protobuf")
        );
    } else {
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json()["metadata"]["name"], "from-proto");
    }
    assert_eq!(
        c.get("/api/v1/namespaces/from-proto").await.json()["status"]["phase"],
        "Active"
    );
}

#[tokio::test]
async fn garbage_collector_deletes_dependents_of_missing_owners() {
    let (_sim, c) = server_support::start_with(kube_sim::SimConfig {
        garbage_collection: true,
        ..kube_sim::SimConfig::default()
    })
    .await;
    let owner = c.post(CMS, &cm("owner", json!({}))).await.json();
    let oref = |uid: &Value| json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]);
    let dep = c.post(CMS, &json!({"metadata": {"name": "dep", "ownerReferences": oref(&owner["metadata"]["uid"])}})).await;
    assert_eq!(dep.status, StatusCode::CREATED);
    let orphan = c.post(CMS, &json!({"metadata": {"name": "stale", "ownerReferences": oref(&json!("00000000-dead-beef-0000-000000000000"))}})).await;
    assert_eq!(orphan.status, StatusCode::CREATED);
    let wait_gone = |name: &'static str| {
        let c = &c;
        async move {
            for _ in 0..100 {
                if c.get(&format!("{CMS}/{name}")).await.status == StatusCode::NOT_FOUND {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            false
        }
    };
    assert!(
        wait_gone("stale").await,
        "an object restored with a stale owner uid is collected"
    );
    assert_eq!(
        c.get(&format!("{CMS}/dep")).await.status,
        StatusCode::OK,
        "a live owner keeps its dependent"
    );
    c.delete(&format!("{CMS}/owner"), "{}").await;
    assert!(
        wait_gone("dep").await,
        "deleting the owner collects the dependent"
    );
}

#[tokio::test]
async fn multi_version_crd_serves_every_version_preferred_first() {
    let (_sim, c) = start().await;
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema},
            ]
        }
    });
    assert_eq!(
        c.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd
        )
        .await
        .status,
        StatusCode::CREATED
    );
    c.until_established("things.example.com").await;
    let group = c.until_ok("/apis/example.com").await.json();
    assert_eq!(group["preferredVersion"]["version"], "v1");
    c.post(
        "/apis/example.com/v1/things",
        &json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}),
    )
    .await;
    let old = c.get("/apis/example.com/v1beta1/things/t").await.json();
    assert_eq!(old["apiVersion"], "example.com/v1beta1");
    let list = c.get("/apis/example.com/v1beta1/things").await.json();
    assert_eq!(
        list["items"][0]["apiVersion"], "example.com/v1beta1",
        "custom resource list items carry their apiVersion"
    );
    assert_eq!(
        c.get("/apis/example.com/v1/namespaces/default/things")
            .await
            .status,
        StatusCode::NOT_FOUND,
        "cluster-scoped"
    );
}

/// A list at an exact past resourceVersion (not compacted yet) shows the state of then.
#[tokio::test]
async fn an_old_exact_list_is_served_from_history() {
    let (_sim, c) = start().await;
    let first = c.post(CMS, &cm("a", json!({}))).await.json();
    c.post(CMS, &cm("b", json!({}))).await;
    let old = c
        .get(&format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ))
        .await;
    assert_eq!(old.status, StatusCode::OK);
    assert_eq!(old.json()["items"].as_array().unwrap().len(), 1);
}
