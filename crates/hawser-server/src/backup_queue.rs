//! Velero's backup queue (1.17 and later): a new Backup is `Queued` with a `queuePosition`
//! until it may start, and two backups whose namespaces overlap never run at the same time.
//!
//! Before a waiting Backup competes for one of the `--concurrent-backups` slots it is
//! *admitted* here ([`BackupQueue::admit`]):
//! 1. a `New` (or phase-less) Backup is moved to `Queued` with `queuePosition` one past the
//!    highest position of the queued backups, by one merge patch carrying its
//!    `resourceVersion` (a single attempt, as Velero's: if it fails the backup still runs, it
//!    only shows `New` meanwhile);
//! 2. the namespaces it covers are resolved: its include and exclude patterns applied to the
//!    namespaces that exist, plus the plain names it includes that do not exist (yet);
//! 3. it waits until no backup admitted before it, and not finished, covers one of those
//!    namespaces, then reserves them until its task ends. Backups that overlap start in the
//!    order they were admitted; one that overlaps nothing is not held up by them.
//!
//! When a backup leaves `Queued` (claimed `InProgress` or `FailedValidation`, with
//! `queuePosition: 0`), the queued ones left are renumbered 1..n in their order
//! ([`renumber`]). After a restart, queued backups are admitted in the order the server sees
//! them and keep their positions until the next renumbering.
//!
//! Differences from Velero, on purpose: no `ReadyToStart` write (a backup goes from `Queued`
//! straight to `InProgress` in the claim, so none is left `ReadyToStart` by a restart), and the
//! reservations live in the process that runs the backups, which is the only one that starts
//! any (leader election).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hawser_api::phase::BackupPhase;
use hawser_core::selection::{Glob, IncludesExcludes, MAX_PATTERNS_PER_LIST, has_wildcard};
use kube::api::ListParams;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::context::Context;
use crate::objects::{text, velero_api};

/// Longest wait between two looks at the reservations (they are also looked at whenever one
/// ends).
const RECHECK: Duration = Duration::from_secs(1);

/// The reservations of the backups admitted and not finished. One per server.
#[derive(Default)]
pub(crate) struct BackupQueue {
    /// Admission ticket → the backup's name and the namespaces it covers.
    reserved: Mutex<BTreeMap<u64, (String, BTreeSet<String>)>>,
    /// Admission counter (the order of `reserved`).
    next: Mutex<u64>,
    /// Signalled when a reservation ends.
    ended: Notify,
    /// Held while a position is computed and written, so two admissions do not pick the same.
    positions: tokio::sync::Mutex<()>,
}

/// A backup's reservation; dropping it lets overlapping backups start.
pub(crate) struct Reservation {
    queue: Arc<BackupQueue>,
    ticket: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.queue
            .reserved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.ticket);
        self.queue.ended.notify_waiters();
    }
}

impl BackupQueue {
    /// Admits the waiting Backup `object` (see the module docs); returns once it may compete
    /// for a slot, or `None` when the server shuts down first.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        ctx: &Context,
        object: &Value,
    ) -> Option<Reservation> {
        let name = text(object, "/metadata/name").to_owned();
        if BackupPhase::of(object) == BackupPhase::New {
            self.enqueue(ctx, object).await;
        }
        let covered = covered_namespaces(ctx, object).await;
        // Registered at once, so that later overlapping backups wait behind this one.
        let reservation = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            self.reserved
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(*next, (name.clone(), covered));
            Reservation {
                queue: self.clone(),
                ticket: *next,
            }
        };
        let mut told = false;
        loop {
            let ended = self.ended.notified();
            let Some(other) = self.blocker(reservation.ticket) else {
                return Some(reservation);
            };
            if !told {
                told = true;
                tracing::info!(backup = %name, before = %other, "the backup waits: backup {other}, admitted before it and not finished, covers some of its namespaces");
            }
            tokio::select! {
                () = ctx.shutdown.cancelled() => return None,
                () = ended => {}
                () = tokio::time::sleep(RECHECK) => {}
            }
        }
    }

    /// The first backup admitted before `ticket`, and not finished, that shares a namespace
    /// with it.
    fn blocker(&self, ticket: u64) -> Option<String> {
        let reserved = self.reserved.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, mine) = reserved.get(&ticket)?;
        reserved
            .range(..ticket)
            .find(|(_, (_, theirs))| overlap(theirs, mine))
            .map(|(_, (other, _))| other.clone())
    }

    /// `New` → `Queued` with the next position (one attempt).
    async fn enqueue(&self, ctx: &Context, object: &Value) {
        let name = text(object, "/metadata/name");
        let _one_at_a_time = self.positions.lock().await;
        let api = velero_api(ctx, "Backup", "backups");
        let backups = match crate::objects::list(ctx, &api, &ListParams::default()).await {
            Ok(list) => list,
            Err(e) => {
                tracing::debug!(backup = %name, error = %e, "the queue could not be listed; the backup is not given a position");
                return;
            }
        };
        let last = backups
            .iter()
            .filter(|b| BackupPhase::of(b) == BackupPhase::Queued)
            .filter_map(|b| b.pointer("/status/queuePosition")?.as_i64())
            .max()
            .unwrap_or(0);
        let patch = json!({
            "metadata": {"resourceVersion": text(object, "/metadata/resourceVersion")},
            "status": {"phase": BackupPhase::Queued, "queuePosition": last + 1},
        });
        match crate::objects::merge_patch_once(&api, name, &patch).await {
            Ok(_) => {
                tracing::info!(backup = %name, position = last + 1, "backup queued");
            }
            Err(e) => {
                tracing::debug!(backup = %name, error = %e, "the backup could not be marked Queued; it waits as it is")
            }
        }
    }
}

/// Gives the `Queued` backups positions 1..n in their current order (position, then
/// creation); one attempt per backup whose position changes.
pub(crate) async fn renumber(ctx: &Context) {
    let api = velero_api(ctx, "Backup", "backups");
    let Ok(list) = crate::objects::list(ctx, &api, &ListParams::default()).await else {
        return;
    };
    let mut queued: Vec<&Value> = list
        .iter()
        .filter(|b| BackupPhase::of(b) == BackupPhase::Queued)
        .collect();
    queued.sort_by_key(|b| {
        (
            b.pointer("/status/queuePosition").and_then(Value::as_i64),
            text(b, "/metadata/creationTimestamp").to_owned(),
        )
    });
    for (index, backup) in queued.into_iter().enumerate() {
        let position = i64::try_from(index).unwrap_or(i64::MAX - 1) + 1;
        if backup
            .pointer("/status/queuePosition")
            .and_then(Value::as_i64)
            == Some(position)
        {
            continue;
        }
        let name = text(backup, "/metadata/name");
        let patch = json!({
            "metadata": {"resourceVersion": text(backup, "/metadata/resourceVersion")},
            "status": {"queuePosition": position},
        });
        if let Err(e) = crate::objects::merge_patch_once(&api, name, &patch).await {
            tracing::debug!(backup = %name, error = %e, "renumbering the queue skipped this backup");
        }
    }
}

/// The namespaces `backup` covers (see the module docs). When the namespaces cannot be listed,
/// only the plain names it includes, or every name (`*`) when it includes everything.
///
/// Validation's limits come first: a list longer than [`MAX_PATTERNS_PER_LIST`] or a pattern
/// that does not compile covers nothing here, since validation refuses that backup before it
/// runs, and applying 100 000 patterns to every namespace would cost more than the backup.
async fn covered_namespaces(ctx: &Context, backup: &Value) -> BTreeSet<String> {
    let lists = ["/spec/includedNamespaces", "/spec/excludedNamespaces"];
    let refused = lists.iter().any(|pointer| {
        backup
            .pointer(pointer)
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.len() > MAX_PATTERNS_PER_LIST
                    || a.iter()
                        .any(|p| p.as_str().is_some_and(|p| Glob::new(p).is_err()))
            })
    });
    if refused {
        return BTreeSet::new();
    }
    let list = |pointer: &str| -> Vec<String> {
        backup
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (includes, excludes) = (
        list("/spec/includedNamespaces"),
        list("/spec/excludedNamespaces"),
    );
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(ctx.client.clone());
    let existing: Vec<String> = match api.list_metadata(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|ns| ns.metadata.name)
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "namespaces could not be listed; the queue compares the names backups include");
            vec!["*".to_owned()]
        }
    };
    covered(&includes, &excludes, &existing)
}

/// Whether two backups' namespaces meet. `*` stands for every namespace (the namespaces could
/// not be listed and the backup includes everything): it meets any backup of some namespace.
fn overlap(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    let every = |s: &BTreeSet<String>| s.contains("*");
    !a.is_disjoint(b) || (every(a) && !b.is_empty()) || (every(b) && !a.is_empty())
}

/// The pure part of [`covered_namespaces`].
fn covered(includes: &[String], excludes: &[String], existing: &[String]) -> BTreeSet<String> {
    let filter = IncludesExcludes::new(includes, excludes);
    let mut names: BTreeSet<String> = existing
        .iter()
        .filter(|ns| filter.should_include(ns))
        .cloned()
        .collect();
    names.extend(
        includes
            .iter()
            .filter(|n| !has_wildcard(n) && !filter.excludes.matches(n))
            .cloned(),
    );
    names
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn covered_namespaces_apply_the_patterns_to_what_exists() {
        let existing = strings(&["shop", "shop-dev", "billing", "kube-system"]);
        let set = |inc: &[&str], exc: &[&str]| {
            covered(&strings(inc), &strings(exc), &existing)
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            set(&[], &[]),
            ["billing", "kube-system", "shop", "shop-dev"]
        );
        assert_eq!(set(&["*"], &["kube-*"]), ["billing", "shop", "shop-dev"]);
        assert_eq!(set(&["shop*"], &["shop-dev"]), ["shop"]);
        // A plain name that does not exist yet still counts: a backup of it overlaps another.
        assert_eq!(set(&["later"], &[]), ["later"]);
        assert_eq!(set(&["billing", "shop"], &["shop"]), ["billing"]);
        // Namespaces that could not be listed: a backup of everything covers `*`, which meets
        // every backup of some namespace.
        let unlisted = covered(&[], &[], &strings(&["*"]));
        assert!(overlap(&unlisted, &covered(&strings(&["shop"]), &[], &[])));
        assert!(!overlap(&unlisted, &BTreeSet::new()));
    }

    #[test]
    fn a_backup_waits_only_for_earlier_overlapping_ones() {
        let queue = Arc::new(BackupQueue::default());
        let reserve = |ticket: u64, name: &str, namespaces: &[&str]| {
            queue.reserved.lock().unwrap().insert(
                ticket,
                (
                    name.to_owned(),
                    namespaces.iter().map(|&n| n.to_owned()).collect(),
                ),
            );
            Reservation {
                queue: queue.clone(),
                ticket,
            }
        };
        let shop = reserve(1, "shop-nightly", &["shop"]);
        let _billing = reserve(2, "billing", &["billing"]);
        let both = reserve(3, "everything", &["billing", "shop"]);
        let _later_shop = reserve(4, "shop-again", &["shop"]);
        assert_eq!(queue.blocker(1), None);
        assert_eq!(queue.blocker(2), None);
        assert_eq!(queue.blocker(3).as_deref(), Some("shop-nightly"));
        // Behind the earlier, still waiting `everything` too, not only the running one.
        assert_eq!(queue.blocker(4).as_deref(), Some("shop-nightly"));
        drop(shop);
        assert_eq!(queue.blocker(3).as_deref(), Some("billing"));
        assert_eq!(queue.blocker(4).as_deref(), Some("everything"));
        drop(both);
        assert_eq!(queue.blocker(4), None);
    }
}
