//! The resource-policy ConfigMap a Backup names (`spec.resourcePolicy`), read when the backup
//! is validated, as Velero does, and handed to [`super::run`] through
//! [`BackupOptions::policies`](super::BackupOptions::policies).

use std::time::Duration;

use hawser_api::Backup;
use hawser_core::restore::modifiers::CONFIGMAP_KIND;
use hawser_core::selection::policies::ResourcePolicies;
use kube::Client;

use crate::cluster::request;

/// The policies of the ConfigMap `backup` names: `Ok(Ok(None))` when it names none or another
/// kind (which Velero does not read and `unsupported_fields` warns of), `Ok(Err(message))` with
/// Velero's validation message when the ConfigMap is missing or not the format.
///
/// # Errors
/// The ConfigMap could not be read within `budget`: the backup waits.
pub(super) async fn resource_policies(
    client: &Client,
    backup: &Backup,
    budget: Duration,
) -> Result<Result<Option<ResourcePolicies>, String>, kube::Error> {
    let Some(reference) = backup
        .spec
        .resource_policy
        .as_ref()
        .filter(|r| r.kind.eq_ignore_ascii_case(CONFIGMAP_KIND))
    else {
        return Ok(Ok(None));
    };
    let namespace = backup.metadata.namespace.as_deref().unwrap_or_default();
    let name = &reference.name;
    Ok(
        match request::config_map_data(client, namespace, name, budget).await? {
            None => Err(format!(
                "fail to get ResourcePolicies {namespace}/{name} ConfigMap with error configmaps \"{name}\" not found"
            )),
            Some(data) => ResourcePolicies::from_config_map(namespace, name, &data).map(Some),
        },
    )
}
