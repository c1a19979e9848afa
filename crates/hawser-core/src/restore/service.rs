//! A Service on restore: its cluster IPs go (the new cluster assigns them), and its node ports
//! stay only where they were set explicitly (Velero's rule; `preserveNodePorts` keeps them
//! all).

use serde_json::Value;

/// The annotation of `kubectl apply`'s last-applied configuration.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Node ports set explicitly: by name for named ports, by value for unnamed ones (from the
/// last-applied configuration), and by `port/protocol` (from managedFields).
#[derive(Default)]
struct ExplicitPorts {
    names: Vec<String>,
    unnamed_values: Vec<i64>,
    port_protocols: Vec<(i64, String)>,
    health_check: bool,
}

fn as_port_number(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn explicit_ports(obj: &Value) -> ExplicitPorts {
    let mut out = ExplicitPorts::default();
    let applied: Option<Value> = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok());
    if let Some(applied) = applied {
        for port in applied
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(node_port) = port.get("nodePort").and_then(as_port_number) else {
                continue;
            };
            if node_port <= 0 {
                continue;
            }
            match port.get("name").and_then(Value::as_str) {
                Some(name) => out.names.push(name.to_string()),
                None => out.unnamed_values.push(node_port),
            }
        }
        out.health_check |= applied
            .pointer("/spec/healthCheckNodePort")
            .and_then(as_port_number)
            .is_some_and(|p| p > 0);
    }
    for entry in obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(spec) = entry.pointer("/fieldsV1/f:spec") else {
            continue;
        };
        out.health_check |= spec.get("f:healthCheckNodePort").is_some();
        for (key, fields) in spec
            .get("f:ports")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if fields.get("f:nodePort").is_none() {
                continue;
            }
            // Keys look like `k:{"port":80,"protocol":"TCP"}`.
            let Some(k) = key
                .strip_prefix("k:")
                .and_then(|k| serde_json::from_str::<Value>(k).ok())
            else {
                continue;
            };
            if let Some(port) = k.get("port").and_then(as_port_number) {
                let protocol = k.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                out.port_protocols.push((port, protocol.to_string()));
            }
        }
    }
    out
}

pub(super) fn clean(obj: &mut Value, preserve_node_ports: bool) {
    let explicit = explicit_ports(obj);
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if preserve_node_ports || spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    if !explicit.health_check {
        spec.remove("healthCheckNodePort");
    }
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let name = port
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let node_port = port.get("nodePort").and_then(as_port_number);
        let number = port.get("port").and_then(as_port_number);
        let protocol = port
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP");
        let by_annotation = match name {
            Some(n) => explicit.names.iter().any(|e| e == n),
            None => node_port.is_some_and(|p| explicit.unnamed_values.contains(&p)),
        };
        let by_fields = number.is_some_and(|n| {
            explicit
                .port_protocols
                .iter()
                .any(|(p, proto)| *p == n && proto == protocol)
        });
        if !by_annotation && !by_fields {
            port.remove("nodePort");
        }
    }
}
