//! The ServerStatusRequest controller: what `hawser version` and `velero version` ask the
//! server (velero-compat §1.7, §2.4).
//!
//! Every second the requests are listed ([`requests`]): one `""`/`New` is answered at
//! once — `phase: Processed`, `serverVersion` (hawser's version), `processedTimestamp` and
//! `plugins` (the built-in object-store providers, named as Velero's plugins are:
//! `velero.io/aws`, kind `ObjectStore`). A processed one is deleted once its
//! `processedTimestamp` is a minute old, looked for every 5 minutes as Velero does.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::PluginInfo;
use hawser_api::phase::ServerStatusRequestPhase;
use hawser_store::Provider;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::requests::{self, Handler};
use crate::context::Context;
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// How long an answered request is kept.
const KEEP: SignedDuration = SignedDuration::from_secs(60);

/// How often answered requests are looked at for deletion.
const SWEEP: Duration = Duration::from_secs(5 * 60);

/// The version the server reports: `v` and the crate version, as Velero's `v1.14.0`.
pub(crate) fn server_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

/// The plugins the server reports: one `ObjectStore` per built-in provider.
pub(crate) fn plugins() -> Vec<PluginInfo> {
    Provider::ALL
        .into_iter()
        .map(|p| PluginInfo {
            name: p.plugin_name(),
            kind: "ObjectStore".to_owned(),
        })
        .collect()
}

/// Runs until the server shuts down; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "ServerStatusRequest", "serverstatusrequests");
    requests::run(ctx, api, Statuses, SWEEP, health).await;
}

/// What a pass does with one request.
#[derive(Debug, PartialEq, Eq)]
enum Triage {
    Answer,
    Delete,
    Keep,
}

fn triage(request: &Value, now: Timestamp) -> Triage {
    match ServerStatusRequestPhase::of(request) {
        ServerStatusRequestPhase::New => Triage::Answer,
        ServerStatusRequestPhase::Processed => {
            let processed = text(request, "/status/processedTimestamp")
                .parse::<Timestamp>()
                .ok();
            // One without a timestamp was not answered by a server; it goes too.
            match processed {
                Some(at) if now.duration_since(at) < KEEP => Triage::Keep,
                _ => Triage::Delete,
            }
        }
        _ => Triage::Keep,
    }
}

struct Statuses;

impl Handler for Statuses {
    const LISTS: &'static str = "server status requests";

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
            Triage::Answer => {
                let status = json!({"status": {
                    "phase": ServerStatusRequestPhase::Processed,
                    "serverVersion": server_version(),
                    "processedTimestamp": Time(now),
                    "plugins": plugins(),
                }});
                if let Err(e) = objects::merge_patch(ctx, api, name, &status).await {
                    tracing::warn!(request = name, error = %e, "answering a server status request failed; the next pass tries again");
                }
            }
            Triage::Delete if sweep => {
                if let Err(e) = objects::delete(ctx, api, name).await {
                    tracing::debug!(request = name, error = %e, "deleting an old server status request failed");
                }
            }
            Triage::Delete | Triage::Keep => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn triage_of_every_state() {
        let now: Timestamp = "2025-01-01T12:00:00Z".parse().unwrap();
        let r = |status: Value| json!({"metadata": {"name": "velero-cli-x"}, "status": status});
        assert_eq!(triage(&r(Value::Null), now), Triage::Answer);
        assert_eq!(triage(&r(json!({"phase": "New"})), now), Triage::Answer);
        let fresh = json!({"phase": "Processed", "processedTimestamp": "2025-01-01T11:59:01Z"});
        assert_eq!(triage(&r(fresh), now), Triage::Keep);
        let old = json!({"phase": "Processed", "processedTimestamp": "2025-01-01T11:59:00Z"});
        assert_eq!(triage(&r(old), now), Triage::Delete);
        assert_eq!(
            triage(&r(json!({"phase": "Processed"})), now),
            Triage::Delete
        );
    }

    #[test]
    fn plugins_are_named_as_velero_names_them() {
        let names: Vec<String> = plugins().into_iter().map(|p| p.name).collect();
        assert!(names.contains(&"velero.io/aws".to_owned()), "{names:?}");
        assert!(names.contains(&"velero.io/azure".to_owned()));
        assert!(names.contains(&"velero.io/gcp".to_owned()));
        assert!(plugins().iter().all(|p| p.kind == "ObjectStore"));
        assert!(server_version().starts_with('v'));
    }
}
