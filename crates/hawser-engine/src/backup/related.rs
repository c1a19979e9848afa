//! The items Velero's built-in item actions add to a backup ([`hawser_core::selection::related`]):
//! a Pod's claims, a claim's volume, the ClusterRoleBindings naming a ServiceAccount and their
//! ClusterRoles.
//!
//! While the types are listed, [`Related::observe`] notes every selected item of the types that
//! matter (the others cost one string comparison). Once every LIST is done, [`back_up_related`]
//! fetches what was named but not listed (GETs, [`Lister::page_size`]-bounded batches, the
//! listing concurrency), puts it through the per-item checks and into the archive, and repeats
//! for what those items name in turn (a claim found through a Pod brings its volume). What the
//! backup holds of the addable types is remembered by key only, so the memory is that of those
//! types' names, never of other objects.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;

use futures::StreamExt;
use hawser_core::pod_annotations::{self, AnnotatedPods};
use hawser_core::selection::related::{
    ADDABLE_TYPES, CLUSTER_ROLE_BINDINGS, ItemKey, PERSISTENT_VOLUME_CLAIMS, PODS,
    SERVICE_ACCOUNTS, bindings_of_accounts, related_items,
};
use hawser_core::selection::{ApiResource, Catalogue, MUST_INCLUDE_ADDITIONAL_ITEMS_ANNOTATION};
use serde_json::Value;

use super::collect::Lister;
use super::results::{BackupLog, Messages, Scope};
use crate::cluster::path::Collection;
use crate::cluster::request::{self, list_all};

/// Names of skipped items given in one log line.
pub(crate) const NAMES_PER_LINE: usize = 10;

/// What the listed items named, and which of the addable items the backup already holds.
#[derive(Debug, Default)]
pub(crate) struct Related {
    inner: Mutex<Noted>,
}

#[derive(Debug, Default)]
struct Noted {
    wanted: BTreeSet<ItemKey>,
    held: HashSet<ItemKey>,
    accounts: BTreeSet<(String, String)>,
    /// Claims selected so far.
    claims_seen: u64,
    /// Claims held back from the archive until their snapshots are taken (see
    /// [`Lister::send`]).
    held_claims: Vec<Value>,
    /// Pods with backup hooks, held back until their hooks have run (see [`Lister::send`]).
    held_pods: Vec<Value>,
    /// Pods carrying Velero annotations hawser does not act on.
    annotated: AnnotatedPods,
}

impl Related {
    /// Whether items of `group_resource` need [`Related::observe`].
    pub(crate) fn matters(group_resource: &str) -> bool {
        ADDABLE_TYPES.contains(&group_resource)
            || group_resource == PODS
            || group_resource == SERVICE_ACCOUNTS
    }

    /// Notes `item`, backed up as `group_resource`.
    pub(crate) fn observe(&self, group_resource: &str, item: &Value) {
        let mut noted = self.lock();
        if ADDABLE_TYPES.contains(&group_resource) {
            noted.held.insert(ItemKey::of(group_resource, item));
        }
        if group_resource == PERSISTENT_VOLUME_CLAIMS {
            noted.claims_seen += 1;
        }
        if group_resource == PODS {
            noted.annotated.observe(pod_annotations::BACKUP, item);
        }
        if group_resource == SERVICE_ACCOUNTS {
            let key = ItemKey::of(group_resource, item);
            noted.accounts.insert((key.namespace, key.name));
        }
        noted.wanted.extend(related_items(group_resource, item));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Noted> {
        // A panic while holding the lock leaves plain sets behind, still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One warning per Velero pod annotation met that hawser does not act on.
    pub(crate) fn annotation_warnings(&self) -> Vec<String> {
        self.lock().annotated.warnings(pod_annotations::BACKUP)
    }

    /// Claims selected so far.
    pub(crate) fn claims_seen(&self) -> u64 {
        self.lock().claims_seen
    }

    /// Holds `claims` back from the archive until their snapshots are taken.
    pub(crate) fn hold_claims(&self, claims: Vec<Value>) {
        self.lock().held_claims.extend(claims);
    }

    /// Holds `pods` back from the archive until their hooks have run.
    pub(crate) fn hold_pods(&self, pods: Vec<Value>) {
        self.lock().held_pods.extend(pods);
    }

    /// The Pods held back so far.
    pub(crate) fn take_held_pods(&self) -> Vec<Value> {
        std::mem::take(&mut self.lock().held_pods)
    }

    /// The claims held back so far.
    pub(crate) fn take_held_claims(&self) -> Vec<Value> {
        std::mem::take(&mut self.lock().held_claims)
    }

    /// The named items not yet held, grouped by type (claims before volumes), now counted as
    /// held.
    fn take_pending(&self) -> BTreeMap<String, Vec<ItemKey>> {
        let mut noted = self.lock();
        let wanted = std::mem::take(&mut noted.wanted);
        let mut pending: BTreeMap<String, Vec<ItemKey>> = BTreeMap::new();
        for key in wanted {
            if noted.held.insert(key.clone()) {
                pending
                    .entry(key.group_resource.clone())
                    .or_default()
                    .push(key);
            }
        }
        pending
    }
}

/// What [`back_up_related`] added.
#[derive(Debug, Default)]
pub(crate) struct Added {
    /// Namespaces of the added items.
    pub namespaces: BTreeSet<String>,
}

/// Backs up the items named by the listed ones (see the module docs).
pub(crate) async fn back_up_related(
    lister: &Lister<'_>,
    catalogue: &Catalogue,
    log: &mut BackupLog,
    messages: &mut Messages,
) -> Added {
    let mut added = Added::default();
    let accounts = std::mem::take(&mut lister.related.lock().accounts);
    if let (false, Some(bindings_type)) = (
        accounts.is_empty(),
        catalogue.resolve(CLUSTER_ROLE_BINDINGS),
    ) {
        let path = Collection::of(bindings_type).path(None);
        match list_all(lister.client, &path, lister.page_size, lister.api_retry).await {
            Ok(bindings) => lister
                .related
                .lock()
                .wanted
                .extend(bindings_of_accounts(&bindings, &accounts)),
            Err(e) => messages.error(
                Scope::Cluster,
                format!(
                    "error listing clusterrolebindings for the backed-up service accounts: {}",
                    request::text(&e)
                ),
            ),
        }
    }
    loop {
        let pending = lister.related.take_pending();
        if pending.is_empty() {
            return added;
        }
        for (group_resource, keys) in pending {
            let Some(r) = catalogue.resolve(&group_resource) else {
                continue;
            };
            let items = fetch(lister, r, keys, log, messages).await;
            if items.is_empty() {
                continue;
            }
            log.info(&format!(
                "Backed up {} additional items of {group_resource} named by backed-up items",
                items.len()
            ));
            for item in &items {
                lister.related.observe(&group_resource, item);
                if let Some(ns) = item
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|ns| !ns.is_empty())
                {
                    added.namespaces.insert(ns.to_owned());
                }
            }
            lister.progress.page_listed(items.len() as u64, 0);
            for chunk in items.chunks(lister.page_size.max(1) as usize) {
                if !lister.send(r, chunk.to_vec()).await {
                    return added;
                }
            }
        }
    }
}

/// GETs the items of `keys`, [`Lister::concurrency`] at a time (answers kept in key order), and
/// keeps those passing the per-item checks.
async fn fetch(
    lister: &Lister<'_>,
    r: &ApiResource,
    keys: Vec<ItemKey>,
    log: &mut BackupLog,
    messages: &mut Messages,
) -> Vec<Value> {
    let collection = Collection::of(r);
    let group_resource = r.group_resource();
    let answers: Vec<(ItemKey, Result<Value, kube::Error>)> = futures::stream::iter(keys)
        .map(|key| {
            let path = collection.item_path(
                Some(key.namespace.as_str()).filter(|ns| !ns.is_empty()),
                &key.name,
            );
            async move {
                let answer = request::get(lister.client, &path, lister.api_retry).await;
                (key, answer)
            }
        })
        .buffered(lister.concurrency.max(1))
        .collect()
        .await;
    let mut items = Vec::new();
    let mut skipped: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for (key, answer) in answers {
        let mut item = match answer {
            Ok(item) => item,
            Err(e) if request::code(&e) == Some(404) => {
                skipped
                    .entry("not found")
                    .or_default()
                    .push(key.full_name());
                continue;
            }
            Err(e) => {
                let scope = match key.namespace.as_str() {
                    "" => Scope::Cluster,
                    ns => Scope::Namespace(ns.to_owned()),
                };
                messages.error(
                    scope,
                    format!(
                        "error getting {group_resource} {} named by a backed-up item: {}",
                        key.full_name(),
                        request::text(&e)
                    ),
                );
                continue;
            }
        };
        if let Some(obj) = item.as_object_mut() {
            obj.insert("apiVersion".to_owned(), r.api_version().into());
            obj.insert("kind".to_owned(), r.kind.clone().into());
        }
        let must_include = item
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MUST_INCLUDE_ADDITIONAL_ITEMS_ANNOTATION))
            .and_then(Value::as_str)
            == Some("true");
        match lister.selection.check_item(r, &item, must_include) {
            Ok(()) => items.push(item),
            Err(reason) => skipped
                .entry(reason.as_str())
                .or_default()
                .push(key.full_name()),
        }
    }
    for (reason, names) in skipped {
        log.info(&skipped_line(&group_resource, reason, names.len(), &names));
    }
    items
}

/// One log line for the `count` items of one type skipped for one reason, naming the first
/// [`NAMES_PER_LINE`] of `names`.
pub(crate) fn skipped_line(
    group_resource: &str,
    reason: &str,
    count: usize,
    names: &[String],
) -> String {
    let shown = names
        .iter()
        .take(NAMES_PER_LINE)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = count.saturating_sub(NAMES_PER_LINE.min(names.len()));
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("Skipped {count} items of {group_resource} ({reason}): {shown}{tail}")
}
