//! `hawser uninstall`: removes what `hawser install` put into the cluster, as Velero's
//! `uninstall` does: the server's Deployment, the finalizers the server put on Restores (no
//! server is left to remove them, and they would hold the namespace's deletion forever), the
//! cluster-wide RBAC objects install made (only those labelled `component: velero`), the
//! namespace (waited for), and the velero.io CRDs. The storage locations' contents are not
//! touched: the backups stay in the bucket.

use std::time::Duration;

use clap::Args;
use hawser_api::labels::RESTORE_FILES_FINALIZER as RESTORE_FINALIZER;
use hawser_core::duration::GoDuration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::bulk::ask;
use super::error::{CliError, ExitStatus};
use super::global::GlobalArgs;
use super::manifests::{self, NAME};

/// `hawser uninstall` flags.
#[derive(Args, Debug)]
pub struct UninstallArgs {
    /// Uninstall without asking (Velero's flag).
    #[arg(long)]
    pub force: bool,
    /// How long to wait for the namespace to be deleted.
    #[arg(long, default_value = "10m")]
    pub timeout: GoDuration,
}

/// Removes the installation in the global namespace (see the module docs).
pub async fn run(global: &GlobalArgs, args: UninstallArgs) -> Result<ExitStatus, CliError> {
    let timeout = args
        .timeout
        .to_std()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| CliError::usage("--timeout", "it must be greater than 0s"))?;
    if !args.force {
        println!("You are about to uninstall hawser.");
        if !ask(&mut std::io::stdin().lock(), &mut std::io::stdout()) {
            return Err(CliError::NotConfirmed);
        }
    }
    let client = global.client().await?;
    let namespace = global.namespace.as_str();

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    delete(&deployments, NAME, "Deployment").await?;
    release_restores(&client, namespace).await?;
    let binding = manifests::binding_name(namespace);
    delete_ours(&Api::<ClusterRoleBinding>::all(client.clone()), &binding).await?;
    delete_ours(&Api::<ClusterRole>::all(client.clone()), &binding).await?;
    delete_namespace(&client, namespace, timeout).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in hawser_api::crd::crds() {
        delete(&crds, &crd.name_any(), "CustomResourceDefinition").await?;
    }
    println!("hawser uninstalled ⛵");
    Ok(ExitStatus::Success)
}

/// Deletes `name`; one already gone is fine.
async fn delete<K>(api: &Api<K>, name: &str, kind: &str) -> Result<(), CliError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CliError::api("delete", format!("{kind} {name}"), e)),
    }
}

/// Deletes the cluster-scoped `name` only when install made it (labelled `component: velero`).
async fn delete_ours<K>(api: &Api<K>, name: &str) -> Result<(), CliError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    match api.get_opt(name).await {
        Ok(Some(found))
            if found.labels().get("component").map(String::as_str) == Some("velero") =>
        {
            delete(api, name, &kind).await
        }
        Ok(_) => Ok(()),
        Err(e) => Err(CliError::api("get", format!("{kind} {name}"), e)),
    }
}

/// Takes the server's finalizer off every Restore of the namespace: with the server gone,
/// nothing else would, and the namespace could never be deleted.
async fn release_restores(client: &kube::Client, namespace: &str) -> Result<(), CliError> {
    let restores: Api<hawser_api::Restore> = Api::namespaced(client.clone(), namespace);
    let list = match restores.list(&ListParams::default()).await {
        Ok(list) => list,
        // No CRD (already uninstalled) or no namespace: nothing holds.
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => {
            return Err(CliError::api(
                "list",
                format!("Restores in namespace {namespace}"),
                e,
            ));
        }
    };
    for restore in list {
        let finalizers = restore.finalizers();
        if !finalizers.iter().any(|f| f == RESTORE_FINALIZER) {
            continue;
        }
        let kept: Vec<&String> = finalizers
            .iter()
            .filter(|f| *f != RESTORE_FINALIZER)
            .collect();
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": restore.resource_version(),
            "finalizers": kept,
        }});
        let name = restore.name_any();
        if let Err(e) = restores
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            return Err(CliError::api(
                "update",
                format!("Restore {namespace}/{name}"),
                e,
            ));
        }
    }
    Ok(())
}

/// Deletes the namespace and waits, printing a dot a second as Velero does, until it is gone.
async fn delete_namespace(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> Result<(), CliError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(namespace, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {
            println!("Namespace {namespace:?} does not exist, skipping.");
            return Ok(());
        }
        Err(e) => return Err(CliError::api("delete", format!("Namespace {namespace}"), e)),
    }
    println!("Waiting for namespace {namespace:?} to be deleted");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match namespaces.get_opt(namespace).await {
            Ok(None) => break,
            Ok(Some(_)) => {}
            Err(e) => return Err(CliError::api("get", format!("Namespace {namespace}"), e)),
        }
        if tokio::time::Instant::now() >= deadline {
            println!();
            return Err(CliError::Timeout {
                what: format!("namespace {namespace} to be deleted"),
                after: timeout,
            });
        }
        print!(".");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("\nNamespace {namespace:?} deleted");
    Ok(())
}
