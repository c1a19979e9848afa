//! The demo's timeline: what happened to which object, and when, since the demo started.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube_sim::SimStore;
use tokio::task::JoinHandle;

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Time since the demo started.
    pub at: Duration,
    /// The object or component, e.g. `Backup velero/demo-backup`.
    pub object: String,
    /// Its phase or what happened to it.
    pub phase: String,
}

/// A shared, append-only list of [`Entry`]s.
#[derive(Debug, Clone)]
pub struct Timeline {
    start: Instant,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<Entry>,
    /// The last phase recorded per object, so that each change is recorded once.
    last: HashMap<String, String>,
}

impl Timeline {
    /// A timeline starting now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            inner: Arc::default(),
        }
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Appends an entry stamped now; returns its time.
    pub fn record(&self, object: impl Into<String>, phase: impl Into<String>) -> Duration {
        let at = self.elapsed();
        self.push(Entry {
            at,
            object: object.into(),
            phase: phase.into(),
        });
        at
    }

    /// Appends an entry stamped `at` (what a log recorded happened then).
    pub fn record_at(&self, at: Duration, object: impl Into<String>, phase: impl Into<String>) {
        self.push(Entry {
            at,
            object: object.into(),
            phase: phase.into(),
        });
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a recorder panicked; the entries are still valid.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, entry: Entry) {
        self.lock().entries.push(entry);
    }

    /// Records that `object` is in `phase`, unless that is already its last recorded phase.
    pub fn observe(&self, object: &str, phase: &str) {
        let at = self.elapsed();
        let mut inner = self.lock();
        if inner.last.get(object).map(String::as_str) == Some(phase) {
            return;
        }
        inner.last.insert(object.to_owned(), phase.to_owned());
        inner.entries.push(Entry {
            at,
            object: object.to_owned(),
            phase: phase.to_owned(),
        });
    }

    /// The entries in time order.
    pub fn entries(&self) -> Vec<Entry> {
        let mut entries = self.lock().entries.clone();
        entries.sort_by_key(|e| e.at);
        entries
    }

    /// Records every change of `status.phase` of the velero.io object `kind namespace/name`,
    /// read from the simulator's store every 10 ms, until the returned task is aborted.
    pub fn follow_phase(
        &self,
        store: SimStore,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> JoinHandle<()> {
        let timeline = self.clone();
        let namespace = namespace.to_owned();
        let name = name.to_owned();
        let label = object_label(kind, &namespace, &name);
        tokio::spawn(async move {
            loop {
                if let Some(object) = store.get("velero.io/v1", kind, &namespace, &name) {
                    timeline.observe(&label, phase_label(&object));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    }
}

impl Default for Timeline {
    fn default() -> Self {
        Self::new()
    }
}

/// `status.phase` of an object.
pub fn phase_of(object: &serde_json::Value) -> Option<&str> {
    Some(hawser_api::phase_str(object)).filter(|p| !p.is_empty())
}

/// The phase shown for an object: `status.phase`, or that it has none yet.
pub fn phase_label(object: &serde_json::Value) -> &str {
    phase_of(object).unwrap_or("created (no phase yet)")
}

/// The label of the velero.io object `kind namespace/name` on the timeline.
pub fn object_label(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind} {namespace}/{name}")
}

/// The timeline as a table: time since start, object, phase.
pub fn render(entries: &[Entry]) -> String {
    let width = entries
        .iter()
        .map(|e| e.object.chars().count())
        .max()
        .unwrap_or(0)
        .max("OBJECT".len());
    let mut out = format!("  {:>8}  {:<width$}  PHASE\n", "TIME", "OBJECT");
    for e in entries {
        out.push_str(&format!(
            "  {:>7.2}s  {:<width$}  {}\n",
            e.at.as_secs_f64(),
            e.object,
            e.phase
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_columns_and_shows_seconds_since_start() {
        let entries = [
            Entry {
                at: Duration::from_millis(120),
                object: "Backup velero/b".to_owned(),
                phase: "InProgress".to_owned(),
            },
            Entry {
                at: Duration::from_millis(4_567),
                object: "kube-sim API".to_owned(),
                phase: "refusing connections".to_owned(),
            },
        ];
        assert_eq!(
            render(&entries),
            "      TIME  OBJECT           PHASE\n\
             \x20    0.12s  Backup velero/b  InProgress\n\
             \x20    4.57s  kube-sim API     refusing connections\n"
        );
    }

    #[test]
    fn observe_records_each_change_of_phase_once() {
        let timeline = Timeline::new();
        for phase in ["New", "InProgress", "InProgress", "Completed", "Completed"] {
            timeline.observe("Backup velero/b", phase);
        }
        timeline.observe("Restore velero/r", "InProgress");
        let seen: Vec<(String, String)> = timeline
            .entries()
            .into_iter()
            .map(|e| (e.object, e.phase))
            .collect();
        let want = [
            ("Backup velero/b", "New"),
            ("Backup velero/b", "InProgress"),
            ("Backup velero/b", "Completed"),
            ("Restore velero/r", "InProgress"),
        ];
        assert_eq!(
            seen,
            want.map(|(o, p)| (o.to_owned(), p.to_owned())).to_vec()
        );
    }

    #[test]
    fn entries_come_back_in_time_order() {
        let timeline = Timeline::new();
        timeline.push(Entry {
            at: Duration::from_secs(2),
            object: "x".to_owned(),
            phase: "Completed".to_owned(),
        });
        timeline.push(Entry {
            at: Duration::from_secs(1),
            object: "x".to_owned(),
            phase: "InProgress".to_owned(),
        });
        let phases: Vec<String> = timeline.entries().into_iter().map(|e| e.phase).collect();
        assert_eq!(phases, ["InProgress", "Completed"]);
    }
}
