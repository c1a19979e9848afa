//! [`StatusUpdate`]: what a worker (or recovery) wants stored on a Backup/Restore.

use hawser_api::StatusPatch;
use hawser_api::phase::{BackupPhase, Phase, RestorePhase};
use serde_json::{Map, Value};

use super::kind::ObjectKey;

/// The object as the caller last saw it. With it the first attempt needs no GET: the write
/// carries `metadata.resourceVersion` as a precondition, so a stale view yields 409 and a re-read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `metadata.resourceVersion` of the object the caller read.
    pub resource_version: String,
    /// `status.phase` of that object.
    pub phase: Phase,
}

/// A status delta for one Backup/Restore: the target phase plus any other `status` fields, sent
/// as a JSON merge patch (`null` removes a field). Built with the chainable methods.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct StatusUpdate {
    pub(crate) key: ObjectKey,
    pub(crate) phase: Phase,
    pub(crate) status: Map<String, Value>,
    pub(crate) claim: bool,
    pub(crate) observed: Option<Observed>,
    pub(crate) uid: Option<String>,
    pub(crate) spec: Map<String, Value>,
    pub(crate) labels: Map<String, Value>,
    pub(crate) annotations: Map<String, Value>,
    pub(crate) restores_record: bool,
    pub(crate) takes_over: bool,
    pub(crate) decided: bool,
}

impl StatusUpdate {
    /// Move the object `namespace/name` of the phase's kind to `phase`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, phase: Phase) -> Self {
        let key = ObjectKey::new(phase.kind(), namespace, name);
        Self::for_key(key, phase)
    }

    /// Move `key` to `phase`, a phase of the key's kind.
    pub(crate) fn for_key(key: ObjectKey, phase: Phase) -> Self {
        debug_assert_eq!(key.kind, phase.kind(), "a status update names its own kind");
        let mut status = Map::new();
        status.insert("phase".to_owned(), Value::String(phase.as_str().to_owned()));
        Self {
            key,
            phase,
            status,
            claim: false,
            observed: None,
            uid: None,
            spec: Map::new(),
            labels: Map::new(),
            annotations: Map::new(),
            restores_record: false,
            takes_over: false,
            decided: false,
        }
    }

    /// The same update, moving to `phase` (of the same kind) instead.
    pub fn with_phase(mut self, phase: Phase) -> Self {
        debug_assert_eq!(
            self.key.kind,
            phase.kind(),
            "a status update names its own kind"
        );
        self.status
            .insert("phase".to_owned(), Value::String(phase.as_str().to_owned()));
        self.phase = phase;
        self
    }

    /// Move a Backup to `phase`.
    pub fn backup(
        namespace: impl Into<String>,
        name: impl Into<String>,
        phase: BackupPhase,
    ) -> Self {
        Self::new(namespace, name, Phase::Backup(phase))
    }

    /// Move a Restore to `phase`.
    pub fn restore(
        namespace: impl Into<String>,
        name: impl Into<String>,
        phase: RestorePhase,
    ) -> Self {
        Self::new(namespace, name, Phase::Restore(phase))
    }

    /// Also set the fields `status` sets (a typed delta of this update's kind, or the fields
    /// both kinds share); its `None` fields are left as they are.
    pub fn status<S: StatusPatch>(self, status: &S) -> Self {
        debug_assert!(
            S::KIND.is_none_or(|kind| kind == self.key.kind),
            "a status update names its own kind"
        );
        match serde_json::to_value(status) {
            Ok(Value::Object(fields)) => self.fields(fields),
            // The status types serialise to objects: nothing else can come out.
            _ => self,
        }
    }

    /// Also set every field of `fields`, a status as it was stored (a record's, written back
    /// as it is); a `phase` key is ignored: the phase is fixed at creation.
    pub fn fields(mut self, fields: Map<String, Value>) -> Self {
        for (k, v) in fields {
            if k != "phase" {
                self.status.insert(k, v);
            }
        }
        self
    }

    /// Write hawser's owner annotation naming this server instance together with the status
    /// (used when entering `InProgress`; see the module docs for how it is written).
    pub fn claim(mut self) -> Self {
        self.claim = true;
        self
    }

    /// A [`claim`](Self::claim) of work another instance started and recovery found orphaned
    /// (its owner's Lease not alive): it may claim an object that is not waiting. Only with
    /// [`observed`](Self::observed), so that it lands on the object as recovery saw it.
    pub fn take_over(mut self) -> Self {
        self.claim = true;
        self.takes_over = true;
        self
    }

    /// Only for the object with this `metadata.uid`: a re-read that finds another object of the
    /// same name (deleted and created again) ends the write as gone, so a status never lands
    /// on an object it was not computed for.
    pub fn for_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into()).filter(|u: &String| !u.is_empty());
        self
    }

    /// The final outcome recorded for this very object (its uid, see [`for_uid`](Self::for_uid),
    /// which this needs) in the storage location: it may be written over a waiting phase,
    /// which the transition table otherwise forbids. A waiting object with a record of its own
    /// is one whose status a client removed after the work had ended (Velero's CRDs have no
    /// status subresource, so replacing the whole object drops it); the record is the truth.
    pub fn restoring_record(mut self) -> Self {
        self.restores_record = true;
        self.decided = true;
        self
    }

    /// This status is what the record stored in the storage location (or the cluster) says:
    /// writing it is right from any server instance, whoever leads (the uid precondition and
    /// the transition table keep it on this object and forward). A server that steps down
    /// keeps landing such statuses and drops the others ([`StatusEngine::step_down`]).
    ///
    /// [`StatusEngine::step_down`]: super::StatusEngine::step_down
    pub fn decided_by_record(mut self) -> Self {
        self.decided = true;
        self
    }

    /// Also set `spec.<field>` in the claim's write of the main resource (what the work was
    /// resolved to, e.g. the storage location, so that recovery does not depend on defaults
    /// that may change). Only written with [`claim`](Self::claim).
    pub fn spec_field(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.spec.insert(field.to_owned(), value.into());
        self
    }

    /// Also set the label `key` in the claim's write (see [`spec_field`](Self::spec_field)).
    pub fn label(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.labels.insert(key.to_owned(), value.into());
        self
    }

    /// Also set the annotation `key` in the claim's write (see [`spec_field`](Self::spec_field)).
    pub fn annotation(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.annotations.insert(key.to_owned(), value.into());
        self
    }

    /// The caller's view of the object (skips the initial GET).
    pub fn observed(
        mut self,
        resource_version: impl Into<String>,
        phase: impl Into<Phase>,
    ) -> Self {
        self.observed = Some(Observed {
            resource_version: resource_version.into(),
            phase: phase.into(),
        });
        self
    }

    /// Which object.
    #[must_use]
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The target phase.
    #[must_use]
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The status delta (including `phase`).
    #[must_use]
    pub fn delta(&self) -> &Map<String, Value> {
        &self.status
    }

    /// Whether the target phase is final (such a status is handed to the re-driver at the
    /// deadline instead of being given up).
    #[must_use]
    pub fn is_final(&self) -> bool {
        self.phase.is_final()
    }
}

/// True when every field of `delta` already has that value in `status` (a `null` in the delta
/// means "absent"). Used to recognise a write that landed although its answer was lost.
pub(crate) fn status_contains(status: Option<&Value>, delta: &Map<String, Value>) -> bool {
    let empty = Map::new();
    let stored = status.and_then(Value::as_object).unwrap_or(&empty);
    delta.iter().all(|(k, v)| match (stored.get(k), v) {
        (None, Value::Null) => true,
        (Some(s), v) => merged_equals(s, v),
        (None, _) => false,
    })
}

/// Whether merging `patch` into `stored` would leave `stored` unchanged.
fn merged_equals(stored: &Value, patch: &Value) -> bool {
    match (stored, patch) {
        (Value::Object(s), Value::Object(p)) => p.iter().all(|(k, v)| match (s.get(k), v) {
            (None, Value::Null) => true,
            (Some(sv), pv) => merged_equals(sv, pv),
            (None, _) => false,
        }),
        (s, p) => s == p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;
    use hawser_api::BackupStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn delta(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn a_landed_delta_is_recognised_and_a_missing_one_is_not() {
        let stored = json!({"phase": "Failed", "failureReason": "x", "progress": {"totalItems": 3, "itemsBackedUp": 3}});
        let table = [
            (json!({"phase": "Failed"}), true),
            (json!({"phase": "Failed", "failureReason": "x"}), true),
            (json!({"phase": "Failed", "failureReason": "y"}), false),
            (json!({"phase": "Completed"}), false),
            (json!({"progress": {"totalItems": 3}}), true),
            (json!({"progress": {"totalItems": 4}}), false),
            (json!({"errors": null}), true),
            (json!({"phase": null}), false),
            (json!({"warnings": 1}), false),
        ];
        for (d, want) in table {
            assert_eq!(
                status_contains(Some(&stored), &delta(d.clone())),
                want,
                "{d}"
            );
        }
        assert!(!status_contains(None, &delta(json!({"phase": "Failed"}))));
    }

    #[test]
    fn builders_keep_the_phase_fixed() {
        let u = StatusUpdate::backup("velero", "b1", BackupPhase::Completed)
            .status(&BackupStatus {
                phase: BackupPhase::InProgress,
                completion_timestamp: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..BackupStatus::default()
            })
            .fields(
                json!({"phase": "Failed"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
        assert_eq!(u.phase(), &Phase::Backup(BackupPhase::Completed));
        assert_eq!(u.delta().get("phase"), Some(&json!("Completed")));
        assert_eq!(
            u.delta().get("completionTimestamp"),
            Some(&json!("1970-01-01T00:00:00Z"))
        );
        assert_eq!(u.delta().len(), 2, "{:?}", u.delta());
        assert!(u.is_final());
        assert_eq!(u.key().kind, Kind::Backup);
    }
}
