//! What the write verbs read from a request besides the object: [`WriteOpts`] (`dryRun`,
//! `fieldManager`), the decoded body ([`decode`]) and the body's `apiVersion`/`kind` checked
//! against the endpoint ([`check_type`]).

use serde_json::Value;

use crate::catalog::Served;
use crate::http::Query;
use crate::status::{ApiError, Cause};

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
