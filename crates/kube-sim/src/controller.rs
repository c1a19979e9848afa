//! Server-side controllers the simulator reproduces: the namespace controller (delete contents,
//! then the namespace), CRD cleanup (delete custom resources, then the CRD), the delayed end of
//! CRD establishment (`establish`), and a garbage collector lite that clears the
//! `foregroundDeletion` and `orphan` finalizers. Tasks arrive on the queue in `work`, pushed by
//! the verbs.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use crate::shared::{CRDS, NAMESPACES, Shared};
use crate::store::Writer;
use crate::verbs::delete::{DeleteOptions, delete};
use crate::work::Work;
use crate::{establish, meta};

/// Runs until `shutdown` flips.
pub async fn run(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let mut pending: Vec<Work> = Vec::new();
    loop {
        pending.extend(shared.work.take());
        pending.sort_by_key(|w| format!("{w:?}"));
        pending.dedup();
        let mut still = Vec::new();
        for w in pending.drain(..) {
            if !process(&shared, &w) {
                still.push(w);
            }
        }
        pending = still;
        // Re-check at least every second, and when the next delayed task is due.
        let recheck = pending
            .iter()
            .filter_map(Work::due)
            .fold(Instant::now() + Duration::from_secs(1), Instant::min);
        collect_garbage(&shared);
        if *shutdown.borrow() {
            return;
        }
        if pending.is_empty() && !shared.config.garbage_collection {
            tokio::select! {
                _ = shared.work.notified() => {}
                _ = shutdown.changed() => {}
            }
        } else {
            // Waiting on other actors (finalizers of contents); re-check on changes.
            let mut changes = shared.store.subscribe();
            changes.borrow_and_update();
            tokio::select! {
                _ = shared.work.notified() => {}
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(recheck) => {}
                _ = shutdown.changed() => {}
            }
        }
    }
}

/// Deletes objects whose owners are all gone (background propagation).
fn collect_garbage(shared: &Shared) {
    let mut st = shared.store.write();
    let candidates = st.take_gc_candidates();
    if !shared.config.garbage_collection {
        return;
    }
    for (storage, ns, name) in candidates {
        let Some(obj) = st.get(&storage, &ns, &name).cloned() else {
            continue;
        };
        let owners = crate::store::owner_uids(&obj);
        if owners.is_empty() || owners.iter().any(|u| st.uid_exists(u)) || meta::is_deleting(&obj) {
            continue;
        }
        let Some(served) = shared.catalog().by_storage(&storage) else {
            continue;
        };
        if let Err(e) = delete(
            shared,
            &mut st,
            &served,
            &ns,
            &name,
            &DeleteOptions::default(),
        ) {
            tracing::debug!(error = %e, %storage, %ns, %name, "garbage collection delete failed");
        }
    }
}

/// Handles one task; `true` = done.
fn process(shared: &Shared, w: &Work) -> bool {
    let mut st = shared.store.write();
    match w {
        Work::Object(storage, ns, name) => {
            clear_gc_finalizers(shared, &mut st, storage, ns, name);
            true
        }
        Work::Namespace(ns) => drain_namespace(shared, &mut st, ns),
        Work::Crd(name) => drain_crd(shared, &mut st, name),
        Work::Establish {
            crd,
            uid,
            at,
            with_names,
        } => {
            if Instant::now() < *at {
                return false;
            }
            establish::finish(shared, &mut st, crd, uid, *with_names);
            true
        }
    }
}

fn clear_gc_finalizers(shared: &Shared, st: &mut Writer<'_>, storage: &str, ns: &str, name: &str) {
    let Some(cur) = st.get(storage, ns, name).cloned() else {
        return;
    };
    if !meta::is_deleting(&cur) {
        return;
    }
    let fins = meta::finalizers(&cur);
    let kept: Vec<String> = fins
        .iter()
        .filter(|f| *f != "foregroundDeletion" && *f != "orphan")
        .cloned()
        .collect();
    if kept.len() == fins.len() {
        return;
    }
    if kept.is_empty() {
        st.remove(storage, ns, name);
        if !ns.is_empty() {
            shared.work.push(Work::Namespace(ns.to_string()));
        }
        if storage == CRDS {
            shared.rebuild_catalog(st);
        }
    } else {
        let mut obj = (*cur).clone();
        meta::meta_mut(&mut obj).insert("finalizers".into(), json!(kept));
        st.put(storage, ns, name, obj);
    }
}

/// Deletes everything in a terminating namespace, then the namespace; `true` = finished.
fn drain_namespace(_shared: &Shared, st: &mut Writer<'_>, ns: &str) -> bool {
    let Some(nsobj) = st.get(NAMESPACES, "", ns).cloned() else {
        return true;
    };
    if !meta::is_deleting(&nsobj) {
        return true;
    }
    let now = meta::now_rfc3339();
    let mut remaining = 0usize;
    for storage in st.storages() {
        if &*storage == NAMESPACES {
            continue;
        }
        let items: Vec<(String, std::sync::Arc<Value>)> = st
            .range(&storage, Some(ns), None)
            .map(|(k, v)| (k.1.clone(), v.clone()))
            .collect();
        for (name, obj) in items {
            let fins: Vec<String> = meta::finalizers(&obj)
                .into_iter()
                .filter(|f| f != "foregroundDeletion" && f != "orphan")
                .collect();
            if fins.is_empty() {
                st.remove(&storage, ns, &name);
            } else {
                remaining += 1;
                if !meta::is_deleting(&obj) || fins.len() != meta::finalizers(&obj).len() {
                    let mut o = (*obj).clone();
                    let m = meta::meta_mut(&mut o);
                    m.entry("deletionTimestamp")
                        .or_insert_with(|| Value::String(now.clone()));
                    m.entry("deletionGracePeriodSeconds")
                        .or_insert_with(|| json!(0));
                    m.insert("finalizers".into(), json!(fins));
                    st.put(&storage, ns, &name, o);
                }
            }
        }
    }
    if remaining > 0 {
        return false;
    }
    // Contents gone: the namespace controller finalizes, then the namespace goes away unless
    // metadata finalizers remain.
    let mut obj = (*nsobj).clone();
    obj["spec"]["finalizers"] = json!([]);
    let meta_fins: Vec<String> = meta::finalizers(&obj)
        .into_iter()
        .filter(|f| f != "foregroundDeletion" && f != "orphan")
        .collect();
    if meta_fins.is_empty() {
        st.remove(NAMESPACES, "", ns);
        true
    } else {
        meta::meta_mut(&mut obj).insert("finalizers".into(), json!(meta_fins));
        if nsobj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            st.put(NAMESPACES, "", ns, obj);
        }
        true
    }
}

/// Deletes every custom resource of a deleting CRD, then the CRD; `true` = finished.
fn drain_crd(shared: &Shared, st: &mut Writer<'_>, name: &str) -> bool {
    let Some(crd) = st.get(CRDS, "", name).cloned() else {
        return true;
    };
    if !meta::is_deleting(&crd) {
        return true;
    }
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let storage = format!("{group}/{plural}");
    let now = meta::now_rfc3339();
    let items: Vec<((String, String), std::sync::Arc<Value>)> = st
        .range(&storage, None, None)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut remaining = 0;
    for ((ns, n), obj) in items {
        let fins: Vec<String> = meta::finalizers(&obj)
            .into_iter()
            .filter(|f| f != "foregroundDeletion" && f != "orphan")
            .collect();
        if fins.is_empty() {
            st.remove(&storage, &ns, &n);
        } else {
            remaining += 1;
            if !meta::is_deleting(&obj) {
                let mut o = (*obj).clone();
                let m = meta::meta_mut(&mut o);
                m.insert("deletionTimestamp".into(), Value::String(now.clone()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                st.put(&storage, &ns, &n, o);
            }
        }
    }
    if remaining > 0 {
        return false;
    }
    let fins: Vec<String> = meta::finalizers(&crd)
        .into_iter()
        .filter(|f| {
            f != "customresourcecleanup.apiextensions.k8s.io"
                && f != "foregroundDeletion"
                && f != "orphan"
        })
        .collect();
    if fins.is_empty() {
        st.remove(CRDS, "", name);
    } else {
        let mut o = (*crd).clone();
        meta::meta_mut(&mut o).insert("finalizers".into(), json!(fins));
        st.put(CRDS, "", name, o);
    }
    shared.rebuild_catalog(st);
    true
}
