//! Discovery (legacy and aggregated v2), `/version`, and the OpenAPI v3 endpoints.

use http::HeaderMap;
use serde_json::{Value, json};

use crate::catalog::Served;
use crate::http::{self as h, Output, Query, Resp};
use crate::openapi;
use crate::shared::{Route, Shared};

const AGGREGATED_CT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The `/version` Info.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a5551a2a9e43a2d3e1e1b6",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn resource_entries(s: &Served) -> Vec<Value> {
    let i = &s.info;
    let mut main = json!({
        "name": i.plural,
        "singularName": i.singular,
        "namespaced": i.namespaced,
        "kind": i.kind,
        "verbs": i.verbs,
    });
    if !i.short_names.is_empty() {
        main["shortNames"] = json!(i.short_names);
    }
    if !i.categories.is_empty() {
        main["categories"] = json!(i.categories);
    }
    main["storageVersionHash"] = json!(storage_hash(&s.storage));
    let mut out = vec![main];
    if i.status_subresource {
        out.push(json!({"name": format!("{}/status", i.plural), "singularName": "", "namespaced": i.namespaced, "kind": i.kind, "verbs": ["get", "patch", "update"]}));
    }
    for sub in &s.extra_subresources {
        let (kind, verbs) = subresource_kind_verbs(i, sub);
        out.push(json!({"name": format!("{}/{sub}", i.plural), "singularName": "", "namespaced": i.namespaced, "kind": kind, "verbs": verbs}));
    }
    out
}

/// The kind and verbs discovery lists for a subresource other than `status`: a pod's `exec`
/// takes `PodExecOptions` (`create` and `get`), a namespace's `finalize` the object (`update`).
fn subresource_kind_verbs<'a>(
    i: &'a crate::resource::ResourceInfo,
    sub: &str,
) -> (&'a str, &'static [&'static str]) {
    if sub == crate::catalog::EXEC {
        ("PodExecOptions", &["create", "get"])
    } else {
        (&i.kind, &["update"])
    }
}

fn storage_hash(storage: &str) -> String {
    // A stable short hash of the storage key (the real one is a hash of the storage version).
    use base64::Engine;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in storage.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    base64::engine::general_purpose::STANDARD.encode(&h.to_be_bytes()[..8])[..11].to_string()
}

fn aggregated_resource(s: &Served) -> Value {
    let i = &s.info;
    let kind = json!({"group": i.group, "version": i.version, "kind": i.kind});
    let mut r = json!({
        "resource": i.plural,
        "responseKind": kind,
        "scope": if i.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": i.singular,
        "verbs": i.verbs,
    });
    if !i.short_names.is_empty() {
        r["shortNames"] = json!(i.short_names);
    }
    if !i.categories.is_empty() {
        r["categories"] = json!(i.categories);
    }
    let mut subs = Vec::new();
    if i.status_subresource {
        subs.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    for sub in &s.extra_subresources {
        let (sub_kind, verbs) = subresource_kind_verbs(i, sub);
        let response = json!({"group": i.group, "version": i.version, "kind": sub_kind});
        subs.push(json!({"subresource": sub, "responseKind": response, "verbs": verbs}));
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// Serves `/api`, `/apis`, `/apis/<g>`, `/api/v1`, `/apis/<g>/<v>`.
pub fn serve(shared: &Shared, route: &Route, accept: Option<&str>, headers: &HeaderMap) -> Resp {
    let aggregated_ok = matches!(route, Route::CoreVersions | Route::GroupList);
    let out = match h::negotiate(accept, aggregated_ok) {
        Ok(o) => o,
        Err(e) => return h::error(&e),
    };
    let catalog = shared.catalog().discoverable();
    if out == Output::AggregatedDiscovery {
        let items: Vec<Value> = match route {
            Route::CoreVersions => {
                let res: Vec<Value> = catalog
                    .entries()
                    .iter()
                    .filter(|s| s.info.group.is_empty())
                    .map(|s| aggregated_resource(s))
                    .collect();
                vec![
                    json!({"metadata": {"creationTimestamp": null}, "versions": [{"version": "v1", "resources": res, "freshness": "Current"}]}),
                ]
            }
            _ => catalog
                .groups()
                .iter()
                .map(|(g, versions)| {
                    let vs: Vec<Value> = versions
                        .iter()
                        .map(|v| {
                            let mut res: Vec<&std::sync::Arc<Served>> = catalog
                                .entries()
                                .iter()
                                .filter(|s| s.info.group == *g && s.info.version == *v)
                                .collect();
                            res.sort_by(|a, b| a.info.plural.cmp(&b.info.plural));
                            let res: Vec<Value> =
                                res.iter().map(|s| aggregated_resource(s)).collect();
                            json!({"version": v, "resources": res, "freshness": "Current"})
                        })
                        .collect();
                    json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": vs})
                })
                .collect(),
        };
        let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items});
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let etag = format!("\"{:016x}\"", fnv(&bytes));
        if headers
            .get(http::header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            == Some(etag.as_str())
        {
            let mut r = h::with_content_type(304, AGGREGATED_CT, Vec::new());
            if let Ok(v) = http::HeaderValue::from_str(&etag) {
                r.headers_mut().insert(http::header::ETAG, v);
            }
            return r;
        }
        let mut r = h::with_content_type(200, AGGREGATED_CT, bytes);
        if let Ok(v) = http::HeaderValue::from_str(&etag) {
            r.headers_mut().insert(http::header::ETAG, v);
        }
        r.headers_mut()
            .insert(http::header::VARY, http::HeaderValue::from_static("Accept"));
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("public"),
        );
        return r;
    }
    let body = match route {
        Route::CoreVersions => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
        }),
        Route::GroupList => {
            let groups: Vec<Value> = catalog
                .groups()
                .iter()
                .map(|(g, vs)| group_json(g, vs))
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        Route::Group(g) => {
            let groups = catalog.groups();
            let versions = groups
                .iter()
                .find(|(x, _)| x == g)
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let mut v = group_json(g, &versions);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        }
        Route::ResourceList(g, v) => {
            let resources: Vec<Value> = catalog
                .entries()
                .iter()
                .filter(|s| s.info.group == *g && s.info.version == *v)
                .flat_map(|s| resource_entries(s))
                .collect();
            let gv = if g.is_empty() {
                v.clone()
            } else {
                format!("{g}/{v}")
            };
            let mut body =
                json!({"kind": "APIResourceList", "groupVersion": gv, "resources": resources});
            if !g.is_empty() {
                body["apiVersion"] = json!("v1");
            }
            body
        }
        _ => return h::error(&crate::status::ApiError::page_not_found()),
    };
    h::json(200, &body)
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `/openapi/v3` and `/openapi/v3/<gv>`.
pub fn openapi(shared: &Shared, route: &Route, _query: &Query) -> Resp {
    let catalog = shared.catalog().discoverable();
    let mut gvs: Vec<String> = vec!["api/v1".to_string()];
    for (g, vs) in catalog.groups() {
        for v in vs {
            gvs.push(format!("apis/{g}/{v}"));
        }
    }
    match route {
        Route::OpenApiIndex => h::json(200, &openapi::v3_index(&gvs)),
        Route::OpenApiDoc(path) => {
            if !gvs.contains(path) {
                return h::error(&crate::status::ApiError::page_not_found());
            }
            let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
                ["api", v] => (String::new(), (*v).to_string()),
                ["apis", g, v] => ((*g).to_string(), (*v).to_string()),
                _ => return h::error(&crate::status::ApiError::page_not_found()),
            };
            let resources: Vec<crate::resource::ResourceInfo> = catalog
                .entries()
                .iter()
                .filter(|s| s.info.group == group && s.info.version == version)
                .map(|s| s.info.clone())
                .collect();
            h::json(200, &openapi::v3_document(path, &resources))
        }
        _ => h::error(&crate::status::ApiError::page_not_found()),
    }
}
