//! Serialising objects and lists in the negotiated representation.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::catalog::Served;
use crate::http::{self as h, Output, Resp};
use crate::table;

/// The object as served at this version (custom resources carry the requested apiVersion).
pub fn present(served: &Served, obj: &Arc<Value>) -> Arc<Value> {
    if served.is_custom() {
        let want = served.info.api_version();
        if obj.get("apiVersion").and_then(Value::as_str) != Some(want.as_str()) {
            let mut o = (**obj).clone();
            if let Some(m) = o.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(want));
            }
            return Arc::new(o);
        }
    }
    obj.clone()
}

/// `PartialObjectMetadata` for an object.
pub fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn write_json(buf: &mut Vec<u8>, v: &Value) {
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, v);
}

/// Writes an object, optionally without `apiVersion`/`kind` or with a replaced `apiVersion`.
fn write_item(buf: &mut Vec<u8>, obj: &Value, strip_type: bool, api_version: Option<&str>) {
    let Value::Object(map) = obj else {
        write_json(buf, obj);
        return;
    };
    buf.push(b'{');
    let mut first = true;
    let mut sep = |buf: &mut Vec<u8>| {
        if !first {
            buf.push(b',');
        }
        first = false;
    };
    for (k, v) in map {
        let is_type = k == "apiVersion" || k == "kind";
        if strip_type && is_type {
            continue;
        }
        sep(buf);
        write_json(buf, &Value::String(k.clone()));
        buf.push(b':');
        match (k.as_str(), api_version) {
            ("apiVersion", Some(av)) => write_json(buf, &Value::String(av.to_string())),
            _ => write_json(buf, v),
        }
    }
    buf.push(b'}');
}

/// Renders one object (GET/POST/PUT/PATCH answers).
pub fn one(out: &Output, served: &Served, obj: &Arc<Value>, code: u16) -> Resp {
    let obj = present(served, obj);
    match out {
        Output::PartialMetadata => h::json(code, &partial(&obj)),
        Output::Table => {
            let t = table::table(
                &served.info,
                &[&*obj],
                json!({"resourceVersion": ""}),
                table::IncludeObject::parse(None),
            );
            h::json(code, &t)
        }
        Output::Yaml => h::with_content_type(
            code,
            "application/yaml",
            serde_yaml::to_string(&*obj)
                .unwrap_or_default()
                .into_bytes(),
        ),
        _ => h::json(code, &obj),
    }
}

/// List metadata: resourceVersion always, continue and remainingItemCount when set.
pub fn list_meta(rv: u64, cont: Option<&str>, remaining: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if let Some(c) = cont {
        m.insert("continue".into(), Value::String(c.to_string()));
    }
    if let Some(r) = remaining {
        m.insert("remainingItemCount".into(), Value::from(r));
    }
    Value::Object(m)
}

/// Renders a list page.
pub fn list(
    out: &Output,
    served: &Served,
    items: &[Arc<Value>],
    meta: Value,
    include_object: Option<&str>,
) -> Resp {
    match out {
        Output::Table => {
            let presented: Vec<Arc<Value>> = items.iter().map(|o| present(served, o)).collect();
            let refs: Vec<&Value> = presented.iter().map(|a| &**a).collect();
            let t = table::table(
                &served.info,
                &refs,
                meta,
                table::IncludeObject::parse(include_object),
            );
            h::json(200, &t)
        }
        Output::Yaml => {
            let full_list = json!({
                "kind": served.info.list_kind,
                "apiVersion": served.info.api_version(),
                "metadata": meta,
                "items": items.iter().map(|o| (*present(served, o)).clone()).collect::<Vec<_>>(),
            });
            h::with_content_type(
                200,
                "application/yaml",
                serde_yaml::to_string(&full_list)
                    .unwrap_or_default()
                    .into_bytes(),
            )
        }
        _ => {
            let mut buf = Vec::with_capacity(128 + items.len() * 256);
            let partial_out = *out == Output::PartialMetadata;
            if partial_out {
                buf.extend_from_slice(br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":"#);
            } else {
                buf.extend_from_slice(b"{\"kind\":");
                write_json(&mut buf, &Value::String(served.info.list_kind.clone()));
                buf.extend_from_slice(b",\"apiVersion\":");
                write_json(&mut buf, &Value::String(served.info.api_version()));
                buf.extend_from_slice(b",\"metadata\":");
            }
            write_json(&mut buf, &meta);
            buf.extend_from_slice(b",\"items\":[");
            let av = served.info.api_version();
            for (i, o) in items.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                if partial_out {
                    write_json(&mut buf, &partial(o));
                } else if served.is_custom() {
                    write_item(&mut buf, o, false, Some(&av));
                } else {
                    write_item(&mut buf, o, true, None);
                }
            }
            buf.extend_from_slice(b"]}");
            h::json_bytes(200, buf)
        }
    }
}

/// One watch event line (newline-terminated) for an object.
pub fn event_line(out: &Output, served: &Served, etype: &str, obj: &Arc<Value>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(etype.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    match out {
        Output::PartialMetadata => write_json(&mut buf, &partial(obj)),
        Output::Table => {
            let t = table::table(
                &served.info,
                &[&**obj],
                json!({"resourceVersion": ""}),
                table::IncludeObject::parse(None),
            );
            write_json(&mut buf, &t);
        }
        _ if served.is_custom() => {
            write_item(&mut buf, obj, false, Some(&served.info.api_version()))
        }
        _ => write_json(&mut buf, obj),
    }
    buf.extend_from_slice(b"}\n");
    buf
}

/// A BOOKMARK event line.
pub fn bookmark_line(out: &Output, served: &Served, rv: u64, initial_end: bool) -> Vec<u8> {
    let (kind, av) = if *out == Output::PartialMetadata {
        (
            "PartialObjectMetadata".to_string(),
            "meta.k8s.io/v1".to_string(),
        )
    } else {
        (served.info.kind.clone(), served.info.api_version())
    };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let ev =
        json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": av, "metadata": meta}});
    let mut buf = serde_json::to_vec(&ev).unwrap_or_default();
    buf.push(b'\n');
    buf
}

/// An ERROR event line carrying a Status.
pub fn error_line(status: &Value) -> Vec<u8> {
    let mut buf =
        serde_json::to_vec(&json!({"type": "ERROR", "object": status})).unwrap_or_default();
    buf.push(b'\n');
    buf
}
