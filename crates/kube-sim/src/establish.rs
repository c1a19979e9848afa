//! The CRD naming and establishing controllers: what they write after a CRD is created.
//!
//! Normally both run at once, in one write right after the create. A `delay-established` fault
//! stretches the gap a real server has between them: the naming step writes at once
//! (`NamesAccepted=True`, `Established=False` reason `Installing`), and the background controller
//! (`controller`, through a [`Work::Establish`] task) sets `Established=True` when the delay is
//! over. With `delayNames` the naming step waits too, and both are written at the end.
//!
//! A CRD whose names are accepted has its custom resources served; discovery lists them only
//! once it is established (see `Catalog::discoverable`).

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::meta;
use crate::shared::{CRDS, Shared};
use crate::store::Writer;
use crate::work::Work;

/// Runs the naming and establishing steps for a CRD just created (under the store lock), or
/// schedules them when a `delay-established` fault matches.
pub fn on_create(shared: &Shared, st: &mut Writer<'_>, name: &str) {
    let Some(fault) = shared.faults.establish_delay(name) else {
        accept_names(shared, st, name, true);
        return;
    };
    if !fault.delay_names {
        accept_names(shared, st, name, false);
    }
    let Some(uid) = st
        .get(CRDS, "", name)
        .map(|crd| meta::meta_str(crd, "uid").to_string())
    else {
        return;
    };
    shared.work.push(Work::Establish {
        crd: name.to_string(),
        uid,
        at: Instant::now() + fault.delay(),
        with_names: fault.delay_names,
    });
}

/// The end of a delay: establishes the CRD (and accepts its names first if `with_names`) if it is
/// still the same object (`uid`) and not being deleted.
pub fn finish(shared: &Shared, st: &mut Writer<'_>, name: &str, uid: &str, with_names: bool) {
    let Some(crd) = st.get(CRDS, "", name).cloned() else {
        return;
    };
    if meta::meta_str(&crd, "uid") != uid || meta::is_deleting(&crd) {
        return;
    }
    if with_names {
        accept_names(shared, st, name, true);
        return;
    }
    let conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_true = |kind: &str| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    if !is_true("NamesAccepted") || is_true("Established") {
        return;
    }
    let established = json!({"type": "Established", "status": "True", "lastTransitionTime": meta::now_rfc3339(), "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"});
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c.get("type").and_then(Value::as_str) != Some("Established"))
        .collect();
    conditions.push(established);
    let mut crd = (*crd).clone();
    crd["status"]["conditions"] = Value::Array(conditions);
    st.put(CRDS, "", name, crd);
    shared.rebuild_catalog(st);
}

/// What the naming controller writes (and the establishing controller, if `establish`): the
/// accepted names and `NamesAccepted`, or the conflict that keeps them from being accepted.
fn accept_names(shared: &Shared, st: &mut Writer<'_>, name: &str, establish: bool) {
    let Some(current) = st.get(CRDS, "", name).cloned() else {
        return;
    };
    let mut crd = (*current).clone();
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // Another established CRD (or built-in) of the same group already using the plural or kind?
    let conflict = st
        .objects(CRDS)
        .values()
        .filter(|o| meta::name(o) != name)
        .find_map(|o| {
            let same_group =
                o.pointer("/spec/group").and_then(Value::as_str) == Some(group.as_str());
            if !same_group {
                return None;
            }
            if o.pointer("/status/acceptedNames/plural")
                .and_then(Value::as_str)
                == Some(plural.as_str())
            {
                return Some(("PluralConflict", format!("\"{plural}\" is already in use")));
            }
            if o.pointer("/status/acceptedNames/kind")
                .and_then(Value::as_str)
                == Some(kind.as_str())
            {
                return Some(("KindConflict", format!("\"{kind}\" is already in use")));
            }
            None
        });
    let now = meta::now_rfc3339();
    let conditions = match conflict {
        None if establish => {
            crd["status"]["acceptedNames"] = names;
            json!([
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ])
        }
        None => {
            crd["status"]["acceptedNames"] = names;
            json!([
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "False", "lastTransitionTime": now, "reason": "Installing", "message": "the initial names have been accepted"},
            ])
        }
        Some((reason, message)) => json!([
            {"type": "NamesAccepted", "status": "False", "lastTransitionTime": now, "reason": reason, "message": message},
            {"type": "Established", "status": "False", "lastTransitionTime": now, "reason": "NotAccepted", "message": "not all names are accepted"},
        ]),
    };
    crd["status"]["conditions"] = conditions;
    st.put(CRDS, "", name, crd);
    shared.rebuild_catalog(st);
}
