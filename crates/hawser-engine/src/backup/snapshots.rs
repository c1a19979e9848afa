//! CSI snapshots of the backed-up claims, taken once the LISTs are done (the part of Velero's
//! CSI actions that runs while the backup is `InProgress`). While snapshots can be taken, the
//! claims wait outside the archive ([`Lister::send`] holds them, so memory grows with the number
//! of claims only) and go in last, each snapshotted one annotated
//! `velero.io/volume-snapshot-name`, which Velero's restore reads.
//!
//! Pipeline of [`take_snapshots`], unless `spec.snapshotVolumes` is `false` or the cluster
//! serves no `snapshot.storage.k8s.io` API:
//!
//! 1. the VolumeSnapshotClasses (one LIST);
//! 2. per bound claim, [`Lister::concurrency`] at a time: its volume (GET); a volume the
//!    backup's resource policy says to `skip`, or one that is not a CSI volume, is left as an
//!    object only (the caller warns about the second kind); the class
//!    ([`hawser_core::csi::choose_class`]); the VolumeSnapshot, created with a name that is the
//!    same whenever this backup is taken up again; then its state is polled ([`poll_backoff`])
//!    until the snapshot is cut (its content has a `snapshotHandle`), fails, or
//!    `spec.csiSnapshotTimeout` passes;
//! 3. a cut snapshot's content gets `deletionPolicy: Retain` (the snapshot outlives the
//!    VolumeSnapshot object, as in Velero) and the backup's name and uid labels (deleting the
//!    backup acts only on contents with its uid), and the VolumeSnapshot, its content and class go into
//!    the archive (past the type filters: Velero's actions return them as items that must be
//!    included), with an operation that waits for `readyToUse`
//!    ([`hawser_core::csi::BackupOperation`]).
//!
//! The claims a Pod with backup hooks mounts are cut between that Pod's pre and post hooks
//! ([`super::hooks`]); the other claims after.
//!
//! A claim that cannot be snapshotted is an error in its namespace; the backup goes on.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use hawser_api::Backup;
use hawser_core::backoff::Backoff;
use hawser_core::csi::{
    BackupOperation, DEFAULT_SNAPSHOT_TIMEOUT, SnapshotState, VOLUME_SNAPSHOT_CLASSES,
    VOLUME_SNAPSHOT_CONTENTS, VOLUME_SNAPSHOT_NAME_ANNOTATION, VOLUME_SNAPSHOTS,
    annotate_for_restore, backup_labels, choose_class, set_annotation, snapshot_state,
    volume_snapshot,
};
use hawser_core::json::text;
use hawser_core::selection::policies::ResourcePolicies;
use hawser_core::selection::related::{PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS};
use hawser_core::selection::{ApiResource, Catalogue};
use serde_json::{Value, json};

use super::collect::Lister;
use super::hooks::{Hooked, Runner};
use super::results::{BackupLog, Messages, Scope};
use super::{typed, volume_info};
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
    /// Claims whose volume a resource policy said to skip.
    pub skipped_by_policy: u64,
    /// The volume info of the volumes looked at ([`super::volume_info`]).
    pub volume_info: Vec<Value>,
}

/// What became of one claim's volume.
enum Shot {
    Cut(Box<Cut>),
    /// Not a CSI volume (its volume info, unless the volume is gone): the claim is an object
    /// only.
    ObjectOnly(Option<Value>),
    /// A volume policy with action `skip` selected it (its volume info).
    Skipped(Value),
}

/// The types a snapshot touches, when the cluster serves them.
pub(crate) struct Types<'a> {
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
    /// Its volume info.
    info: Value,
}

/// How often a snapshot's state is read while `timeout` runs: after 50 ms, then twice as long
/// each time, up to a twentieth of the timeout (between 50 ms and 1 s), so that a quick
/// snapshot is seen at once and a slow one costs few reads.
pub(crate) fn poll_backoff(timeout: Duration) -> Backoff {
    Backoff {
        initial: Duration::from_millis(50),
        ..Backoff::with_max((timeout / 20).clamp(Duration::from_millis(50), Duration::from_secs(1)))
    }
}

/// The types a snapshot touches, when the cluster serves them all.
pub(crate) fn served(catalogue: &Catalogue) -> Option<Types<'_>> {
    Some(Types {
        snapshots: catalogue.resolve(VOLUME_SNAPSHOTS)?,
        contents: catalogue.resolve(VOLUME_SNAPSHOT_CONTENTS)?,
        classes: catalogue.resolve(VOLUME_SNAPSHOT_CLASSES)?,
        volumes: catalogue.resolve(PERSISTENT_VOLUMES)?,
    })
}

/// Takes the snapshots of the claims [`Lister::send`] held back, then hands the claims (each
/// snapshotted one annotated with its snapshot's name) and the snapshot objects to the archive
/// (see the module docs).
pub(crate) async fn take_snapshots(
    lister: &Lister<'_>,
    catalogue: &Catalogue,
    (backup, policies): (&Backup, Option<&ResourcePolicies>),
    clock: &hawser_core::clock::Clock,
    hooks: &Runner<'_>,
    log: &mut BackupLog,
    messages: &mut Messages,
) -> Taken {
    let seen = lister.related.claims_seen();
    let pods = lister.related.take_held_pods();
    let pod_type = catalogue.resolve(PODS);
    let (Some(types), true) = (served(catalogue), lister.hold_claims) else {
        if seen > 0 && backup.spec.snapshot_volumes != Some(false) {
            log.info(
                "The cluster serves no snapshot.storage.k8s.io API: no CSI snapshots are taken",
            );
        }
        let kept = kept_pods(hooks.around(lister, pods, |_| async {}).await);
        send_all(lister, &[(pod_type, kept, true)]).await;
        return Taken {
            objects_only: seen,
            ..Taken::default()
        };
    };
    let mut claims = lister.related.take_held_claims();
    let mut taken = Taken::default();
    let (cuts, kept) = cut_all(
        lister,
        &types,
        (backup, policies),
        clock,
        (&claims, pods, hooks),
        (log, messages),
        &mut taken,
    )
    .await;
    let mut snapshots = Vec::new();
    let mut contents = Vec::new();
    let mut class_objects = Vec::new();
    let mut class_names = BTreeSet::new();
    for (claim, cut) in claims.iter_mut().zip(cuts) {
        let Some(cut) = cut else { continue };
        set_annotation(
            claim,
            VOLUME_SNAPSHOT_NAME_ANNOTATION,
            text(&cut.snapshot, "/metadata/name"),
        );
        if class_names.insert(text(&cut.class, "/metadata/name").to_owned()) {
            class_objects.push(cut.class);
        }
        snapshots.push(cut.snapshot);
        contents.push(cut.content);
        taken.operations.push(cut.operation);
        taken.volume_info.push(cut.info);
    }
    if taken.skipped_by_policy > 0 {
        log.info(&format!(
            "{} PersistentVolumeClaims were backed up without a snapshot of their volumes: the resource policy says to skip them",
            taken.skipped_by_policy
        ));
    }
    if !taken.operations.is_empty() {
        log.info(&format!(
            "Cut {} CSI volume snapshots; the backup waits for them to be ready to use",
            taken.operations.len()
        ));
    }
    let claim_type = catalogue.resolve(PERSISTENT_VOLUME_CLAIMS);
    send_all(
        lister,
        &[
            (pod_type, kept, true),
            (claim_type, claims, true),
            (Some(types.snapshots), snapshots, false),
            (Some(types.contents), contents, false),
            (Some(types.classes), class_objects, false),
        ],
    )
    .await;
    taken
}

/// Hands each list of items to the archive, counting those not counted when listed; stops
/// when the archive task is gone.
async fn send_all(lister: &Lister<'_>, lists: &[(Option<&ApiResource>, Vec<Value>, bool)]) {
    for (r, items, counted) in lists {
        let Some(r) = r.filter(|_| !items.is_empty()) else {
            continue;
        };
        if !counted {
            lister.progress.page_listed(items.len() as u64, 0);
        }
        for chunk in items.chunks(lister.page_size.max(1) as usize) {
            if !lister.send_now(r, chunk.to_vec()).await {
                return;
            }
        }
    }
}

/// The Pods whose hooks did not leave them out.
fn kept_pods<T>(hooked: Vec<Hooked<T>>) -> Vec<Value> {
    hooked
        .into_iter()
        .filter(|h| h.kept)
        .map(|h| h.pod)
        .collect()
}

/// The indexes of the claims (in `claims`) that each Pod mounts, keyed `namespace/name`; a
/// claim mounted by several Pods belongs to the first.
fn claims_of_pods(
    pods: &[Value],
    claims: &[Value],
    bound: &[usize],
) -> HashMap<String, Vec<usize>> {
    let mut by_key: HashMap<(&str, &str), usize> = bound
        .iter()
        .map(|i| {
            let c = &claims[*i];
            (
                (text(c, "/metadata/namespace"), text(c, "/metadata/name")),
                *i,
            )
        })
        .collect();
    let mut owned = HashMap::new();
    for pod in pods {
        let namespace = text(pod, "/metadata/namespace");
        let mine: Vec<usize> = pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                v.pointer("/persistentVolumeClaim/claimName")
                    .and_then(Value::as_str)
            })
            .filter_map(|claim| by_key.remove(&(namespace, claim)))
            .collect();
        owned.insert(format!("{namespace}/{}", text(pod, "/metadata/name")), mine);
    }
    owned
}

/// The snapshot of each of `claims`, in order: `None` for one left as an object only
/// (counted in `taken`) or not snapshotted (an error in the log and `messages`); and the held
/// Pods that go into the archive. The claims a Pod with hooks mounts are cut between its pre
/// and post hooks ([`Runner::around`]), the others after.
async fn cut_all(
    lister: &Lister<'_>,
    types: &Types<'_>,
    (backup, policies): (&Backup, Option<&ResourcePolicies>),
    clock: &hawser_core::clock::Clock,
    (claims, pods, hooks): (&[Value], Vec<Value>, &Runner<'_>),
    (log, messages): (&mut BackupLog, &mut Messages),
    taken: &mut Taken,
) -> (Vec<Option<Cut>>, Vec<Value>) {
    let mut cuts: Vec<Option<Cut>> = claims.iter().map(|_| None).collect();
    let mut bound: Vec<usize> = (0..claims.len())
        .filter(|i| !text(&claims[*i], "/spec/volumeName").is_empty())
        .collect();
    taken.objects_only += (claims.len() - bound.len()) as u64;
    let classes = if bound.is_empty() {
        Vec::new()
    } else {
        match list_all(
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
                bound.clear();
                Vec::new()
            }
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
        types,
        classes: &classes,
        annotations: &annotations,
        backup_name: backup.metadata.name.as_deref().unwrap_or_default(),
        backup_uid: backup.metadata.uid.as_deref().unwrap_or_default(),
        timeout,
        clock,
        policies,
    };
    let of_pods = claims_of_pods(&pods, claims, &bound);
    let context = &context;
    let hooked = hooks
        .around(lister, pods, |pod| {
            let mine = of_pods
                .get(&format!(
                    "{}/{}",
                    text(pod, "/metadata/namespace"),
                    text(pod, "/metadata/name")
                ))
                .cloned()
                .unwrap_or_default();
            async move {
                let cut = mine
                    .into_iter()
                    .map(|i| async move { (i, context.snapshot(&claims[i]).await) });
                futures::future::join_all(cut).await
            }
        })
        .await;
    let owned: HashSet<usize> = of_pods.values().flatten().copied().collect();
    let mut results: Vec<(usize, Result<Shot, String>)> = Vec::new();
    let mut kept = Vec::new();
    for pod in hooked {
        results.extend(pod.done);
        if pod.kept {
            kept.push(pod.pod);
        }
    }
    let rest = bound.into_iter().filter(|i| !owned.contains(i));
    results.extend(
        futures::stream::iter(rest)
            .map(|i| async move { (i, context.snapshot(&claims[i]).await) })
            .buffered(lister.concurrency.max(1))
            .collect::<Vec<_>>()
            .await,
    );
    for (i, result) in results {
        let claim = &claims[i];
        let namespace = text(claim, "/metadata/namespace").to_owned();
        match result {
            Ok(Shot::Cut(cut)) => cuts[i] = Some(*cut),
            Ok(Shot::ObjectOnly(info)) => {
                taken.objects_only += 1;
                let info = info.map(|info| volume_info::skipped(info, volume_info::NOT_CSI));
                taken.volume_info.extend(info);
            }
            Ok(Shot::Skipped(info)) => {
                taken.skipped_by_policy += 1;
                let info = volume_info::skipped(info, volume_info::SKIPPED_BY_POLICY);
                taken.volume_info.push(info);
            }
            Err(why) => {
                let message = format!(
                    "PersistentVolumeClaim {namespace}/{} was not snapshotted: {why}",
                    text(claim, "/metadata/name")
                );
                log.line("error", &message);
                messages.error(Scope::Namespace(namespace), message);
            }
        }
    }
    (cuts, kept)
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
    policies: Option<&'a ResourcePolicies>,
}

impl Context<'_> {
    /// The snapshot of `claim`, unless its volume is not a CSI volume or a volume policy says
    /// to skip it.
    async fn snapshot(&self, claim: &Value) -> Result<Shot, String> {
        let client = self.lister.client;
        let retry = self.lister.api_retry;
        let namespace = text(claim, "/metadata/namespace");
        let claim_name = text(claim, "/metadata/name");
        let volume_name = text(claim, "/spec/volumeName");
        let volume_path = Collection::of(self.types.volumes).item_path(None, volume_name);
        let what = format!("its PersistentVolume {volume_name}");
        let Some(volume) = read(client, &volume_path, retry, &what).await? else {
            return Ok(Shot::ObjectOnly(None));
        };
        let info = volume_info::of_volume(claim, &volume);
        if self.policies.and_then(|p| p.volume_action(claim, &volume)) == Some("skip") {
            return Ok(Shot::Skipped(info));
        }
        let driver = text(&volume, "/spec/csi/driver");
        if driver.is_empty() {
            return Ok(Shot::ObjectOnly(Some(info)));
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
        match request::create::<serde::de::IgnoredAny>(
            client,
            &snapshots.path(Some(namespace)),
            &wanted,
            retry,
        )
        .await
        {
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
                if hawser_core::csi::labelled_backup_uid(&existing).unwrap_or_default()
                    != self.backup_uid
                {
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
        // Retained, and labelled with the backup's uid: deleting this backup deletes it, and
        // only this backup's deletion does.
        let kept = json!({
            "metadata": {"labels": backup_labels(self.backup_name, self.backup_uid)},
            "spec": {"deletionPolicy": "Retain"}
        });
        let content = request::merge_patch(client, &content_path, &kept, retry)
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
        let info = volume_info::cut(info, &operation, &content);
        Ok(Shot::Cut(Box::new(Cut {
            snapshot,
            content: typed(content, self.types.contents),
            class: typed(class, self.types.classes),
            operation,
            info,
        })))
    }

    /// Polls the snapshot until it is cut; the snapshot and its content then.
    async fn until_cut(&self, namespace: &str, name: &str) -> Result<(Value, Value), String> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let backoff = poll_backoff(self.timeout);
        let mut polls = 0;
        loop {
            let (snapshot, content) = read_snapshot(
                self.lister.client,
                self.types.snapshots,
                self.types.contents,
                namespace,
                name,
                self.lister.api_retry,
            )
            .await?
            .ok_or_else(|| format!("VolumeSnapshot {namespace}/{name} is gone"))?;
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
            polls += 1;
            let wait = backoff.delay(polls, &mut rand::rng());
            if tokio::time::Instant::now() + wait > deadline {
                return Err(format!(
                    "VolumeSnapshot {namespace}/{name} was not cut within the CSI snapshot timeout ({})",
                    hawser_core::duration::GoDuration::from(self.timeout)
                ));
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// A VolumeSnapshot and, once it names one, its content; `None` when the VolumeSnapshot is gone.
pub(crate) async fn read_snapshot(
    client: &kube::Client,
    snapshots: &ApiResource,
    contents: &ApiResource,
    namespace: &str,
    name: &str,
    retry: Duration,
) -> Result<Option<(Value, Option<Value>)>, String> {
    let path = Collection::of(snapshots).item_path(Some(namespace), name);
    let what = format!("VolumeSnapshot {namespace}/{name}");
    let Some(snapshot) = read(client, &path, retry, &what).await? else {
        return Ok(None);
    };
    let content_name = text(&snapshot, "/status/boundVolumeSnapshotContentName");
    if content_name.is_empty() {
        return Ok(Some((snapshot, None)));
    }
    let content_path = Collection::of(contents).item_path(None, content_name);
    let what = format!("VolumeSnapshotContent {content_name}");
    let content = read(client, &content_path, retry, &what).await?;
    Ok(Some((snapshot, content)))
}

/// The object at `path`, `None` when it is not there; an error says `what` could not be read.
async fn read(
    client: &kube::Client,
    path: &str,
    retry: Duration,
    what: &str,
) -> Result<Option<Value>, String> {
    request::get_opt(client, path, retry)
        .await
        .map_err(|e| format!("{what} could not be read: {}", request::text(&e)))
}
