//! Which index blobs hold the repository's current index, from the list of blob IDs (kopia's
//! epoch manager, format 2 and 3; `epochParameters.Enabled`):
//!
//! - `xe<E>` marks epoch E as started; the write epoch W is the greatest;
//! - `xw<seconds>` is a deletion watermark: deleted contents older than the greatest are gone;
//! - `xn<E>_…` are the index blobs written during epoch E, all of them used;
//! - `xs<E>_…-s<set>-c<N>` compact epoch E into a set of N blobs, used once complete and E is
//!   settled (E ≤ W − 2);
//! - `xr<E1>_<E2>_…-s<set>-c<N>` compact epochs E1..E2; the longest chain of complete ranges
//!   from epoch 0 is used, then each later epoch up to W + 1 on its own.
//!
//! Format 1 repositories (legacy `n…` index blobs with `m…` compaction logs) are refused by
//! name: Velero has written format 3 since it adopted kopia.

use std::collections::BTreeMap;

use crate::KopiaError;

/// The live index blobs and the deletion watermark (seconds; 0 for none).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct IndexSet {
    /// Blob IDs to read, in the order found.
    pub blobs: Vec<String>,
    /// Deleted contents at or before this time are gone.
    pub watermark: i64,
    /// The epoch new index blobs belong to (the greatest `xe` marker; 0 without one).
    pub write_epoch: u64,
    /// The last epoch the range checkpoints in use cover, if any.
    pub ranges_end: Option<u64>,
}

/// The epoch number at the start of `rest` (digits up to `_` or the end).
fn epoch_of(rest: &str) -> Option<u64> {
    rest.split('_').next()?.parse().ok()
}

/// Groups blobs into complete sets: `…-s<set>-c<N>` with N members; a blob of another shape
/// is a set of its own. The first complete set in listing order.
pub(crate) fn first_complete<'a>(blobs: &[&'a str]) -> Option<Vec<&'a str>> {
    let mut sets: Vec<(String, usize, Vec<&'a str>)> = Vec::new();
    for blob in blobs {
        let parts: Vec<&str> = blob.split('-').collect();
        let (set, count) = match parts.as_slice() {
            [_, set, count, ..] if set.starts_with('s') && count.starts_with('c') => {
                match count[1..].parse::<usize>() {
                    Ok(n) => ((*set).to_owned(), n),
                    Err(_) => ((*blob).to_owned(), 1),
                }
            }
            _ => ((*blob).to_owned(), 1),
        };
        let index = match sets.iter().position(|(s, n, _)| *s == set && *n == count) {
            Some(i) => {
                sets[i].2.push(blob);
                i
            }
            None => {
                sets.push((set, count, vec![blob]));
                sets.len() - 1
            }
        };
        let (_, n, members) = &sets[index];
        if members.len() == *n {
            return Some(members.clone());
        }
    }
    None
}

/// The index set of a repository whose blob IDs are `ids`.
///
/// # Errors
/// [`KopiaError::Unsupported`] for a format 1 repository (legacy index blobs only).
pub fn select(ids: &[String]) -> Result<IndexSet, KopiaError> {
    let mut write_epoch: Option<u64> = None;
    let mut watermark = 0i64;
    let mut single: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    let mut ranges: BTreeMap<(u64, u64), Vec<&str>> = BTreeMap::new();
    let mut uncompacted: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for id in ids {
        let (Some(kind), Some(rest)) = (id.get(..2), id.get(2..)) else {
            continue;
        };
        match kind {
            "xe" => {
                if let Ok(e) = rest.parse::<u64>() {
                    write_epoch = Some(write_epoch.map_or(e, |w| w.max(e)));
                }
            }
            "xw" => {
                if let Ok(t) = rest.parse::<i64>() {
                    watermark = watermark.max(t);
                }
            }
            "xs" | "xn" => {
                if let Some(e) = epoch_of(rest) {
                    let by_epoch = if kind == "xs" {
                        &mut single
                    } else {
                        &mut uncompacted
                    };
                    by_epoch.entry(e).or_default().push(id);
                }
            }
            "xr" => {
                let mut parts = rest.split('_');
                if let (Some(Ok(a)), Some(Ok(b))) = (
                    parts.next().map(str::parse::<u64>),
                    parts.next().map(str::parse::<u64>),
                ) {
                    ranges.entry((a, b)).or_default().push(id);
                }
            }
            _ => {}
        }
    }
    let indexed = write_epoch.is_some() || !uncompacted.is_empty() || !single.is_empty();
    if !indexed && ids.iter().any(|id| id.starts_with('n')) {
        return Err(KopiaError::Unsupported {
            what: "repository format",
            value: "1 (legacy index blobs without epochs)".to_owned(),
        });
    }
    let w = write_epoch.unwrap_or(0);
    // The longest chain of complete range checkpoints from epoch 0 (fewer ranges on a tie),
    // found from the last start backwards, each start's best chain once.
    let complete: BTreeMap<(u64, u64), Vec<&str>> = ranges
        .iter()
        .filter(|((a, b), _)| a <= b)
        .filter_map(|(k, v)| first_complete(v).map(|set| (*k, set)))
        .collect();
    let mut best_from: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let starts: std::collections::BTreeSet<u64> = complete.keys().map(|(a, _)| *a).collect();
    for &start in starts.iter().rev() {
        let mut best: Vec<(u64, u64)> = Vec::new();
        for &(a, b) in complete.keys().filter(|(a, _)| *a == start) {
            let mut chain = vec![(a, b)];
            if let Some(rest) = b.checked_add(1).and_then(|next| best_from.get(&next)) {
                chain.extend(rest.iter().copied());
            }
            let end = |c: &[(u64, u64)]| c.last().map_or(0, |(_, b)| *b);
            if best.is_empty()
                || end(&chain) > end(&best)
                || (end(&chain) == end(&best) && chain.len() < best.len())
            {
                best = chain;
            }
        }
        best_from.insert(start, best);
    }
    let mut blobs: Vec<String> = Vec::new();
    let mut start = 0u64;
    let mut ranges_end = None;
    for range in best_from.get(&0).into_iter().flatten() {
        blobs.extend(complete[range].iter().map(|b| (*b).to_owned()));
        start = range.1.saturating_add(1);
        ranges_end = Some(range.1);
    }
    // Only the epochs that have blobs, up to W + 1 (a huge marker costs nothing).
    let last = w.saturating_add(1);
    let epochs: std::collections::BTreeSet<u64> = single
        .range(start..=last)
        .chain(uncompacted.range(start..=last))
        .map(|(e, _)| *e)
        .collect();
    for epoch in epochs {
        let settled = epoch.saturating_add(2) <= w;
        match single.get(&epoch).and_then(|v| first_complete(v)) {
            Some(set) if settled => blobs.extend(set.into_iter().map(str::to_owned)),
            _ => blobs.extend(
                uncompacted
                    .get(&epoch)
                    .into_iter()
                    .flatten()
                    .map(|b| (*b).to_owned()),
            ),
        }
    }
    Ok(IndexSet {
        blobs,
        watermark,
        write_epoch: w,
        ranges_end,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_new_repository_reads_its_uncompacted_blobs() {
        let set = select(&ids(&[
            "kopia.repository",
            "p4d4a962fe147f7e41d52aa0bae8c8b3b-sb6",
            "xn0_38b0b35250633a94170e49c481cc100d-sb6-c1",
            "xn0_8109f2d19c06a82c25e518e1ceecf89b-sea1-c1",
        ]))
        .unwrap();
        assert_eq!(set.blobs.len(), 2);
        assert_eq!(set.watermark, 0);
    }

    #[test]
    fn settled_epochs_are_read_from_their_complete_compaction() {
        let set = select(&ids(&[
            "xe0",
            "xe1",
            "xe2",
            "xe3",
            "xw1700000000",
            "xn0_aa-s1-c1",
            "xn0_bb-s2-c1",
            "xs0_cc-sx-c2",
            "xs0_dd-sx-c2",
            "xn1_ee-s3-c1",
            "xs1_ff-sy-c2",
            "xn2_gg-s4-c1",
            "xn3_hh-s5-c1",
            "xn4_ii-s6-c1",
            "xn10_jj-s7-c1",
        ]))
        .unwrap();
        // Epoch 0: its complete compaction; 1: its compaction lacks a member; 2, 3 unsettled;
        // 4 = W + 1; 10 is beyond.
        assert_eq!(
            set.blobs,
            ids(&[
                "xs0_cc-sx-c2",
                "xs0_dd-sx-c2",
                "xn1_ee-s3-c1",
                "xn2_gg-s4-c1",
                "xn3_hh-s5-c1",
                "xn4_ii-s6-c1"
            ])
        );
        assert_eq!(set.watermark, 1_700_000_000);
    }

    #[test]
    fn range_checkpoints_replace_the_epochs_they_cover() {
        let set = select(&ids(&[
            "xe5",
            "xr0_3_aa-sr-c1",
            "xn2_bb-s1-c1",
            "xn4_cc-s2-c1",
            "xn6_dd-s3-c1",
        ]))
        .unwrap();
        assert_eq!(
            set.blobs,
            ids(&["xr0_3_aa-sr-c1", "xn4_cc-s2-c1", "xn6_dd-s3-c1"])
        );
    }

    #[test]
    fn hostile_markers_and_ranges_cost_nothing() {
        // A backwards range, ranges that chain in every way up to epoch 60, a huge marker.
        let mut names = vec![
            "xe18446744073709551615".to_owned(),
            "xr4_3_aa-sa-c1".to_owned(),
        ];
        for i in 0..60u64 {
            names.push(format!("xr{i}_{i}_b{i}-sb{i}-c1"));
            names.push(format!("xr{i}_{}_c{i}-sc{i}-c1", i + 1));
        }
        names.push("xn7_dd-s1-c1".to_owned());
        let set = select(&names).unwrap();
        assert!(
            set.blobs.iter().all(|b| !b.starts_with("xr4_3")),
            "{:?}",
            set.blobs
        );
        // The chain reaches epoch 60, the farthest, in 31 ranges (every chain to 60 has 31); the
        // epoch-7 blob is covered by it.
        assert_eq!(set.blobs.len(), 31, "{:?}", set.blobs);
        assert!(set.blobs.last().is_some_and(|b| b.starts_with("xr59_60_")));
    }

    #[test]
    fn a_format_1_repository_is_refused_by_name() {
        let err = select(&ids(&["kopia.repository", "n0123-s1", "p01-s1"])).unwrap_err();
        assert!(err.to_string().contains("repository format: 1"), "{err}");
    }
}
