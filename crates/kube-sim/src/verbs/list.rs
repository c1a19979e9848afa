//! LIST: selectors, pagination with snapshot-consistent continue tokens, resourceVersion rules.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::catalog::Served;
use crate::http::{Output, Query, Resp};
use crate::meta;
use crate::render;
use crate::selector::{FieldSelector, LabelSelector};
use crate::shared::{ResourceRequest, Shared};
use crate::status::{ApiError, Cause};
use crate::store::{Key, State};

/// Label and field selection of a list or watch.
#[derive(Debug)]
pub struct Filter {
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
}

impl Filter {
    pub fn from_query(served: &Served, query: &Query) -> Result<Filter, ApiError> {
        let labels = match query.value("labelSelector") {
            Some(s) => {
                let sel =
                    LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                (!sel.is_empty()).then_some(sel)
            }
            None => None,
        };
        let fields = match query.value("fieldSelector") {
            Some(s) => {
                let sel =
                    FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                for f in sel.fields() {
                    if !field_supported(served, &f) {
                        return Err(ApiError::bad_request(if served.is_custom() {
                            format!("field label not supported: {f}")
                        } else {
                            format!(
                                "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                            )
                        }));
                    }
                }
                Some(sel)
            }
            None => None,
        };
        Ok(Filter { labels, fields })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(l) = &self.labels {
            let labels = meta::meta(obj)
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object);
            if !l.matches(labels) {
                return false;
            }
        }
        if let Some(f) = &self.fields
            && !f.matches(obj)
        {
            return false;
        }
        true
    }
}

fn field_supported(served: &Served, field: &str) -> bool {
    if field == "metadata.name" || (field == "metadata.namespace" && served.info.namespaced) {
        return true;
    }
    if served.selectable_fields.iter().any(|f| f == field) {
        return true;
    }
    let extra: &[&str] = match (served.info.group.as_str(), served.info.plural.as_str()) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    };
    extra.contains(&field)
}

/// The opaque continue token: base64url JSON of the snapshot RV and the last returned key.
fn encode_continue(rv: u64, last: &Key, seen: u64) -> String {
    let v = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}", last.0, last.1), "seen": seen});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Key, u64), ApiError> {
    let bad = || ApiError::bad_request("invalid continue token");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    let seen = v.get("seen").and_then(Value::as_u64).unwrap_or(0);
    Ok((rv, (ns.to_string(), name.to_string()), seen))
}

fn list_options_invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_kind(
        "ListOptions.meta.k8s.io",
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![Cause {
            reason: "FieldValueInvalid",
            message: message.to_string(),
            field: field.to_string(),
        }],
    )
}

pub fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

fn too_large_rv(requested: u64, current: u64) -> ApiError {
    ApiError::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {requested}, current: {current}"),
    )
    .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}))
}

/// Waits up to 3 s for the store to reach `rv`.
pub async fn wait_for_rv(shared: &Shared, rv: u64) -> Result<(), ApiError> {
    let mut sub = shared.store.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let cur = shared.store.read().rv();
        if cur >= rv {
            return Ok(());
        }
        if tokio::time::timeout_at(deadline, sub.changed())
            .await
            .is_err()
        {
            return Err(too_large_rv(rv, cur));
        }
    }
}

/// Iterates the state of one resource as it was at `at` (current state when `at` is the
/// store's RV), after `after`, restricted to `ns`.
type CurrentIter<'a> = Box<dyn Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a>;
type OverrideIter<'a> = Box<dyn Iterator<Item = (&'a Key, &'a Option<Arc<Value>>)> + 'a>;

pub struct SnapshotIter<'a> {
    current: std::iter::Peekable<CurrentIter<'a>>,
    overrides: std::iter::Peekable<OverrideIter<'a>>,
}

impl<'a> Iterator for SnapshotIter<'a> {
    type Item = (&'a Key, &'a Arc<Value>);
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let a = self.current.peek().map(|(k, _)| *k);
            let b = self.overrides.peek().map(|(k, _)| *k);
            match (a, b) {
                (None, None) => return None,
                (Some(_), None) => return self.current.next(),
                (Some(ka), Some(kb)) if ka < kb => return self.current.next(),
                (Some(ka), Some(kb)) if ka == kb => {
                    self.current.next();
                    if let Some((k, Some(v))) = self.overrides.next() {
                        return Some((k, v));
                    }
                }
                _ => {
                    if let Some((k, Some(v))) = self.overrides.next() {
                        return Some((k, v));
                    }
                }
            }
        }
    }
}

/// For a past snapshot: the state at `at` of every key changed since (None = absent then).
pub fn snapshot_overrides(
    state: &State,
    storage: &str,
    at: u64,
) -> Result<BTreeMap<Key, Option<Arc<Value>>>, ApiError> {
    let mut out = BTreeMap::new();
    if at >= state.rv() {
        return Ok(out);
    }
    let events = state.events_after(at).ok_or_else(|| {
        ApiError::expired(format!(
            "too old resource version: {at} ({})",
            state.oldest_rv() + 1
        ))
    })?;
    for e in events.iter().filter(|e| &*e.storage == storage) {
        let key = (e.namespace.clone(), meta::name(&e.object).to_string());
        out.entry(key).or_insert_with(|| match e.etype {
            crate::store::EventType::Added => None,
            _ => e.prev.clone(),
        });
    }
    Ok(out)
}

pub fn snapshot_iter<'a>(
    state: &'a State,
    storage: &str,
    ns: Option<&'a str>,
    after: Option<&Key>,
    overrides: &'a BTreeMap<Key, Option<Arc<Value>>>,
) -> SnapshotIter<'a> {
    use std::ops::Bound;
    let current: Box<dyn Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a> =
        Box::new(state.range(storage, ns, after));
    let start = match after {
        Some(k) => Bound::Excluded(k.clone()),
        None => Bound::Unbounded,
    };
    let ov: Box<dyn Iterator<Item = (&'a Key, &'a Option<Arc<Value>>)> + 'a> = Box::new(
        overrides
            .range((start, Bound::Unbounded))
            .filter(move |(k, _)| ns.is_none_or(|n| k.0 == n)),
    );
    SnapshotIter {
        current: current.peekable(),
        overrides: ov.peekable(),
    }
}

pub async fn list(
    shared: &Shared,
    r: &ResourceRequest,
    query: &Query,
    out: &Output,
) -> Result<Resp, ApiError> {
    let filter = Filter::from_query(&r.served, query)?;
    let limit = match query.value("limit") {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?
            .max(0) as usize,
        None => 0,
    };
    let cont = query.value("continue");
    let rv = query.value("resourceVersion");
    let rvm = query.value("resourceVersionMatch");
    if query.flag("sendInitialEvents") {
        return Err(list_options_invalid(
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    if let Some(m) = rvm {
        if !matches!(m, "NotOlderThan" | "Exact") {
            return Err(list_options_invalid(
                "resourceVersionMatch",
                &format!(
                    "Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            ));
        }
        if rv.is_none() {
            return Err(list_options_invalid(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if cont.is_some() {
            return Err(list_options_invalid(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if m == "Exact" && rv == Some("0") {
            return Err(list_options_invalid(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if cont.is_some() && rv.is_some_and(|v| v != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let requested = match rv {
        Some(v) => Some(parse_rv(v)?),
        None => None,
    };
    let exact = match (requested, rvm) {
        (Some(n), Some("Exact")) => Some(n),
        (Some(n), None) if n > 0 && limit > 0 => Some(n),
        _ => None,
    };
    if let Some(n) = requested
        && n > 0
    {
        wait_for_rv(shared, n).await?;
    }
    let st = shared.store.read();
    let (at, after, seen) = match cont {
        Some(token) => {
            let (tok_rv, key, seen) = decode_continue(token)?;
            if tok_rv < st.oldest_rv() {
                let e = ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                );
                let mut e = e;
                e.metadata = Some(json!({"continue": encode_continue(st.rv(), &key, seen)}));
                return Err(e);
            }
            (tok_rv, Some(key), seen)
        }
        None => match exact {
            Some(n) if n < st.oldest_rv() => {
                return Err(ApiError::expired(
                    "The resourceVersion for the provided list is too old.",
                ));
            }
            Some(n) => (n, None, 0),
            None => (st.rv(), None, 0),
        },
    };
    let (items, last, more, remaining) = {
        let overrides = snapshot_overrides(&st, &r.served.storage, at)?;
        let ns = r.namespace.as_deref();
        let mut iter = snapshot_iter(&st, &r.served.storage, ns, after.as_ref(), &overrides);
        let mut items: Vec<Arc<Value>> = Vec::new();
        let mut last: Option<Key> = None;
        let mut more = false;
        for (k, v) in iter.by_ref() {
            if filter.matches(v) {
                items.push(v.clone());
                if limit > 0 && items.len() >= limit {
                    last = Some(k.clone());
                    break;
                }
            }
        }
        let mut remaining = None;
        if last.is_some() {
            if filter.is_empty() {
                // Objects at the snapshot = current count corrected by the changes since.
                let mut total = st.count_in(&r.served.storage, ns) as i64;
                for (k, then) in overrides
                    .iter()
                    .filter(|(k, _)| ns.is_none_or(|n| k.0 == n))
                {
                    let now = st.get(&r.served.storage, &k.0, &k.1).is_some();
                    total += i64::from(then.is_some()) - i64::from(now);
                }
                let rest = total - seen as i64 - items.len() as i64;
                more = rest > 0;
                remaining = more.then_some(rest as u64);
            } else {
                more = iter.next().is_some();
            }
        }
        (items, last, more, remaining)
    };
    drop(st);
    let token = if more {
        last.as_ref()
            .map(|k| encode_continue(at, k, seen + items.len() as u64))
    } else {
        None
    };
    let meta = render::list_meta(at, token.as_deref(), remaining);
    Ok(render::list(
        out,
        &r.served,
        &items,
        meta,
        query.get("includeObject"),
    ))
}
