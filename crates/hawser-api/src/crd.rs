//! The CustomResourceDefinitions, generated from the types and adjusted to Velero's served shape.
//!
//! kube-derive gives the names, scope, short names, printer columns and schema. [`crds`] then
//! adjusts the result so that it is served like Velero's CRDs (velero-compat §1.0):
//!
//! - `listKind` is set (`BackupList`, ...).
//! - The status subresource kube-derive adds for every type with a status is removed. No Velero
//!   CRD has one: `backups`, `restores`, `downloadrequests`, `serverstatusrequests` and
//!   `volumesnapshotlocations` have no `subresources` key, the others an empty
//!   `subresources: {}`. Status is therefore written with ordinary patches of the main resource,
//!   and a create may carry a status.
//! - `apiVersion`, `kind` and `metadata` are declared at the root.
//! - Schema defaults are removed (Velero's CRDs have none; the API server would otherwise write
//!   `phase: New` into every status it stores), as are `null` entries in enums (which the
//!   generator adds for optional enums; `nullable: true` already allows null) and titles.
//!
//! One deliberate difference: `spec` is required at the top level (except for
//! ServerStatusRequests, whose spec is empty), because the types cannot read an object without
//! one. Velero's clients always send a spec.
//!
//! The checked-in copy is `crds/velero.io.yaml` at the repository root; a test fails when it
//! drifts. Regenerate with `HAWSER_UPDATE_CRDS=1 cargo nextest run -p hawser-api`, or print with
//! `cargo run -p hawser-api --example print-crds`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresources, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{
    Backup, BackupRepository, BackupStorageLocation, DataDownload, DataUpload, DeleteBackupRequest,
    DownloadRequest, PodVolumeBackup, PodVolumeRestore, Restore, Schedule, ServerStatusRequest,
    VolumeSnapshotLocation,
};

/// How a CRD's `subresources` key looks in Velero.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subresources {
    /// No `subresources` key.
    Absent,
    /// `subresources: {}`.
    Empty,
}

/// Every CRD Velero installs (thirteen), in a stable order (alphabetical by plural).
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        velero_shape(BackupRepository::crd(), Subresources::Empty),
        velero_shape(Backup::crd(), Subresources::Absent),
        velero_shape(BackupStorageLocation::crd(), Subresources::Empty),
        velero_shape(DataDownload::crd(), Subresources::Empty),
        velero_shape(DataUpload::crd(), Subresources::Empty),
        velero_shape(DeleteBackupRequest::crd(), Subresources::Empty),
        velero_shape(DownloadRequest::crd(), Subresources::Absent),
        velero_shape(PodVolumeBackup::crd(), Subresources::Empty),
        velero_shape(PodVolumeRestore::crd(), Subresources::Empty),
        velero_shape(Restore::crd(), Subresources::Absent),
        velero_shape(Schedule::crd(), Subresources::Empty),
        spec_optional(velero_shape(
            ServerStatusRequest::crd(),
            Subresources::Absent,
        )),
        velero_shape(VolumeSnapshotLocation::crd(), Subresources::Absent),
    ]
}

fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            root.required = None;
        }
    }
    crd
}

fn velero_shape(
    mut crd: CustomResourceDefinition,
    subresources: Subresources,
) -> CustomResourceDefinition {
    let names = &mut crd.spec.names;
    names.list_kind = Some(format!("{}List", names.kind));
    for version in &mut crd.spec.versions {
        version.subresources = match subresources {
            Subresources::Absent => None,
            Subresources::Empty => Some(CustomResourceSubresources::default()),
        };
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            root.title = None;
            clean_schema(root);
            add_type_meta(root, &format!("{}/{}", crd.spec.group, version.name));
        }
    }
    crd
}

/// Declares `apiVersion`, `kind` and `metadata` at the root, as Velero's CRDs do (the API server
/// handles them either way; this keeps `kubectl explain` output alike).
fn add_type_meta(root: &mut JSONSchemaProps, api_version: &str) {
    let typed = |type_: &str, description: &str| JSONSchemaProps {
        type_: Some(type_.to_owned()),
        description: Some(description.to_owned()),
        ..JSONSchemaProps::default()
    };
    let properties = root.properties.get_or_insert_default();
    properties.insert(
        "apiVersion".to_owned(),
        typed(
            "string",
            &format!("The object's API version (`{api_version}`)."),
        ),
    );
    properties.insert("kind".to_owned(), typed("string", "The object's kind."));
    properties.insert(
        "metadata".to_owned(),
        JSONSchemaProps {
            type_: Some("object".to_owned()),
            ..JSONSchemaProps::default()
        },
    );
}

/// Removes `default`, `title` and `null` enum entries from a schema node and everything below it.
fn clean_schema(node: &mut JSONSchemaProps) {
    node.default = None;
    node.title = None;
    if let Some(values) = node.enum_.as_mut() {
        values.retain(|value| !value.0.is_null());
    }
    for child in node
        .properties
        .iter_mut()
        .flat_map(|props| props.values_mut())
    {
        clean_schema(child);
    }
    match node.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(child)) => clean_schema(child),
        Some(JSONSchemaPropsOrArray::Schemas(children)) => {
            children.iter_mut().for_each(clean_schema)
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = node.additional_properties.as_mut() {
        clean_schema(child);
    }
    for list in [&mut node.all_of, &mut node.any_of, &mut node.one_of] {
        list.iter_mut().flatten().for_each(clean_schema);
    }
}

/// Every CRD as one multi-document YAML stream, each document starting with `---`.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}
