//! The BackupStorageLocation controller: validates every location when it has never been
//! validated, when its spec changed, and then every validation frequency (`spec.validationFrequency`,
//! else `--store-validation-frequency`; zero means once), and writes `status.phase`
//! (`Available`/`Unavailable`), `status.message` (what is wrong and what to do) and
//! `status.lastValidationTime`, as Velero's controller does. Validation is the store's answer to
//! a listing of the prefix (velero-compat §2.4). `velero_backup_location_status_gauge` follows.
//!
//! Objects are read as untyped JSON so that one malformed location cannot stop the validation of
//! the others: it is marked `Unavailable` with the parse error.
//!
//! Only one location is the default: when several have `spec.default: true`, the most
//! recently created keeps it and the others' flag is set to false, as Velero does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hawser_api::{BackupStorageLocation, BackupStorageLocationPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::context::Context;
use crate::locations::ranked_defaults;
use crate::readiness::Watch;

/// Longest time between two looks at the locations.
const TICK: Duration = Duration::from_secs(10);

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("velero.io", "v1", "BackupStorageLocation"),
        "backupstoragelocations",
    )
}

/// Runs until the server shuts down; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource());
    // The spec each location had when this process last validated it.
    let mut seen: HashMap<String, Value> = HashMap::new();
    let tick = ctx
        .settings
        .locations
        .validation_frequency
        .map_or(TICK, |f| f.min(TICK))
        .max(Duration::from_millis(200));
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                health.up();
                for older in ranked_defaults(list.items.iter()).iter().skip(1) {
                    unset_default(&api, older).await;
                }
                for object in list.items {
                    reconcile(&ctx, &api, &mut seen, object).await;
                }
            }
            Err(e) => {
                health.down();
                tracing::debug!(error = %e, "listing storage locations failed; trying again");
            }
        }
        tokio::select! {
            () = ctx.shutdown.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
    }
}

async fn reconcile(
    ctx: &Context,
    api: &Api<DynamicObject>,
    seen: &mut HashMap<String, Value>,
    object: DynamicObject,
) {
    let Some(name) = object.metadata.name.clone() else {
        return;
    };
    let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
    let changed = seen.get(&name) != Some(&spec);
    let now = ctx.clock.now();
    let (phase, message) = match serde_json::from_value::<BackupStorageLocation>(
        serde_json::to_value(&object).unwrap_or(Value::Null),
    ) {
        Err(e) => {
            if !changed {
                return;
            }
            (
                BackupStorageLocationPhase::Unavailable,
                Some(format!("the BackupStorageLocation cannot be read: {e}")),
            )
        }
        Ok(bsl) => {
            if !changed && !due(ctx, &bsl, now) {
                return;
            }
            match validate(ctx, &name, &bsl).await {
                Ok(()) => (BackupStorageLocationPhase::Available, None),
                Err(Some(message)) => (BackupStorageLocationPhase::Unavailable, Some(message)),
                Err(None) => return,
            }
        }
    };
    let patch = json!({"status": {
        "phase": phase,
        "message": message,
        "lastValidationTime": Time(now),
    }});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            if message.is_some() {
                tracing::warn!(location = %name, message = ?message, "storage location unavailable");
            } else {
                tracing::info!(location = %name, "storage location available");
            }
            ctx.metrics
                .location_status(&name, phase == BackupStorageLocationPhase::Available);
            seen.insert(name, spec);
        }
        Err(e) => {
            tracing::warn!(location = %name, error = %e, "storing the location's status failed; trying again")
        }
    }
}

/// Turns `spec.default` off on `name`, a default location older than another.
async fn unset_default(api: &Api<DynamicObject>, name: &str) {
    let patch = json!({"spec": {"default": false}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::info!(
            location = %name,
            "a more recently created location is the default; spec.default of this one is now false"
        ),
        Err(e) => {
            tracing::warn!(location = %name, error = %e, "turning spec.default off failed; trying again")
        }
    }
}

/// Whether the validation frequency has passed since the last validation.
fn due(ctx: &Context, bsl: &BackupStorageLocation, now: jiff::Timestamp) -> bool {
    let Some(last) = bsl
        .status
        .as_ref()
        .and_then(|s| s.last_validation_time.as_ref())
    else {
        return true;
    };
    let frequency = match bsl.spec.validation_frequency {
        Some(f) => f.to_std().filter(|d| !d.is_zero()),
        None => ctx.settings.locations.validation_frequency,
    };
    let Some(frequency) = frequency else {
        return false;
    };
    let elapsed = now.duration_since(last.0);
    elapsed.is_negative() || elapsed.unsigned_abs() >= frequency
}

/// `Err(Some(message))`: unavailable; `Err(None)`: the API could not answer (try again).
async fn validate(
    ctx: &Context,
    name: &str,
    bsl: &BackupStorageLocation,
) -> Result<(), Option<String>> {
    let location = match ctx.locations.open(name, &bsl.spec).await {
        Ok(l) => l,
        Err(e) if e.is_transient() => return Err(None),
        Err(e) => return Err(Some(e.full_message())),
    };
    hawser_store::validate(&location)
        .await
        .map_err(|e| Some(e.reason()))
}
