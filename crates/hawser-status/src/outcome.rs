//! The outcome of finished work as recorded outside the cluster ([`RecordedOutcome`]), and where
//! recovery reads it from ([`RecordSource`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use serde_json::{Map, Value};

use super::kind::{Kind, ObjectKey};

/// The outcome recorded in the storage location for one Backup/Restore: its final status.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedOutcome {
    /// The final phase.
    pub phase: String,
    /// Other status fields to restore (e.g. `completionTimestamp`, `progress`, `errors`).
    pub status: Map<String, Value>,
}

impl RecordedOutcome {
    /// A recorded outcome with only a phase.
    #[must_use]
    pub fn phase(phase: impl Into<String>) -> Self {
        Self {
            phase: phase.into(),
            status: Map::new(),
        }
    }

    /// Add a status field.
    #[must_use]
    pub fn with(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.status.insert(field.to_owned(), value.into());
        self
    }
}

/// Reading a record failed.
#[derive(Debug, thiserror::Error)]
#[error("could not read the outcome record of {key}")]
pub struct RecordError {
    /// Which object.
    pub key: ObjectKey,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl RecordError {
    /// A stable short category.
    #[must_use]
    pub fn category(&self) -> &'static str {
        "RecordUnreadable"
    }
}

/// Where the outcome of finished work is recorded (the storage location; an in-memory one for
/// tests and `hawser dev`).
pub trait RecordSource: Send + Sync {
    /// The recorded final outcome of the object, `None` when there is no record.
    fn outcome(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<RecordedOutcome>, RecordError>> + Send;
}

/// An in-memory [`RecordSource`].
#[derive(Debug, Default)]
pub struct MemoryRecords {
    records: Mutex<HashMap<ObjectKey, RecordedOutcome>>,
}

impl MemoryRecords {
    /// Record `outcome` for `key`.
    pub fn insert(&self, key: ObjectKey, outcome: RecordedOutcome) {
        if let Ok(mut r) = self.records.lock() {
            r.insert(key, outcome);
        }
    }
}

impl RecordSource for MemoryRecords {
    async fn outcome(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<RecordedOutcome>, RecordError> {
        let key = ObjectKey::new(kind, namespace, name);
        Ok(self.records.lock().ok().and_then(|r| r.get(&key).cloned()))
    }
}
