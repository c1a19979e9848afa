//! kube-rs discovery (legacy per-group documents and aggregated discovery) finds built-in and
//! custom resources with the right scope and verbs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

#[path = "kube_rs_common.rs"]
mod common;

use common::*;
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope, verbs};

fn check(discovery: &Discovery) {
    for (group, version, kind, plural, scope) in [
        ("", "v1", "ConfigMap", "configmaps", Scope::Namespaced),
        ("", "v1", "Namespace", "namespaces", Scope::Cluster),
        ("apps", "v1", "Deployment", "deployments", Scope::Namespaced),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            Scope::Cluster,
        ),
        (
            "simtest.example.com",
            "v1",
            "Widget",
            "widgets",
            Scope::Namespaced,
        ),
    ] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{kind} discovered"));
        assert_eq!(ar.plural, plural);
        assert_eq!(caps.scope, scope, "{kind} scope");
        for verb in [
            verbs::GET,
            verbs::LIST,
            verbs::WATCH,
            verbs::CREATE,
            verbs::PATCH,
            verbs::DELETE,
        ] {
            assert!(caps.supports_operation(verb), "{kind} supports {verb}");
        }
    }
    let widgets = discovery
        .get("simtest.example.com")
        .and_then(|g| g.recommended_kind("Widget"))
        .expect("Widget recommended kind");
    assert!(
        widgets
            .1
            .subresources
            .iter()
            .any(|(ar, _)| ar.plural == "status"),
        "the status subresource is discovered"
    );
    assert!(discovery.has_group("apps"));
}

/// Runs discovery until it lists the Widget CRD: a real API server publishes a CRD in its
/// discovery documents shortly after the CRD is `Established`, not with it (kube-sim at once).
async fn discovered<F, Fut>(run: F) -> Discovery
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = kube::Result<Discovery>>,
{
    let widget = GroupVersionKind::gvk("simtest.example.com", "v1", "Widget");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let discovery = run().await.expect("discovery succeeds");
        if discovery.resolve_gvk(&widget).is_some() || std::time::Instant::now() > deadline {
            return discovery;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn legacy_discovery_finds_builtins_and_crds() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let discovery = discovered(|| Discovery::new(client.clone()).run()).await;
    check(&discovery);
}

#[tokio::test]
async fn aggregated_discovery_finds_builtins_and_crds() {
    let (_sim, client) = start().await;
    install_widgets(&client).await;
    let discovery = discovered(|| Discovery::new(client.clone()).run_aggregated()).await;
    check(&discovery);
}

#[tokio::test]
async fn server_version_is_plausible() {
    let (_sim, client) = start().await;
    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.major, "1");
    assert!(info.git_version.starts_with('v'), "{}", info.git_version);
}
