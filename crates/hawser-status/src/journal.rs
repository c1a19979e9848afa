//! What this instance stored and still owes, for people watching the server (the status page):
//! the phases each object's status went through here with the time each was stored, and the
//! statuses the re-driver holds. Bounded: the newest [`MAX_OBJECTS`] objects, each with its
//! last [`MAX_CHANGES`] phases. Nothing here decides anything; the truth is in the objects and
//! the records.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use jiff::Timestamp;

use super::kind::ObjectKey;

/// Objects whose phases are kept; the one stored to longest ago is forgotten first.
pub const MAX_OBJECTS: usize = 1000;
/// Phases kept per object (the first one is kept with the newest ones).
pub const MAX_CHANGES: usize = 32;

/// A phase stored for an object, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseChange {
    /// The phase written.
    pub phase: String,
    /// When it was stored.
    pub at: Timestamp,
}

/// A status the re-driver holds: written by the work, not yet stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingStatus {
    /// The object.
    pub key: ObjectKey,
    /// The phase it is to store.
    pub phase: String,
    /// When the re-driver took it over.
    pub since: Timestamp,
}

#[derive(Default)]
pub(crate) struct Journal {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    changes: HashMap<ObjectKey, Vec<PhaseChange>>,
    /// Objects from the one stored to longest ago to the latest.
    order: VecDeque<ObjectKey>,
}

impl Journal {
    /// `phase` was stored for `key` at `at`; a repeat of the last phase is not a change.
    pub(crate) fn record(&self, key: &ObjectKey, phase: &str, at: Timestamp) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { changes, order } = &mut *state;
        if let Some(position) = order.iter().position(|k| k == key) {
            order.remove(position);
        }
        order.push_back(key.clone());
        while order.len() > MAX_OBJECTS {
            if let Some(oldest) = order.pop_front() {
                changes.remove(&oldest);
            }
        }
        let list = changes.entry(key.clone()).or_default();
        if list.last().is_some_and(|last| last.phase == phase) {
            return;
        }
        if list.len() == MAX_CHANGES {
            list.remove(1);
        }
        list.push(PhaseChange {
            phase: phase.to_owned(),
            at,
        });
    }

    /// The phases stored for `key`, oldest first.
    pub(crate) fn of(&self, key: &ObjectKey) -> Vec<PhaseChange> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.changes.get(key).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use crate::Kind;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn phases_are_kept_in_order_without_repeats() {
        let journal = Journal::default();
        let key = ObjectKey::new(Kind::Backup, "velero", "b");
        for (second, phase) in [(1, "InProgress"), (2, "InProgress"), (3, "Completed")] {
            journal.record(&key, phase, at(second));
        }
        let phases: Vec<(String, Timestamp)> = journal
            .of(&key)
            .into_iter()
            .map(|c| (c.phase, c.at))
            .collect();
        assert_eq!(
            phases,
            [
                ("InProgress".to_owned(), at(1)),
                ("Completed".to_owned(), at(3))
            ]
        );
        assert!(
            journal
                .of(&ObjectKey::new(Kind::Restore, "velero", "b"))
                .is_empty()
        );
    }

    #[test]
    fn the_first_phase_and_the_newest_ones_are_kept_and_old_objects_forgotten() {
        let journal = Journal::default();
        let key = ObjectKey::new(Kind::Restore, "velero", "r");
        for i in 0..(MAX_CHANGES + 5) {
            journal.record(&key, &format!("P{i}"), at(i64::try_from(i).unwrap()));
        }
        let kept = journal.of(&key);
        assert_eq!(kept.len(), MAX_CHANGES);
        assert_eq!(kept[0].phase, "P0");
        assert_eq!(kept[MAX_CHANGES - 1].phase, format!("P{}", MAX_CHANGES + 4));

        for i in 0..MAX_OBJECTS {
            journal.record(
                &ObjectKey::new(Kind::Backup, "velero", format!("b{i}")),
                "New",
                at(0),
            );
        }
        assert!(
            journal.of(&key).is_empty(),
            "the oldest object is forgotten"
        );
        assert_eq!(
            journal
                .of(&ObjectKey::new(Kind::Backup, "velero", "b0"))
                .len(),
            1
        );
    }
}
