//! Garbage collection: expired backups are deleted through a DeleteBackupRequest, as Velero's
//! GC controller does (velero-compat §2.4).
//!
//! At start and every `--garbage-collection-frequency` (default 1h) every Backup whose
//! `status.expiration` has passed, and that is not `Deleting` already, is looked at: when its
//! storage location is missing the Backup gets the label `velero.io/gc-failure=BSLNotFound`
//! (`BSLCannotGet` when it cannot be read, `BSLReadOnly` for a read-only location) and is left
//! alone; an unavailable location leaves it for the next pass; otherwise the label is removed
//! and a request is created (`generateName: <backup>-`, with the backup's name and uid labels),
//! unless a request for that backup is still `New` or `InProgress`. The deletion controller
//! does the rest, and never deletes a backup a restore is reading.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::labels::{BACKUP_NAME, BACKUP_UID, GC_FAILURE, gc_failure};
use hawser_api::phase::{BackupPhase, DeleteBackupRequestPhase};
use hawser_core::label::valid_label_value;
use kube::api::ListParams;
use serde_json::{Value, json};

use super::periodic::{self, Pass};
use crate::context::{Context, backup_location_name};
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// Runs until the term ends.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let collector = Collector {
        backups: velero_api(&ctx, "Backup", "backups"),
        requests: velero_api(&ctx, "DeleteBackupRequest", "deletebackuprequests"),
    };
    periodic::run(ctx, collector, health).await;
}

struct Collector {
    backups: kube::Api<kube::api::DynamicObject>,
    requests: kube::Api<kube::api::DynamicObject>,
}

impl Pass for Collector {
    type Listed = Vec<Value>;

    const LISTS: &'static str = "backups to collect";

    async fn list(&mut self, ctx: &Context) -> Result<Vec<Value>, kube::Error> {
        objects::list(ctx, &self.backups, &ListParams::default()).await
    }

    /// Every expired Backup that is not being deleted yet.
    async fn handle(&mut self, ctx: &Context, backups: Vec<Value>) -> Duration {
        let now = ctx.clock.now();
        for backup in backups {
            let expired = text(&backup, "/status/expiration")
                .parse::<jiff::Timestamp>()
                .is_ok_and(|at| at < now);
            if !expired || BackupPhase::of(&backup) == BackupPhase::Deleting {
                continue;
            }
            collect(ctx, &self.backups, &self.requests, &backup).await;
        }
        ctx.settings.backup.gc_frequency
    }

    fn retry_after(&self, ctx: &Context) -> Duration {
        ctx.settings.backup.gc_frequency
    }
}

async fn collect(
    ctx: &Context,
    backups: &kube::Api<kube::api::DynamicObject>,
    requests: &kube::Api<kube::api::DynamicObject>,
    backup: &Value,
) {
    let name = text(backup, "/metadata/name");
    let location = backup_location_name(backup, &ctx.settings.backup.default_location);
    let failure = match ctx.locations.get(&location).await {
        Ok(None) => Some(gc_failure::BSL_NOT_FOUND),
        Err(e) if e.is_transient() => {
            tracing::debug!(backup = name, error = %e.full_message(), "expired backup's location cannot be read now");
            return;
        }
        Err(_) => Some(gc_failure::BSL_CANNOT_GET),
        Ok(Some(bsl))
            if bsl.spec.access_mode
                == Some(hawser_api::BackupStorageLocationAccessMode::ReadOnly) =>
        {
            Some(gc_failure::BSL_READ_ONLY)
        }
        Ok(Some(bsl)) => {
            let available = bsl.status.as_ref().and_then(|s| s.phase.clone())
                == Some(hawser_api::BackupStorageLocationPhase::Available);
            if !available {
                tracing::info!(
                    backup = name,
                    location,
                    "expired backup waits: its location is not available"
                );
                return;
            }
            None
        }
    };
    let labelled = backup
        .pointer("/metadata/labels")
        .and_then(|l| l.get(GC_FAILURE))
        .and_then(Value::as_str);
    if labelled != failure {
        let label = json!({"metadata": {"labels": {GC_FAILURE: failure}}});
        if let Err(e) = objects::merge_patch(ctx, backups, name, &label).await {
            tracing::debug!(backup = name, error = %e, "labelling an expired backup failed");
        }
    }
    if let Some(failure) = failure {
        tracing::warn!(
            backup = name,
            location,
            reason = failure,
            "expired backup not collected"
        );
        return;
    }
    let uid = text(backup, "/metadata/uid");
    let selector = format!(
        "{BACKUP_NAME}={},{BACKUP_UID}={uid}",
        valid_label_value(name)
    );
    let pending = match objects::list(ctx, requests, &ListParams::default().labels(&selector)).await
    {
        Ok(found) => found
            .iter()
            .any(|r| DeleteBackupRequestPhase::of(r).is_pending()),
        Err(e) => {
            tracing::debug!(backup = name, error = %e, "reading deletion requests failed");
            return;
        }
    };
    if pending {
        return;
    }
    let request = json!({
        "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
        "metadata": {
            "generateName": format!("{name}-"),
            "namespace": ctx.namespace,
            "labels": {BACKUP_NAME: valid_label_value(name), BACKUP_UID: uid},
        },
        "spec": {"backupName": name}
    });
    match objects::create(ctx, requests, &request).await {
        Ok(_) => tracing::info!(backup = name, "expired backup: deletion requested"),
        Err(e) => {
            tracing::warn!(backup = name, error = %e, "requesting the deletion of an expired backup failed")
        }
    }
}
