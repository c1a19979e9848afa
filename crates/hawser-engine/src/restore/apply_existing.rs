//! An archived item whose object already exists, and an archived status re-applied: the
//! existing-object decision (velero-compat §7.6) acted on.

use hawser_core::restore::{Existing, decide, made_by_restore};
use hawser_core::selection::related::PODS;
use serde_json::Value;

use super::{ItemResult, Restorer, Target};
use crate::cluster::path::Collection;
use crate::cluster::request as api;

impl Restorer {
    /// Re-applies the archived status through the status subresource; failures are warnings.
    pub(super) async fn restore_status(
        &self,
        c: &Collection,
        t: &Target<'_>,
        created: Value,
        status: Value,
    ) {
        let mut body = created;
        if let Some(map) = body.as_object_mut() {
            map.insert("status".into(), status);
        }
        let path = format!("{}/status", c.item_path(t.namespace.as_deref(), &t.name));
        if let Err(e) = api::replace(&self.client, &path, &body, self.api_retry).await {
            self.report.warn(
                t.scope(),
                format!("could not restore status of {}: {}", t.id(), api::text(&e)),
            );
        }
    }

    /// The object exists: compare and act (velero-compat §7.6).
    pub(super) async fn existing(&self, c: &Collection, t: &Target<'_>, desired: &mut Value) {
        let path = c.item_path(t.namespace.as_deref(), &t.name);
        let live = match api::get(&self.client, &path, self.api_retry).await {
            Ok(live) => live,
            Err(e) => {
                self.report.warn(
                    t.scope(),
                    format!(
                        "could not restore {}: it already exists, and reading it failed: {}",
                        t.id(),
                        api::text(&e)
                    ),
                );
                self.record(t, ItemResult::Failed);
                return;
            }
        };
        if made_by_restore(desired, &live) {
            // An earlier attempt of this very restore created it before it was interrupted:
            // its exec hooks run (again: they may have run before the interruption).
            self.touched(t);
            if t.gr == PODS {
                self.note_exec_hooks(t, desired);
            }
            self.record(t, ItemResult::Created);
            return;
        }
        match decide(t.gr, desired, live, self.policy) {
            Existing::Unchanged { label_patch } => {
                if let Some(patch) = label_patch {
                    self.patch_or_warn(&path, t, &patch).await;
                }
                self.record(t, ItemResult::Skipped);
            }
            Existing::Patch { patch, fallback } => {
                match api::merge_patch(&self.client, &path, &patch, self.api_retry).await {
                    Ok(_) => {
                        self.touched(t);
                        self.record(t, ItemResult::Updated);
                    }
                    Err(e) => {
                        self.report.warn(
                            t.scope(),
                            format!("could not update {}: {}", t.id(), api::text(&e)),
                        );
                        if let Some(labels) = fallback {
                            self.patch_or_warn(&path, t, &labels).await;
                        }
                        self.record(t, ItemResult::Failed);
                    }
                }
            }
            Existing::Differs { warning } => {
                self.report.warn(t.scope(), warning);
                self.record(t, ItemResult::Failed);
            }
        }
    }

    async fn patch_or_warn(&self, path: &str, t: &Target<'_>, patch: &Value) {
        if let Err(e) = api::merge_patch(&self.client, path, patch, self.api_retry).await {
            self.report.warn(
                t.scope(),
                format!(
                    "could not add the restore labels to {}: {}",
                    t.id(),
                    api::text(&e)
                ),
            );
        }
    }
}
