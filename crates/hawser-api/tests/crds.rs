//! The checked-in CRDs match the types, and have Velero's served shape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use hawser_api::crd::{crds, crds_yaml};
use serde_json::Value;

fn checked_in_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds/velero.io.yaml")
}

#[test]
fn checked_in_crds_match_the_types() {
    let generated = crds_yaml().unwrap();
    let path = checked_in_path();
    if std::env::var_os("HAWSER_UPDATE_CRDS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{} is out of date with the types in hawser-api; regenerate it with \
         `HAWSER_UPDATE_CRDS=1 cargo nextest run -p hawser-api` and commit the result",
        path.display()
    );
}

fn crd_json(plural: &str) -> Value {
    let crd = crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("no CRD for {plural}"));
    serde_json::to_value(crd).unwrap()
}

#[test]
fn names_scope_and_group_are_velero_s() {
    let expected = [
        ("backuprepositories", "BackupRepository", None, "v1"),
        ("backups", "Backup", None, "v1"),
        (
            "backupstoragelocations",
            "BackupStorageLocation",
            Some("bsl"),
            "v1",
        ),
        ("datadownloads", "DataDownload", None, "v2alpha1"),
        ("datauploads", "DataUpload", None, "v2alpha1"),
        ("deletebackuprequests", "DeleteBackupRequest", None, "v1"),
        ("downloadrequests", "DownloadRequest", None, "v1"),
        ("podvolumebackups", "PodVolumeBackup", None, "v1"),
        ("podvolumerestores", "PodVolumeRestore", None, "v1"),
        ("restores", "Restore", None, "v1"),
        ("schedules", "Schedule", None, "v1"),
        (
            "serverstatusrequests",
            "ServerStatusRequest",
            Some("ssr"),
            "v1",
        ),
        (
            "volumesnapshotlocations",
            "VolumeSnapshotLocation",
            Some("vsl"),
            "v1",
        ),
    ];
    assert_eq!(crds().len(), expected.len());
    for (plural, kind, short, version) in expected {
        let crd = crd_json(plural);
        assert_eq!(crd["metadata"]["name"], format!("{plural}.velero.io"));
        let spec = &crd["spec"];
        assert_eq!(spec["group"], "velero.io");
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(spec["names"]["kind"], kind);
        assert_eq!(spec["names"]["listKind"], format!("{kind}List"));
        assert_eq!(spec["names"]["singular"], kind.to_lowercase());
        let shorts = spec["names"].get("shortNames").cloned();
        assert_eq!(shorts, short.map(|s| serde_json::json!([s])), "{plural}");
        let versions = spec["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["name"], version);
        assert_eq!(versions[0]["served"], true);
        assert_eq!(versions[0]["storage"], true);
        let api_version = &versions[0]["schema"]["openAPIV3Schema"]["properties"]["apiVersion"];
        assert!(
            api_version["description"]
                .as_str()
                .unwrap()
                .contains(&format!("velero.io/{version}")),
            "{plural}"
        );
    }
}

#[test]
fn no_crd_has_a_status_subresource() {
    for plural in [
        "backups",
        "restores",
        "downloadrequests",
        "serverstatusrequests",
        "volumesnapshotlocations",
    ] {
        let version = &crd_json(plural)["spec"]["versions"][0];
        assert!(version.get("subresources").is_none(), "{plural}: {version}");
    }
    for plural in [
        "backuprepositories",
        "backupstoragelocations",
        "datadownloads",
        "datauploads",
        "deletebackuprequests",
        "podvolumebackups",
        "podvolumerestores",
        "schedules",
    ] {
        let version = &crd_json(plural)["spec"]["versions"][0];
        assert_eq!(version["subresources"], serde_json::json!({}), "{plural}");
    }
}

fn columns(plural: &str) -> Vec<(String, String, String)> {
    let version = &crd_json(plural)["spec"]["versions"][0];
    match version.get("additionalPrinterColumns") {
        None => Vec::new(),
        Some(list) => list
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let field = |k: &str| c[k].as_str().unwrap().to_owned();
                (field("name"), field("type"), field("jsonPath"))
            })
            .collect(),
    }
}

#[test]
fn printer_columns_are_velero_s() {
    let owned = |cols: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        cols.iter()
            .map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into()))
            .collect()
    };
    assert_eq!(
        columns("backupstoragelocations"),
        owned(&[
            ("Phase", "string", ".status.phase"),
            ("Last Validated", "date", ".status.lastValidationTime"),
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Default", "boolean", ".spec.default"),
        ])
    );
    assert_eq!(
        columns("schedules"),
        owned(&[
            ("Status", "string", ".status.phase"),
            ("Schedule", "string", ".spec.schedule"),
            ("LastBackup", "date", ".status.lastBackup"),
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Paused", "boolean", ".spec.paused"),
        ])
    );
    assert_eq!(
        columns("deletebackuprequests"),
        owned(&[
            ("BackupName", "string", ".spec.backupName"),
            ("Status", "string", ".status.phase"),
        ])
    );
    assert_eq!(
        columns("backuprepositories"),
        owned(&[
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Repository Type", "string", ".spec.repositoryType"),
        ])
    );
    let transfer = |extra: &[(&'static str, &'static str, &'static str)],
                    tail: &[(&'static str, &'static str, &'static str)]| {
        let mut cols = vec![
            ("Status", "string", ".status.phase"),
            ("Started", "date", ".status.startTimestamp"),
            ("Bytes Done", "integer", ".status.progress.bytesDone"),
            ("Total Bytes", "integer", ".status.progress.totalBytes"),
        ];
        cols.extend_from_slice(extra);
        cols.extend_from_slice(&[
            ("Storage Location", "string", ".spec.backupStorageLocation"),
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Node", "string", ".status.node"),
        ]);
        cols.extend_from_slice(tail);
        owned(&cols)
    };
    let incremental = [("Incremental Bytes", "integer", ".status.incrementalBytes")];
    assert_eq!(
        columns("podvolumebackups"),
        transfer(
            &incremental,
            &[("Uploader", "string", ".spec.uploaderType")]
        )
    );
    assert_eq!(
        columns("podvolumerestores"),
        transfer(&[], &[("Uploader Type", "string", ".spec.uploaderType")])
    );
    assert_eq!(columns("datauploads"), transfer(&incremental, &[]));
    assert_eq!(columns("datadownloads"), transfer(&[], &[]));
    // Incremental bytes only in `kubectl get -o wide`, as Velero.
    let version = &crd_json("datauploads")["spec"]["versions"][0];
    let wide = &version["additionalPrinterColumns"][4];
    assert_eq!(wide["priority"], 10);
    assert_eq!(wide["format"], "int64");
    for plural in [
        "backups",
        "restores",
        "downloadrequests",
        "serverstatusrequests",
        "volumesnapshotlocations",
    ] {
        assert!(columns(plural).is_empty(), "{plural}");
    }
}

/// Walks a schema and reports every node that a structural-schema check would reject: a node
/// without `type` (unless it preserves unknown fields or is int-or-string), or one using
/// `$ref`, `additionalProperties: false`-style combinations with `properties`, or `definitions`.
fn structural_problems(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        problems.push(format!("{path}: not an object"));
        return;
    };
    let preserves = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if !obj.contains_key("type") && !preserves && !int_or_string {
        problems.push(format!("{path}: no type"));
    }
    for banned in ["$ref", "definitions", "$defs", "$schema"] {
        if obj.contains_key(banned) {
            problems.push(format!("{path}: has {banned}"));
        }
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            structural_problems(sub, &format!("{path}.{name}"), problems);
        }
    }
    if let Some(items) = obj.get("items") {
        structural_problems(items, &format!("{path}[]"), problems);
    }
    if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        structural_problems(extra, &format!("{path}{{}}"), problems);
    }
}

#[test]
fn schemas_are_structural() {
    for crd in crds() {
        let version = &serde_json::to_value(&crd.spec.versions[0]).unwrap();
        let schema = &version["schema"]["openAPIV3Schema"];
        let mut problems = Vec::new();
        structural_problems(schema, &crd.spec.names.plural, &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    names
}

fn required(schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = schema["required"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn schemas_enforce_velero_s_enums_and_required_fields() {
    let schema =
        |plural: &str| crd_json(plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    let backup = schema("backups");
    let phases = backup["properties"]["status"]["properties"]["phase"]["enum"].clone();
    assert_eq!(
        phases,
        serde_json::json!([
            "New",
            "Queued",
            "ReadyToStart",
            "FailedValidation",
            "InProgress",
            "WaitingForPluginOperations",
            "WaitingForPluginOperationsPartiallyFailed",
            "Finalizing",
            "FinalizingPartiallyFailed",
            "Completed",
            "PartiallyFailed",
            "Failed",
            "Deleting"
        ])
    );
    assert_eq!(
        backup["properties"]["spec"]["properties"]["ttl"]["type"],
        "string"
    );

    let bsl = schema("backupstoragelocations");
    let spec = &bsl["properties"]["spec"];
    assert_eq!(required(spec), sorted(&["provider", "objectStorage"]));
    assert_eq!(
        required(&spec["properties"]["objectStorage"]),
        sorted(&["bucket"])
    );
    assert_eq!(
        spec["properties"]["accessMode"]["enum"],
        serde_json::json!(["ReadOnly", "ReadWrite"])
    );

    let schedule = schema("schedules");
    assert_eq!(
        required(&schedule["properties"]["spec"]),
        sorted(&["template", "schedule"])
    );
    let dbr = schema("deletebackuprequests");
    assert_eq!(
        required(&dbr["properties"]["spec"]),
        sorted(&["backupName"])
    );
    let download = schema("downloadrequests");
    assert_eq!(
        required(&download["properties"]["spec"]["properties"]["target"]),
        sorted(&["kind", "name"])
    );

    let vsl = schema("volumesnapshotlocations");
    assert_eq!(required(&vsl["properties"]["spec"]), sorted(&["provider"]));
    assert_eq!(
        vsl["properties"]["status"]["properties"]["phase"]["enum"],
        serde_json::json!(["Available", "Unavailable"])
    );
    let transfer_phases = serde_json::json!([
        "New",
        "Accepted",
        "Prepared",
        "InProgress",
        "Canceling",
        "Canceled",
        "Completed",
        "Failed"
    ]);
    for plural in [
        "podvolumebackups",
        "podvolumerestores",
        "datauploads",
        "datadownloads",
    ] {
        assert_eq!(
            schema(plural)["properties"]["status"]["properties"]["phase"]["enum"],
            transfer_phases,
            "{plural}"
        );
    }
    let pvb = schema("podvolumebackups");
    assert_eq!(
        required(&pvb["properties"]["spec"]),
        sorted(&[
            "backupStorageLocation",
            "node",
            "pod",
            "repoIdentifier",
            "volume"
        ])
    );
    assert_eq!(
        pvb["properties"]["spec"]["properties"]["uploaderType"]["enum"],
        serde_json::json!(["kopia", "restic", ""])
    );
    let pvr = schema("podvolumerestores");
    assert_eq!(
        required(&pvr["properties"]["spec"]),
        sorted(&[
            "backupStorageLocation",
            "pod",
            "repoIdentifier",
            "snapshotID",
            "sourceNamespace",
            "volume"
        ])
    );
    let repository = schema("backuprepositories");
    assert_eq!(
        required(&repository["properties"]["spec"]),
        sorted(&[
            "backupStorageLocation",
            "maintenanceFrequency",
            "volumeNamespace"
        ])
    );
    assert_eq!(
        repository["properties"]["status"]["properties"]["phase"]["enum"],
        serde_json::json!(["New", "Ready", "NotReady"])
    );
    let upload = schema("datauploads");
    assert_eq!(
        required(&upload["properties"]["spec"]),
        sorted(&[
            "backupStorageLocation",
            "operationTimeout",
            "snapshotType",
            "sourceNamespace",
            "sourcePVC"
        ])
    );
    assert_eq!(
        required(&upload["properties"]["spec"]["properties"]["csiSnapshot"]),
        sorted(&["storageClass", "volumeSnapshot"])
    );
    let data_download = schema("datadownloads");
    assert_eq!(
        required(&data_download["properties"]["spec"]),
        sorted(&[
            "backupStorageLocation",
            "operationTimeout",
            "snapshotID",
            "sourceNamespace",
            "targetVolume"
        ])
    );
    assert_eq!(
        required(&data_download["properties"]["spec"]["properties"]["targetVolume"]),
        sorted(&["namespace", "pv", "pvc"])
    );

    let restore = schema("restores");
    let init = &restore["properties"]["spec"]["properties"]["hooks"]["properties"]["resources"]["items"]
        ["properties"]["postHooks"]["items"]["properties"]["init"]["properties"]["initContainers"];
    assert_eq!(init["items"]["x-kubernetes-preserve-unknown-fields"], true);
}
