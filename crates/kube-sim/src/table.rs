//! `meta.k8s.io/v1` Table responses, what `kubectl get` asks for.
//!
//! Columns are `Name` followed by the resource's printer columns, or a single `Age` column
//! (`.metadata.creationTimestamp`) when it has none — what the server does for custom resources.
//! Cells are computed as the server's custom-resource table converter computes them:
//! `string` columns print the value (JSON text for non-strings), `integer`/`number`/`boolean`
//! columns carry the raw JSON value when it has that type, `date` columns a human-readable age
//! (`5m`, `3h2m`, `12d`), exactly as kubectl prints it; a missing value is `null`.
//! Rows carry the object as `PartialObjectMetadata`, whole, or not at all (`includeObject`).

use serde_json::{Map, Value, json};

use crate::resource::{PrinterColumn, ResourceInfo};

/// The `includeObject` query parameter of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses `includeObject`; absent or unrecognised means `Metadata`, the server's default.
    #[must_use]
    pub fn parse(v: Option<&str>) -> IncludeObject {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Cannot be updated.";
const AGE_DESCRIPTION: &str =
    "CreationTimestamp is the server time when this object was created, in RFC 3339 form, UTC.";

/// Builds the Table for `objects` (a list, or one object for a GET) with `list_meta` as its
/// `metadata` (`resourceVersion`, `continue`, `remainingItemCount`). Ages are relative to now.
#[must_use]
pub fn table(
    resource: &ResourceInfo,
    objects: &[&Value],
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    table_at(
        resource,
        objects,
        list_meta,
        include,
        jiff::Timestamp::now(),
    )
}

/// [`table`] with ages computed relative to `now`.
#[must_use]
pub fn table_at(
    resource: &ResourceInfo,
    objects: &[&Value],
    list_meta: Value,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    let default_columns;
    let columns: &[PrinterColumn] = if resource.printer_columns.is_empty() {
        default_columns = [PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: AGE_DESCRIPTION.into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }];
        &default_columns
    } else {
        &resource.printer_columns
    };
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0,
    })];
    defs.extend(columns.iter().map(|c| {
        json!({
            "name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority,
        })
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let name = obj
                .pointer("/metadata/name")
                .cloned()
                .unwrap_or(Value::String(String::new()));
            let mut cells = vec![name];
            cells.extend(columns.iter().map(|c| cell(c, obj, now)));
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert(
                        "object".into(),
                        json!({
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                        }),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), (*obj).clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

fn cell(col: &PrinterColumn, obj: &Value, now: jiff::Timestamp) -> Value {
    let Some(v) = eval_json_path(obj, &col.json_path) else {
        return Value::Null;
    };
    match (col.type_.as_str(), v) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(s)) => Value::String(s.clone()),
        ("string", other) => Value::String(other.to_string()),
        ("integer", Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!(i),
            // Truncation toward zero, as the server converts float values for integer columns.
            #[allow(clippy::cast_possible_truncation)]
            (None, Some(f)) => json!(f as i64),
            _ => Value::Null,
        },
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => match s.parse::<jiff::Timestamp>() {
            Ok(t) => Value::String(human_duration(now.duration_since(t).as_secs())),
            Err(_) => Value::String("<invalid>".into()),
        },
        _ => Value::Null,
    }
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`, `.a[*].b` = first element, `['x.y']`,
/// `.a\.b` escapes, optional `{…}` braces) to the first value it selects.
#[must_use]
pub fn eval_json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut cur = obj;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    name.push(chars[i]);
                    i += 1;
                }
                if !name.is_empty() {
                    cur = cur.get(&name)?;
                }
            }
            '[' => {
                let end = chars[i..].iter().position(|c| *c == ']')? + i;
                let inner: String = chars[i + 1..end].iter().collect();
                let inner = inner.trim();
                cur = if inner == "*" {
                    match cur {
                        Value::Array(a) => a.first()?,
                        Value::Object(m) => m.values().next()?,
                        _ => return None,
                    }
                } else if let Ok(idx) = inner.parse::<i64>() {
                    let a = cur.as_array()?;
                    let len = i64::try_from(a.len()).ok()?;
                    let idx = if idx < 0 { idx + len } else { idx };
                    a.get(usize::try_from(idx).ok()?)?
                } else {
                    let key = inner.trim_matches(|c| c == '\'' || c == '"');
                    cur.get(key)?
                };
                i = end + 1;
            }
            _ => return None,
        }
    }
    Some(cur)
}

/// A duration in seconds as the server's printers write ages (`42s`, `3m5s`, `2h10m`, `5d`, `2y3d`).
#[must_use]
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn resource(columns: Vec<PrinterColumn>) -> ResourceInfo {
        ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Backup".into(),
            list_kind: "BackupList".into(),
            plural: "backups".into(),
            singular: "backup".into(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            verbs: vec![],
            status_subresource: true,
            uses_generation: true,
            printer_columns: columns,
        }
    }

    fn col(name: &str, type_: &str, path: &str, priority: i32) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority,
            json_path: path.into(),
        }
    }

    fn now() -> jiff::Timestamp {
        "2025-01-02T03:04:05Z".parse().unwrap()
    }

    fn backup() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Backup",
            "metadata": {"name": "b1", "namespace": "velero", "creationTimestamp": "2025-01-02T02:59:05Z", "uid": "u"},
            "spec": {"ttl": "720h", "included": ["a", "b"], "items": [{"n": 1}, {"n": 2}]},
            "status": {"phase": "Completed", "progress": {"itemsBackedUp": 7}, "ratio": 0.5, "ok": true,
                       "started": "2025-01-01T03:04:05Z"}
        })
    }

    #[test]
    fn default_age_column() {
        let b = backup();
        let t = table_at(
            &resource(vec![]),
            &[&b],
            json!({"resourceVersion": "9"}),
            IncludeObject::Metadata,
            now(),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "9"}));
        let defs = t["columnDefinitions"].as_array().unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[0]["type"], "string");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[1]["name"], "Age");
        assert_eq!(defs[1]["type"], "date");
        assert_eq!(t["rows"][0]["cells"], json!(["b1", "5m"]));
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": b["metadata"]})
        );
    }

    #[test]
    fn printer_columns_cells_by_type() {
        let b = backup();
        let cols = vec![
            col("Phase", "string", ".status.phase", 0),
            col("Items", "integer", ".status.progress.itemsBackedUp", 0),
            col("Ratio", "number", ".status.ratio", 1),
            col("OK", "boolean", ".status.ok", 0),
            col("Started", "date", ".status.started", 0),
            col("First", "string", ".spec.included[0]", 0),
            col("N", "integer", ".spec.items[*].n", 0),
            col("Included", "string", ".spec.included", 0),
            col("Missing", "string", ".status.nothing", 0),
            col("WrongType", "integer", ".status.phase", 0),
            col("Braced", "string", "{.spec.ttl}", 0),
        ];
        let t = table_at(
            &resource(cols),
            &[&b],
            json!({}),
            IncludeObject::None,
            now(),
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "b1",
                "Completed",
                7,
                0.5,
                true,
                "24h",
                "a",
                1,
                "[\"a\",\"b\"]",
                null,
                null,
                "720h"
            ])
        );
        assert!(t["rows"][0].get("object").is_none());
        assert_eq!(t["columnDefinitions"][3]["priority"], 1);
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 12);
    }

    #[test]
    fn include_object_variants() {
        assert_eq!(IncludeObject::parse(None), IncludeObject::Metadata);
        assert_eq!(IncludeObject::parse(Some("None")), IncludeObject::None);
        assert_eq!(IncludeObject::parse(Some("Object")), IncludeObject::Object);
        assert_eq!(
            IncludeObject::parse(Some("Metadata")),
            IncludeObject::Metadata
        );
        let b = backup();
        let t = table_at(
            &resource(vec![]),
            &[&b],
            json!({}),
            IncludeObject::Object,
            now(),
        );
        assert_eq!(t["rows"][0]["object"], b);
    }

    #[test]
    fn empty_list_has_empty_rows() {
        let t = table_at(
            &resource(vec![]),
            &[],
            json!({"resourceVersion": "1"}),
            IncludeObject::Metadata,
            now(),
        );
        assert_eq!(t["rows"], json!([]));
    }

    #[test]
    fn invalid_date_cell() {
        let b = json!({"metadata": {"name": "x", "creationTimestamp": "yesterday"}});
        let t = table_at(
            &resource(vec![]),
            &[&b],
            json!({}),
            IncludeObject::None,
            now(),
        );
        assert_eq!(t["rows"][0]["cells"], json!(["x", "<invalid>"]));
    }

    #[test]
    fn human_duration_table() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (185, "3m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
            (730 * 86400, "2y"),
            (3000 * 86400, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn json_path_forms() {
        let v =
            json!({"metadata": {"annotations": {"example.com/x": "1"}}, "a": [{"b": 1}, {"b": 2}]});
        assert_eq!(
            eval_json_path(&v, ".metadata.annotations.example\\.com/x"),
            Some(&json!("1"))
        );
        assert_eq!(
            eval_json_path(&v, ".metadata.annotations['example.com/x']"),
            Some(&json!("1"))
        );
        assert_eq!(eval_json_path(&v, ".a[1].b"), Some(&json!(2)));
        assert_eq!(eval_json_path(&v, ".a[-1].b"), Some(&json!(2)));
        assert_eq!(eval_json_path(&v, ".a[5].b"), None);
        assert_eq!(eval_json_path(&v, "{$.a[0].b}"), Some(&json!(1)));
        assert_eq!(eval_json_path(&v, "a.b"), None);
    }
}
