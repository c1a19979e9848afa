//! Resource verbs: get, list, create, delete, deletecollection (update and patch live in
//! `write`, watch in `watch`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http::{Request, header};
use hyper::body::Incoming;
use serde_json::{Map, Value, json};

use crate::catalog::Served;
use crate::http::{self as h, Output, Query, Resp};
use crate::meta;
use crate::render;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::{ResourceRequest, Shared};
use crate::status::{self, ApiError, Cause};
use crate::store::{Key, State, Writer};
use crate::{watch, write};

pub const NAMESPACES: &str = "/namespaces";
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub manager: String,
}

impl WriteOpts {
    pub fn from_request(query: &Query, user_agent: Option<&str>) -> Result<WriteOpts, ApiError> {
        let dry_run = match query.value("dryRun") {
            None => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::invalid_kind(
                    "CreateOptions.meta.k8s.io",
                    "meta.k8s.io",
                    "CreateOptions",
                    "",
                    vec![Cause {
                        reason: "FieldValueNotSupported",
                        message: format!(
                            "Unsupported value: \"{other}\": supported values: \"All\""
                        ),
                        field: "dryRun".into(),
                    }],
                ));
            }
        };
        let manager = match query.value("fieldManager") {
            Some(m) => m.to_string(),
            None => user_agent
                .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".to_string()),
        };
        Ok(WriteOpts { dry_run, manager })
    }
}

/// Entry point for a resource request.
pub async fn serve(
    shared: &Arc<Shared>,
    r: ResourceRequest,
    req: Request<Incoming>,
    query: Query,
) -> Resp {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let out = match h::negotiate(accept.as_deref(), false) {
        Ok(o) => o,
        Err(e) => return h::error(&e),
    };
    if r.verb == "watch" {
        return watch::serve(shared.clone(), r, query, out).await;
    }
    match serve_inner(shared, &r, req, &query, &out).await {
        Ok(resp) => resp,
        Err(e) => h::error(&e),
    }
}

async fn serve_inner(
    shared: &Arc<Shared>,
    r: &ResourceRequest,
    req: Request<Incoming>,
    query: &Query,
    out: &Output,
) -> Result<Resp, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match r.verb {
        "get" | "list" => bytes::Bytes::new(),
        _ => h::read_body(req.into_body(), shared.config.max_body_bytes).await?,
    };
    match r.verb {
        "get" => get(shared, r, out),
        "list" => list(shared, r, query, out).await,
        "create" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let created = create(shared, &r.served, r.namespace.as_deref(), obj, &opts)?;
            Ok(render::one(out, &r.served, &created, 201))
        }
        "update" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let obj = decode(&content_type, &body)?;
            let (code, obj) = write::update(shared, r, obj, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "patch" => {
            let opts = WriteOpts::from_request(query, user_agent.as_deref())?;
            let (code, obj) = write::patch(shared, r, &content_type, &body, query, &opts)?;
            Ok(render::one(out, &r.served, &obj, code))
        }
        "delete" => {
            let dopts = DeleteOptions::parse(&body, query)?;
            let name = r.name.as_deref().unwrap_or("");
            let mut st = shared.store.write();
            match delete(
                shared,
                &mut st,
                &r.served,
                r.namespace.as_deref().unwrap_or(""),
                name,
                &dopts,
            )? {
                Deleted::Object(o) => Ok(render::one(out, &r.served, &o, 200)),
                Deleted::Status(s) => Ok(h::json(200, &s)),
            }
        }
        "deletecollection" => delete_collection(shared, r, &body, query, out),
        _ => Err(ApiError::method_not_allowed(r.verb, &r.served.info)),
    }
}

/// Decodes a create/update body (JSON or YAML).
pub fn decode(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let v: Value = match mime.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?,
        "application/vnd.kubernetes.protobuf" => match crate::protobuf::decode(body) {
            Ok(v) => v,
            Err(e @ crate::protobuf::ProtoError::Malformed) => {
                return Err(ApiError::bad_request(e.to_string()));
            }
            Err(_) => return Err(ApiError::unsupported_media_type(content_type)),
        },
        _ => return Err(ApiError::unsupported_media_type(content_type)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(v)
}

fn get(shared: &Shared, r: &ResourceRequest, out: &Output) -> Result<Resp, ApiError> {
    let name = r.name.as_deref().unwrap_or("");
    let st = shared.store.read();
    let obj = st
        .get(
            &r.served.storage,
            r.namespace.as_deref().unwrap_or(""),
            name,
        )
        .cloned()
        .ok_or_else(|| ApiError::not_found(&r.served.info, name))?;
    drop(st);
    Ok(render::one(out, &r.served, &obj, 200))
}

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
pub struct SnapshotIter<'a> {
    current: std::iter::Peekable<Box<dyn Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a>>,
    overrides:
        std::iter::Peekable<Box<dyn Iterator<Item = (&'a Key, &'a Option<Arc<Value>>)> + 'a>>,
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

async fn list(
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

fn namespace_check(st: &State, ns: &str, res: &Served, name: &str) -> Result<(), ApiError> {
    match st.get(NAMESPACES, "", ns) {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(n) if meta::is_deleting(n) => Err(ApiError::new(
            403,
            "Forbidden",
            format!("unable to create new content in namespace {ns} because it is being terminated"),
        )
        .with_details(json!({
            "name": name,
            "group": res.info.group,
            "kind": res.info.plural,
            "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}],
        }))),
        Some(_) => Ok(()),
    }
}

/// Checks body `apiVersion`/`kind` against the endpoint and fills them in.
pub fn check_type(served: &Served, obj: &mut Value) -> Result<(), ApiError> {
    let want_av = served.info.api_version();
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    };
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(av) if !av.is_empty() && av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != served.info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                served.info.kind
            )));
        }
        None | Some("") if served.is_custom() => {
            return Err(ApiError::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                Value::Object(m.clone())
            )));
        }
        _ => {}
    }
    m.insert("apiVersion".into(), Value::String(want_av));
    m.insert("kind".into(), Value::String(served.info.kind.clone()));
    Ok(())
}

/// Creates an object (the POST path, also used for seeding and server-side apply creates).
pub fn create(
    shared: &Shared,
    served: &Served,
    url_ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
) -> Result<Arc<Value>, ApiError> {
    check_type(served, &mut obj)?;
    {
        let m = meta::meta_mut(&mut obj);
        let body_ns = m
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match url_ns {
            Some(ns) => {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                m.insert("namespace".into(), Value::String(ns.to_string()));
            }
            None => {
                m.remove("namespace");
            }
        }
        match m.get("resourceVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() || s == "0" => {}
            Some(_) => {
                return Err(ApiError::new(
                    500,
                    "",
                    "resourceVersion should not be set on objects to be created",
                ));
            }
        }
    }
    let mut st = shared.store.write();
    create_locked(shared, &mut st, served, obj, opts)
}

/// The create path under the store lock.
pub fn create_locked(
    shared: &Shared,
    st: &mut Writer<'_>,
    served: &Served,
    mut obj: Value,
    opts: &WriteOpts,
) -> Result<Arc<Value>, ApiError> {
    let ns = meta::namespace(&obj).to_string();
    let given = meta::name(&obj).to_string();
    let generate = meta::meta_str(&obj, "generateName").to_string();
    if given.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            &served.info,
            "",
            vec![Cause {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        ));
    }
    let check_name = if given.is_empty() {
        format!("{generate}a")
    } else {
        given.clone()
    };
    let mut causes = Vec::new();
    if let Some(msg) = meta::validate_name(served.name_rule, &check_name) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: msg,
            field: if given.is_empty() {
                "metadata.generateName".into()
            } else {
                "metadata.name".into()
            },
        });
    }
    causes.extend(meta::validate_meta(&obj));
    if !causes.is_empty() {
        return Err(ApiError::invalid(&served.info, &given, causes));
    }
    if served.info.namespaced {
        namespace_check(st, &ns, served, &given)?;
    }
    kind_defaults_on_create(served, &mut obj)?;

    let name = if given.is_empty() {
        let mut found = None;
        for _ in 0..8 {
            let candidate = meta::generate_name(&generate);
            if st.get(&served.storage, &ns, &candidate).is_none() {
                found = Some(candidate);
                break;
            }
        }
        match found {
            Some(n) => n,
            None => {
                let mut e = ApiError::already_exists(&served.info, &generate, false);
                if let Some(d) = e.details.as_mut() {
                    d["retryAfterSeconds"] = json!(1);
                }
                return Err(e);
            }
        }
    } else {
        given
    };
    if let Some(existing) = st.get(&served.storage, &ns, &name) {
        return Err(ApiError::already_exists(
            &served.info,
            &name,
            meta::is_deleting(existing),
        ));
    }
    let now = meta::now_rfc3339();
    {
        let m = meta::meta_mut(&mut obj);
        m.insert("name".into(), Value::String(name.clone()));
        m.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        m.insert("creationTimestamp".into(), Value::String(now.clone()));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("resourceVersion");
        m.remove("selfLink");
        if served.info.uses_generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    if !obj
        .pointer("/metadata/managedFields")
        .is_some_and(|v| v.is_array())
    {
        write::set_managed(
            &mut obj,
            None,
            &opts.manager,
            "Update",
            &served.info.api_version(),
            None,
            &now,
        );
    }
    if opts.dry_run {
        return Ok(Arc::new(obj));
    }
    let stored = st.put(&served.storage, &ns, &name, obj);
    if served.storage == CRDS {
        establish_crd(shared, st, &name);
    }
    Ok(stored)
}

fn kind_defaults_on_create(served: &Served, obj: &mut Value) -> Result<(), ApiError> {
    let drop_status =
        served.info.status_subresource && !matches!(served.storage.as_str(), NAMESPACES | CRDS);
    if drop_status && let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    match served.storage.as_str() {
        NAMESPACES => {
            let name = meta::name(obj).to_string();
            let labels = meta::meta_mut(obj)
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        "/pods" => {
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
        "/secrets" => {
            if let Some(m) = obj.as_object_mut() {
                if let Some(Value::Object(sd)) = m.remove("stringData") {
                    let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
                    if let Some(d) = data.as_object_mut() {
                        for (k, v) in sd {
                            let s = v.as_str().unwrap_or("").to_string();
                            d.insert(
                                k,
                                Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                            );
                        }
                    }
                }
                m.entry("type").or_insert_with(|| json!("Opaque"));
            }
        }
        CRDS => crd_defaults(obj)?,
        _ => {}
    }
    Ok(())
}

fn crd_defaults(obj: &mut Value) -> Result<(), ApiError> {
    let group = obj
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plural = obj
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = meta::name(obj).to_string();
    let info = crate::catalog::builtins()
        .into_iter()
        .find(|s| s.storage == CRDS)
        .map(|s| s.info);
    let Some(info) = info else {
        return Err(ApiError::internal("CRD kind missing from the catalogue"));
    };
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.group".into(),
        });
    }
    if plural.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.plural".into(),
        });
    }
    if kind.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.kind".into(),
        });
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
            ),
            field: "metadata.name".into(),
        });
    }
    let versions = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage: Vec<String> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    if versions.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired",
            message: "Required value: must have exactly one version marked as storage version"
                .into(),
            field: "spec.versions".into(),
        });
    } else if storage.len() != 1 {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                Value::from(versions.len())
            ),
            field: "spec.versions".into(),
        });
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&info, &name, causes));
    }
    let spec = obj.get_mut("spec").and_then(Value::as_object_mut);
    if let Some(spec) = spec {
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            names
                .entry("singular")
                .or_insert_with(|| Value::String(kind.to_lowercase()));
            names
                .entry("listKind")
                .or_insert_with(|| Value::String(format!("{kind}List")));
        }
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    obj["status"] = json!({
        "acceptedNames": {"kind": "", "plural": ""},
        "conditions": [],
        "storedVersions": storage,
    });
    Ok(())
}

/// What the naming and establishing controllers would write right after a CRD is created.
fn establish_crd(shared: &Shared, st: &mut Writer<'_>, name: &str) {
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
        None => {
            crd["status"]["acceptedNames"] = names;
            json!([
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
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

/// Parsed `DeleteOptions` (body or query).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub orphan_dependents: Option<bool>,
}

impl DeleteOptions {
    pub fn parse(body: &[u8], query: &Query) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions::default();
        let trimmed = body.iter().any(|b| !b.is_ascii_whitespace());
        if trimmed {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            if let Some(kind) = v.get("kind").and_then(Value::as_str)
                && kind != "DeleteOptions"
            {
                return Err(ApiError::bad_request(format!(
                    "expected DeleteOptions, got {kind}"
                )));
            }
            o.dry_run = match v.get("dryRun") {
                None | Some(Value::Null) => false,
                Some(Value::Array(a)) if a.is_empty() => false,
                Some(Value::Array(a)) if a.iter().all(|x| x == "All") => true,
                Some(other) => return Err(bad_dry_run(other)),
            };
            o.propagation = v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
            o.precondition_uid = v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.precondition_rv = v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        } else {
            o.dry_run = match query.value("dryRun") {
                None => false,
                Some("All") => true,
                Some(other) => return Err(bad_dry_run(&json!(other))),
            };
            o.propagation = query.value("propagationPolicy").map(str::to_string);
            o.orphan_dependents = query.value("orphanDependents").map(|v| v == "true");
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
        {
            return Err(ApiError::invalid_kind(
                "DeleteOptions.meta.k8s.io",
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![Cause {
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                    ),
                    field: "propagationPolicy".into(),
                }],
            ));
        }
        Ok(o)
    }
}

fn bad_dry_run(v: &Value) -> ApiError {
    ApiError::invalid_kind(
        "DeleteOptions.meta.k8s.io",
        "meta.k8s.io",
        "DeleteOptions",
        "",
        vec![Cause {
            reason: "FieldValueNotSupported",
            message: format!("Unsupported value: {v}: supported values: \"All\""),
            field: "dryRun".into(),
        }],
    )
}

/// The result of a delete.
pub enum Deleted {
    Object(Arc<Value>),
    Status(Value),
}

/// Deletes one object per §2.7 (under the store lock).
pub fn delete(
    shared: &Shared,
    st: &mut Writer<'_>,
    served: &Served,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
) -> Result<Deleted, ApiError> {
    let current = st
        .get(&served.storage, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&served.info, name))?;
    let uid = meta::meta_str(&current, "uid").to_string();
    if let Some(p) = &o.precondition_uid
        && *p != uid
    {
        return Err(ApiError::conflict(
            &served.info,
            name,
            &format!("Precondition failed: UID in precondition: {p}, UID in object meta: {uid}"),
        ));
    }
    let cur_rv = meta::meta_str(&current, "resourceVersion").to_string();
    if let Some(p) = &o.precondition_rv
        && *p != cur_rv
    {
        return Err(ApiError::conflict(
            &served.info,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {p}, ResourceVersion in object meta: {cur_rv}"
            ),
        ));
    }
    let mut finalizers = meta::finalizers(&current);
    let mut added = false;
    let extra = match (o.propagation.as_deref(), o.orphan_dependents) {
        (Some("Foreground"), _) => Some("foregroundDeletion"),
        (Some("Orphan"), _) | (None, Some(true)) => Some("orphan"),
        _ => None,
    };
    if let Some(f) = extra
        && !finalizers.iter().any(|x| x == f)
    {
        finalizers.push(f.to_string());
        added = true;
    }
    let is_namespace = served.storage == NAMESPACES;
    let is_crd = served.storage == CRDS;
    if is_crd
        && !finalizers
            .iter()
            .any(|f| f == "customresourcecleanup.apiextensions.k8s.io")
    {
        finalizers.push("customresourcecleanup.apiextensions.k8s.io".into());
        added = true;
    }
    let graceful_pending = is_namespace || !finalizers.is_empty();
    if meta::is_deleting(&current) {
        if added && !o.dry_run {
            let mut obj = (*current).clone();
            meta::meta_mut(&mut obj).insert("finalizers".into(), json!(finalizers));
            let stored = st.put(&served.storage, ns, name, obj);
            shared.work.push(crate::controller::Work::Object(
                served.storage.clone(),
                ns.to_string(),
                name.to_string(),
            ));
            return Ok(Deleted::Object(stored));
        }
        return Ok(Deleted::Object(current));
    }
    if graceful_pending {
        let mut obj = (*current).clone();
        {
            let m = meta::meta_mut(&mut obj);
            m.insert(
                "deletionTimestamp".into(),
                Value::String(meta::now_rfc3339()),
            );
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if !finalizers.is_empty() {
                m.insert("finalizers".into(), json!(finalizers));
            }
            if let Some(g) = m.get("generation").and_then(Value::as_i64)
                && g > 0
            {
                m.insert("generation".into(), json!(g + 1));
            }
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        if is_crd {
            let cond = json!({"type": "Terminating", "status": "True", "lastTransitionTime": meta::now_rfc3339(), "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"});
            if let Some(cs) = obj
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                cs.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
                cs.push(cond);
            }
        }
        if o.dry_run {
            return Ok(Deleted::Object(Arc::new(obj)));
        }
        let stored = st.put(&served.storage, ns, name, obj);
        if is_crd {
            shared.rebuild_catalog(st);
        }
        let work = if is_namespace {
            crate::controller::Work::Namespace(name.to_string())
        } else if is_crd {
            crate::controller::Work::Crd(name.to_string())
        } else {
            crate::controller::Work::Object(
                served.storage.clone(),
                ns.to_string(),
                name.to_string(),
            )
        };
        shared.work.push(work);
        return Ok(Deleted::Object(stored));
    }
    let last = if o.dry_run {
        current.clone()
    } else {
        let last = st
            .remove(&served.storage, ns, name)
            .unwrap_or_else(|| current.clone());
        after_remove(shared, served, ns);
        last
    };
    if served.returns_deleted {
        Ok(Deleted::Object(last))
    } else {
        Ok(Deleted::Status(status::delete_success(
            &served.info,
            name,
            &uid,
        )))
    }
}

/// Wakes controllers waiting for a namespace or CRD to drain.
pub fn after_remove(shared: &Shared, served: &Served, ns: &str) {
    if !ns.is_empty() {
        shared
            .work
            .push(crate::controller::Work::Namespace(ns.to_string()));
    }
    if let Some(crd) = &served.crd {
        shared.work.push(crate::controller::Work::Crd(crd.clone()));
    }
    shared.work.wake();
}

fn delete_collection(
    shared: &Shared,
    r: &ResourceRequest,
    body: &[u8],
    query: &Query,
    out: &Output,
) -> Result<Resp, ApiError> {
    let filter = Filter::from_query(&r.served, query)?;
    let dopts = DeleteOptions::parse(body, query)?;
    let ns = r.namespace.clone().unwrap_or_default();
    let mut st = shared.store.write();
    let keys: Vec<(Key, Arc<Value>)> = st
        .range(&r.served.storage, r.namespace.as_deref(), None)
        .filter(|(_, v)| filter.matches(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut items = Vec::with_capacity(keys.len());
    for (k, v) in keys {
        match delete(shared, &mut st, &r.served, &k.0, &k.1, &dopts) {
            Ok(_) | Err(ApiError { code: 404, .. }) => items.push(v),
            Err(e) => return Err(e),
        }
    }
    let rv = st.rv();
    drop(st);
    let _ = ns;
    shared.work.wake();
    Ok(render::list(
        out,
        &r.served,
        &items,
        render::list_meta(rv, None, None),
        None,
    ))
}
