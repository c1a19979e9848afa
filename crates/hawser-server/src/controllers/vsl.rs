//! VolumeSnapshotLocations: hawser has no volume snapshotter plugins, so no location can take or
//! restore a snapshot. Each location is looked at once per spec: fetch (LIST) → assess (pure,
//! [`assess`]) → report: a warning in the log and a Warning Event `VolumeSnapshotsUnsupported`
//! on the location, saying what that means for backups that name it.
//!
//! `status.phase` is left alone, as Velero leaves it: Velero's CRD declares
//! `Available`/`Unavailable` but no Velero controller writes it, and tools reading it see the
//! same as with Velero.
//!
//! The list does not gate `/readyz`, and a cluster whose CRDs predate VolumeSnapshotLocations
//! (the LIST answers 404) is simply looked at again on the next tick.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

use super::periodic::{self, Pass};
use crate::context::Context;
use crate::objects::{self, velero_api};
use crate::readiness::Watch;

/// Longest time between two looks at the locations (`--status-resync-period` when shorter).
const TICK: Duration = Duration::from_secs(30);
/// Longest an Event may take to publish; it is a courtesy, never a reason to wait.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Reason of the Warning Event on each location.
pub(crate) const REASON: &str = "VolumeSnapshotsUnsupported";

/// What a location means in hawser, in words for people.
pub(crate) fn assess(spec: &Value) -> String {
    let provider = spec
        .get("provider")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let what = match provider {
        Some(provider) => format!("provider {provider:?} is a volume snapshotter plugin"),
        None => "spec.provider is empty (it must name a volume snapshotter plugin)".to_owned(),
    };
    format!(
        "{what}, and hawser runs no plugins: no volume is snapshotted or restored through this \
         location. Backups that name it store the cluster's resources without volume snapshots; \
         back up volume data by other means, or delete the location"
    )
}

/// Runs until the term ends.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "VolumeSnapshotLocation", "volumesnapshotlocations");
    let recorder = Recorder::new(
        ctx.client.clone(),
        Reporter {
            controller: "hawser".to_owned(),
            instance: Some(ctx.engine.instance_id().to_owned()),
        },
    );
    let locations = Locations {
        api,
        recorder,
        reported: HashMap::new(),
    };
    periodic::run(ctx, locations, health).await;
}

struct Locations {
    api: Api<DynamicObject>,
    recorder: Recorder,
    /// The spec each location had when it was last reported.
    reported: HashMap<String, Value>,
}

impl Pass for Locations {
    const LISTS: &'static str = "volume snapshot locations";

    type Listed = Vec<DynamicObject>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<DynamicObject>, kube::Error> {
        objects::list_once(ctx, &self.api).await
    }

    async fn handle(&mut self, ctx: &Context, locations: Vec<DynamicObject>) -> Duration {
        // A location deleted and created again is reported again.
        self.reported.retain(|name, _| {
            locations
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name))
        });
        for object in locations {
            report(ctx, &self.recorder, &mut self.reported, object).await;
        }
        self.retry_after(ctx)
    }

    fn retry_after(&self, ctx: &Context) -> Duration {
        ctx.settings.status.resync_period.min(TICK)
    }
}

async fn report(
    ctx: &Context,
    recorder: &Recorder,
    reported: &mut HashMap<String, Value>,
    object: DynamicObject,
) {
    let Some(name) = object.metadata.name.clone() else {
        return;
    };
    let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
    if reported.get(&name) == Some(&spec) {
        return;
    }
    let message = assess(&spec);
    tracing::warn!(
        namespace = %ctx.namespace,
        volume_snapshot_location = %name,
        "VolumeSnapshotLocation cannot be used: {message}"
    );
    let event = Event {
        type_: EventType::Warning,
        reason: REASON.to_owned(),
        note: Some(message),
        action: "Validate".to_owned(),
        secondary: None,
    };
    let regarding = ObjectReference {
        api_version: Some("velero.io/v1".to_owned()),
        kind: Some("VolumeSnapshotLocation".to_owned()),
        name: Some(name.clone()),
        namespace: Some(ctx.namespace.clone()),
        uid: object.metadata.uid.clone(),
        resource_version: object.metadata.resource_version.clone(),
        field_path: None,
    };
    match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&event, &regarding)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "could not publish the Event"),
        Err(_) => tracing::debug!("publishing the Event timed out"),
    }
    reported.insert(name, spec);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_message_names_the_provider_and_what_backups_get() {
        let message = assess(&json!({"provider": "aws", "config": {"region": "eu-west-1"}}));
        assert!(message.starts_with("provider \"aws\" is a volume snapshotter plugin"));
        assert!(message.contains("without volume snapshots"), "{message}");
        for spec in [json!({}), json!({"provider": ""}), Value::Null] {
            let message = assess(&spec);
            assert!(
                message.starts_with("spec.provider is empty"),
                "{spec}: {message}"
            );
        }
    }
}
