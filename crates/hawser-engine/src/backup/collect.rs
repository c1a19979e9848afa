//! Listing: paged LISTs (`limit`, `continue`) of one type at a time, items checked against the
//! selection and handed to the archive task one page at a time.
//!
//! Items stay the JSON text the API server sent ([`Item::Text`]); the checks read their
//! metadata only. The items of the types the built-in item actions look into (Pods, claims,
//! ServiceAccounts), of ordered types and of claims waiting for snapshots are parsed whole.
//!
//! A type named in `spec.orderedResources` is the exception: its selected items are held until
//! its LISTs are done, then go to the archive in the given order (the named items first, the
//! rest in listing order), so its memory grows with that type's items only.

use std::collections::{BTreeMap, BTreeSet};

use hawser_core::selection::{
    ApiResource, BackedUpItems, NamespaceScope, Selection, SkipReason, order_for_type,
    sort_by_order,
};
use kube::Client;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::progress::ProgressHandle;
use super::related::{NAMES_PER_LINE, Related};
use super::results::{Messages, Scope};
use super::sink::{Batch, Item};
use crate::cluster::path::{Collection, page_url};
use crate::cluster::request::{self, fresh_token, get_page};
use hawser_core::backup_hooks::BackupHooks;
use hawser_core::selection::related::{PERSISTENT_VOLUME_CLAIMS, PODS};

/// What listing one type produced besides the items themselves.
#[derive(Debug, Default)]
pub(crate) struct ResourceReport {
    /// Namespaces items were backed up from.
    pub namespaces: BTreeSet<String>,
    /// Items handed to the archive.
    pub selected: u64,
    /// Warnings and errors.
    pub messages: Messages,
    /// The archive task is gone: stop listing.
    pub stopped: bool,
    /// Items skipped because they are being deleted (`deletionTimestamp` set).
    pub being_deleted: usize,
    /// The first [`NAMES_PER_LINE`] of those, `ns/name`.
    pub being_deleted_names: Vec<String>,
}

/// Shared settings of the listing tasks.
pub(crate) struct Lister<'a> {
    pub client: &'a Client,
    pub selection: &'a Selection,
    pub scope: &'a NamespaceScope,
    pub page_size: u32,
    /// How long one page is retried (see [`crate::cluster::request`]).
    pub api_retry: std::time::Duration,
    pub progress: ProgressHandle,
    pub sender: mpsc::Sender<Batch>,
    /// `spec.orderedResources`: plural → comma list of `ns/name` (or `name`).
    pub ordered: &'a BTreeMap<String, String>,
    /// Types listed at the same time (and GETs of related items in flight).
    pub concurrency: usize,
    /// What the listed items name (the built-in item actions).
    pub related: Related,
    /// Whether claims wait for their CSI snapshots before they go into the archive (so that
    /// each carries the name of its snapshot, as in Velero).
    pub hold_claims: bool,
    /// The backup's hooks: Pods that have some wait until they have run.
    pub hooks: &'a BackupHooks,
}

/// Resumptions of one LIST after an expired continue token.
const MAX_RESUMES: u32 = 3;

impl Lister<'_> {
    /// Lists every object of `r` the selection keeps and sends them to the archive.
    pub(crate) async fn collect(&self, r: &ApiResource) -> ResourceReport {
        let mut report = ResourceReport::default();
        let namespaces: Vec<Option<&str>> = match (r.namespaced, self.scope) {
            (true, NamespaceScope::Only(names)) => names.iter().map(|n| Some(n.as_str())).collect(),
            _ => vec![None],
        };
        let selectors = self.selection.list_label_selectors();
        // With several OR selectors an object may match more than one LIST.
        let mut seen = (selectors.len() > 1).then(BackedUpItems::default);
        let order = order_for_type(self.ordered, &r.plural);
        let mut held = (!order.is_empty()).then(Vec::new);
        for namespace in namespaces {
            for selector in &selectors {
                let path = Collection::of(r).path(namespace);
                let list = List {
                    path: &path,
                    namespace,
                    selector,
                };
                self.collect_list(r, list, seen.as_mut(), held.as_mut(), &mut report)
                    .await;
                if report.stopped {
                    return report;
                }
            }
        }
        if let Some(items) = held {
            let sorted = sort_by_order(items, &order, full_name);
            for name in sorted.not_found {
                report.messages.warn(
                    Scope::Velero,
                    format!(
                        "spec.orderedResources names {} {name}, which was not backed up",
                        r.plural
                    ),
                );
            }
            let items: Vec<serde_json::Value> = sorted.items.into_iter().map(|(i, _)| i).collect();
            for chunk in items.chunks(self.page_size.max(1) as usize) {
                if !self.send(r, chunk.to_vec()).await {
                    report.stopped = true;
                    return report;
                }
            }
        }
        report
    }

    /// Hands `items` of `r` to the archive, or holds them back when they are claims waiting for
    /// their snapshots ([`Lister::hold_claims`]) or Pods waiting for their hooks; `false` when
    /// the archive task is gone.
    pub(crate) async fn send(&self, r: &ApiResource, items: Vec<serde_json::Value>) -> bool {
        let group_resource = r.group_resource();
        if self.hold_claims && group_resource == PERSISTENT_VOLUME_CLAIMS {
            self.related.hold_claims(items);
            return !self.sender.is_closed();
        }
        if group_resource == PODS {
            let (hooked, items): (Vec<_>, Vec<_>) =
                items.into_iter().partition(|pod| self.hooks.any(pod));
            self.related.hold_pods(hooked);
            if items.is_empty() {
                return !self.sender.is_closed();
            }
            return self.send_now(r, items).await;
        }
        self.send_now(r, items).await
    }

    /// Hands `items` of `r` to the archive; `false` when the archive task is gone.
    pub(crate) async fn send_now(&self, r: &ApiResource, items: Vec<serde_json::Value>) -> bool {
        self.send_items(r, Item::objects(items)).await
    }

    /// Hands `items` of `r` to the archive; `false` when the archive task is gone.
    async fn send_items(&self, r: &ApiResource, items: Vec<Item>) -> bool {
        let batch = Batch {
            group_resource: r.group_resource(),
            version: r.version.clone(),
            api_version: r.api_version(),
            kind: r.kind.clone(),
            items,
        };
        self.sender.send(batch).await.is_ok()
    }

    /// Lists one collection; its selected items go to the archive page by page, or to `held`.
    async fn collect_list(
        &self,
        r: &ApiResource,
        list: List<'_>,
        mut seen: Option<&mut BackedUpItems>,
        mut held: Option<&mut Vec<serde_json::Value>>,
        report: &mut ResourceReport,
    ) {
        let List {
            path,
            namespace,
            selector,
        } = list;
        let group_resource = r.group_resource();
        let observed = Related::matters(&group_resource);
        let as_text = held.is_none()
            && !observed
            && !(self.hold_claims && group_resource == PERSISTENT_VOLUME_CLAIMS);
        let api_version = r.api_version();
        let scope = match namespace {
            Some(ns) => Scope::Namespace(ns.to_owned()),
            None => Scope::Cluster,
        };
        let mut token: Option<String> = None;
        let mut remaining_reported: i64 = 0;
        let mut resumes = 0;
        loop {
            let url = page_url(path, self.page_size, selector, token.as_deref());
            let page = match get_page::<Box<RawValue>>(self.client, &url, self.api_retry).await {
                Ok(page) => page,
                Err(e) if token.is_some() && resumes < MAX_RESUMES && fresh_token(&e).is_some() => {
                    // The continue token expired (410); the server offers a token that goes on
                    // after the last item returned, at its current state.
                    resumes += 1;
                    token = fresh_token(&e);
                    report.messages.warn(
                        scope.clone(),
                        format!("listing {group_resource} resumed after its continue token expired; items changed meanwhile may be missed"),
                    );
                    continue;
                }
                Err(e) => {
                    self.progress.page_listed(0, -remaining_reported);
                    let text = hawser_core::errors::chain_text(&e);
                    if request::code(&e) == Some(404) {
                        report.messages.warn(
                            scope,
                            format!("{group_resource} could not be listed, it is no longer served (404): {text}"),
                        );
                    } else {
                        report
                            .messages
                            .error(scope, format!("error listing {group_resource}: {text}"));
                    }
                    return;
                }
            };
            let mut objects = Vec::new();
            let mut texts = Vec::new();
            for json in page.items {
                let Decoded { check: item, text } =
                    match decode(json, &api_version, &r.kind, as_text) {
                        Ok(decoded) => decoded,
                        Err(e) => {
                            report.messages.error(
                                scope.clone(),
                                format!("error decoding an item of {group_resource}: {e}"),
                            );
                            continue;
                        }
                    };
                match self.selection.check_item(r, &item, false) {
                    Ok(()) => {}
                    Err(SkipReason::BeingDeleted) => {
                        report.being_deleted += 1;
                        if report.being_deleted_names.len() < NAMES_PER_LINE {
                            report.being_deleted_names.push(full_name(&item));
                        }
                        continue;
                    }
                    Err(_) => continue,
                }
                if let Some(seen) = seen.as_deref_mut()
                    && seen.insert(&item).is_err()
                {
                    continue;
                }
                let namespace = item
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|ns| !ns.is_empty());
                if let Some(ns) = namespace
                    && !report.namespaces.contains(ns)
                {
                    report.namespaces.insert(ns.to_owned());
                }
                if observed {
                    self.related.observe(&group_resource, &item);
                }
                match text {
                    Some((json, typed)) => texts.push(Item::Text {
                        namespace: namespace.map(str::to_owned),
                        name: item
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        json,
                        typed,
                    }),
                    None => objects.push(item),
                }
            }
            let next = page.metadata.continue_token.filter(|t| !t.is_empty());
            let remaining = if next.is_some() {
                page.metadata.remaining_item_count.unwrap_or(0).max(0)
            } else {
                0
            };
            let selected = (objects.len() + texts.len()) as u64;
            self.progress
                .page_listed(selected, remaining - remaining_reported);
            remaining_reported = remaining;
            report.selected += selected;
            if let Some(held) = held.as_deref_mut() {
                held.extend(objects);
            } else if (!objects.is_empty() && !self.send(r, objects).await)
                || (!texts.is_empty() && !self.send_items(r, texts).await)
            {
                report.stopped = true;
                return;
            }
            match next {
                Some(next) => token = Some(next),
                None => return,
            }
        }
    }
}

/// One LIST of a type: its collection path, the namespace it covers (`None`: all, or a
/// cluster-scoped type) and its label selector.
struct List<'a> {
    path: &'a str,
    namespace: Option<&'a str>,
    selector: &'a str,
}

/// What the checks of a LIST item read, and its text when it is kept as text.
struct Decoded {
    /// The whole object, or (with `text`) its `apiVersion`, `kind` and `metadata`; with
    /// `apiVersion` and `kind` set.
    check: Value,
    /// The item's JSON text and whether it holds the type already.
    text: Option<(Box<RawValue>, bool)>,
}

/// The fields of an item the checks read.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: Value,
}

/// Decodes one item of a LIST of `kind` at `api_version`: only its head when `as_text` (and it
/// carries either no type or this one), the whole object otherwise.
fn decode(
    json: Box<RawValue>,
    api_version: &str,
    kind: &str,
    as_text: bool,
) -> serde_json::Result<Decoded> {
    if as_text {
        let head: Head = serde_json::from_str(json.get())?;
        let typed =
            head.api_version.as_deref() == Some(api_version) && head.kind.as_deref() == Some(kind);
        if typed || (head.api_version.is_none() && head.kind.is_none()) {
            let check = serde_json::json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": head.metadata,
            });
            return Ok(Decoded {
                check,
                text: Some((json, typed)),
            });
        }
    }
    let mut object: Value = serde_json::from_str(json.get())?;
    if let Some(map) = object.as_object_mut() {
        // Items of a LIST carry no type; the archive and the checks need it.
        map.insert("apiVersion".to_owned(), api_version.into());
        map.insert("kind".to_owned(), kind.into());
    }
    Ok(Decoded {
        check: object,
        text: None,
    })
}

/// `ns/name`, or `name` for a cluster-scoped item: how `spec.orderedResources` names items.
fn full_name(item: &serde_json::Value) -> String {
    let text = |p: &str| {
        item.pointer(p)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    match text("/metadata/namespace") {
        "" => text("/metadata/name").to_owned(),
        ns => format!("{ns}/{}", text("/metadata/name")),
    }
}
