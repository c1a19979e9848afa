//! The ConfigMaps a restore reads once at its start, in the restore's namespace: Velero's
//! restore plugin ConfigMap that hawser acts on, found by Velero's labels
//! (`velero.io/plugin-config` and `velero.io/change-storage-class: RestoreItemAction`, whose
//! data maps an old storage class to a new one), and the resource-modifier ConfigMap named by
//! `spec.resourceModifier`.

use std::collections::BTreeMap;
use std::time::Duration;

use hawser_api::Restore;
use hawser_core::restore::ResourceModifiers;
use hawser_core::restore::modifiers::CONFIGMAP_KIND;
use kube::Client;
use serde_json::Value;

use super::RestoreError;
use crate::cluster::path::{encode, page_url};
use crate::cluster::request;

/// The label selector of Velero's `change-storage-class` ConfigMap.
const CHANGE_STORAGE_CLASS: &str =
    "velero.io/plugin-config,velero.io/change-storage-class=RestoreItemAction";

/// ConfigMaps read at most (more than one is refused, as Velero does).
const LIMIT: u32 = 10;

/// The storage-class mapping of the restore (old class → new class, only new classes that
/// exist in the cluster), and one warning per thing that keeps a class unchanged.
pub(crate) async fn storage_classes(
    client: &Client,
    namespace: &str,
    budget: Duration,
) -> (BTreeMap<String, String>, Vec<String>) {
    let path = format!("/api/v1/namespaces/{}/configmaps", encode(namespace));
    let url = page_url(&path, LIMIT, CHANGE_STORAGE_CLASS, None);
    let maps = match request::get_page::<Value>(client, &url, budget).await {
        Ok(page) => page.items,
        Err(e) => {
            return (
                BTreeMap::new(),
                vec![format!(
                    "the change-storage-class ConfigMap could not be read ({e}): storage classes were restored unchanged"
                )],
            );
        }
    };
    let config = match maps.as_slice() {
        [] => return (BTreeMap::new(), Vec::new()),
        [one] => one,
        many => {
            let names: Vec<&str> = many
                .iter()
                .filter_map(|m| m.pointer("/metadata/name").and_then(Value::as_str))
                .collect();
            return (
                BTreeMap::new(),
                vec![format!(
                    "more than one change-storage-class ConfigMap in namespace {namespace} ({}): none was used, storage classes were restored unchanged",
                    names.join(", ")
                )],
            );
        }
    };
    let name = config
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut mapping = BTreeMap::new();
    let mut warnings = Vec::new();
    let entries = config.get("data").and_then(Value::as_object);
    for (old, new) in entries.into_iter().flatten() {
        let Some(new) = new.as_str().map(str::trim).filter(|n| !n.is_empty()) else {
            continue;
        };
        let class = format!("/apis/storage.k8s.io/v1/storageclasses/{}", encode(new));
        match request::get_opt(client, &class, budget).await {
            Ok(Some(_)) => {
                mapping.insert(old.clone(), new.to_owned());
            }
            Ok(None) => warnings.push(format!(
                "ConfigMap {name} maps storage class {old} to {new}, which does not exist in this cluster: items of class {old} keep it"
            )),
            Err(e) => warnings.push(format!(
                "ConfigMap {name} maps storage class {old} to {new}, which could not be read ({e}): items of class {old} keep it"
            )),
        }
    }
    (mapping, warnings)
}

/// The rules of the resource-modifier ConfigMap `restore` names (`None` when it names none, or
/// names another kind, which Velero does not read and `unsupported_fields` warns of), read when
/// the restore is validated, as Velero does, and handed to [`super::run`] through
/// [`RestoreOptions::modifiers`](super::RestoreOptions::modifiers).
///
/// # Errors
/// [`RestoreError::Validation`] with Velero's message when the ConfigMap is missing or not the
/// format; [`RestoreError::ConfigMap`] when it could not be read within `budget`.
pub async fn resource_modifiers(
    client: &Client,
    restore: &Restore,
    budget: Duration,
) -> Result<Option<ResourceModifiers>, RestoreError> {
    let Some(reference) = restore
        .spec
        .resource_modifier
        .as_ref()
        .filter(|r| r.kind.eq_ignore_ascii_case(CONFIGMAP_KIND))
    else {
        return Ok(None);
    };
    let namespace = restore.metadata.namespace.as_deref().unwrap_or_default();
    let name = &reference.name;
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        encode(namespace),
        encode(name)
    );
    let invalid = |message: String| RestoreError::Validation {
        messages: vec![message],
    };
    let config = request::get_opt(client, &path, budget)
        .await
        .map_err(|source| RestoreError::ConfigMap {
            name: format!("{namespace}/{name}"),
            source,
        })?
        .ok_or_else(|| {
            invalid(format!(
                "failed to get resource modifiers configmap {namespace}/{name}"
            ))
        })?;
    let data: Option<BTreeMap<String, String>> = config
        .get("data")
        .map(|d| serde_json::from_value(d.clone()))
        .transpose()
        .map_err(|e| {
            invalid(format!(
                "ConfigMap {namespace}/{name} has unreadable data: {e}"
            ))
        })?;
    ResourceModifiers::from_config_map(namespace, name, data.as_ref())
        .map(Some)
        .map_err(invalid)
}
