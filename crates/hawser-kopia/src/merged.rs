//! The repository's index as held in memory: per content the entry that wins ([`wins`], the
//! rule every kopia reader applies), each held once with its ID inline. Most entries are in
//! one list sorted by ID (80 bytes each, found by binary search); those added since it was last
//! sorted are in a hash set beside it, folded into the list once they are a quarter of it, so
//! a write's new entries cost a sort now and then rather than a table twice their size.

use std::borrow::Borrow;
use std::collections::HashSet;

use crate::content::ContentId;
use crate::index::{Entry, wins};

/// Entries added since the list was last sorted are folded into it past this many, or past a
/// quarter of the list.
const RECENT_MIN: usize = 4096;

#[derive(Default)]
pub(crate) struct Index {
    /// Sorted by ID, one entry per content.
    sorted: Vec<Entry>,
    /// Added since; each wins over the list's entry of the same content, if any.
    recent: HashSet<Keyed>,
}

/// An entry found by its ID.
struct Keyed(Entry);

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for Keyed {}

impl std::hash::Hash for Keyed {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::hash::Hash::hash(&self.0.id, state);
    }
}

impl Borrow<ContentId> for Keyed {
    fn borrow(&self) -> &ContentId {
        &self.0.id
    }
}

impl Index {
    /// The index of `entries`, in any order, several of a content among them.
    pub(crate) fn from_entries(entries: Vec<Entry>) -> Self {
        let mut index = Self {
            sorted: entries,
            recent: HashSet::new(),
        };
        index.fold();
        index
    }

    pub(crate) fn get(&self, id: &ContentId) -> Option<&Entry> {
        self.recent
            .get(id)
            .map(|k| &k.0)
            .or_else(|| self.in_list(id))
    }

    fn in_list(&self, id: &ContentId) -> Option<&Entry> {
        let at = self.sorted.binary_search_by(|e| e.id.cmp(id)).ok()?;
        self.sorted.get(at)
    }

    /// Holds `entry` if it wins over the content's entry held before.
    pub(crate) fn merge(&mut self, entry: Entry) {
        if self.get(&entry.id).is_none_or(|have| wins(&entry, have)) {
            self.recent.replace(Keyed(entry));
            if self.recent.len() > RECENT_MIN.max(self.sorted.len() / 4) {
                self.fold();
            }
        }
    }

    /// Merges the entries of `other` (as many as may come: they are sorted in, not hashed;
    /// the larger list takes in the smaller, so a first write's entries are not copied).
    pub(crate) fn absorb(&mut self, mut other: Index) {
        other.fold();
        if other.sorted.len() > self.sorted.len() {
            std::mem::swap(&mut self.sorted, &mut other.sorted);
        }
        self.sorted.append(&mut other.sorted);
        self.fold();
    }

    /// Sorts the recent entries into the list, keeping per content the one that wins.
    fn fold(&mut self) {
        let recent = std::mem::take(&mut self.recent);
        self.sorted.extend(recent.into_iter().map(|k| k.0));
        self.sorted.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        self.sorted.dedup_by(|later, kept| {
            if later.id != kept.id {
                return false;
            }
            if wins(later, kept) {
                std::mem::swap(later, kept);
            }
            true
        });
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Entry> {
        let listed = self.sorted.iter().filter(|e| !self.recent.contains(&e.id));
        self.recent.iter().map(|k| &k.0).chain(listed)
    }

    pub(crate) fn retain(&mut self, keep: impl FnMut(&Entry) -> bool) {
        self.fold();
        self.sorted.retain(keep);
    }

    pub(crate) fn len(&self) -> usize {
        let shadowed = self
            .recent
            .iter()
            .filter(|k| self.in_list(&k.0.id).is_some())
            .count();
        self.sorted.len() + self.recent.len() - shadowed
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.sorted.is_empty() && self.recent.is_empty()
    }
}
