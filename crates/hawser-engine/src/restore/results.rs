//! What a restore reports: warnings and errors per target namespace, cluster and server (the
//! results file), the restored-resource list, progress on a watch channel, and the restore's
//! own log.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use hawser_api::{RestoreProgress, count};
use hawser_core::archive::gzjson::{ResourceList, ResultMessages, Results};
use tokio::sync::watch;

/// A snapshot of a restore's progress (`status.progress`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Items handled so far (created, updated, skipped as unchanged, or failed).
    pub items_restored: u64,
    /// Items to restore: the archived items that pass the filters and skip rules, plus the
    /// namespaces created on the way.
    pub total_items: u64,
    /// Every item is restored and the restore waits for its exec hooks (Velero's
    /// `Finalizing`).
    pub finalizing: bool,
}

impl Progress {
    /// As the Restore's `status.progress` says it.
    #[must_use]
    pub fn status(&self) -> RestoreProgress {
        RestoreProgress {
            total_items: Some(count(self.total_items)),
            items_restored: Some(count(self.items_restored)),
        }
    }
}

pub(crate) use hawser_core::archive::gzjson::Scope;
use hawser_core::errors::{MAX_MESSAGE_BYTES, printable};

/// How one item ended, as the restored-resource list writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemResult {
    Created,
    Updated,
    Skipped,
    Failed,
}

impl ItemResult {
    fn suffix(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    warnings: ResultMessages,
    errors: ResultMessages,
    restored: ResourceList,
    log: String,
    /// The claims and VolumeSnapshots created: (kind, namespace, name).
    created_volumes: BTreeSet<(String, String, String)>,
}

/// The kinds [`Report::was_created`] answers for.
const VOLUME_KINDS: [&str; 2] = ["PersistentVolumeClaim", "VolumeSnapshot"];

/// Shared by the concurrent item tasks of a restore; cheap to clone.
#[derive(Clone)]
pub(crate) struct Report {
    restore: Arc<str>,
    clock: hawser_core::clock::Clock,
    state: Arc<Mutex<State>>,
    progress: Option<watch::Sender<Progress>>,
}

impl Report {
    pub(crate) fn new(
        restore: String,
        clock: hawser_core::clock::Clock,
        progress: Option<watch::Sender<Progress>>,
    ) -> Self {
        Self {
            restore: restore.into(),
            clock,
            state: Arc::default(),
            progress,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A panic while holding the lock leaves plain data behind; keep using it.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    /// Appends one logfmt line to the restore's log (and to the process log).
    pub(crate) fn line(&self, level: &str, message: &str) {
        let now = self.clock.now();
        // Messages carry archive paths and object fields: untrusted, of any length.
        let message = printable(message, MAX_MESSAGE_BYTES);
        let escaped = message
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let text = format!(
            "time=\"{}\" level={level} msg=\"{escaped}\" restore={}\n",
            now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            self.restore
        );
        self.with(|s| s.log.push_str(&text));
        match level {
            "error" => tracing::error!(restore = %self.restore, "{message}"),
            "warning" => tracing::warn!(restore = %self.restore, "{message}"),
            _ => tracing::info!(restore = %self.restore, "{message}"),
        }
    }

    pub(crate) fn info(&self, message: &str) {
        self.line("info", message);
    }

    pub(crate) fn warn(&self, scope: Scope, message: String) {
        let message = printable(&message, MAX_MESSAGE_BYTES);
        self.line("warning", &message);
        self.with(|s| s.warnings.push(&scope, message));
    }

    pub(crate) fn error(&self, scope: Scope, message: String) {
        let message = printable(&message, MAX_MESSAGE_BYTES);
        self.line("error", &message);
        self.with(|s| s.errors.push(&scope, message));
    }

    /// Records how an item ended and counts it as handled.
    pub(crate) fn item(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        result: ItemResult,
    ) {
        let name = printable(name, MAX_MESSAGE_BYTES);
        let namespace = namespace.map(|ns| printable(ns, MAX_MESSAGE_BYTES));
        let entry = format!("{name}({})", result.suffix());
        self.with(|s| {
            s.restored
                .add(api_version, kind, namespace.as_deref(), &entry);
            if result == ItemResult::Created && VOLUME_KINDS.contains(&kind) {
                let ns = namespace.clone().unwrap_or_default();
                s.created_volumes
                    .insert((kind.to_owned(), ns, name.clone()));
            }
        });
        if let Some(p) = &self.progress {
            p.send_modify(|p| {
                p.items_restored += 1;
                p.total_items = p.total_items.max(p.items_restored);
            });
        }
    }

    /// Whether this restore created the PersistentVolumeClaim or VolumeSnapshot (`kind`)
    /// `namespace/name`.
    pub(crate) fn was_created(&self, kind: &str, namespace: &str, name: &str) -> bool {
        let key = (kind.to_owned(), namespace.to_owned(), name.to_owned());
        self.with(|s| s.created_volumes.contains(&key))
    }

    /// `n` more items are to be restored.
    pub(crate) fn add_total(&self, n: u64) {
        if let Some(p) = &self.progress {
            p.send_modify(|p| p.total_items += n);
        }
    }

    /// Every item is restored; the exec hooks are waited for now.
    pub(crate) fn finalizing(&self) {
        if let Some(p) = &self.progress {
            p.send_modify(|p| p.finalizing = true);
        }
    }

    /// The final numbers: the total is what was handled.
    pub(crate) fn finish_progress(&self) -> u64 {
        let handled = self.with(|s| s.restored.len() as u64);
        if let Some(p) = &self.progress {
            p.send_modify(|p| {
                p.items_restored = handled;
                p.total_items = handled;
            });
        }
        handled
    }

    pub(crate) fn error_count(&self) -> usize {
        self.with(|s| s.errors.count())
    }

    /// The results, the restored-resource list and the log text, taken out of the report.
    pub(crate) fn take(&self) -> (Results, ResourceList, String) {
        self.with(|s| {
            let results = Results {
                errors: std::mem::take(&mut s.errors),
                warnings: std::mem::take(&mut s.warnings),
            };
            (
                results,
                std::mem::take(&mut s.restored),
                std::mem::take(&mut s.log),
            )
        })
    }
}
