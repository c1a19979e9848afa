//! The queue of server-side work that verbs hand to the background controllers (see
//! `controller`): namespaces and CRDs to drain, deleting objects whose GC finalizers to clear,
//! CRDs to establish after an injected delay.
//! A leaf: the verbs push, the controller takes, neither imports the other for this.

use std::collections::HashSet;
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

/// A pending server-side task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    Namespace(String),
    Crd(String),
    /// (storage, namespace, name) of a deleting object carrying GC finalizers.
    Object(String, String, String),
    /// A CRD whose establishment a `delay-established` fault holds back until `at` (`uid` tells
    /// it from a later CRD of the same name; `with_names`: accept its names then too).
    Establish {
        crd: String,
        uid: String,
        at: Instant,
        with_names: bool,
    },
}

impl Work {
    /// When the task can be done, if not at once.
    pub fn due(&self) -> Option<Instant> {
        match self {
            Work::Establish { at, .. } => Some(*at),
            Work::Namespace(_) | Work::Crd(_) | Work::Object(..) => None,
        }
    }
}

/// The queue of pending tasks.
#[derive(Debug, Default)]
pub struct WorkQueue {
    items: Mutex<HashSet<Work>>,
    notify: Notify,
}

impl WorkQueue {
    pub fn push(&self, w: Work) {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(w);
        self.notify.notify_one();
    }

    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Drains the pending tasks (the controller's side).
    pub fn take(&self) -> Vec<Work> {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
            .collect()
    }

    /// Resolves on the next [`push`](Self::push) or [`wake`](Self::wake) (the controller's side).
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }
}
