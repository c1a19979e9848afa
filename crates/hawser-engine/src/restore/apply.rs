//! Restoring the items of one type: each item is cleaned and created, items already present
//! get the existing-object decision, status is re-applied where asked, with at most
//! `concurrency` items of the type in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt};
use hawser_core::archive::{ArchiveItem, ItemPath};
use hawser_core::csi::{
    VOLUME_SNAPSHOT_CONTENTS, VOLUME_SNAPSHOTS, claimed_by_another, own_snapshot, restored_content,
    restored_content_name,
};
use hawser_core::json::str_at;
use hawser_core::restore::{
    CRDS, CleanContext, Cleaned, ExecHooks, ExistingPolicy, ImageNames, InitHooks,
    NonCanonicalType, ResourceModifiers, RestoreSelection, clean,
};
use hawser_core::selection::related::{PERSISTENT_VOLUMES, PODS};
use hawser_core::selection::{Catalogue, NAMESPACES};
use kube::Client;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::exec_hooks::HookedPod;
use super::namespaces::Namespaces;
use super::results::{ItemResult, Report, Scope};
use crate::cluster::path::Collection;
use crate::cluster::request as api;

#[path = "apply_existing.rs"]
mod existing;

/// Everything the item tasks of one restore share.
pub(crate) struct Restorer {
    pub client: Client,
    pub catalogue: Catalogue,
    pub selection: RestoreSelection,
    pub backup_name: String,
    pub restore_name: String,
    /// The Restore's `metadata.uid` (empty when it has none).
    pub restore_uid: String,
    pub preserve_node_ports: bool,
    pub mapping: BTreeMap<String, String>,
    pub policy: ExistingPolicy,
    pub concurrency: usize,
    /// How long one request is retried (see [`crate::cluster::request`]).
    pub api_retry: std::time::Duration,
    pub report: Report,
    pub namespaces: Namespaces,
    /// PersistentVolumes left to dynamic provisioning (their claims lose `volumeName`).
    pub reprovisioned_pvs: BTreeSet<String>,
    /// The archived CSI snapshots of claims: (source namespace, claim) → VolumeSnapshot name.
    /// A claim with one is provisioned from it; its PersistentVolume is not restored.
    pub snapshots: BTreeMap<(String, String), String>,
    /// CRDs created or updated, to wait for before their custom resources.
    pub crds_touched: Mutex<Vec<String>>,
    /// What an archived VolumeSnapshot is checked against before its handle is brought back.
    pub proof: SnapshotProof,
    /// The restore's exec hooks ([`hawser_core::restore::exec_hooks`]).
    pub exec_hooks: Arc<ExecHooks>,
    /// The Pods created that have exec hooks to run once the items are restored.
    pub hooked_pods: Mutex<Vec<HookedPod>>,
    /// Velero's `change-storage-class` mapping (see [`super::plugin_config`]).
    pub storage_classes: BTreeMap<String, String>,
    /// Velero's `change-image-name` rules (see [`super::plugin_config`]).
    pub image_names: ImageNames,
    /// The restore's resource modifiers (see [`super::plugin_config::resource_modifiers`]).
    pub modifiers: Option<ResourceModifiers>,
    /// The restore's init-container hooks ([`hawser_core::restore::init_hooks`]).
    pub init_hooks: Arc<InitHooks>,
}

/// What shows that an archived snapshot handle is the backup's own (see
/// [`hawser_core::csi::own_snapshot`]).
#[derive(Default)]
pub(crate) struct SnapshotProof {
    /// The uid the backup labelled its snapshots with: the uid in its record.
    pub backup_uid: String,
    /// The backup's volume info, or why it could not be read.
    pub volume_info: Option<Result<Vec<Value>, String>>,
    /// The live VolumeSnapshotContents, listed at the first snapshot restored.
    pub contents: tokio::sync::OnceCell<Result<Vec<Value>, String>>,
}

/// One item as it is restored: where it goes and what it is.
struct Target<'a> {
    gr: &'a str,
    namespace: Option<String>,
    name: String,
    api_version: String,
    kind: String,
}

impl Target<'_> {
    fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{ns}/{}", self.gr, self.name),
            None => format!("{}/{}", self.gr, self.name),
        }
    }

    fn scope(&self) -> Scope {
        Scope::of(self.namespace.as_deref())
    }
}

/// How an archived object contradicts the path it is stored under (its name, namespace, or kind
/// against `served_kind`, the kind of the path's type), if it does. A field the object leaves
/// out does not contradict anything.
///
/// Velero restores such an item where its path says, under the path's name; an object that
/// claims another identity than its path is either a damaged or a crafted archive, so hawser
/// restores neither identity and reports the entry instead.
fn identity_conflict(
    location: &ItemPath,
    object: &Value,
    served_kind: Option<&str>,
) -> Option<String> {
    if let Some(name) = str_at(object, "/metadata/name")
        && name != location.name
    {
        return Some(format!(
            "has metadata.name {name:?} but its path names it {:?}",
            location.name
        ));
    }
    match (str_at(object, "/metadata/namespace"), &location.namespace) {
        (Some(ns), Some(path_ns)) if ns != path_ns => {
            return Some(format!(
                "has metadata.namespace {ns:?} but its path puts it in namespace {path_ns:?}"
            ));
        }
        (Some(ns), None) if !ns.is_empty() => {
            return Some(format!(
                "has metadata.namespace {ns:?} but its path says it is cluster-scoped"
            ));
        }
        _ => {}
    }
    if let (Some(kind), Some(served)) = (str_at(object, "/kind"), served_kind)
        && kind != served
    {
        return Some(format!(
            "has kind {kind:?} but its path holds {} (kind {served:?})",
            location.group_resource
        ));
    }
    None
}

impl Restorer {
    pub(crate) fn clean_context(&self) -> CleanContext<'_> {
        CleanContext {
            backup_name: &self.backup_name,
            restore_name: &self.restore_name,
            restore_uid: &self.restore_uid,
            preserve_node_ports: self.preserve_node_ports,
            namespace_mapping: &self.mapping,
            reprovisioned_pvs: &self.reprovisioned_pvs,
            snapshots: &self.snapshots,
            storage_classes: &self.storage_classes,
            image_names: &self.image_names,
            modifiers: self.modifiers.as_ref(),
            init_hooks: &self.init_hooks,
        }
    }

    /// Restores every item of `items` (all of type `gr`), `concurrency` at a time.
    pub(crate) async fn restore_type<S>(&self, gr: &str, items: S)
    where
        S: Stream<Item = ArchiveItem>,
    {
        let resolved = self.catalogue.resolve(gr);
        if let Some(served) = resolved.filter(|r| r.group_resource() != gr) {
            // A name the checking pass could not resolve that the refreshed discovery (after
            // the restored CRDs) serves under another name: refused like any alias.
            let refusal = NonCanonicalType::Alias {
                dir: gr.to_owned(),
                canonical: served.group_resource(),
            };
            let counted = items
                .map(|item| self.refuse(gr, item, &refusal))
                .count()
                .await;
            self.report
                .info(&format!("Refused {counted} items of {gr}: {refusal}"));
            return;
        }
        let collection = resolved.map(Collection::of);
        let collection = collection.as_ref();
        let counted = items
            .map(|item| self.restore_item(gr, collection, item))
            .buffer_unordered(self.concurrency.max(1))
            .count()
            .await;
        self.report
            .info(&format!("Restored {counted} items of {gr}"));
    }

    fn refuse(&self, gr: &str, item: ArchiveItem, refusal: &NonCanonicalType) {
        let target = Target {
            gr,
            namespace: item
                .location
                .namespace
                .as_deref()
                .map(|ns| self.selection.target_namespace(ns).to_owned()),
            name: item.location.name.clone(),
            api_version: str_at(&item.object, "/apiVersion")
                .unwrap_or_default()
                .to_owned(),
            kind: str_at(&item.object, "/kind").unwrap_or_default().to_owned(),
        };
        self.fail(
            &target,
            format!("archive entry {:?} rejected: {refusal}", item.path),
        );
    }

    async fn restore_item(&self, gr: &str, collection: Option<&Collection>, item: ArchiveItem) {
        let ArchiveItem {
            path,
            location,
            object,
            ..
        } = item;
        let source_ns = location.namespace.clone();
        let target_ns = source_ns
            .as_deref()
            .map(|ns| self.selection.target_namespace(ns).to_owned());
        let served_kind = self.catalogue.resolve(gr).map(|r| r.kind.clone());
        let fallback_version = collection.map(Collection::api_version).unwrap_or_default();
        // The path decides what the item is and where it goes; the object must agree with it.
        let target = Target {
            gr,
            namespace: target_ns,
            name: location.name.clone(),
            api_version: str_at(&object, "/apiVersion").map_or(fallback_version, str::to_owned),
            kind: str_at(&object, "/kind")
                .map(str::to_owned)
                .or(served_kind.clone())
                .unwrap_or_default(),
        };
        if let Some(conflict) = identity_conflict(&location, &object, served_kind.as_deref()) {
            let target = Target {
                kind: served_kind.unwrap_or(target.kind),
                ..target
            };
            self.fail(
                &target,
                format!("the object in archive entry {path} {conflict}; it is not restored"),
            );
            return;
        }
        if gr == NAMESPACES && source_ns.is_none() {
            let name = &location.name;
            let target = self.selection.target_namespace(name).to_owned();
            if let Err(message) = self.namespaces.ensure(self, name, &target).await {
                self.report.error(
                    Scope::Cluster,
                    format!("error restoring namespaces/{target}: {message}"),
                );
            }
            return;
        }
        match self.check_target(collection, &target) {
            Ok(c) => self.create(c, &target, source_ns.as_deref(), object).await,
            Err(message) => self.fail(&target, message),
        }
    }

    /// The collection the item is created in: the type must be served, the item's scope must
    /// match the type's, and its `apiVersion` must be of the type's group.
    fn check_target(
        &self,
        collection: Option<&Collection>,
        t: &Target<'_>,
    ) -> Result<Collection, String> {
        let Some(c) = collection else {
            return Err(format!("the cluster does not serve {}", t.gr));
        };
        if c.namespaced != t.namespace.is_some() {
            let want = if c.namespaced {
                "namespaced"
            } else {
                "cluster-scoped"
            };
            return Err(format!(
                "{} is {want} but the item is not archived so",
                t.gr
            ));
        }
        let (group, version) = match t.api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", t.api_version.as_str()),
        };
        if group != c.group || version.is_empty() {
            return Err(format!(
                "apiVersion {:?} is not a version of {}",
                t.api_version, t.gr
            ));
        }
        // The archived version is used (the target may serve it besides its preferred one).
        Ok(Collection {
            version: version.to_owned(),
            ..c.clone()
        })
    }

    fn fail(&self, t: &Target<'_>, message: String) {
        self.report
            .error(t.scope(), format!("error restoring {}: {message}", t.id()));
        self.record(t, ItemResult::Failed);
    }

    fn record(&self, t: &Target<'_>, result: ItemResult) {
        self.report.item(
            &t.api_version,
            &t.kind,
            t.namespace.as_deref(),
            &t.name,
            result,
        );
    }

    async fn create(&self, c: Collection, t: &Target<'_>, source_ns: Option<&str>, obj: Value) {
        if let (Some(source), Some(target)) = (source_ns, t.namespace.as_deref())
            && let Err(message) = self.namespaces.ensure(self, source, target).await
        {
            self.fail(t, format!("namespace {target} is not available: {message}"));
            return;
        }
        if t.gr == PERSISTENT_VOLUMES
            && let (Some(ns), Some(claim)) = (
                str_at(&obj, "/spec/claimRef/namespace"),
                str_at(&obj, "/spec/claimRef/name"),
            )
            && self
                .snapshots
                .contains_key(&(ns.to_owned(), claim.to_owned()))
        {
            // Its claim is provisioned from the claim's snapshot: a new volume.
            self.record(t, ItemResult::Skipped);
            return;
        }
        if t.gr == VOLUME_SNAPSHOTS
            && let Err(message) = self.create_snapshot_content(t, source_ns, &obj).await
        {
            self.fail(t, message);
            return;
        }
        let with_status = self.selection.restores_status(t.gr, &obj);
        let Cleaned {
            mut object,
            status,
            modifier_errors,
            refused,
        } = clean(t.gr, obj, source_ns, &self.clean_context(), with_status);
        if let Some(why) = refused {
            self.fail(t, why);
            return;
        }
        for e in modifier_errors {
            self.report.error(t.scope(), format!("{}: {e}", t.id()));
        }
        if let Some(renamed) = str_at(&object, "/metadata/name").filter(|n| *n != t.name) {
            self.report.warn(
                t.scope(),
                format!(
                    "{}: a resource modifier renamed it to {renamed}; hawser restores items under their archived names",
                    t.id()
                ),
            );
        }
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), Value::from(t.api_version.clone()));
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), Value::from(t.name.clone()));
            }
        }
        let ns = t.namespace.as_deref();
        let path = c.path(ns);
        let created = match status {
            // The created object is read only to put the status on it.
            Some(status) => api::create::<Value>(&self.client, &path, &object, self.api_retry)
                .await
                .map(|created| Some((created, status))),
            None => api::create::<IgnoredAny>(&self.client, &path, &object, self.api_retry)
                .await
                .map(|_| None),
        };
        match created {
            Ok(with_status) => {
                self.touched(t);
                if let Some((created, status)) = with_status {
                    self.restore_status(&c, t, created, status).await;
                }
                if t.gr == PODS {
                    self.note_exec_hooks(t, &mut object);
                }
                self.record(t, ItemResult::Created);
            }
            Err(e) if api::already_exists(&e) => self.existing(&c, t, &mut object).await,
            Err(e) => self.fail(t, api::text(&e)),
        }
    }

    /// Keeps a Pod this restore created (now, or in an attempt before an interruption) for its
    /// exec hooks, if it has some (as in Velero, Pods that existed before run none).
    fn note_exec_hooks(&self, t: &Target<'_>, pod: &mut Value) {
        let namespace = t.namespace.clone().unwrap_or_default();
        pod["metadata"]["namespace"] = Value::from(namespace.clone());
        let (hooks, notes) = self.exec_hooks.of_pod(pod);
        for note in notes {
            self.report.warn(t.scope(), format!("{}: {note}", t.id()));
        }
        if !hooks.is_empty() {
            self.hooked_pods
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(HookedPod {
                    namespace,
                    name: t.name.clone(),
                    hooks,
                });
        }
    }

    /// The pre-provisioned VolumeSnapshotContent the VolumeSnapshot `t` (archived in
    /// `source_ns`) is restored onto (see [`restored_content`]), once the archived snapshot
    /// shows it is the backup's own and no live content names its handle for another backup.
    /// One of the same name that exists already is kept when it holds the same handle (a
    /// restore taken up again) and refused otherwise.
    async fn create_snapshot_content(
        &self,
        t: &Target<'_>,
        source_ns: Option<&str>,
        archived: &Value,
    ) -> Result<(), String> {
        let namespace = t.namespace.as_deref().unwrap_or_default();
        let name = restored_content_name(&self.restore_name, namespace, &t.name);
        let content = restored_content(archived, namespace, &t.name, &name)?;
        let handle = content
            .pointer("/spec/source/snapshotHandle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let contents = self
            .catalogue
            .resolve(VOLUME_SNAPSHOT_CONTENTS)
            .map(Collection::of)
            .ok_or_else(|| "the cluster serves no VolumeSnapshotContents".to_owned())?;
        let proof = &self.proof;
        let volume_info = match &proof.volume_info {
            Some(Ok(info)) => info.as_slice(),
            Some(Err(why)) => return Err(format!("the backup's volume info: {why}")),
            None => &[],
        };
        own_snapshot(
            archived,
            source_ns.unwrap_or_default(),
            &proof.backup_uid,
            volume_info,
        )?;
        let live = proof
            .contents
            .get_or_init(|| async {
                api::list_all(&self.client, &contents.path(None), 500, self.api_retry)
                    .await
                    .map_err(|e| api::text(&e))
            })
            .await
            .as_ref()
            .map_err(|why| format!("listing the VolumeSnapshotContents failed: {why}"))?;
        if let Some(uid) = claimed_by_another(live, handle, &proof.backup_uid) {
            return Err(format!(
                "its snapshot handle {handle:?} belongs to a VolumeSnapshotContent of backup uid {uid}, not this backup's"
            ));
        }
        match api::create::<IgnoredAny>(
            &self.client,
            &contents.path(None),
            &content,
            self.api_retry,
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(e) if api::already_exists(&e) => {
                let existing = api::get(
                    &self.client,
                    &contents.item_path(None, &name),
                    self.api_retry,
                )
                .await
                .map_err(|e| {
                    format!(
                        "reading the existing VolumeSnapshotContent {name} failed: {}",
                        api::text(&e)
                    )
                })?;
                let held = existing
                    .pointer("/spec/source/snapshotHandle")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if held == handle {
                    Ok(())
                } else {
                    Err(format!(
                        "VolumeSnapshotContent {name} exists with snapshot handle {held:?}, not {handle:?}; it is left as it is"
                    ))
                }
            }
            Err(e) => Err(format!(
                "creating its VolumeSnapshotContent {name} failed: {}",
                api::text(&e)
            )),
        }
    }

    fn touched(&self, t: &Target<'_>) {
        if t.gr == CRDS {
            self.crds_touched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(t.name.clone());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "apply_tests.rs"]
mod tests;
