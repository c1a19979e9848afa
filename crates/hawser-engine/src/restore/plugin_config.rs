//! The ConfigMaps a restore reads once at its start, in the restore's namespace: Velero's
//! restore plugin ConfigMaps that hawser acts on, each found by Velero's labels
//! (`velero.io/plugin-config` and `velero.io/<action>: RestoreItemAction`): `change-storage-class`
//! (old storage class → new one) and `change-image-name` (`old,new` image parts); and the
//! resource-modifier ConfigMap named by `spec.resourceModifier`.

use std::collections::BTreeMap;
use std::time::Duration;

use hawser_api::Restore;
use hawser_core::restore::modifiers::CONFIGMAP_KIND;
use hawser_core::restore::{ImageNames, ResourceModifiers};
use kube::Client;
use serde_json::Value;

use super::RestoreError;
use crate::cluster::path::{encode, page_url};
use crate::cluster::request;

/// ConfigMaps read at most per action (more than one is refused).
const LIMIT: u32 = 10;

/// The ConfigMap of Velero's restore item action `action` (`change-storage-class`, …): its name
/// and data, `Ok(None)` when there is none, or the warning that says why none is used (it
/// could not be read, or there is more than one, which Velero refuses too).
async fn plugin_config(
    client: &Client,
    namespace: &str,
    action: &str,
    budget: Duration,
) -> Result<Option<(String, BTreeMap<String, String>)>, String> {
    let selector = format!("velero.io/plugin-config,velero.io/{action}=RestoreItemAction");
    let path = format!("/api/v1/namespaces/{}/configmaps", encode(namespace));
    let url = page_url(&path, LIMIT, &selector, None);
    let maps = request::get_page::<Value>(client, &url, budget)
        .await
        .map_err(|e| format!("the {action} ConfigMap could not be read ({e})"))?
        .items;
    let name_of = |m: &Value| {
        m.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match maps.as_slice() {
        [] => Ok(None),
        [one] => {
            // Values that are not strings are not rules.
            let data = one
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect();
            Ok(Some((name_of(one), data)))
        }
        many => Err(format!(
            "more than one {action} ConfigMap in namespace {namespace} ({}): none was used",
            many.iter().map(name_of).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The storage-class mapping of the restore (old class → new class, only new classes that
/// exist in the cluster), and one warning per thing that keeps a class unchanged.
pub(crate) async fn storage_classes(
    client: &Client,
    namespace: &str,
    budget: Duration,
) -> (BTreeMap<String, String>, Vec<String>) {
    let (name, entries) =
        match plugin_config(client, namespace, "change-storage-class", budget).await {
            Ok(Some(config)) => config,
            Ok(None) => return (BTreeMap::new(), Vec::new()),
            Err(why) => {
                return (
                    BTreeMap::new(),
                    vec![format!("{why}: storage classes were restored unchanged")],
                );
            }
        };
    let mut mapping = BTreeMap::new();
    let mut warnings = Vec::new();
    for (old, new) in entries {
        let new = new.trim();
        if new.is_empty() {
            continue;
        }
        let class = format!("/apis/storage.k8s.io/v1/storageclasses/{}", encode(new));
        match request::get_opt(client, &class, budget).await {
            Ok(Some(_)) => {
                mapping.insert(old, new.to_owned());
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

/// The image renaming rules of the restore (see [`ImageNames`]), and a warning when none are
/// used because the ConfigMap could not be read or there is more than one.
pub(crate) async fn image_names(
    client: &Client,
    namespace: &str,
    budget: Duration,
) -> (ImageNames, Option<String>) {
    match plugin_config(client, namespace, "change-image-name", budget).await {
        Ok(Some((_, data))) => (ImageNames::from_data(&data), None),
        Ok(None) => (ImageNames::default(), None),
        Err(why) => (
            ImageNames::default(),
            Some(format!("{why}: images were restored unchanged")),
        ),
    }
}

/// The rules of the resource-modifier ConfigMap `restore` names (`None` when it names none, or
/// names another kind, which Velero does not read and `unsupported_fields` warns of), read when
/// the restore is validated ([`super::ValidatedRestore::check`]), as Velero does.
///
/// # Errors
/// [`RestoreError::Validation`] with Velero's message when the ConfigMap is missing or not the
/// format; [`RestoreError::ConfigMap`] when it could not be read within `budget`.
pub(super) async fn resource_modifiers(
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
    let data = request::config_map_data(client, namespace, name, budget)
        .await
        .map_err(|source| RestoreError::ConfigMap {
            name: format!("{namespace}/{name}"),
            source,
        })?
        .ok_or_else(|| RestoreError::Validation {
            messages: vec![format!(
                "failed to get resource modifiers configmap {namespace}/{name}"
            )],
        })?;
    ResourceModifiers::from_config_map(namespace, name, &data)
        .map(Some)
        .map_err(|message| RestoreError::Validation {
            messages: vec![message],
        })
}
