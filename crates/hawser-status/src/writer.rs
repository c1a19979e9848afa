//! One attempt at storing a [`StatusUpdate`]: read if needed → check the transition (pure) →
//! merge-patch with a `resourceVersion` precondition → verify.
//!
//! Where the status goes: discovery of `/apis/velero.io/v1` tells, per kind, whether
//! `<plural>/status` exists (cached; re-checked when the answer contradicts it). Velero's CRDs have
//! no status subresource, so by default the status is part of a merge patch of the main resource —
//! and then the owner annotation travels in the *same* patch, atomically with `InProgress`. When
//! the subresource is enabled, the main resource ignores `.status` and `/status` ignores
//! metadata, so a claiming write is two patches: first the annotation on the main resource, then
//! the status on `/status` (each with the resourceVersion the previous one returned). An object
//! left between the two (annotation, old phase) is harmless: recovery only resolves objects whose
//! phase says the work had started.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hawser_api::phase::Phase;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::api::StatusApi;
use super::error::{AttemptError, Class};
use super::kind::Kind;
use super::update::{StatusUpdate, status_contains};

/// What an attempt achieved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// The status was stored by this attempt; the object as the server returned it.
    Landed(Value),
    /// The object already carried the status (an earlier attempt's answer was lost, or another
    /// writer stored the same thing).
    AlreadyLanded(Value),
    /// The object is in a phase that may not move to the target: drop the update.
    Stale {
        /// The phase found.
        current: Phase,
    },
}

/// State carried from one attempt to the next for the same update.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttemptState {
    /// resourceVersion to send as precondition, and the phase the object had at it.
    known: Option<(String, Phase)>,
    /// The owner annotation is already on the object (subresource mode, first half done).
    claimed: bool,
    /// The last object seen (for Event references).
    pub(crate) last_object: Option<Value>,
}

impl AttemptState {
    pub(crate) fn from_update(u: &StatusUpdate) -> Self {
        Self {
            known: u
                .observed
                .as_ref()
                .map(|o| (o.resource_version.clone(), o.phase.clone())),
            claimed: false,
            last_object: None,
        }
    }
}

/// Writes statuses; shared by the reconcile path, the re-driver and recovery.
pub(crate) struct Writer {
    api: StatusApi,
    instance_id: String,
    owner_annotation: &'static str,
    subresource: Mutex<HashMap<Kind, bool>>,
    /// One discovery request at a time: many writes starting together (e.g. after an outage)
    /// share its answer instead of each asking.
    discovering: tokio::sync::Mutex<()>,
}

fn uid_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn rv_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Time left until `end`, never zero (a zero timeout would fail at once).
fn left(end: Instant) -> Duration {
    end.saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

impl Writer {
    pub(crate) fn new(api: StatusApi, instance_id: String, owner_annotation: &'static str) -> Self {
        Self {
            api,
            instance_id,
            owner_annotation,
            subresource: Mutex::new(HashMap::new()),
            discovering: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn api(&self) -> &StatusApi {
        &self.api
    }

    pub(crate) fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn cached_subresource(&self, kind: Kind) -> Option<bool> {
        self.subresource
            .lock()
            .ok()
            .and_then(|m| m.get(&kind).copied())
    }

    fn forget_subresource(&self, kind: Kind) {
        if let Ok(mut m) = self.subresource.lock() {
            m.remove(&kind);
        }
    }

    async fn status_subresource(&self, kind: Kind, end: Instant) -> Result<bool, AttemptError> {
        if let Some(v) = self.cached_subresource(kind) {
            return Ok(v);
        }
        let _one_at_a_time = tokio::time::timeout(left(end), self.discovering.lock())
            .await
            .map_err(|_| AttemptError::TimedOut(left(end)))?;
        if let Some(v) = self.cached_subresource(kind) {
            return Ok(v);
        }
        let v = self.api.has_status_subresource(kind, left(end)).await?;
        if let Ok(mut m) = self.subresource.lock() {
            m.insert(kind, v);
        }
        tracing::debug!(
            kind = kind.label(),
            status_subresource = v,
            "discovered where status is written"
        );
        Ok(v)
    }

    /// One attempt, bounded by `timeout` as a whole.
    pub(crate) async fn attempt(
        &self,
        u: &StatusUpdate,
        st: &mut AttemptState,
        timeout: Duration,
    ) -> Result<Step, AttemptError> {
        let end = Instant::now() + timeout;
        let key = &u.key;
        let (rv, current) = match st.known.clone() {
            Some(k) => k,
            None => {
                let obj = self
                    .api
                    .get(key.kind, &key.namespace, &key.name, left(end))
                    .await?;
                if let Some(wanted) = &u.uid
                    && let Some(found) = uid_of(&obj)
                    && *wanted != found
                {
                    return Err(AttemptError::Replaced {
                        wanted: wanted.clone(),
                        found,
                    });
                }
                let current = Phase::of(key.kind, &obj);
                let Some(rv) = rv_of(&obj) else {
                    return Err(AttemptError::Api {
                        code: 500,
                        reason: String::new(),
                        message: "object without metadata.resourceVersion".to_owned(),
                        retry_after: None,
                    });
                };
                let landed = status_contains(obj.get("status"), &u.status)
                    && (!u.claim
                        || (self.is_claimed(&obj) && status_contains(obj.get("spec"), &u.spec)));
                st.claimed = st.claimed || self.is_claimed(&obj);
                st.last_object = Some(obj.clone());
                if landed {
                    return Ok(Step::AlreadyLanded(obj));
                }
                st.known = Some((rv.clone(), current.clone()));
                (rv, current)
            }
        };
        // A claim takes work only from a waiting phase: an object another writer (another
        // server) has started is not taken over, even though writing its phase again would be
        // allowed; unless recovery found that work orphaned and hands it over.
        let taken_elsewhere = u.claim && !current.is_waiting() && !st.claimed && !u.takes_over;
        let record_over_lost_status =
            u.restores_record && u.uid.is_some() && current.is_waiting() && u.phase.is_final();
        if taken_elsewhere || !(current.can_transition_to(&u.phase) || record_over_lost_status) {
            return Ok(Step::Stale { current });
        }
        let result = self.patch(u, st, &rv, end).await;
        match &result {
            // A conflict or a contradiction means our view is stale: read again next time.
            Err(e)
                if matches!(e.class(), Class::Conflict)
                    || matches!(e, AttemptError::NotApplied { .. }) =>
            {
                st.known = None
            }
            Err(_) => {}
            Ok(obj) => {
                st.known = rv_of(obj).map(|rv| (rv, u.phase.clone()));
                st.last_object = Some(obj.clone());
            }
        }
        result.map(Step::Landed)
    }

    fn is_claimed(&self, obj: &Value) -> bool {
        obj.pointer("/metadata/annotations")
            .and_then(|a| a.get(self.owner_annotation))
            .and_then(Value::as_str)
            == Some(self.instance_id.as_str())
    }

    /// The metadata a claim writes: the owner annotation naming this instance, and the
    /// update's own labels and annotations.
    fn claim_metadata(&self, u: &StatusUpdate, rv: &str) -> Value {
        let mut annotations = u.annotations.clone();
        annotations.insert(
            self.owner_annotation.to_owned(),
            Value::String(self.instance_id.clone()),
        );
        let mut metadata = json!({ "resourceVersion": rv, "annotations": annotations });
        if !u.labels.is_empty() {
            metadata["labels"] = Value::Object(u.labels.clone());
        }
        metadata
    }

    async fn patch(
        &self,
        u: &StatusUpdate,
        st: &mut AttemptState,
        rv: &str,
        end: Instant,
    ) -> Result<Value, AttemptError> {
        let key = &u.key;
        let sub = self.status_subresource(key.kind, end).await?;
        let status = Value::Object(u.status.clone());
        let obj = if !sub {
            let mut body = json!({ "metadata": { "resourceVersion": rv }, "status": status });
            if u.claim {
                body["metadata"] = self.claim_metadata(u, rv);
                if !u.spec.is_empty() {
                    body["spec"] = Value::Object(u.spec.clone());
                }
            }
            self.api
                .merge_patch(key.kind, &key.namespace, &key.name, false, &body, left(end))
                .await?
        } else {
            let mut rv = rv.to_owned();
            if u.claim && !st.claimed {
                let mut body = json!({ "metadata": self.claim_metadata(u, &rv) });
                if !u.spec.is_empty() {
                    body["spec"] = Value::Object(u.spec.clone());
                }
                let obj = self
                    .api
                    .merge_patch(key.kind, &key.namespace, &key.name, false, &body, left(end))
                    .await?;
                st.claimed = true;
                if let Some(new_rv) = rv_of(&obj) {
                    rv = new_rv.clone();
                    st.known = Some((new_rv, Phase::of(key.kind, &obj)));
                }
            }
            let body = json!({ "metadata": { "resourceVersion": rv }, "status": status });
            match self
                .api
                .merge_patch(key.kind, &key.namespace, &key.name, true, &body, left(end))
                .await
            {
                Err(e) if e.code() == Some(404) => {
                    // Either the object is gone or `/status` is not served (CRD changed): tell apart.
                    let obj = self
                        .api
                        .get(key.kind, &key.namespace, &key.name, left(end))
                        .await?;
                    self.forget_subresource(key.kind);
                    return Err(AttemptError::NotApplied {
                        stored: Phase::of(key.kind, &obj),
                    });
                }
                r => r?,
            }
        };
        let stored = Phase::of(key.kind, &obj);
        if stored != u.phase {
            // The server accepted the patch but ignored `.status`: the subresource was enabled
            // after discovery. Re-discover on the next attempt.
            self.forget_subresource(key.kind);
            return Err(AttemptError::NotApplied { stored });
        }
        Ok(obj)
    }
}
