//! Kubernetes Events on Backups/Restores about their status writes (events.k8s.io/v1 through
//! kube-runtime's `Recorder`). Publishing is best effort: one attempt, failures logged at debug —
//! an Event is a courtesy to the user, never a reason to hold a worker.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

use super::kind::ObjectKey;

/// Reasons of the Events the engine emits (stable strings).
pub mod reasons {
    /// Normal: a status landed after more than one attempt.
    pub const STATUS_LANDED_AFTER_RETRIES: &str = "StatusStoredAfterRetries";
    /// Warning: the API server refused a status write permanently.
    pub const STATUS_WRITE_REJECTED: &str = "StatusWriteRejected";
    /// Normal: an orphaned object was resolved at start-up or resync.
    pub const RECOVERED: &str = "StatusRecovered";
    /// Warning: an orphaned object waits, because its outcome record cannot be read yet.
    pub const RECOVERY_WAITING: &str = "RecoveryWaiting";
}

#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
    timeout: Duration,
}

fn reference(key: &ObjectKey, obj: Option<&Value>) -> ObjectReference {
    let ar = key.kind.api_resource();
    let meta = |p: &str| {
        obj.and_then(|o| o.pointer(p))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    ObjectReference {
        api_version: Some(ar.api_version),
        kind: Some(ar.kind),
        name: Some(key.name.clone()),
        namespace: Some(key.namespace.clone()),
        uid: meta("/metadata/uid"),
        resource_version: meta("/metadata/resourceVersion"),
        field_path: None,
    }
}

impl Events {
    pub(crate) fn new(client: kube::Client, instance_id: &str, timeout: Duration) -> Self {
        let reporter = Reporter {
            controller: "hawser".to_owned(),
            instance: Some(instance_id.to_owned()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            timeout,
        }
    }

    pub(crate) async fn publish(
        &self,
        key: &ObjectKey,
        obj: Option<&Value>,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: "UpdateStatus".to_owned(),
            secondary: None,
        };
        let r = reference(key, obj);
        match tokio::time::timeout(self.timeout, self.recorder.publish(&ev, &r)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(object = %key, reason, error = %e, "could not publish Event")
            }
            Err(_) => tracing::debug!(object = %key, reason, "publishing Event timed out"),
        }
    }
}
