//! Cleaning of Services: cluster IPs and node ports.

use serde_json::{Value, json};

use super::*;

fn service(spec: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "namespace": "shop", "annotations": annotations},
        "spec": spec})
}

#[test]
fn service_cluster_ip_cleared_unless_headless() {
    let m = no_mapping();
    let svc = service(
        json!({"clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"], "ports": [{"port": 80}]}),
        json!({}),
    );
    let out = clean("services", svc, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out.pointer("/spec/clusterIP"), None);
    assert_eq!(out.pointer("/spec/clusterIPs"), None);
    let headless = service(
        json!({"clusterIP": "None", "clusterIPs": ["None"]}),
        json!({}),
    );
    let out = clean("services", headless, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out.pointer("/spec/clusterIP"), Some(&json!("None")));
    assert_eq!(out.pointer("/spec/clusterIPs"), Some(&json!(["None"])));
}

#[test]
fn service_node_ports_cleared_unless_explicit_or_preserved() {
    let applied = json!({"spec": {"ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"port": 9000, "nodePort": 30900}]}}).to_string();
    let spec = json!({
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000,
        "ports": [
            {"name": "http", "port": 80, "nodePort": 30080},
            {"name": "https", "port": 443, "nodePort": 30443},
            {"port": 9000, "nodePort": 30900},
            {"port": 9001, "nodePort": 30901}
        ]
    });
    let svc = service(
        spec.clone(),
        json!({"kubectl.kubernetes.io/last-applied-configuration": applied}),
    );
    let m = no_mapping();
    let out = clean("services", svc.clone(), Some("shop"), &ctx(&m), false).object;
    let ports: Vec<Option<&Value>> = out
        .pointer("/spec/ports")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.get("nodePort"))
        .collect();
    assert_eq!(
        ports,
        [Some(&json!(30080)), None, Some(&json!(30900)), None]
    );
    assert_eq!(out.pointer("/spec/healthCheckNodePort"), None);

    let mut preserve = ctx(&m);
    preserve.preserve_node_ports = true;
    let out = clean("services", svc, Some("shop"), &preserve, false).object;
    assert_eq!(out.pointer("/spec/ports"), spec.get("ports"));
    assert_eq!(
        out.pointer("/spec/healthCheckNodePort"),
        Some(&json!(31000))
    );
}

#[test]
fn service_node_ports_set_through_managed_fields_are_kept() {
    let mut svc = service(
        json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 81, "protocol": "TCP", "nodePort": 30081}]}),
        json!({}),
    );
    svc["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:ports": {
        "k:{\"port\":80,\"protocol\":\"TCP\"}": {"f:nodePort": {}, "f:port": {}},
        "k:{\"port\":81,\"protocol\":\"TCP\"}": {"f:port": {}}
    }}}}]);
    let m = no_mapping();
    let out = clean("services", svc, Some("shop"), &ctx(&m), false).object;
    assert_eq!(out.pointer("/spec/ports/0/nodePort"), Some(&json!(30080)));
    assert_eq!(out.pointer("/spec/ports/1/nodePort"), None);
}
