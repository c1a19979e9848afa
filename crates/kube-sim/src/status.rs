//! API errors and the `metav1.Status` bodies they become.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;

/// An error answered to an API client as a full `Status` object (or, for a few real cases, plain text).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    /// `StatusReason`; empty for errors that did not originate as a Status (e.g. create with RV).
    pub reason: String,
    pub message: String,
    /// `details`, when the real server fills it.
    pub details: Option<Value>,
    /// Plain-text body instead of a Status (APF 429, unknown paths).
    pub plain: bool,
    /// Extra fields merged into the Status `metadata` (e.g. `continue` for an expired token).
    pub metadata: Option<Value>,
}

/// One `details.causes[]` entry.
#[derive(Debug, Clone)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            plain: false,
            metadata: None,
        }
    }

    #[must_use]
    pub fn with_details(mut self, mut details: Value) -> ApiError {
        strip_empty(&mut details);
        self.details = Some(details);
        self
    }

    /// The plain-text `404 page not found` of Go's `http.NotFound`.
    pub fn page_not_found() -> ApiError {
        ApiError {
            plain: true,
            ..ApiError::new(404, "NotFound", "404 page not found\n")
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    pub fn not_found(res: &ResourceInfo, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", res.qualified_plural(), name),
        )
        .with_details(json!({"name": name, "group": res.group, "kind": res.plural}))
    }

    pub fn namespace_not_found(ns: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
            .with_details(json!({"name": ns, "kind": "namespaces"}))
    }

    pub fn already_exists(res: &ResourceInfo, name: &str, deleting: bool) -> ApiError {
        let prefix = if deleting {
            "object is being deleted: "
        } else {
            ""
        };
        ApiError::new(
            409,
            "AlreadyExists",
            format!(
                "{prefix}{} \"{}\" already exists",
                res.qualified_plural(),
                name
            ),
        )
        .with_details(json!({"name": name, "group": res.group, "kind": res.plural}))
    }

    pub fn conflict(res: &ResourceInfo, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                res.qualified_plural(),
                name,
                why
            ),
        )
        .with_details(json!({"name": name, "group": res.group, "kind": res.plural}))
    }

    pub fn modified_conflict(res: &ResourceInfo, name: &str) -> ApiError {
        ApiError::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid on an object: `Kind.group "name" is invalid: field: message, ...`.
    pub fn invalid(res: &ResourceInfo, name: &str, causes: Vec<Cause>) -> ApiError {
        let qualified_kind = if res.group.is_empty() {
            res.kind.clone()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        ApiError::invalid_kind(&qualified_kind, &res.group, &res.kind, name, causes)
    }

    /// 422 Invalid for an arbitrary qualified kind (e.g. `ListOptions.meta.k8s.io`).
    pub fn invalid_kind(
        qualified_kind: &str,
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<Cause>,
    ) -> ApiError {
        let parts: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let causes_json: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        let mut details =
            json!({"name": name, "group": group, "kind": kind, "causes": causes_json});
        strip_empty(&mut details);
        ApiError::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(details)
    }

    pub fn method_not_allowed(verb: &str, res: &ResourceInfo) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({verb} {})",
                res.qualified_plural()
            ),
        )
    }

    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got \"{content_type}\")"
            ),
        )
    }

    pub fn not_acceptable() -> ApiError {
        ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        )
    }

    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    /// `details.retryAfterSeconds`, when set.
    pub fn retry_after(&self) -> Option<u64> {
        self.details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
            .filter(|s| *s > 0)
    }

    /// The Status object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), "Status".into());
        status.insert("apiVersion".into(), "v1".into());
        status.insert(
            "metadata".into(),
            self.metadata.clone().unwrap_or_else(|| json!({})),
        );
        status.insert("status".into(), "Failure".into());
        status.insert("message".into(), self.message.clone().into());
        // `reason` is omitted when empty (Go's omitempty), as the real server writes it.
        if !self.reason.is_empty() {
            status.insert("reason".into(), self.reason.clone().into());
        }
        if let Some(d) = &self.details {
            status.insert("details".into(), d.clone());
        }
        status.insert("code".into(), self.code.into());
        Value::Object(status)
    }
}

/// Removes empty-string and empty-array members, as Go's omitempty would.
fn strip_empty(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| match x {
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => true,
        });
    }
}

/// The Success Status a delete answers for kinds that do not return the deleted object.
pub fn delete_success(res: &ResourceInfo, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "group": res.group, "kind": res.plural, "uid": uid});
    strip_empty(&mut details);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
