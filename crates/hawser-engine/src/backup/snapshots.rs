//! CSI snapshots of the backed-up claims, taken once the LISTs are done (the part of Velero's
//! CSI actions that runs while the backup is `InProgress`).
//!
//! Pipeline of [`take_snapshots`], unless `spec.snapshotVolumes` is `false` or the cluster
//! serves no `snapshot.storage.k8s.io` API:
//!
//! 1. the VolumeSnapshotClasses (one LIST);
//! 2. per bound claim, [`Lister::concurrency`] at a time: its volume (GET); a volume that is not
//!    a CSI volume is left as an object only (the caller warns about those); the class
//!    ([`hawser_core::csi::choose_class`]); the VolumeSnapshot, created with a name that is the
//!    same whenever this backup is taken up again; then its state is polled until the snapshot
//!    is cut (its content has a `snapshotHandle`), fails, or `spec.csiSnapshotTimeout` passes;
//! 3. a cut snapshot's content gets `deletionPolicy: Retain` (the snapshot outlives the
//!    VolumeSnapshot object, as in Velero), and the VolumeSnapshot, its content and class go into
//!    the archive (past the type filters: Velero's actions return them as items that must be
//!    included), with an operation that waits for `readyToUse`
//!    ([`hawser_core::csi::BackupOperation`]).
//!
//! A claim that cannot be snapshotted is an error in its namespace; the backup goes on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use hawser_api::Backup;
use hawser_core::csi::{
    BackupOperation, DEFAULT_SNAPSHOT_TIMEOUT, SnapshotState, VOLUME_SNAPSHOT_CLASSES,
    VOLUME_SNAPSHOT_CONTENTS, VOLUME_SNAPSHOTS, annotate_for_restore, choose_class, snapshot_state,
    volume_snapshot,
};
use hawser_core::selection::related::PERSISTENT_VOLUMES;
use hawser_core::selection::{ApiResource, Catalogue};
use serde_json::{Value, json};

use super::collect::Lister;
use super::results::{BackupLog, Messages, Scope};
use super::typed;
use crate::cluster::path::Collection;
use crate::cluster::request::{self, list_all};

/// What [`take_snapshots`] did.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// One per snapshot cut, waiting for `readyToUse`.
    pub operations: Vec<BackupOperation>,
    /// Claims left as objects only (unbound, no CSI volume, no snapshot API, or
    /// `snapshotVolumes: false`).
    pub objects_only: u64,
}

/// The types a snapshot touches, when the cluster serves them.
struct Types<'a> {
    snapshots: &'a ApiResource,
    contents: &'a ApiResource,
    classes: &'a ApiResource,
    volumes: &'a ApiResource,
}

/// One snapshot cut: the objects for the archive and its operation.
struct Cut {
    snapshot: Value,
    content: Value,
    class: Value,
    operation: BackupOperation,
}

/// How often a snapshot's state is read while it is being cut: a twentieth of the timeout,
/// between 50 ms and 1 s.
pub(crate) fn poll_interval(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Takes the snapshots of `claims` (see the module docs).
pub(crate) async fn take_snapshots(
    lister: &Lister<'_>,
    catalogue: &Catalogue,
    backup: &Backup,
    clock: &hawser_core::clock::Clock,
    log: &mut BackupLog,
    messages: &mut Messages,
) -> Taken {
    let (claims, unbound): (Vec<Value>, Vec<Value>) = lister
        .related
        .take_claims()
        .into_iter()
        .partition(|c| !text(c, "/spec/volumeName").is_empty());
    let mut taken = Taken {
        objects_only: unbound.len() as u64,
        ..Taken::default()
    };
    if claims.is_empty() || backup.spec.snapshot_volumes == Some(false) {
        taken.objects_only += claims.len() as u64;
        return taken;
    }
    let types = match (
        catalogue.resolve(VOLUME_SNAPSHOTS),
        catalogue.resolve(VOLUME_SNAPSHOT_CONTENTS),
        catalogue.resolve(VOLUME_SNAPSHOT_CLASSES),
        catalogue.resolve(PERSISTENT_VOLUMES),
    ) {
        (Some(snapshots), Some(contents), Some(classes), Some(volumes)) => Types {
            snapshots,
            contents,
            classes,
            volumes,
        },
        _ => {
            log.info(
                "The cluster serves no snapshot.storage.k8s.io API: no CSI snapshots are taken",
            );
            taken.objects_only += claims.len() as u64;
            return taken;
        }
    };
    let classes = match list_all(
        lister.client,
        &Collection::of(types.classes).path(None),
        lister.page_size,
        lister.api_retry,
    )
    .await
    {
        Ok(classes) => classes,
        Err(e) => {
            messages.error(
                Scope::Velero,
                format!(
                    "error listing VolumeSnapshotClasses, so no claim was snapshotted: {}",
                    request::text(&e)
                ),
            );
            return taken;
        }
    };
    let annotations: BTreeMap<String, String> = backup
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let timeout = backup
        .spec
        .csi_snapshot_timeout
        .and_then(|t| t.to_std())
        .filter(|t| !t.is_zero())
        .unwrap_or(DEFAULT_SNAPSHOT_TIMEOUT);
    let context = Context {
        lister,
        types: &types,
        classes: &classes,
        annotations: &annotations,
        backup_name: backup.metadata.name.as_deref().unwrap_or_default(),
        backup_uid: backup.metadata.uid.as_deref().unwrap_or_default(),
        timeout,
        clock,
    };
    let results: Vec<(Value, Result<Option<Cut>, String>)> = futures::stream::iter(claims)
        .map(|claim| {
            let context = &context;
            async move {
                let result = context.snapshot(&claim).await;
                (claim, result)
            }
        })
        .buffered(lister.concurrency.max(1))
        .collect()
        .await;
    let mut snapshots = Vec::new();
    let mut contents = Vec::new();
    let mut class_objects = Vec::new();
    let mut class_names = BTreeSet::new();
    for (claim, result) in results {
        let namespace = text(&claim, "/metadata/namespace").to_owned();
        match result {
            Ok(Some(cut)) => {
                if class_names.insert(text(&cut.class, "/metadata/name").to_owned()) {
                    class_objects.push(cut.class);
                }
                snapshots.push(cut.snapshot);
                contents.push(cut.content);
                taken.operations.push(cut.operation);
            }
            Ok(None) => taken.objects_only += 1,
            Err(why) => {
                let message = format!(
                    "PersistentVolumeClaim {namespace}/{} was not snapshotted: {why}",
                    text(&claim, "/metadata/name")
                );
                log.line("error", &message);
                messages.error(Scope::Namespace(namespace), message);
            }
        }
    }
    if !taken.operations.is_empty() {
        log.info(&format!(
            "Cut {} CSI volume snapshots; the backup waits for them to be ready to use",
            taken.operations.len()
        ));
    }
    for (r, items) in [
        (types.snapshots, snapshots),
        (types.contents, contents),
        (types.classes, class_objects),
    ] {
        if !items.is_empty() {
            lister.progress.page_listed(items.len() as u64, 0);
            lister.send(r, items).await;
        }
    }
    taken
}

/// What one claim's snapshot needs.
struct Context<'a> {
    lister: &'a Lister<'a>,
    types: &'a Types<'a>,
    classes: &'a [Value],
    annotations: &'a BTreeMap<String, String>,
    backup_name: &'a str,
    backup_uid: &'a str,
    timeout: Duration,
    clock: &'a hawser_core::clock::Clock,
}

impl Context<'_> {
    /// The snapshot of `claim`: `None` when its volume is not a CSI volume.
    async fn snapshot(&self, claim: &Value) -> Result<Option<Cut>, String> {
        let client = self.lister.client;
        let retry = self.lister.api_retry;
        let namespace = text(claim, "/metadata/namespace");
        let claim_name = text(claim, "/metadata/name");
        let volume_name = text(claim, "/spec/volumeName");
        let volume_path = Collection::of(self.types.volumes).item_path(None, volume_name);
        let volume = match request::get(client, &volume_path, retry).await {
            Ok(volume) => volume,
            Err(e) if request::code(&e) == Some(404) => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "its PersistentVolume {volume_name} could not be read: {}",
                    request::text(&e)
                ));
            }
        };
        let driver = text(&volume, "/spec/csi/driver");
        if driver.is_empty() {
            return Ok(None);
        }
        let class_name = choose_class(driver, claim, self.annotations, self.classes)?;
        let wanted = volume_snapshot(
            namespace,
            claim_name,
            &class_name,
            self.backup_name,
            self.backup_uid,
        );
        let name = text(&wanted, "/metadata/name").to_owned();
        let snapshots = Collection::of(self.types.snapshots);
        match request::create(client, &snapshots.path(Some(namespace)), &wanted, retry).await {
            Ok(_) => {}
            Err(e) if request::already_exists(&e) => {
                // Taken up again: the snapshot made the first time, if it is this backup's.
                let existing =
                    request::get(client, &snapshots.item_path(Some(namespace), &name), retry)
                        .await
                        .map_err(|e| {
                            format!(
                                "VolumeSnapshot {namespace}/{name} could not be read: {}",
                                request::text(&e)
                            )
                        })?;
                if text(&existing, "/metadata/labels/velero.io~1backup-uid") != self.backup_uid {
                    return Err(format!(
                        "VolumeSnapshot {namespace}/{name} exists and is not this backup's"
                    ));
                }
            }
            Err(e) => {
                return Err(format!(
                    "creating VolumeSnapshot {namespace}/{name} failed: {}",
                    request::text(&e)
                ));
            }
        }
        let (snapshot, content) = self.until_cut(namespace, &name).await?;
        let content_name = text(&content, "/metadata/name").to_owned();
        let contents = Collection::of(self.types.contents);
        let content_path = contents.item_path(None, &content_name);
        let content = request::merge_patch(
            client,
            &content_path,
            &json!({"spec": {"deletionPolicy": "Retain"}}),
            retry,
        )
        .await
        .map_err(|e| {
            format!(
                "setting deletionPolicy Retain on VolumeSnapshotContent {content_name} failed: {}",
                request::text(&e)
            )
        })?;
        let class_path = Collection::of(self.types.classes).item_path(None, &class_name);
        let class = request::get(client, &class_path, retry)
            .await
            .map_err(|e| {
                format!(
                    "VolumeSnapshotClass {class_name} could not be read: {}",
                    request::text(&e)
                )
            })?;
        let now = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let operation = BackupOperation::snapshot(
            self.backup_name,
            self.backup_uid,
            namespace,
            &name,
            &content_name,
            &now,
        );
        let mut snapshot = typed(snapshot, self.types.snapshots);
        annotate_for_restore(&mut snapshot, &content);
        Ok(Some(Cut {
            snapshot,
            content: typed(content, self.types.contents),
            class: typed(class, self.types.classes),
            operation,
        }))
    }

    /// Polls the snapshot until it is cut; the snapshot and its content then.
    async fn until_cut(&self, namespace: &str, name: &str) -> Result<(Value, Value), String> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let interval = poll_interval(self.timeout);
        loop {
            let (snapshot, content) = read_snapshot(
                self.lister.client,
                self.types.snapshots,
                self.types.contents,
                namespace,
                name,
                self.lister.api_retry,
            )
            .await?;
            match snapshot_state(&snapshot, content.as_ref()) {
                SnapshotState::Cut { .. } | SnapshotState::Ready { .. } => {
                    if let Some(content) = content {
                        return Ok((snapshot, content));
                    }
                }
                SnapshotState::Failed(why) => {
                    return Err(format!("VolumeSnapshot {namespace}/{name} failed: {why}"));
                }
                SnapshotState::Pending => {}
            }
            if tokio::time::Instant::now() + interval > deadline {
                return Err(format!(
                    "VolumeSnapshot {namespace}/{name} was not cut within the CSI snapshot timeout ({})",
                    hawser_core::duration::GoDuration::from(self.timeout)
                ));
            }
            tokio::time::sleep(interval).await;
        }
    }
}

/// A VolumeSnapshot and, once it names one, its content.
pub(crate) async fn read_snapshot(
    client: &kube::Client,
    snapshots: &ApiResource,
    contents: &ApiResource,
    namespace: &str,
    name: &str,
    retry: Duration,
) -> Result<(Value, Option<Value>), String> {
    let path = Collection::of(snapshots).item_path(Some(namespace), name);
    let snapshot = request::get(client, &path, retry).await.map_err(|e| {
        format!(
            "VolumeSnapshot {namespace}/{name} could not be read: {}",
            request::text(&e)
        )
    })?;
    let content_name = text(&snapshot, "/status/boundVolumeSnapshotContentName");
    if content_name.is_empty() {
        return Ok((snapshot, None));
    }
    let content_path = Collection::of(contents).item_path(None, content_name);
    match request::get(client, &content_path, retry).await {
        Ok(content) => Ok((snapshot, Some(content))),
        Err(e) if request::code(&e) == Some(404) => Ok((snapshot, None)),
        Err(e) => Err(format!(
            "VolumeSnapshotContent {content_name} could not be read: {}",
            request::text(&e)
        )),
    }
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}
