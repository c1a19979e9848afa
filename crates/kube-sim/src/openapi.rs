//! The OpenAPI v3 documents kubectl reads before `create`/`apply`/`replace -f`.
//!
//! kubectl validates with `--validate=strict` by default: it fetches `/openapi/v3`, then the
//! group-version document, and looks for a PATCH operation whose `x-kubernetes-group-version-kind`
//! is the object's kind and which declares the `fieldValidation` query parameter; for custom
//! resources whose group is not found it checks the Namespace PATCH operation in `api/v1`. When it
//! finds the parameter it sends `fieldValidation=Strict` and leaves validation to the server.
//!
//! The documents here carry exactly that: one item path per resource with GET and PATCH operations
//! (PATCH declaring `dryRun`, `fieldManager`, `fieldValidation`, `force`), and no schemas
//! (`components.schemas` is empty). The PATCH request body lists JSON patch, merge patch and apply
//! but not strategic merge patch, so client-side `kubectl apply` does not try to build a patch
//! from the (absent) v3 schemas and falls back to its compiled-in types.
//!
//! The `hash` in the index covers the list of served group-versions, so it changes when a group
//! appears or disappears; it does not change when a kind is added to an existing group.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;

/// `GET /openapi/v3`: one entry per served group-version (`api/v1`, `apis/apps/v1`, …).
#[must_use]
pub fn v3_index(group_versions: &[String]) -> Value {
    let mut all: Vec<&String> = group_versions.iter().collect();
    all.sort();
    let mut paths = Map::new();
    for gv in group_versions {
        let mut h = Fnv::new();
        h.write(gv.as_bytes());
        for other in &all {
            h.write(b"\n");
            h.write(other.as_bytes());
        }
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={:016X}", h.finish())}),
        );
    }
    json!({"paths": paths})
}

/// 64-bit FNV-1a: small, stable across builds and platforms (the index hash must not vary).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The `api/v1` or `apis/<group>/<version>` path of a resource's group-version.
fn gv_path(r: &ResourceInfo) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

fn namespace_resource() -> ResourceInfo {
    ResourceInfo {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        list_kind: "NamespaceList".into(),
        plural: "namespaces".into(),
        singular: "namespace".into(),
        short_names: vec!["ns".into()],
        categories: vec![],
        namespaced: false,
        verbs: vec![],
        status_subresource: true,
        uses_generation: false,
        printer_columns: vec![],
    }
}

fn query_param(name: &str, type_: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": type_, "uniqueItems": true}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
           "schema": {"type": "string", "uniqueItems": true}})
}

fn json_content() -> Value {
    json!({"application/json": {"schema": {"type": "object"}}})
}

fn item_path(r: &ResourceInfo) -> (String, Value) {
    let prefix = format!("/{}", gv_path(r));
    let path = if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{prefix}/{}/{{name}}", r.plural)
    };
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let op_suffix = format!("{}{}", if r.namespaced { "Namespaced" } else { "" }, r.kind);
    let mut parameters = vec![path_param("name", &format!("name of the {}", r.kind))];
    if r.namespaced {
        parameters.push(path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    let body_schema = json!({"schema": {"type": "object"}});
    let item = json!({
        "parameters": parameters,
        "get": {
            "description": format!("read the specified {}", r.kind),
            "operationId": format!("read{op_suffix}"),
            "responses": {"200": {"description": "OK", "content": json_content()}},
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": gvk,
        },
        "patch": {
            "description": format!("partially update the specified {}", r.kind),
            "operationId": format!("patch{op_suffix}"),
            "parameters": [
                query_param("dryRun", "string", "When present, indicates that modifications should not be persisted. The only valid value is All."),
                query_param("fieldManager", "string", "A name associated with the actor or entity that is making these changes. Required for apply requests."),
                query_param("fieldValidation", "string", "How to handle unknown or duplicate fields in the request: Ignore, Warn (default) or Strict."),
                query_param("force", "boolean", "Take ownership of conflicting fields; only valid for apply requests."),
            ],
            "requestBody": {
                "required": true,
                "content": {
                    "application/json-patch+json": body_schema,
                    "application/merge-patch+json": body_schema,
                    "application/apply-patch+yaml": body_schema,
                },
            },
            "responses": {
                "200": {"description": "OK", "content": json_content()},
                "201": {"description": "Created", "content": json_content()},
            },
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        },
    });
    (path, item)
}

/// `GET /openapi/v3/<group_version_path>`: the document for one group-version. Resources of
/// other group-versions in `resources` are ignored; `api/v1` always includes Namespace.
#[must_use]
pub fn v3_document(group_version_path: &str, resources: &[ResourceInfo]) -> Value {
    let gv_path_trimmed = group_version_path.trim_matches('/');
    let mut selected: Vec<ResourceInfo> = resources
        .iter()
        .filter(|r| gv_path(r) == gv_path_trimmed)
        .cloned()
        .collect();
    if gv_path_trimmed == "api/v1" && !selected.iter().any(|r| r.kind == "Namespace") {
        selected.push(namespace_resource());
    }
    let mut paths = Map::new();
    for r in &selected {
        let (p, item) = item_path(r);
        paths.insert(p, item);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn res(group: &str, kind: &str, plural: &str, namespaced: bool) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced,
            verbs: vec![],
            status_subresource: false,
            uses_generation: false,
            printer_columns: vec![],
        }
    }

    /// What kubectl's query-parameter verifier looks for: a PATCH operation for the kind whose
    /// own parameters include the query parameter.
    fn supports_param(doc: &Value, group: &str, kind: &str, param: &str) -> bool {
        doc["paths"].as_object().unwrap().values().any(|p| {
            let op = &p["patch"];
            let gvk = &op["x-kubernetes-group-version-kind"];
            gvk["group"] == group
                && gvk["version"] == "v1"
                && gvk["kind"] == kind
                && op["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|x| x["name"] == param && x["in"] == "query"))
        })
    }

    #[test]
    fn index_lists_every_group_version_with_stable_hash() {
        let gvs = vec!["api/v1".to_string(), "apis/apps/v1".to_string()];
        let a = v3_index(&gvs);
        let b = v3_index(&gvs);
        assert_eq!(a, b);
        let url = a["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert_ne!(
            a["paths"]["api/v1"]["serverRelativeURL"],
            a["paths"]["apis/apps/v1"]["serverRelativeURL"]
        );
        let more = v3_index(&[
            "api/v1".to_string(),
            "apis/apps/v1".to_string(),
            "apis/x.io/v1".to_string(),
        ]);
        assert_ne!(
            more["paths"]["api/v1"], a["paths"]["api/v1"],
            "hash changes when groups change"
        );
    }

    #[test]
    fn document_advertises_field_validation_per_kind() {
        let resources = vec![
            res("", "ConfigMap", "configmaps", true),
            res("", "Namespace", "namespaces", false),
            res("example.com", "Backup", "backups", true),
        ];
        let core = v3_document("api/v1", &resources);
        assert_eq!(core["openapi"], "3.0.0");
        assert!(supports_param(&core, "", "ConfigMap", "fieldValidation"));
        assert!(supports_param(&core, "", "Namespace", "fieldValidation"));
        assert!(supports_param(&core, "", "ConfigMap", "fieldManager"));
        assert!(supports_param(&core, "", "ConfigMap", "dryRun"));
        assert!(!supports_param(
            &core,
            "example.com",
            "Backup",
            "fieldValidation"
        ));
        assert!(
            core["paths"]
                .get("/api/v1/namespaces/{namespace}/configmaps/{name}")
                .is_some()
        );
        assert!(core["paths"].get("/api/v1/namespaces/{name}").is_some());

        let group = v3_document("apis/example.com/v1", &resources);
        assert!(supports_param(
            &group,
            "example.com",
            "Backup",
            "fieldValidation"
        ));
        assert_eq!(group["paths"].as_object().unwrap().len(), 1);
        assert!(
            group["paths"]
                .get("/apis/example.com/v1/namespaces/{namespace}/backups/{name}")
                .is_some()
        );
    }

    #[test]
    fn core_document_always_has_namespace() {
        let doc = v3_document("api/v1", &[]);
        assert!(supports_param(&doc, "", "Namespace", "fieldValidation"));
    }

    #[test]
    fn patch_body_omits_strategic_merge() {
        let doc = v3_document("api/v1", &[res("", "ConfigMap", "configmaps", true)]);
        for p in doc["paths"].as_object().unwrap().values() {
            let content = p["patch"]["requestBody"]["content"].as_object().unwrap();
            assert!(content.contains_key("application/merge-patch+json"));
            assert!(!content.contains_key("application/strategic-merge-patch+json"));
        }
        assert_eq!(doc["components"], json!({"schemas": {}}));
    }
}
