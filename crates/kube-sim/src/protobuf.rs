//! Decoding of the protobuf request bodies kubectl's imperative generators send
//! (`kubectl create namespace|configmap|secret|serviceaccount`): the `k8s\0` envelope with a
//! `runtime.Unknown`, and the few message types those commands use. Anything else is 415.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\x00";

#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("malformed protobuf body")]
    Malformed,
    #[error(
        "protobuf bodies are only understood for Namespace, ConfigMap, Secret and ServiceAccount (got {0})"
    )]
    Unsupported(String),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ProtoError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or(ProtoError::Malformed)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(ProtoError::Malformed)
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtoError> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wt) = (key >> 3, key & 7);
        let w = match wt {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            1 => {
                pos = pos.checked_add(8).ok_or(ProtoError::Malformed)?;
                Wire::Fixed
            }
            2 => {
                let len =
                    usize::try_from(varint(buf, &mut pos)?).map_err(|_| ProtoError::Malformed)?;
                let end = pos.checked_add(len).ok_or(ProtoError::Malformed)?;
                let b = buf.get(pos..end).ok_or(ProtoError::Malformed)?;
                pos = end;
                Wire::Bytes(b)
            }
            5 => {
                pos = pos.checked_add(4).ok_or(ProtoError::Malformed)?;
                Wire::Fixed
            }
            _ => return Err(ProtoError::Malformed),
        };
        if pos > buf.len() {
            return Err(ProtoError::Malformed);
        }
        out.push((num, w));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed)
}

/// A `map<string, string>` (or bytes values, base64-encoded) entry.
fn map_entry(b: &[u8], base64_value: bool) -> Result<(String, Value), ProtoError> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, w) in fields(b)? {
        match (n, w) {
            (1, Wire::Bytes(x)) => k = string(x)?,
            (2, Wire::Bytes(x)) if base64_value => {
                v = Value::String(base64::engine::general_purpose::STANDARD.encode(x));
            }
            (2, Wire::Bytes(x)) => v = Value::String(string(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (n, w) in fields(b)? {
        match (n, w) {
            (1, Wire::Bytes(x)) => {
                m.insert("name".into(), Value::String(string(x)?));
            }
            (2, Wire::Bytes(x)) => {
                m.insert("generateName".into(), Value::String(string(x)?));
            }
            (3, Wire::Bytes(x)) => {
                m.insert("namespace".into(), Value::String(string(x)?));
            }
            (6, Wire::Bytes(x)) => {
                m.insert("resourceVersion".into(), Value::String(string(x)?));
            }
            (11, Wire::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                labels.insert(k, v);
            }
            (12, Wire::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                annotations.insert(k, v);
            }
            (14, Wire::Bytes(x)) => finalizers.push(Value::String(string(x)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtoError::Malformed)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, w) in fields(rest)? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (tn, tw) in fields(tm)? {
                    match (tn, tw) {
                        (1, Wire::Bytes(x)) => api_version = string(x)?,
                        (2, Wire::Bytes(x)) => kind = string(x)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), Value::String(api_version.clone()));
    obj.insert("kind".into(), Value::String(kind.clone()));
    let mut data = Map::new();
    let mut binary = Map::new();
    let mut string_data = Map::new();
    let mut spec_finalizers = Vec::new();
    for (n, w) in fields(raw)? {
        let Wire::Bytes(x) = w else {
            if let (Wire::Varint(v), true) = (
                w,
                (kind == "ConfigMap" && n == 4) || (kind == "Secret" && n == 5),
            ) {
                obj.insert("immutable".into(), json!(v != 0));
            }
            continue;
        };
        match (api_version.as_str(), kind.as_str(), n) {
            ("v1", _, 1) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("v1", "Namespace", 2) => {
                for (sn, sw) in fields(x)? {
                    if let (1, Wire::Bytes(f)) = (sn, sw) {
                        spec_finalizers.push(Value::String(string(f)?));
                    }
                }
            }
            ("v1", "ConfigMap", 2) => {
                let (k, v) = map_entry(x, false)?;
                data.insert(k, v);
            }
            ("v1", "ConfigMap", 3) => {
                let (k, v) = map_entry(x, true)?;
                binary.insert(k, v);
            }
            ("v1", "Secret", 2) => {
                let (k, v) = map_entry(x, true)?;
                data.insert(k, v);
            }
            ("v1", "Secret", 3) => {
                obj.insert("type".into(), Value::String(string(x)?));
            }
            ("v1", "Secret", 4) => {
                let (k, v) = map_entry(x, false)?;
                string_data.insert(k, v);
            }
            ("v1", "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount", _) => {}
            _ => {
                return Err(ProtoError::Unsupported(format!(
                    "{api_version}, Kind={kind}"
                )));
            }
        }
    }
    if !matches!(
        kind.as_str(),
        "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
    ) || api_version != "v1"
    {
        return Err(ProtoError::Unsupported(format!(
            "{api_version}, Kind={kind}"
        )));
    }
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !binary.is_empty() {
        obj.insert("binaryData".into(), Value::Object(binary));
    }
    if !string_data.is_empty() {
        obj.insert("stringData".into(), Value::Object(string_data));
    }
    if !spec_finalizers.is_empty() {
        obj.insert("spec".into(), json!({"finalizers": spec_finalizers}));
    }
    obj.entry("metadata").or_insert_with(|| json!({}));
    Ok(Value::Object(obj))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn field(n: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![
            u8::try_from(n << 3 | 2).unwrap(),
            u8::try_from(bytes.len()).unwrap(),
        ];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let meta = [
            field(1, b"cm1"),
            field(11, &[field(1, b"app"), field(2, b"x")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"app": "x"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn rejects_other_kinds_and_garbage() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [
            MAGIC.to_vec(),
            field(1, &type_meta),
            field(2, &field(1, b"")),
        ]
        .concat();
        assert!(matches!(decode(&body), Err(ProtoError::Unsupported(_))));
        assert!(matches!(decode(b"k8s\x00\xff"), Err(ProtoError::Malformed)));
        assert!(matches!(decode(b"{}"), Err(ProtoError::Malformed)));
    }
}
