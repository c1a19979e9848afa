//! Progress of a running backup: items backed up and an estimate of the total, published on a
//! watch channel after every page.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use hawser_api::{BackupProgress, count};
use tokio::sync::watch;

/// A snapshot of a backup's progress (`status.progress`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Items written to the archive so far.
    pub items_backed_up: u64,
    /// Estimated number of items in the backup: items selected so far plus the items the API
    /// server says remain in the LISTs in progress (counted before selection, so it may
    /// overestimate until those LISTs end).
    pub total_items: u64,
}

impl Progress {
    /// As the Backup's `status.progress` says it.
    #[must_use]
    pub fn status(&self) -> BackupProgress {
        BackupProgress {
            total_items: Some(count(self.total_items)),
            items_backed_up: Some(count(self.items_backed_up)),
        }
    }
}

/// Shared by the listing tasks and the archive task; cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProgressHandle {
    sender: Option<watch::Sender<Progress>>,
    selected: Arc<AtomicU64>,
    remaining: Arc<AtomicI64>,
}

impl ProgressHandle {
    pub(crate) fn new(sender: Option<watch::Sender<Progress>>) -> Self {
        Self {
            sender,
            selected: Arc::default(),
            remaining: Arc::default(),
        }
    }

    /// A page of a LIST was selected: `selected` items go to the archive, and the LIST's
    /// `remainingItemCount` changed by `remaining_delta`.
    pub(crate) fn page_listed(&self, selected: u64, remaining_delta: i64) {
        let selected = self.selected.fetch_add(selected, Ordering::Relaxed) + selected;
        let remaining =
            self.remaining.fetch_add(remaining_delta, Ordering::Relaxed) + remaining_delta;
        let total = selected.saturating_add(u64::try_from(remaining).unwrap_or(0));
        if let Some(sender) = &self.sender {
            sender.send_modify(|p| p.total_items = total.max(p.items_backed_up));
        }
    }

    /// Items were written to the archive.
    pub(crate) fn items_written(&self, written: u64) {
        if let Some(sender) = &self.sender {
            sender.send_modify(|p| {
                p.items_backed_up += written;
                p.total_items = p.total_items.max(p.items_backed_up);
            });
        }
    }

    /// The final numbers: the total is what was backed up (as Velero reports it).
    pub(crate) fn finish(&self, items_backed_up: u64) {
        if let Some(sender) = &self.sender {
            sender.send_modify(|p| {
                p.items_backed_up = items_backed_up;
                p.total_items = items_backed_up;
            });
        }
    }
}
