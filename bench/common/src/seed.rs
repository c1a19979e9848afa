//! The benchmark's cluster: a Widget CRD, ten namespaces, and ConfigMaps, Secrets (1–4 KiB of
//! data each), Deployments and Widgets loaded through kube-sim's store (not HTTP).

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube_sim::SimStore;
use serde_json::{Value, json};

/// How many application namespaces hold the objects.
pub const NAMESPACES: usize = 10;
/// The Widget CRD.
pub const CRD_NAME: &str = "widgets.bench.example.com";

/// Creates the Widget CRD through the API and waits until it is established.
///
/// # Errors
/// When the create fails or the CRD is not established within 30 s.
pub async fn install_crd(client: &Client) -> Result<()> {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "bench.example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .context("the Widget CRD")?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .context("creating the Widget CRD")?;
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, CRD_NAME, conditions::is_crd_established()),
    )
    .await
    .context("the Widget CRD was not established within 30 s")?
    .context("waiting for the Widget CRD")?;
    Ok(())
}

/// The name of application namespace `i`: `app-<i>`.
#[must_use]
pub fn namespace(i: usize) -> String {
    format!("app-{i}")
}

/// The ten application namespaces `app-0` … `app-9`.
///
/// # Errors
/// When the store refuses one.
pub fn namespaces(store: &SimStore) -> Result<()> {
    for i in 0..NAMESPACES {
        store
            .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(i)}}))
            .context("creating a namespace")?;
    }
    Ok(())
}

/// Deterministic pseudo-random text (so gzip sees realistic, not trivially repetitive, data).
fn text(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=-_.:/ \n";
    let mut x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // the modulus keeps the index below ALPHABET.len()
            #[allow(clippy::cast_possible_truncation)]
            let i = (x % ALPHABET.len() as u64) as usize;
            char::from(ALPHABET[i])
        })
        .collect()
}

/// Object `i` of the benchmark: 40% ConfigMaps, 30% Secrets, 15% Deployments, 15% Widgets.
fn object(i: usize) -> Value {
    let ns = namespace(i % NAMESPACES);
    let seed = i as u64;
    let size = 1024 + (i * 7919) % 3072;
    match i % 20 {
        0..8 => json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:07}"), "namespace": ns, "labels": {"app": "bench"}},
            "data": {"config.yaml": text(seed, size), "mode": "production"}
        }),
        8..14 => {
            use base64::Engine;
            let raw = text(seed, size * 3 / 4);
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("secret-{i:07}"), "namespace": ns},
                "type": "Opaque",
                "data": {"token": base64::engine::general_purpose::STANDARD.encode(raw)}
            })
        }
        14..17 => json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("deploy-{i:07}"), "namespace": ns, "labels": {"app": "bench"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": format!("web-{i}")}},
                "template": {
                    "metadata": {"labels": {"app": format!("web-{i}")}},
                    "spec": {"containers": [{
                        "name": "web", "image": "registry.example.com/web:1.27",
                        "env": [{"name": "SETTINGS", "value": text(seed, 512)}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
                    }]}
                }
            }
        }),
        _ => json!({
            "apiVersion": "bench.example.com/v1", "kind": "Widget",
            "metadata": {"name": format!("widget-{i:07}"), "namespace": ns},
            "spec": {"size": i % 100, "notes": text(seed, size)}
        }),
    }
}

/// Loads objects `from..to` into the store.
///
/// # Errors
/// When the store refuses one.
pub fn objects(store: &SimStore, from: usize, to: usize) -> Result<()> {
    for i in from..to {
        store
            .insert(object(i))
            .with_context(|| format!("seeding object {i}"))?;
    }
    Ok(())
}

/// The seeded types: `(apiVersion, kind, group resource)`.
pub const TYPES: [(&str, &str, &str); 4] = [
    ("v1", "ConfigMap", "configmaps"),
    ("v1", "Secret", "secrets"),
    ("apps/v1", "Deployment", "deployments.apps"),
    (
        "bench.example.com/v1",
        "Widget",
        "widgets.bench.example.com",
    ),
];
