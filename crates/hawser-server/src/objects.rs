//! The other velero.io objects the server acts on (Schedules, DeleteBackupRequests, and Backups
//! and Restores outside their status engine), read untyped and written with their API calls
//! retried.
//!
//! These writes are not the final phase of a Backup or Restore, so they do not need the status
//! engine's re-driver: a write that does not land by `--resource-timeout` is left to the next
//! pass of its controller, which derives what to do from the objects again (a schedule's next
//! run, a deletion request still `New` or `InProgress`). Until then each call is retried while
//! the API server is unreachable or answers 429/5xx, with the status engine's backoff.

use hawser_core::backoff::Backoff;
use hawser_engine::cluster::request::is_transient;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use serde_json::Value;
use tokio::time::Instant;

use crate::context::Context;

/// The velero.io/v1 collection of `kind` (`plural`) in the server namespace.
pub(crate) fn velero_api(ctx: &Context, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("velero.io", "v1", kind), plural);
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
}

/// Runs `call` until it succeeds, fails for good, or `--resource-timeout` has passed.
pub(crate) async fn retried<T, F, Fut>(ctx: &Context, mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let backoff = Backoff::with_max(ctx.settings.status.max_backoff);
    let deadline = Instant::now() + ctx.settings.status.resource_timeout;
    let mut failures = 0;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(e) if is_transient(&e) && Instant::now() < deadline => {
                failures += 1;
                let wait = backoff.delay(failures, &mut rand::rng());
                tracing::debug!(error = %e, wait_ms = wait.as_millis(), "API call failed; trying again");
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = ctx.shutdown.cancelled() => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Every object of `api`, as JSON, each read on its own ([`crate::tolerant`]): one that cannot
/// be parsed is left out with a warning naming it (not its text), and fails nothing else.
pub(crate) async fn list(
    ctx: &Context,
    api: &Api<DynamicObject>,
    params: &ListParams,
) -> Result<Vec<Value>, kube::Error> {
    let url = api.resource_url();
    let (read, unreadable) = retried(ctx, || {
        hawser_status::tolerant::list(&ctx.client, url, params)
    })
    .await?;
    for u in unreadable {
        tracing::warn!(object = %u.id(), error = %u.error, "an object cannot be read; left out");
    }
    Ok(read)
}

/// The object `name`, as JSON, or `None`.
pub(crate) async fn get(
    ctx: &Context,
    api: &Api<DynamicObject>,
    name: &str,
) -> Result<Option<Value>, kube::Error> {
    let object = retried(ctx, || api.get_opt(name)).await?;
    Ok(object.and_then(|o| serde_json::to_value(o).ok()))
}

/// A JSON merge patch of `name` (include `metadata.resourceVersion` for a precondition).
pub(crate) async fn merge_patch(
    ctx: &Context,
    api: &Api<DynamicObject>,
    name: &str,
    patch: &Value,
) -> Result<Value, kube::Error> {
    let params = PatchParams::default();
    let patch = Patch::Merge(patch);
    let object = retried(ctx, || api.patch(name, &params, &patch)).await?;
    serde_json::to_value(object).map_err(kube::Error::SerdeError)
}

/// Creates `object` (which may use `generateName`).
pub(crate) async fn create(
    ctx: &Context,
    api: &Api<DynamicObject>,
    object: &Value,
) -> Result<Value, kube::Error> {
    let object: DynamicObject =
        serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    let params = PostParams::default();
    let created = retried(ctx, || api.create(&params, &object)).await?;
    serde_json::to_value(created).map_err(kube::Error::SerdeError)
}

/// Deletes `name`; one already gone counts as deleted.
pub(crate) async fn delete(
    ctx: &Context,
    api: &Api<DynamicObject>,
    name: &str,
) -> Result<(), kube::Error> {
    let params = DeleteParams::default();
    match retried(ctx, || api.delete(name, &params)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A string field of an object, `""` when missing.
pub(crate) fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}
