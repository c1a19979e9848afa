//! Tests of server-side apply (`super`): ownership, conflicts, force, removal of omitted fields.

use super::*;

const T0: &str = "2025-01-02T03:04:05Z";
const T1: &str = "2025-01-02T03:05:00Z";

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": data})
}

fn managers(obj: &Value) -> Vec<(String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["fieldsV1"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn create_records_apply_entry() {
    let obj = server_side_apply(None, &cm(json!({"a": "1"})), "v1", "mgr", false, T0).unwrap();
    assert_eq!(obj["data"], json!({"a": "1"}));
    assert_eq!(obj["metadata"]["name"], "c");
    assert_eq!(
        obj["metadata"]["managedFields"],
        json!([{"manager": "mgr", "operation": "Apply", "apiVersion": "v1", "time": T0,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}])
    );
}

#[test]
fn update_sets_fields_and_keeps_unmanaged_ones() {
    let mut current =
        server_side_apply(None, &cm(json!({"a": "1"})), "v1", "mgr", false, T0).unwrap();
    current["metadata"]["uid"] = json!("u1");
    current["metadata"]["resourceVersion"] = json!("5");
    current["data"]["other"] = json!("x");
    let mut applied = cm(json!({"a": "2", "b": "3"}));
    applied["metadata"]["labels"] = json!({"l": "v"});
    let obj = server_side_apply(Some(&current), &applied, "v1", "mgr", false, T1).unwrap();
    assert_eq!(obj["data"], json!({"a": "2", "b": "3", "other": "x"}));
    assert_eq!(obj["metadata"]["labels"], json!({"l": "v"}));
    assert_eq!(obj["metadata"]["uid"], "u1");
    assert_eq!(obj["metadata"]["resourceVersion"], "5");
    let m = managers(&obj);
    assert_eq!(m.len(), 1);
    assert_eq!(
        m[0].1,
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:l": {}}}})
    );
    assert_eq!(obj["metadata"]["managedFields"][0]["time"], T1);
}

#[test]
fn omitted_fields_are_removed() {
    let mut applied = cm(json!({"a": "1", "b": "2"}));
    applied["metadata"]["labels"] = json!({"l": "v"});
    let current = server_side_apply(None, &applied, "v1", "mgr", false, T0).unwrap();
    let obj = server_side_apply(
        Some(&current),
        &cm(json!({"a": "1"})),
        "v1",
        "mgr",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1"}));
    assert!(
        obj["metadata"].get("labels").is_none(),
        "emptied labels map removed: {obj}"
    );
}

#[test]
fn omitted_field_owned_by_another_manager_stays() {
    let current = server_side_apply(
        None,
        &cm(json!({"a": "1", "b": "2"})),
        "v1",
        "one",
        false,
        T0,
    )
    .unwrap();
    let current = server_side_apply(
        Some(&current),
        &cm(json!({"b": "2"})),
        "v1",
        "two",
        false,
        T0,
    )
    .unwrap();
    let obj = server_side_apply(
        Some(&current),
        &cm(json!({"a": "1"})),
        "v1",
        "one",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1", "b": "2"}));
    let m = managers(&obj);
    assert_eq!(m[0], ("one".to_string(), json!({"f:data": {"f:a": {}}})));
    assert_eq!(m[1], ("two".to_string(), json!({"f:data": {"f:b": {}}})));
}

#[test]
fn conflict_with_other_manager() {
    let current =
        server_side_apply(None, &cm(json!({"x": "1"})), "v1", "other", false, T0).unwrap();
    let err = server_side_apply(
        Some(&current),
        &cm(json!({"x": "2"})),
        "v1",
        "me",
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err,
        PatchError::Conflict {
            message: "Apply failed with 1 conflict: conflict with \"other\": .data.x".into(),
            causes: vec![(".data.x".into(), "conflict with \"other\"".into())],
        }
    );
}

#[test]
fn same_value_is_shared_not_a_conflict() {
    let current =
        server_side_apply(None, &cm(json!({"x": "1"})), "v1", "other", false, T0).unwrap();
    let obj = server_side_apply(
        Some(&current),
        &cm(json!({"x": "1"})),
        "v1",
        "me",
        false,
        T1,
    )
    .unwrap();
    let m = managers(&obj);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].1, m[1].1);
}

#[test]
fn multiple_conflicts_message() {
    let current = server_side_apply(
        None,
        &cm(json!({"x": "1", "y": "1"})),
        "v1",
        "other",
        false,
        T0,
    )
    .unwrap();
    let err = server_side_apply(
        Some(&current),
        &cm(json!({"x": "2", "y": "2"})),
        "v1",
        "me",
        false,
        T1,
    )
    .unwrap_err();
    let PatchError::Conflict { message, causes } = err else {
        panic!("expected a conflict")
    };
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"other\":\n- .data.x\n- .data.y"
    );
    assert_eq!(causes.len(), 2);
}

#[test]
fn update_manager_conflict_names_time() {
    let mut current = cm(json!({"x": "1"}));
    current["metadata"]["managedFields"] = json!([{"manager": "kubectl-edit", "operation": "Update",
        "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:x": {}}}}]);
    let err = server_side_apply(
        Some(&current),
        &cm(json!({"x": "2"})),
        "v1",
        "me",
        false,
        T1,
    )
    .unwrap_err();
    let PatchError::Conflict { message, .. } = err else {
        panic!("expected a conflict")
    };
    assert_eq!(
        message,
        format!(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1 at {T0}: .data.x"
        )
    );
}

#[test]
fn force_takes_ownership() {
    let current = server_side_apply(
        None,
        &cm(json!({"x": "1", "y": "1"})),
        "v1",
        "other",
        false,
        T0,
    )
    .unwrap();
    let obj =
        server_side_apply(Some(&current), &cm(json!({"x": "2"})), "v1", "me", true, T1).unwrap();
    assert_eq!(obj["data"], json!({"x": "2", "y": "1"}));
    let m = managers(&obj);
    assert_eq!(m[0], ("other".to_string(), json!({"f:data": {"f:y": {}}})));
    assert_eq!(m[1], ("me".to_string(), json!({"f:data": {"f:x": {}}})));
    // The other manager no longer owns x: omitting it later as "me" removes it.
    let obj = server_side_apply(Some(&obj), &cm(json!({})), "v1", "me", false, T1).unwrap();
    assert_eq!(obj["data"], json!({"y": "1"}));
}

#[test]
fn force_drops_manager_left_with_nothing() {
    let current =
        server_side_apply(None, &cm(json!({"x": "1"})), "v1", "other", false, T0).unwrap();
    let obj =
        server_side_apply(Some(&current), &cm(json!({"x": "2"})), "v1", "me", true, T1).unwrap();
    let m = managers(&obj);
    assert_eq!(m, vec![("me".to_string(), json!({"f:data": {"f:x": {}}}))]);
}

#[test]
fn lists_are_atomic() {
    let dep = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"spec": {"containers": containers}}}})
    };
    let current = server_side_apply(
        None,
        &dep(json!([{"name": "a", "image": "1"}])),
        "apps/v1",
        "m",
        false,
        T0,
    )
    .unwrap();
    assert_eq!(
        managers(&current)[0].1,
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}})
    );
    let obj = server_side_apply(
        Some(&current),
        &dep(json!([{"name": "b", "image": "2"}])),
        "apps/v1",
        "m",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "2"}])
    );
}

#[test]
fn validation_errors() {
    let current = cm(json!({}));
    let wrong_version = json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert!(matches!(
        server_side_apply(None, &wrong_version, "v1", "m", false, T0),
        Err(PatchError::BadRequest(_))
    ));
    let wrong_kind = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}});
    assert!(matches!(
        server_side_apply(Some(&current), &wrong_kind, "v1", "m", false, T0),
        Err(PatchError::BadRequest(_))
    ));
    let mut with_mf = cm(json!({}));
    with_mf["metadata"]["managedFields"] = json!([]);
    assert!(matches!(
        server_side_apply(None, &with_mf, "v1", "m", false, T0),
        Err(PatchError::BadRequest(_))
    ));
    assert!(matches!(
        server_side_apply(None, &cm(json!({})), "v1", "", false, T0),
        Err(PatchError::Invalid(_))
    ));
    assert!(matches!(
        server_side_apply(None, &json!([1]), "v1", "m", false, T0),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn null_in_applied_config_removes_field() {
    let current =
        server_side_apply(None, &cm(json!({"a": "1", "b": "2"})), "v1", "m", false, T0).unwrap();
    let obj = server_side_apply(
        Some(&current),
        &cm(json!({"a": "1", "b": null})),
        "v1",
        "m",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1"}));
}
