//! Target namespaces (velero-compat §7.4): before the first item of a namespace, the namespace
//! is ensured once per restore: built from the archived Namespace object (labels, annotations,
//! spec; name = target), created when absent, waited on while it is terminating. A created
//! namespace counts as a restored item.

use std::collections::BTreeMap;
use std::time::Duration;

use hawser_core::restore::namespace_object;
use serde_json::Value;
use tokio::sync::Mutex;

use super::apply::Restorer;
use super::results::ItemResult;
use hawser_core::poll::poll_until;

use crate::cluster::path::namespace_path;
use crate::cluster::request as api;

/// How often a terminating namespace is looked at.
const TERMINATING_POLL: Duration = Duration::from_secs(1);

/// The archived Namespace objects and the namespaces ensured so far.
pub(crate) struct Namespaces {
    archived: BTreeMap<String, Value>,
    ensured: Mutex<BTreeMap<String, Result<(), String>>>,
    terminating_timeout: Duration,
}

impl Namespaces {
    pub(crate) fn new(archived: BTreeMap<String, Value>, terminating_timeout: Duration) -> Self {
        Self {
            archived,
            ensured: Mutex::default(),
            terminating_timeout,
        }
    }

    /// Ensures `target`, the target of source namespace `source`; the first answer for a
    /// target is kept for the rest of the restore.
    pub(crate) async fn ensure(
        &self,
        r: &Restorer,
        source: &str,
        target: &str,
    ) -> Result<(), String> {
        let mut ensured = self.ensured.lock().await;
        if let Some(done) = ensured.get(target) {
            return done.clone();
        }
        let result = self.ensure_once(r, source, target).await;
        ensured.insert(target.to_owned(), result.clone());
        result
    }

    async fn ensure_once(&self, r: &Restorer, source: &str, target: &str) -> Result<(), String> {
        let path = namespace_path(target);
        match api::get(&r.client, &path, r.api_retry).await {
            Ok(ns) if is_terminating(&ns) => self.wait_gone(r, &path, target).await?,
            Ok(_) => return Ok(()),
            Err(e) if api::code(&e) == Some(404) => {}
            Err(e) => return Err(format!("reading namespace {target}: {}", api::text(&e))),
        }
        let obj = namespace_object(target, self.archived.get(source), &r.clean_context());
        match api::create::<serde::de::IgnoredAny>(
            &r.client,
            "/api/v1/namespaces",
            &obj,
            r.api_retry,
        )
        .await
        {
            Ok(_) => {
                r.report.add_total(1);
                r.report
                    .item("v1", "Namespace", None, target, ItemResult::Created);
                r.report.info(&format!("Created namespace {target}"));
                Ok(())
            }
            Err(e) if api::already_exists(&e) => Ok(()),
            Err(e) => Err(format!("creating namespace {target}: {}", api::text(&e))),
        }
    }

    async fn wait_gone(&self, r: &Restorer, path: &str, target: &str) -> Result<(), String> {
        let gone = poll_until(self.terminating_timeout, TERMINATING_POLL, || async {
            match api::get(&r.client, path, r.api_retry).await {
                Err(e) if api::code(&e) == Some(404) => Some(Ok(())),
                Err(e) => Some(Err(format!(
                    "reading namespace {target}: {}",
                    api::text(&e)
                ))),
                Ok(ns) if !is_terminating(&ns) => Some(Ok(())),
                Ok(_) => None,
            }
        })
        .await;
        gone.unwrap_or_else(|| {
            Err(format!(
                "namespace {target} is still terminating after {}s",
                self.terminating_timeout.as_secs()
            ))
        })
    }
}

fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
        || ns
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
}
