//! Listing: paged LISTs (`limit`, `continue`) of one type at a time, items checked against the
//! selection and handed to the archive task one page at a time.

use std::collections::BTreeSet;

use hawser_core::selection::{ApiResource, BackedUpItems, NamespaceScope, Selection};
use kube::Client;
use tokio::sync::mpsc;

use super::progress::ProgressHandle;
use super::results::{Messages, Scope};
use super::sink::Batch;
use crate::cluster::path::{Collection, page_url};
use crate::cluster::request::{self, fresh_token, get_page};

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
        for namespace in namespaces {
            for selector in &selectors {
                let path = Collection::of(r).path(namespace);
                self.collect_list(r, &path, namespace, selector, seen.as_mut(), &mut report)
                    .await;
                if report.stopped {
                    return report;
                }
            }
        }
        report
    }

    async fn collect_list(
        &self,
        r: &ApiResource,
        path: &str,
        namespace: Option<&str>,
        selector: &str,
        mut seen: Option<&mut BackedUpItems>,
        report: &mut ResourceReport,
    ) {
        let group_resource = r.group_resource();
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
            let page = match get_page(self.client, &url, self.api_retry).await {
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
            let mut items = Vec::with_capacity(page.items.len());
            for mut item in page.items {
                if let Some(obj) = item.as_object_mut() {
                    // Items of a LIST carry no type; the archive and the checks need it.
                    obj.insert("apiVersion".to_owned(), api_version.clone().into());
                    obj.insert("kind".to_owned(), r.kind.clone().into());
                }
                if self.selection.check_item(r, &item, false).is_err() {
                    continue;
                }
                if let Some(seen) = seen.as_deref_mut()
                    && seen.insert(&item).is_err()
                {
                    continue;
                }
                if let Some(ns) = item
                    .pointer("/metadata/namespace")
                    .and_then(serde_json::Value::as_str)
                    && !ns.is_empty()
                    && !report.namespaces.contains(ns)
                {
                    report.namespaces.insert(ns.to_owned());
                }
                items.push(item);
            }
            let next = page.metadata.continue_token.filter(|t| !t.is_empty());
            let remaining = if next.is_some() {
                page.metadata.remaining_item_count.unwrap_or(0).max(0)
            } else {
                0
            };
            let selected = items.len() as u64;
            self.progress
                .page_listed(selected, remaining - remaining_reported);
            remaining_reported = remaining;
            report.selected += selected;
            if !items.is_empty() {
                let batch = Batch {
                    group_resource: group_resource.clone(),
                    version: r.version.clone(),
                    api_version: api_version.clone(),
                    kind: r.kind.clone(),
                    items,
                };
                if self.sender.send(batch).await.is_err() {
                    report.stopped = true;
                    return;
                }
            }
            match next {
                Some(next) => token = Some(next),
                None => return,
            }
        }
    }
}
