//! The other velero.io objects the server acts on (Schedules, DeleteBackupRequests, and Backups
//! and Restores outside their status engine), read untyped and written with their API calls
//! retried; `merge_patch_once` and `list_once` are the single attempts of writes and reads the
//! next pass makes again.
//!
//! These writes are not the final phase of a Backup or Restore, so they do not need the status
//! engine's re-driver: a write that does not land by `--resource-timeout` is left to the next
//! pass of its controller, which derives what to do from the objects again (a schedule's next
//! run, a deletion request still `New` or `InProgress`). Until then each call is retried while
//! the API server is unreachable or answers 429/5xx, in hawser's one retry loop with the status
//! engine's policy, stretched to the wait the answer asks for (`details.retryAfterSeconds`),
//! never past the deadline.

use hawser_core::backoff::DeadlinePolicy;
use hawser_core::retry::{self, Verdict};
use hawser_engine::cluster::request::{jitter_rng, verdict};
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

/// Runs `call` until it succeeds, fails for good, or the status engine's deadline policy
/// (`--resource-timeout`, backoff capped at `--status-patch-max-backoff`) leaves no room for
/// another try; the end of the term stops the wait.
pub(crate) async fn retried<T, F, Fut>(ctx: &Context, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    retry_until(&ctx.engine.policy(), &ctx.shutdown, call).await
}

/// [`retried`] with its settings given.
async fn retry_until<T, F, Fut>(
    policy: &DeadlinePolicy,
    shutdown: &tokio_util::sync::CancellationToken,
    mut call: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let classify = |e: &kube::Error| {
        let verdict = verdict(e);
        if verdict != Verdict::Stop {
            tracing::debug!(error = %e, "API call failed; it is tried again while the deadline allows");
        }
        verdict
    };
    retry::until_deadline(
        policy,
        jitter_rng(),
        Instant::now(),
        shutdown.cancelled(),
        classify,
        |_, _| call(),
    )
    .await
    .into_result()
}

/// Every object of `api`, as JSON, each read on its own ([`hawser_status::tolerant`]): one that
/// cannot be parsed is left out with a warning naming it (not its text), and fails nothing else.
pub(crate) async fn list(
    ctx: &Context,
    api: &Api<DynamicObject>,
    params: &ListParams,
) -> Result<Vec<Value>, kube::Error> {
    let url = api.resource_url();
    let found = retried(ctx, || {
        hawser_status::tolerant::list(&ctx.client, url, params)
    })
    .await?;
    Ok(readable(found))
}

/// The objects that were read; each one that was not is named in a warning (not its text).
fn readable(
    (read, unreadable): (Vec<Value>, Vec<hawser_status::tolerant::Unreadable>),
) -> Vec<Value> {
    for u in unreadable {
        tracing::warn!(object = %u.id(), error = %u.error, "an object cannot be read; left out");
    }
    read
}

/// Every object of `api` as a `DynamicObject`, each read on its own as [`list`] reads them, in
/// one request: the controllers that call this look again on their next pass, and a LIST that
/// fails shows in `/readyz` at once.
pub(crate) async fn list_once(
    ctx: &Context,
    api: &Api<DynamicObject>,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let found =
        hawser_status::tolerant::list(&ctx.client, api.resource_url(), &ListParams::default())
            .await?;
    Ok(readable(found)
        .into_iter()
        .filter_map(|object| serde_json::from_value(object).ok())
        .collect())
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

/// A JSON merge patch of `name`, tried once: for writes that the next pass makes again (a
/// location's status and its `spec.default` fix, the backup queue's positions), so that an API that does not answer does
/// not hold the pass. Include `metadata.resourceVersion` for a precondition.
pub(crate) async fn merge_patch_once(
    api: &Api<DynamicObject>,
    name: &str,
    patch: &Value,
) -> Result<(), kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
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
pub(crate) use hawser_core::json::text;

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use hawser_core::backoff::Backoff;
    use kube::core::Status;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn answer(code: u16, retry_after_seconds: u32) -> kube::Error {
        let status: Status = serde_json::from_value(json!({
            "code": code,
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": retry_after_seconds}
        }))
        .unwrap();
        kube::Error::Api(status.boxed())
    }

    /// Runs `retry_until` over `answers` (then success) with a 10 ms backoff cap; the number
    /// of calls, the time taken and the result.
    async fn run(
        answers: Vec<kube::Error>,
        budget: Duration,
        shutdown: &CancellationToken,
    ) -> (usize, Duration, Result<(), kube::Error>) {
        let answers = std::cell::RefCell::new(answers.into_iter());
        let calls = Cell::new(0);
        let start = Instant::now();
        let policy = DeadlinePolicy {
            backoff: Backoff::with_max(Duration::from_millis(10)),
            timeout: budget,
            request_timeout: budget,
            min_request_timeout: Duration::ZERO,
        };
        let result = retry_until(&policy, shutdown, || {
            calls.set(calls.get() + 1);
            let next = answers.borrow_mut().next();
            async move { next.map_or(Ok(()), Err) }
        })
        .await;
        (calls.get(), start.elapsed(), result)
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_an_answer_asks_for_is_kept_and_the_deadline_is_not_passed() {
        let never = CancellationToken::new();
        let (calls, took, result) = run(
            vec![answer(429, 3), answer(429, 3)],
            Duration::from_secs(60),
            &never,
        )
        .await;
        assert!(result.is_ok());
        assert_eq!(calls, 3);
        assert!(took >= Duration::from_secs(6), "{took:?}");
        // A wait that would end after the deadline is not waited: the error comes back.
        let (calls, took, result) =
            run(vec![answer(503, 30)], Duration::from_secs(10), &never).await;
        assert_eq!((calls, took), (1, Duration::ZERO));
        assert!(matches!(result, Err(kube::Error::Api(s)) if s.code == 503));
        // A permanent answer is not retried.
        let (calls, _, result) = run(vec![answer(404, 0)], Duration::from_secs(10), &never).await;
        assert_eq!(calls, 1);
        assert!(result.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_term_stops_the_wait() {
        let shutdown = CancellationToken::new();
        let ending = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            ending.cancel();
        });
        let (calls, took, result) = run(
            vec![answer(429, 20), answer(429, 20)],
            Duration::from_secs(60),
            &shutdown,
        )
        .await;
        assert_eq!(calls, 1);
        assert_eq!(took, Duration::from_secs(1));
        assert!(result.is_err());
    }
}
