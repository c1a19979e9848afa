//! Quick maintenance: the epoch manager's housekeeping, as kopia's maintenance does it.
//!
//! - **Advance** (`advance-epoch`): the write epoch ends (marker `xe<W+1>`) once its index
//!   blobs span the repository's `MinEpochDuration` and are `EpochAdvanceOnCountThreshold`
//!   many or `EpochAdvanceOnTotalSizeBytesThreshold` large.
//! - **Compact** (`compact-single-epoch`): a settled epoch (two behind the write epoch, so no
//!   writer adds to it any more) without a complete compaction gets one: its index blobs merged
//!   into one `xs<E>_<hash>-s<set>-c1`, every content's winning entry kept (deleted ones too:
//!   dropping one could bring back an older entry of another epoch).
//! - **Range checkpoint** (`generate-epoch-range-index`, full maintenance): once the settled
//!   epochs from the one after the last range checkpoint (or epoch 0) are more than
//!   `FullCheckpointFrequency` (eight under kopia's 7),
//!   the index of those epochs (each one's complete compaction, else its uncompacted blobs) is
//!   merged into one `xr<first>_<last>_<hash>-s<set>-c1`, which readers then take for them all.
//! - **Clean up** (`delete-superseded-epoch-indexes`, full maintenance): the `xn<E>_` blobs of
//!   an epoch whose compaction was stored `CleanupSafetyMargin` ago are deleted; a reader that
//!   listed before the compaction still finds the blobs it listed.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::SignedDuration;

use crate::KopiaError;
use crate::blobs::BlobMeta;
use crate::epoch::{first_complete, select};
use crate::repo::{EpochParameters, Repository};

/// What quick maintenance did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QuickReport {
    /// The epoch it advanced to, if it did.
    pub advanced_to: Option<u64>,
    /// Epochs it compacted.
    pub compacted: Vec<u64>,
    /// The epochs (first, last) of the range checkpoint full maintenance wrote, if it did.
    pub range: Option<(u64, u64)>,
}

/// The epoch of an index blob of `kind` (`xn`, `xs`).
fn epoch_of(id: &str, kind: &str) -> Option<u64> {
    id.strip_prefix(kind)?.split('_').next()?.parse().ok()
}

/// kopia's rule for ending the write epoch, over its index blobs.
pub(crate) fn should_advance(blobs: &[&BlobMeta], params: &EpochParameters) -> bool {
    let (Some(first), Some(last)) = (
        blobs.iter().map(|b| b.modified).min(),
        blobs.iter().map(|b| b.modified).max(),
    ) else {
        return false;
    };
    let span = last.duration_since(first);
    if span < SignedDuration::from_nanos(params.min_epoch_duration) {
        return false;
    }
    blobs.len() >= params.epoch_advance_on_count_threshold
        || blobs.iter().map(|b| b.size).sum::<u64>()
            >= params.epoch_advance_on_total_size_bytes_threshold
}

/// The complete single-epoch compaction sets in `listing`, by epoch.
fn compactions(listing: &[BlobMeta]) -> BTreeMap<u64, Vec<&BlobMeta>> {
    let mut by_epoch: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for blob in listing {
        if let Some(e) = epoch_of(&blob.id, "xs") {
            by_epoch.entry(e).or_default().push(&blob.id);
        }
    }
    by_epoch
        .into_iter()
        .filter_map(|(e, ids)| {
            let set = first_complete(&ids)?;
            Some((
                e,
                listing
                    .iter()
                    .filter(|b| set.contains(&b.id.as_str()))
                    .collect(),
            ))
        })
        .collect()
}

/// The uncompacted index blobs in `listing`, by epoch.
fn uncompacted(listing: &[BlobMeta]) -> BTreeMap<u64, Vec<&BlobMeta>> {
    let mut by_epoch: BTreeMap<u64, Vec<&BlobMeta>> = BTreeMap::new();
    for blob in listing {
        if let Some(e) = epoch_of(&blob.id, "xn") {
            by_epoch.entry(e).or_default().push(blob);
        }
    }
    by_epoch
}

impl Repository {
    /// Compacts the settled epochs and advances the write epoch (see the module docs).
    pub(crate) async fn quick_under(&mut self) -> Result<QuickReport, KopiaError> {
        let listing = self.blobs.list_meta().await?;
        let ids: Vec<String> = listing.iter().map(|b| b.id.clone()).collect();
        let set = select(&ids)?;
        let w = set.write_epoch;
        let done = compactions(&listing);
        let mut report = QuickReport::default();
        for (epoch, blobs) in uncompacted(&listing) {
            let covered = set.ranges_end.is_some_and(|end| epoch <= end);
            if covered || epoch.saturating_add(2) > w || done.contains_key(&epoch) {
                continue;
            }
            let ids: Vec<String> = blobs.iter().map(|b| b.id.clone()).collect();
            self.compact_into(&ids, &format!("xs{epoch}_")).await?;
            report.compacted.push(epoch);
        }
        let current: Vec<&BlobMeta> = listing
            .iter()
            .filter(|b| epoch_of(&b.id, "xn") == Some(w))
            .collect();
        if should_advance(&current, &self.config().epoch_parameters) {
            let next = w + 1;
            self.blobs
                .put(
                    &format!("xe{next}"),
                    bytes::Bytes::from_static(b"epoch-marker"),
                )
                .await?;
            self.write_epoch = next;
            report.advanced_to = Some(next);
        }
        Ok(report)
    }

    /// Merges the index blobs `ids` into one blob of a new set, named with `prefix`.
    async fn compact_into(&self, ids: &[String], prefix: &str) -> Result<(), KopiaError> {
        let merged = self.merge_index_blobs(ids).await?;
        let mut set_id = [0u8; 8];
        rand::fill(&mut set_id);
        self.put_named_blob(
            prefix,
            &format!("s{}-c1", hex::encode(set_id)),
            &crate::index::build(merged.values())?,
        )
        .await?;
        Ok(())
    }

    /// Writes the range checkpoint that is due, if one is (see the module docs); returns the
    /// epochs it covers.
    pub(crate) async fn range_under(&self) -> Result<Option<(u64, u64)>, KopiaError> {
        let listing = self.blobs.list_meta().await?;
        let ids: Vec<String> = listing.iter().map(|b| b.id.clone()).collect();
        let set = select(&ids)?;
        let first = set.ranges_end.map_or(0, |end| end.saturating_add(1));
        let Some(last) = set.write_epoch.checked_sub(2) else {
            return Ok(None);
        };
        let frequency = self
            .config()
            .epoch_parameters
            .full_checkpoint_frequency
            .max(1);
        if last < first || last - first < frequency {
            return Ok(None);
        }
        let done = compactions(&listing);
        let raw = uncompacted(&listing);
        let mut inputs = Vec::new();
        for epoch in first..=last {
            let blobs = done.get(&epoch).or_else(|| raw.get(&epoch));
            inputs.extend(blobs.into_iter().flatten().map(|b| b.id.clone()));
        }
        self.compact_into(&inputs, &format!("xr{first}_{last}_"))
            .await?;
        Ok(Some((first, last)))
    }

    /// Deletes the uncompacted index blobs of epochs whose compaction is older than `margin`
    /// by the store's clock (the newest blob's time); returns how many.
    pub(crate) async fn delete_superseded(&self, margin: Duration) -> Result<usize, KopiaError> {
        let listing = self.blobs.list_meta().await?;
        let Some(clock) = listing.iter().map(|b| b.modified).max() else {
            return Ok(0);
        };
        let before = clock - SignedDuration::try_from(margin).unwrap_or(SignedDuration::MAX);
        let done = compactions(&listing);
        let mut deleted = 0;
        for (epoch, blobs) in uncompacted(&listing) {
            let settled_long_ago = done
                .get(&epoch)
                .is_some_and(|set| set.iter().all(|b| b.modified <= before));
            if !settled_long_ago {
                continue;
            }
            for blob in blobs {
                self.blobs.delete(&blob.id).await?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// When a compaction is old enough for the blobs it replaces to go.
pub(crate) fn cleanup_margin(params: &EpochParameters, no_margins: bool) -> Duration {
    if no_margins {
        Duration::ZERO
    } else {
        Duration::from_nanos(u64::try_from(params.cleanup_safety_margin).unwrap_or(0))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use jiff::Timestamp;

    use super::*;

    fn blob(id: &str, hours_ago: i64, size: u64) -> BlobMeta {
        BlobMeta {
            id: id.to_owned(),
            size,
            modified: Timestamp::from_second(1_800_000_000 - hours_ago * 3600).unwrap(),
        }
    }

    #[test]
    fn the_write_epoch_ends_on_count_or_size_once_it_spans_its_duration() {
        let params = EpochParameters::default();
        let many: Vec<BlobMeta> = (0..20)
            .map(|i| blob(&format!("xn0_{i}"), 2 * i, 100))
            .collect();
        assert!(should_advance(&many.iter().collect::<Vec<_>>(), &params));
        // 20 blobs within 24 hours: not yet.
        let recent: Vec<BlobMeta> = (0..20).map(|i| blob(&format!("xn0_{i}"), 0, 100)).collect();
        assert!(!should_advance(&recent.iter().collect::<Vec<_>>(), &params));
        // Few but large, over 24 hours.
        let large = [blob("xn0_a", 30, 6 << 20), blob("xn0_b", 0, 5 << 20)];
        assert!(should_advance(&large.iter().collect::<Vec<_>>(), &params));
        let small = [blob("xn0_a", 30, 100), blob("xn0_b", 0, 100)];
        assert!(!should_advance(&small.iter().collect::<Vec<_>>(), &params));
        assert!(!should_advance(&[], &params));
    }

    #[test]
    fn only_complete_compactions_count() {
        let listing = [
            blob("xs0_aa-sx-c2", 0, 1),
            blob("xs0_bb-sx-c2", 0, 1),
            blob("xs1_cc-sy-c2", 0, 1),
            blob("xn1_dd-s1-c1", 0, 1),
        ];
        let done = compactions(&listing);
        assert_eq!(done.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(done[&0].len(), 2);
        assert_eq!(uncompacted(&listing)[&1].len(), 1);
    }
}
