//! Maintenance ([`Repository::maintain`]), as kopia's `maintenance run`: quick maintenance is
//! the epoch manager's housekeeping ([`crate::compaction`]); full maintenance adds the garbage
//! collection below, which gives back the space of deleted snapshots with kopia's safety
//! margins, so that kopia and Velero read the repository as before and a backup that ran
//! meanwhile stays restorable. Either takes the repository as a writer ([`crate::session`]):
//! while another writer is live, it is refused.
//!
//! 1. Every content the snapshots use is found: each snapshot's directories, files, links and
//!    indirect lists. A snapshot manifest that does not parse or a listing that cannot be read
//!    stops the collection: what it uses is unknown.
//! 2. An unused content older than [`Safety::content_min_age`] is marked deleted, a used one
//!    marked deleted is brought back (one index blob of new entries, as kopia's snapshot GC
//!    writes them). Manifests (`m`) are never collected here.
//! 3. Deleted entries older than [`Safety::drop_after`] are dropped by a deletion watermark
//!    (`xw<seconds>`): a content marked in an earlier run and still unused in this one (the
//!    two cycles kopia asks for, so that a backup that found a content before it was marked
//!    and names it afterwards is seen by the next run and the content brought back).
//! 4. Short packs are rewritten, as kopia's full maintenance does: where a kind of pack (`p`
//!    file data, `q` the rest) has two or more packs whose index entries (deleted ones too)
//!    add up to less than 60 % of the repository's maximum pack size and whose contents are
//!    all older than [`Safety::rewrite_min_age`], every content of those packs is read,
//!    checked (a damaged one stops the run, never copied) and copied into new packs under
//!    newer entries, deleted ones as deleted (kopia leaves a too-new content where it is and
//!    copies the rest; here such a pack stays whole). A pack that a kept snapshot shares with
//!    a deleted one gives the deleted one's space back this way: once the deleted entries are
//!    dropped the pack is short, and its used contents move.
//! 5. Packs and session markers no index entry names (deleted ones still count) are deleted
//!    when older than [`Safety::blob_min_age`] and not of a session active within
//!    [`Safety::session_expiry`], nor while a content it holds (its own index says which)
//!    moved to another pack less than [`Safety::rewrite_delete_delay`] ago, so that a reader
//!    that loaded the index before a rewrite still finds it.
//! 6. The uncompacted index blobs of compacted epochs are deleted once the compaction is older
//!    than the repository's `CleanupSafetyMargin` (no margin under [`Safety::NONE`]).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use jiff::{SignedDuration, Timestamp};

use crate::KopiaError;
use crate::compaction::{QuickReport, cleanup_margin};
use crate::content::ContentId;
use crate::index::Entry;
use crate::object::ObjectId;
use crate::repo::Repository;
use crate::session::{Lease, session_of, sessions};
use crate::writer::Writer;

/// Blobs deleted at once.
const DELETES: usize = 16;

/// A pack whose entries add up to less than this share of the maximum pack size is short
/// (kopia's threshold).
const SHORT_PACK_PERCENT: u64 = 60;

/// How long maintenance leaves new things alone (kopia's `SafetyParameters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Safety {
    /// A content younger than this is not marked deleted.
    pub content_min_age: Duration,
    /// A deleted entry is dropped from the index when older than this (kopia's margin between
    /// two snapshot GCs plus its extra drop margin).
    pub drop_after: Duration,
    /// A blob younger than this is not deleted.
    pub blob_min_age: Duration,
    /// A session whose marker is younger than this keeps its packs.
    pub session_expiry: Duration,
    /// A content younger than this is not rewritten out of a short pack.
    pub rewrite_min_age: Duration,
    /// A pack a content moved out of (by a rewrite) less than this long ago is not deleted
    /// (kopia's delay between a rewrite and deleting what it orphaned).
    pub rewrite_delete_delay: Duration,
}

impl Safety {
    /// kopia's default (`--safety=full`).
    pub const FULL: Self = Self {
        content_min_age: Duration::from_secs(24 * 3600),
        drop_after: Duration::from_secs(5 * 3600),
        blob_min_age: Duration::from_secs(24 * 3600),
        session_expiry: Duration::from_secs(96 * 3600),
        rewrite_min_age: Duration::from_secs(2 * 3600),
        rewrite_delete_delay: Duration::from_secs(3600),
    };
    /// No margins (`--safety=none`): only when nothing else writes into the repository.
    pub const NONE: Self = Self {
        content_min_age: Duration::ZERO,
        drop_after: Duration::ZERO,
        blob_min_age: Duration::ZERO,
        session_expiry: Duration::ZERO,
        rewrite_min_age: Duration::ZERO,
        rewrite_delete_delay: Duration::ZERO,
    };
}

/// What a collection did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    /// Snapshots walked.
    pub snapshots: usize,
    /// Contents they use.
    pub in_use: usize,
    /// Contents marked deleted now.
    pub marked: usize,
    /// Deleted contents brought back because a snapshot uses them.
    pub undeleted: usize,
    /// Unused contents left because they are too new.
    pub too_recent: usize,
    /// The deletion watermark written, when one was.
    pub watermark: Option<Timestamp>,
    /// Contents copied out of short packs.
    pub rewritten: usize,
    /// Short packs left because they hold contents too new to rewrite.
    pub short_packs_kept: usize,
    /// Blobs deleted.
    pub blobs_deleted: usize,
    /// Their bytes.
    pub bytes_deleted: u64,
    /// Unreferenced blobs left because they are too new or of an active session.
    pub blobs_kept: usize,
}

/// What [`Repository::maintain`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Quick maintenance.
    pub quick: QuickReport,
    /// The garbage collection, when full.
    pub gc: Option<GcReport>,
    /// Uncompacted index blobs deleted, their epochs compacted long enough ago.
    pub superseded_deleted: usize,
}

impl std::fmt::Display for MaintenanceReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.quick.advanced_to {
            Some(e) => writeln!(f, "Write epoch advanced to {e}.")?,
            None => writeln!(f, "Write epoch unchanged.")?,
        }
        writeln!(f, "Epochs compacted: {:?}.", self.quick.compacted)?;
        if let Some((first, last)) = self.quick.range {
            writeln!(f, "Range checkpoint written for epochs {first} to {last}.")?;
        }
        let Some(gc) = &self.gc else {
            return writeln!(
                f,
                "Quick maintenance done (no garbage collection without --full)."
            );
        };
        writeln!(
            f,
            "Snapshots: {}; contents in use: {}; marked deleted: {}; brought back: {}; too recent to collect: {}.",
            gc.snapshots, gc.in_use, gc.marked, gc.undeleted, gc.too_recent
        )?;
        if let Some(w) = gc.watermark {
            writeln!(f, "Deleted contents up to {w} dropped from the index.")?;
        }
        writeln!(
            f,
            "Contents rewritten out of short packs: {}; short packs left for contents too new: {}.",
            gc.rewritten, gc.short_packs_kept
        )?;
        writeln!(
            f,
            "Blobs deleted: {} ({} bytes); unreferenced but kept (too new or of an active session): {}; superseded index blobs deleted: {}.",
            gc.blobs_deleted, gc.bytes_deleted, gc.blobs_kept, self.superseded_deleted
        )
    }
}

/// How long before `now` `then` was; nothing for a time after `now` (a clock ahead).
fn age(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// How long before `now` an index entry was written.
fn entry_age(now: Timestamp, entry: &Entry) -> Duration {
    age(now, Timestamp::from_second(entry.timestamp).unwrap_or(now))
}

impl Repository {
    /// Runs quick maintenance, and with `full` the garbage collection, as described in the
    /// module docs.
    ///
    /// # Errors
    /// [`KopiaError::Busy`] while another writer is live; the errors of reading the
    /// snapshots (nothing is marked then) and of writing.
    pub async fn maintain(
        &mut self,
        full: bool,
        safety: &Safety,
    ) -> Result<MaintenanceReport, KopiaError> {
        let mut lease = Lease::acquire(self).await?;
        let result = async {
            // What was written since the repository was opened (here or by another writer,
            // a failed write's packs among it) is in the index before anything is judged
            // unused.
            self.load_index().await?;
            let quick = self.quick_under().await?;
            let mut report = MaintenanceReport {
                quick,
                ..MaintenanceReport::default()
            };
            if full {
                report.quick.range = self.range_under().await?;
                report.gc = Some(self.collect_under(&mut lease, safety).await?);
                let margin =
                    cleanup_margin(&self.config().epoch_parameters, *safety == Safety::NONE);
                report.superseded_deleted = self.delete_superseded(margin).await?;
            }
            Ok(report)
        }
        .await;
        lease.release(self).await;
        result
    }

    async fn collect_under(
        &mut self,
        lease: &mut Lease,
        safety: &Safety,
    ) -> Result<GcReport, KopiaError> {
        let start = Timestamp::now();
        let mut report = GcReport::default();
        let snapshots = self.snapshots_strict().await?;
        report.snapshots = snapshots.len();
        let (mut in_use, mut walked) = (HashSet::new(), HashSet::new());
        for snapshot in &snapshots {
            let root = &snapshot.root;
            self.contents_of(lease, &root.obj, root.kind == "d", &mut in_use, &mut walked)
                .await?;
        }
        report.in_use = in_use.len();

        let mut changes: Vec<Entry> = Vec::new();
        for entry in self.index.values() {
            if entry.id.prefix() == Some('m') {
                continue;
            }
            let used = in_use.contains(&entry.id);
            // In use and live, or unused and deleted already: nothing to change.
            if used != entry.deleted {
                continue;
            }
            if !used && entry_age(start, entry) < safety.content_min_age {
                report.too_recent += 1;
                continue;
            }
            // Newer than the entry it overrides, even one written this second.
            let timestamp = start.as_second().max(entry.timestamp + 1);
            changes.push(Entry {
                deleted: !used,
                timestamp,
                ..entry.clone()
            });
            if used {
                report.undeleted += 1;
            } else {
                report.marked += 1;
            }
        }
        if !changes.is_empty() {
            self.put_index_blob(&changes, &lease.info.id).await?;
            self.index
                .absorb(crate::merged::Index::from_entries(changes));
        }

        let drop_before = start - SignedDuration::try_from(safety.drop_after).unwrap_or_default();
        let cut = drop_before.as_second();
        if self.index.values().any(|e| e.deleted && e.timestamp <= cut) {
            self.blobs
                .put(
                    &format!("xw{cut}"),
                    bytes::Bytes::from_static(b"deletion-watermark"),
                )
                .await?;
            self.index.retain(|e| !(e.deleted && e.timestamp <= cut));
            report.watermark = Some(drop_before);
        }

        self.rewrite_short_packs(lease, safety, start, &mut report)
            .await?;
        self.delete_unreferenced(lease, safety, start, &mut report)
            .await?;
        tracing::info!(?report, "kopia repository garbage collected");
        Ok(report)
    }

    /// Step 4 of the module docs.
    async fn rewrite_short_packs(
        &mut self,
        lease: &mut Lease,
        safety: &Safety,
        start: Timestamp,
        report: &mut GcReport,
    ) -> Result<(), KopiaError> {
        let threshold = self.config().pack_size() * SHORT_PACK_PERCENT / 100;
        let mut packs: BTreeMap<&str, (u64, Vec<&Entry>)> = BTreeMap::new();
        for entry in self.index.values() {
            let pack = packs.entry(&entry.pack).or_default();
            pack.0 += u64::from(entry.packed_length);
            pack.1.push(entry);
        }
        let mut short: BTreeMap<char, Vec<&Vec<&Entry>>> = BTreeMap::new();
        for (id, (total, entries)) in &packs {
            if *total < threshold
                && let Some(kind) = id.chars().next()
            {
                short.entry(kind).or_default().push(entries);
            }
        }
        let mut copy: Vec<Entry> = Vec::new();
        for packs in short.into_values() {
            // A pack is rewritten whole or not at all: one with a content too new stays.
            let (old, new): (Vec<_>, Vec<_>) = packs.into_iter().partition(|entries| {
                entries
                    .iter()
                    .all(|e| entry_age(start, e) >= safety.rewrite_min_age)
            });
            report.short_packs_kept += new.len();
            // One short pack of a kind is left: rewriting it would give one short pack again.
            if old.len() > 1 {
                copy.extend(old.into_iter().flatten().map(|e| (*e).clone()));
            }
        }
        if copy.is_empty() {
            return Ok(());
        }
        let mut writer = Writer::new(self, lease);
        for entry in &copy {
            let copied = async {
                let sealed = self.read_sealed(entry).await?;
                // Checked before it is copied: damage is named, not spread.
                self.cipher
                    .decrypt(entry.id.iv(), &sealed, &format!("content {}", entry.id))?;
                writer.rewrite(entry, &sealed).await
            }
            .await;
            if let Err(e) = copied {
                return Err(writer.abandon(e).await);
            }
        }
        let stored = writer.commit().await?;
        report.rewritten = stored.len();
        self.index.absorb(stored);
        Ok(())
    }

    /// Whether a content of unreferenced pack `id` has moved to another pack within
    /// [`Safety::rewrite_delete_delay`] (its winning entry is that new): a reader that loaded
    /// the index before the move still reads it there. A pack whose own index cannot be read
    /// counts as moved lately: kept, and said so.
    async fn rewritten_lately(
        &self,
        id: &str,
        size: u64,
        start: Timestamp,
        safety: &Safety,
    ) -> bool {
        match self.pack_contents(id, size).await {
            Ok(contents) => contents.iter().any(|c| {
                self.index
                    .get(c)
                    .is_some_and(|e| entry_age(start, e) < safety.rewrite_delete_delay)
            }),
            Err(error) => {
                tracing::warn!(pack = id, %error, "an unreferenced pack whose index cannot be read is kept");
                true
            }
        }
    }

    /// Step 5 of the module docs.
    async fn delete_unreferenced(
        &self,
        lease: &mut Lease,
        safety: &Safety,
        start: Timestamp,
        report: &mut GcReport,
    ) -> Result<(), KopiaError> {
        let listing = self.blobs.list_meta().await?;
        let seen = sessions(self, &listing).await?;
        let referenced: HashSet<&str> = self.index.values().map(|e| &*e.pack).collect();
        let cutoff = start + SignedDuration::from_secs(1);
        let mut doomed = Vec::new();
        for blob in &listing {
            if !matches!(blob.id.chars().next(), Some('p' | 'q' | 's'))
                || referenced.contains(blob.id.as_str())
            {
                continue;
            }
            let session = session_of(&blob.id);
            let active = session.is_some_and(|s| {
                s == lease.info.id
                    || seen
                        .get(s)
                        .and_then(|s| s.info.as_ref())
                        .is_some_and(|i| age(cutoff, i.checkpoint_time) < safety.session_expiry)
            });
            if blob.modified > cutoff || age(cutoff, blob.modified) < safety.blob_min_age || active
            {
                report.blobs_kept += 1;
                continue;
            }
            doomed.push((blob.id.clone(), blob.size));
        }
        if !safety.rewrite_delete_delay.is_zero() {
            let mut left = Vec::with_capacity(doomed.len());
            for (id, size) in doomed {
                lease.keep(self).await?;
                if id.starts_with('s') || !self.rewritten_lately(&id, size, start, safety).await {
                    left.push((id, size));
                } else {
                    report.blobs_kept += 1;
                }
            }
            doomed = left;
        }
        lease.keep(self).await?;
        let mut deletes = futures::stream::iter(doomed)
            .map(|(id, size)| async move { self.blobs.delete(&id).await.map(|()| size) })
            .buffer_unordered(DELETES);
        while let Some(size) = deletes.try_next().await? {
            lease.keep(self).await?;
            report.blobs_deleted += 1;
            report.bytes_deleted += size;
        }
        Ok(())
    }

    /// Adds every content object `obj` uses to `used`: a directory's listing and, through
    /// it, its entries; a file's or link's contents and indirect lists.
    async fn contents_of(
        &self,
        lease: &mut Lease,
        obj: &str,
        is_dir: bool,
        used: &mut HashSet<ContentId>,
        walked: &mut HashSet<String>,
    ) -> Result<(), KopiaError> {
        let mut pending = vec![(obj.to_owned(), is_dir)];
        while let Some((obj, is_dir)) = pending.pop() {
            // A long walk keeps the repository (its marker refreshed as a writer's is).
            lease.keep(self).await?;
            // The same object is the same listing or file below it: walked once.
            if !walked.insert(obj.clone()) {
                continue;
            }
            let id = ObjectId::parse(&obj)?;
            // A large listing is an indirect object too (`Ik…`): its pieces are in use.
            used.extend(self.object_contents(&id).await?);
            if is_dir {
                for entry in self.directory(&obj).await? {
                    pending.push((entry.obj, entry.kind == "d"));
                }
            }
        }
        Ok(())
    }
}
