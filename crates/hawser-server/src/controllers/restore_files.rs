//! Velero's restore finalizer, `restores.velero.io/external-resources-finalizer`: a Restore the
//! server starts carries it ([`add_finalizer`]), so that deleting the Restore (`hawser restore
//! delete`, `kubectl delete restore`) first deletes what it left outside the cluster object: its
//! files in the storage location (`restores/<name>/`) and its record in the cluster. Then the
//! finalizer is removed and the API server deletes the object.
//!
//! Every second ([`run`], part of the `restore` controller) the Restores being deleted that carry
//! the finalizer are handled one at a time:
//! - one whose work is still running (`InProgress`) waits: its worker is still writing files;
//! - the location is the one of the backup it restored (as Velero finds it); when that Backup
//!   or its location no longer exists there is no way to reach the files: the finalizer is
//!   removed and the log says which files are left;
//! - a storage failure keeps the finalizer (the object stays, being deleted) and is logged; the
//!   next pass tries again, so the object disappears only once its files are gone.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::phase::RestorePhase;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use super::periodic::{self, Pass};
use crate::context::{Context, backup_location_name};
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// The finalizer Velero puts on the Restores it processes.
pub(crate) const FINALIZER: &str = hawser_api::labels::RESTORE_FILES_FINALIZER;

/// How often the Restores being deleted are looked for.
const TICK: Duration = Duration::from_secs(1);

/// How many times a finalizer write meeting a newer object is tried again at once.
const CONFLICT_TRIES: usize = 5;

/// Whether `restore` (as JSON) carries the finalizer.
pub(crate) fn has_finalizer(restore: &Value) -> bool {
    finalizers(restore).iter().any(|f| f == FINALIZER)
}

fn finalizers(restore: &Value) -> Vec<String> {
    restore
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Sets the finalizer list of Restore `name` to what `change` makes of the current one, with the
/// object's resourceVersion as a precondition (read again on a conflict). `Ok` when the list
/// already was what `change` makes, or the object is gone.
async fn set_finalizers(
    ctx: &Context,
    api: &kube::Api<DynamicObject>,
    name: &str,
    change: impl Fn(Vec<String>) -> Vec<String>,
) -> Result<(), String> {
    for _ in 0..CONFLICT_TRIES {
        let Some(current) = objects::get(ctx, api, name)
            .await
            .map_err(|e| format!("reading Restore {name}: {e}"))?
        else {
            return Ok(());
        };
        let before = finalizers(&current);
        let after = change(before.clone());
        if after == before {
            return Ok(());
        }
        let patch = json!({"metadata": {
            "resourceVersion": text(&current, "/metadata/resourceVersion"),
            "finalizers": after,
        }});
        match objects::merge_patch(ctx, api, name, &patch).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(format!("writing the finalizers of Restore {name}: {e}")),
        }
    }
    Err(format!(
        "writing the finalizers of Restore {name}: the object kept changing"
    ))
}

/// Puts the finalizer on Restore `name` (the server is about to write its files).
pub(crate) async fn add_finalizer(ctx: &Context, name: &str) -> Result<(), String> {
    let api = velero_api(ctx, "Restore", "restores");
    set_finalizers(ctx, &api, name, |mut list| {
        if !list.iter().any(|f| f == FINALIZER) {
            list.push(FINALIZER.to_owned());
        }
        list
    })
    .await
}

/// Takes the finalizer off Restore `name` (its files are gone, or cannot be reached).
pub(crate) async fn remove_finalizer(ctx: &Context, name: &str) -> Result<(), String> {
    let api = velero_api(ctx, "Restore", "restores");
    set_finalizers(ctx, &api, name, |list| {
        list.into_iter().filter(|f| f != FINALIZER).collect()
    })
    .await
}

/// Deletes the files of `restore` in `location` and its record in the cluster.
pub(crate) async fn delete_files(
    ctx: &Context,
    location: &hawser_store::Location,
    restore: &Value,
) -> Result<(), String> {
    let name = text(restore, "/metadata/name");
    location
        .delete_restore(name)
        .await
        .map_err(|e| format!("deleting the files of restore {name}: {}", e.full_message()))?;
    crate::records::remove_cluster_record(
        &ctx.client,
        &ctx.namespace,
        text(restore, "/metadata/uid"),
    )
    .await
    .map_err(|e| format!("deleting the record of restore {name}: {e}"))
}

/// Handles the Restores being deleted until the term ends (see the module docs).
pub(crate) async fn run(ctx: Arc<Context>) {
    let restores = velero_api(&ctx, "Restore", "restores");
    periodic::run(ctx, Finalizer(restores), Watch::unwatched("restore-files")).await;
}

struct Finalizer(kube::Api<DynamicObject>);

impl Pass for Finalizer {
    const LISTS: &'static str = "restores being deleted";

    type Listed = Vec<Value>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<Value>, kube::Error> {
        objects::list(ctx, &self.0, &ListParams::default()).await
    }

    async fn handle(&mut self, ctx: &Context, restores: Vec<Value>) -> Duration {
        for restore in restores.iter().filter(|r| ready_to_finalize(r)) {
            if ctx.shutdown.is_cancelled() {
                break;
            }
            finalize(ctx, restore).await;
        }
        TICK
    }

    fn retry_after(&self, _: &Context) -> Duration {
        TICK
    }
}

/// Being deleted, carrying the finalizer, and no worker writing its files.
fn ready_to_finalize(restore: &Value) -> bool {
    restore.pointer("/metadata/deletionTimestamp").is_some()
        && has_finalizer(restore)
        && !RestorePhase::of(restore).is_in_flight()
}

async fn finalize(ctx: &Context, restore: &Value) {
    let name = text(restore, "/metadata/name");
    let backup_name = text(restore, "/spec/backupName");
    let backups = velero_api(ctx, "Backup", "backups");
    let backup = match objects::get(ctx, &backups, backup_name).await {
        Ok(backup) => backup,
        Err(e) => {
            tracing::warn!(restore = %name, error = %e, "the Backup of a Restore being deleted could not be read; trying again");
            return;
        }
    };
    let location = match &backup {
        Some(backup) => {
            let location_name = backup_location_name(backup, &ctx.settings.backup.default_location);
            match ctx.locations.open_named(&location_name).await {
                Ok(location) => Some(location),
                Err(crate::locations::LocationError::NotFound { .. }) => None,
                Err(e) => {
                    tracing::warn!(restore = %name, location = %location_name, error = %e.full_message(), "the storage location of a Restore being deleted cannot be used; its files stay and the Restore waits");
                    return;
                }
            }
        }
        None => None,
    };
    match location {
        Some(location) => {
            if let Err(why) = delete_files(ctx, &location, restore).await {
                tracing::warn!(restore = %name, error = %why, "the files of a Restore being deleted could not be deleted; the Restore waits and this is tried again");
                return;
            }
        }
        None => tracing::warn!(
            restore = %name,
            backup = %backup_name,
            "the Backup of a Restore being deleted, or its storage location, no longer exists: the restore's files there (restores/{name}/) cannot be reached and are left"
        ),
    }
    match remove_finalizer(ctx, name).await {
        Ok(()) => tracing::info!(restore = %name, "restore files deleted; the Restore is deleted"),
        Err(why) => tracing::warn!(restore = %name, error = %why, "trying again"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn only_a_deleted_finished_restore_with_the_finalizer_is_finalized() {
        let restore = |phase: &str, deleting: bool, finalizers: Value| {
            let mut r = json!({"metadata": {"name": "r", "finalizers": finalizers},
                               "status": {"phase": phase}});
            if deleting {
                r["metadata"]["deletionTimestamp"] = json!("2026-12-06T00:00:00Z");
            }
            r
        };
        let ours = json!([FINALIZER]);
        assert!(ready_to_finalize(&restore("Completed", true, ours.clone())));
        assert!(ready_to_finalize(&restore(
            "FailedValidation",
            true,
            ours.clone()
        )));
        assert!(ready_to_finalize(&restore("", true, ours.clone())));
        assert!(!ready_to_finalize(&restore(
            "InProgress",
            true,
            ours.clone()
        )));
        assert!(!ready_to_finalize(&restore("Completed", false, ours)));
        assert!(!ready_to_finalize(&restore(
            "Completed",
            true,
            json!(["example.com/other"])
        )));
        assert!(!ready_to_finalize(&restore("Completed", true, Value::Null)));
    }
}
