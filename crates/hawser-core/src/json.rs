//! Reading a string field of an untyped object by JSON pointer.

use serde_json::Value;

/// The string at `pointer` in `value`, `None` when it is missing or not a string.
#[must_use]
pub fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The string at `pointer` in `value`, `""` when it is missing or not a string.
#[must_use]
pub fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    str_at(value, pointer).unwrap_or_default()
}
