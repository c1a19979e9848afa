//! Hand-written JSON schemas for fields whose derived schema would not match Velero's CRDs.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A list of arbitrary objects (Velero's `[]runtime.RawExtension`), kept unpruned.
pub(crate) fn raw_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "nullable": true,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// Optional bytes (Go `[]byte`), base64 in JSON.
pub(crate) fn optional_bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "byte",
        "nullable": true,
    })
}
