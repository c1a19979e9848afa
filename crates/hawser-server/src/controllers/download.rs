//! The DownloadRequest controller: a time-limited URL of one file of a backup or restore
//! (velero-compat §1.6, §2.4), what `hawser backup logs`/`download` and `velero` use.
//!
//! Every second the requests are listed ([`requests`]); for each:
//! 1. **Triage** (pure, [`triage`]): `status.expiration` past → deleted on the next sweep (every
//!    minute, as Velero's periodic check); expiration set and not past, or a phase other than
//!    `""`/`New` → nothing to do.
//! 2. **Target** (pure): the kind and name of `spec.target`.
//! 3. **Fetch**: for the `Restore*` kinds the Restore, for its `spec.backupName`; the Backup; its
//!    storage location, opened.
//! 4. **Sign**: the key of the kind in the layout ([`Layout::download_key`]) → the location's
//!    download URL, good for 10 minutes ([`hawser_store::Location::download_url`]).
//! 5. **Record**: `phase: Processed`, `downloadURL`, `expiration` = now + 10 min.
//!
//! A missing Restore, Backup or location (or one that cannot be opened) is Velero's answer:
//! logged, not retried; only `expiration` is written, so the request stays `New` and is deleted
//! once it has expired. An API that cannot answer leaves the request for the next pass.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::phase::DownloadRequestPhase;
use hawser_core::layout::{DownloadTargetKind, Layout};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::requests::{self, Handler};
use crate::context::{Context, backup_location_name};
use crate::locations::LocationError;
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// How long a URL (and the request) lives: Velero's `DownloadURLTTL`.
const URL_TTL: Duration = Duration::from_secs(10 * 60);

/// How often expired requests are looked for.
const SWEEP: Duration = Duration::from_secs(60);

/// Runs until the server shuts down; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "DownloadRequest", "downloadrequests");
    requests::run(ctx, api, Downloads, SWEEP, health).await;
}

/// What a pass does with one request.
#[derive(Debug, PartialEq, Eq)]
enum Triage {
    /// Its time is over: delete it (on a sweep).
    Expired,
    /// Answered already (or refused and waiting to expire).
    Done,
    /// To be answered.
    New,
}

fn triage(request: &Value, now: Timestamp) -> Triage {
    let expiration = text(request, "/status/expiration")
        .parse::<Timestamp>()
        .ok();
    match (expiration, DownloadRequestPhase::of(request)) {
        (Some(at), _) if at < now => Triage::Expired,
        (Some(_), _) => Triage::Done,
        (None, DownloadRequestPhase::New) => Triage::New,
        (None, _) => Triage::Done,
    }
}

/// The kind and name of `spec.target`.
fn target(request: &Value) -> Result<(DownloadTargetKind, &str), String> {
    let kind = text(request, "/spec/target/kind");
    let kind = DownloadTargetKind::parse(kind)
        .ok_or_else(|| format!("spec.target.kind {kind:?} is not a download kind"))?;
    let name = text(request, "/spec/target/name");
    if name.is_empty() {
        return Err("spec.target.name is empty".to_owned());
    }
    Ok((kind, name))
}

/// Why no URL was made.
enum Failure {
    /// For good (Velero: logged, not requeued).
    Refused(String),
    /// The API could not answer; the next pass tries again.
    Later(String),
}

struct Downloads;

impl Handler for Downloads {
    const LISTS: &'static str = "download requests";

    async fn handle(
        &self,
        ctx: &Context,
        api: &kube::Api<DynamicObject>,
        request: &Value,
        sweep: bool,
    ) {
        let name = text(request, "/metadata/name");
        let now = ctx.clock.now();
        match triage(request, now) {
            Triage::Expired if sweep => {
                match objects::delete(ctx, api, name).await {
                    Ok(()) => tracing::debug!(request = name, "expired download request deleted"),
                    Err(e) => {
                        tracing::debug!(request = name, error = %e, "deleting an expired download request failed")
                    }
                }
                return;
            }
            Triage::Expired | Triage::Done => return,
            Triage::New => {}
        }
        let expiration =
            Time(now + SignedDuration::try_from(URL_TTL).unwrap_or(SignedDuration::MAX));
        let status = match url_for(ctx, request).await {
            Ok(url) => {
                tracing::info!(request = name, "download URL signed");
                json!({"phase": DownloadRequestPhase::Processed, "downloadURL": url, "expiration": expiration})
            }
            Err(Failure::Later(why)) => {
                tracing::debug!(request = name, reason = %why, "download request waits for the API");
                return;
            }
            Err(Failure::Refused(why)) => {
                tracing::error!(request = name, reason = %why, "download request not answered");
                json!({"expiration": expiration})
            }
        };
        if let Err(e) = objects::merge_patch(ctx, api, name, &json!({"status": status})).await {
            tracing::warn!(request = name, error = %e, "recording the download request's answer failed; the next pass tries again");
        }
    }
}

/// Steps 2–4 of the module docs.
async fn url_for(ctx: &Context, request: &Value) -> Result<String, Failure> {
    let (kind, name) = target(request).map_err(Failure::Refused)?;
    let backups = velero_api(ctx, "Backup", "backups");
    let backup_name = if kind.is_restore_kind() {
        let restores = velero_api(ctx, "Restore", "restores");
        let restore = found(objects::get(ctx, &restores, name).await, "restore", name)?;
        text(&restore, "/spec/backupName").to_owned()
    } else {
        name.to_owned()
    };
    let backup = found(
        objects::get(ctx, &backups, &backup_name).await,
        "backup",
        &backup_name,
    )?;
    let location_name = backup_location_name(&backup, &ctx.settings.backup.default_location);
    let location = match ctx.locations.open_named(&location_name).await {
        Ok(location) => location,
        Err(e @ LocationError::Api { .. }) => return Err(Failure::Later(e.full_message())),
        Err(e) => return Err(Failure::Refused(e.full_message())),
    };
    let key = Layout::new(None).download_key(kind, name);
    location
        .download_url(&key, URL_TTL)
        .await
        .map_err(|e| Failure::Refused(format!("signing a URL of {key}: {}", e.full_message())))
}

fn found(
    got: Result<Option<Value>, kube::Error>,
    kind: &str,
    name: &str,
) -> Result<Value, Failure> {
    match got {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(Failure::Refused(format!("{kind} {name} not found"))),
        Err(e) => Err(Failure::Later(format!("reading {kind} {name}: {e}"))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    const NOW: &str = "2025-01-01T12:00:00Z";

    fn request(status: Value) -> Value {
        json!({
            "metadata": {"name": "b1-x"},
            "spec": {"target": {"kind": "BackupLog", "name": "b1"}},
            "status": status,
        })
    }

    #[test]
    fn triage_of_every_state() {
        let now: Timestamp = NOW.parse().unwrap();
        assert_eq!(triage(&request(json!({})), now), Triage::New);
        assert_eq!(triage(&request(json!({"phase": "New"})), now), Triage::New);
        assert_eq!(triage(&request(Value::Null), now), Triage::New);
        let later = json!({"phase": "Processed", "expiration": "2025-01-01T12:05:00Z"});
        assert_eq!(triage(&request(later), now), Triage::Done);
        let past = json!({"phase": "Processed", "expiration": "2025-01-01T11:59:59Z"});
        assert_eq!(triage(&request(past), now), Triage::Expired);
        // Refused earlier: New with an expiration; not tried again, deleted once expired.
        let refused = json!({"expiration": "2025-01-01T12:05:00Z"});
        assert_eq!(triage(&request(refused), now), Triage::Done);
        let refused_past = json!({"phase": "New", "expiration": "2025-01-01T11:00:00Z"});
        assert_eq!(triage(&request(refused_past), now), Triage::Expired);
        assert_eq!(
            triage(&request(json!({"phase": "Other"})), now),
            Triage::Done
        );
    }

    #[test]
    fn targets() {
        let r = request(Value::Null);
        let (kind, name) = target(&r).unwrap();
        assert_eq!((kind, name), (DownloadTargetKind::BackupLog, "b1"));
        let bad = json!({"spec": {"target": {"kind": "Everything", "name": "b1"}}});
        assert!(target(&bad).is_err());
        let unnamed = json!({"spec": {"target": {"kind": "RestoreLog", "name": ""}}});
        assert!(target(&unnamed).is_err());
        // Every API kind maps to a layout kind.
        for kind in DownloadTargetKind::ALL {
            let r = json!({"spec": {"target": {"kind": kind.as_str(), "name": "x"}}});
            assert_eq!(target(&r).unwrap().0, kind);
        }
    }
}
