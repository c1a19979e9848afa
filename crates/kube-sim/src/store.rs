//! The in-memory object store: one global resourceVersion, objects ordered by key, and a bounded
//! history of change events for watches.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde_json::Value;
use tokio::sync::watch;

/// Kind of change an [`Event`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change in the history.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub storage: Arc<str>,
    pub namespace: String,
    pub etype: EventType,
    /// The object after the change (for deletes: the last state with the deletion RV).
    pub object: Arc<Value>,
    /// The object before the change, if any (selector-aware watches need it).
    pub prev: Option<Arc<Value>>,
}

/// Object key inside one resource: (namespace or `""`, name).
pub type Key = (String, String);

/// (storage, namespace, name) of an object.
pub type ObjectRef = (Arc<str>, String, String);

fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
}

/// uids of an object's owners.
pub fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Everything behind the store lock.
#[derive(Debug)]
pub struct State {
    rv: u64,
    objects: HashMap<Arc<str>, BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    /// Objects per (storage, namespace), for remainingItemCount.
    counts: HashMap<(Arc<str>, String), usize>,
    /// uid of every stored object.
    uids: HashSet<String>,
    /// Owner uid → objects naming it in `ownerReferences`.
    dependents: HashMap<String, HashSet<ObjectRef>>,
    /// Objects whose owners may all be gone (checked by the garbage collector).
    gc_candidates: Vec<ObjectRef>,
    /// Every event with an RV greater than this is still in `history`.
    oldest_rv: u64,
    history_limit: usize,
}

/// The store with change notification.
#[derive(Debug)]
pub struct Store {
    state: RwLock<State>,
    notify: watch::Sender<u64>,
}

static EMPTY: std::sync::LazyLock<BTreeMap<Key, Arc<Value>>> =
    std::sync::LazyLock::new(BTreeMap::new);

impl Store {
    /// An empty store whose first write gets resourceVersion `start_rv + 1`.
    pub fn new(history_limit: usize, start_rv: u64) -> Store {
        let (notify, _) = watch::channel(start_rv);
        Store {
            state: RwLock::new(State {
                rv: start_rv,
                objects: HashMap::new(),
                history: VecDeque::new(),
                counts: HashMap::new(),
                uids: HashSet::new(),
                dependents: HashMap::new(),
                gc_candidates: Vec::new(),
                oldest_rv: start_rv,
                history_limit: history_limit.max(1),
            }),
            notify,
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the data is still consistent enough to serve.
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn write(&self) -> Writer<'_> {
        let guard = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = guard.rv;
        Writer {
            guard,
            before,
            notify: &self.notify,
        }
    }

    /// A receiver that changes whenever the global resourceVersion moves.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }
}

/// A write guard that wakes watchers when dropped after a change.
pub struct Writer<'a> {
    guard: RwLockWriteGuard<'a, State>,
    before: u64,
    notify: &'a watch::Sender<u64>,
}

impl std::ops::Deref for Writer<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        if self.guard.rv != self.before {
            self.notify.send_replace(self.guard.rv);
        }
    }
}

impl State {
    /// The current global resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The oldest RV a watch may resume from.
    pub fn oldest_rv(&self) -> u64 {
        self.oldest_rv
    }

    pub fn get(&self, storage: &str, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(storage)?
            .get(&(ns.to_string(), name.to_string()))
    }

    /// All objects of one resource in key order.
    pub fn objects(&self, storage: &str) -> &BTreeMap<Key, Arc<Value>> {
        self.objects.get(storage).unwrap_or(&EMPTY)
    }

    /// Objects of one resource in one namespace (`None` = all), starting strictly after `after`.
    pub fn range<'a>(
        &'a self,
        storage: &str,
        ns: Option<&'a str>,
        after: Option<&Key>,
    ) -> impl Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a {
        use std::ops::Bound;
        let map = self.objects(storage);
        let start = match (after, ns) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        map.range((start, Bound::Unbounded))
            .take_while(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
    }

    pub fn count(&self, storage: &str) -> usize {
        self.objects.get(storage).map_or(0, BTreeMap::len)
    }

    /// Objects of one resource in one namespace (`None` = all).
    pub fn count_in(&self, storage: &str, ns: Option<&str>) -> usize {
        match ns {
            None => self.count(storage),
            Some(ns) => self
                .objects
                .get_key_value(storage)
                .and_then(|(k, _)| self.counts.get(&(k.clone(), ns.to_string())))
                .copied()
                .unwrap_or(0),
        }
    }

    /// Stores `obj` (whose `metadata.resourceVersion` is set here) and records the event.
    pub fn put(&mut self, storage: &str, ns: &str, name: &str, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        set_rv(&mut obj, rv);
        let obj = Arc::new(obj);
        let storage: Arc<str> = self
            .objects
            .get_key_value(storage)
            .map_or_else(|| Arc::from(storage), |(k, _)| k.clone());
        let prev = self
            .objects
            .entry(storage.clone())
            .or_default()
            .insert((ns.to_string(), name.to_string()), obj.clone());
        let me: ObjectRef = (storage.clone(), ns.to_string(), name.to_string());
        if let Some(p) = &prev {
            self.unindex(p, &me);
        }
        if let Some(u) = uid_of(&obj) {
            self.uids.insert(u.to_string());
        }
        let owners = owner_uids(&obj);
        if !owners.is_empty() {
            for o in owners {
                self.dependents.entry(o).or_default().insert(me.clone());
            }
            self.gc_candidates.push(me);
        }
        let etype = if prev.is_some() {
            EventType::Modified
        } else {
            *self
                .counts
                .entry((storage.clone(), ns.to_string()))
                .or_default() += 1;
            EventType::Added
        };
        self.record(Event {
            rv,
            storage,
            namespace: ns.to_string(),
            etype,
            object: obj.clone(),
            prev,
        });
        obj
    }

    /// Removes an object; the DELETED event carries the deletion RV. Returns that last state.
    pub fn remove(&mut self, storage: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        let storage_key = self.objects.get_key_value(storage)?.0.clone();
        let prev = self
            .objects
            .get_mut(storage)?
            .remove(&(ns.to_string(), name.to_string()))?;
        if let Some(c) = self.counts.get_mut(&(storage_key.clone(), ns.to_string())) {
            *c = c.saturating_sub(1);
        }
        let me: ObjectRef = (storage_key.clone(), ns.to_string(), name.to_string());
        self.unindex(&prev, &me);
        if let Some(u) = uid_of(&prev)
            && let Some(deps) = self.dependents.get(u)
        {
            self.gc_candidates.extend(deps.iter().cloned());
        }
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*prev).clone();
        set_rv(&mut last, rv);
        let last = Arc::new(last);
        self.record(Event {
            rv,
            storage: storage_key,
            namespace: ns.to_string(),
            etype: EventType::Deleted,
            object: last.clone(),
            prev: Some(prev),
        });
        Some(last)
    }

    fn unindex(&mut self, old: &Value, me: &ObjectRef) {
        if let Some(u) = uid_of(old) {
            self.uids.remove(u);
        }
        for o in owner_uids(old) {
            if let Some(set) = self.dependents.get_mut(&o) {
                set.remove(me);
                if set.is_empty() {
                    self.dependents.remove(&o);
                }
            }
        }
    }

    /// Whether an object with this uid is stored.
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }

    /// Takes the objects the garbage collector should look at.
    pub fn take_gc_candidates(&mut self) -> Vec<ObjectRef> {
        std::mem::take(&mut self.gc_candidates)
    }

    fn record(&mut self, event: Event) {
        self.history.push_back(Arc::new(event));
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.oldest_rv = old.rv;
            }
        }
    }

    /// Drops all retained history: watches and continue tokens older than now expire.
    pub fn compact(&mut self) {
        self.history.clear();
        self.oldest_rv = self.rv;
    }

    /// Events with RV greater than `after`, or `None` if some of them were compacted away.
    pub fn events_after(&self, after: u64) -> Option<Vec<Arc<Event>>> {
        if after < self.oldest_rv {
            return None;
        }
        let start = self.history.partition_point(|e| e.rv <= after);
        Some(self.history.range(start..).cloned().collect())
    }

    /// Storage keys that currently hold objects.
    pub fn storages(&self) -> Vec<Arc<str>> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}
