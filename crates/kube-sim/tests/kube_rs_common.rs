//! Shared fixtures for the kube-rs conformance tests (included with `#[path]`; as a test target of
//! its own it contains no tests).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test fixtures; failures are test failures

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config, CustomResource, CustomResourceExt};
use kube_sim::{KubeSim, SimConfig};

#[path = "real_kube/mod.rs"]
pub mod real_kube;
pub use real_kube::Sim;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A custom resource with a status subresource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "simtest.example.com",
    version = "v1",
    kind = "Widget",
    namespaced
)]
#[kube(status = "WidgetStatus", shortname = "wd")]
pub struct WidgetSpec {
    pub size: i64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    pub phase: String,
}

pub const WIDGET_CRD: &str = "widgets.simtest.example.com";
pub const GADGET_CRD: &str = "gadgets.simtest.example.com";

/// A simulator with the default configuration and a kube-rs client for it; with
/// `HAWSER_TEST_KUBE=real` a real API server of the test's own behind it (see [`real_kube`]).
pub async fn start() -> (Sim, Client) {
    start_with(SimConfig::default()).await
}

pub async fn start_with(config: SimConfig) -> (Sim, Client) {
    let sim = Sim::start(config).await;
    let client = client_for(&sim);
    (sim, client)
}

/// A client built the way applications build one from a URL.
pub fn client_for(sim: &KubeSim) -> Client {
    let url = sim.api_url().parse().expect("api_url is a URI");
    Client::try_from(Config::new(url)).expect("client builds")
}

/// Registers a CRD and waits until it is Established.
pub async fn install_crd(client: &Client, crd: CustomResourceDefinition) {
    let name = crd.metadata.name.clone().expect("CRD has a name");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("CRD established within 10s")
    .expect("watching the CRD works");
}

/// The Widget CRD (status subresource enabled).
pub async fn install_widgets(client: &Client) {
    install_crd(client, Widget::crd()).await;
}

/// A CRD without `subresources.status`, whose objects keep any fields.
pub fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": GADGET_CRD},
        "spec": {
            "group": "simtest.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("valid CRD")
}

pub fn widget(name: &str, size: i64) -> Widget {
    let mut w = Widget::new(name, WidgetSpec { size });
    w.metadata.namespace = Some("default".into());
    w
}

pub fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// The HTTP code and reason of a kube-rs API error.
pub fn api_error(e: &kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `f` every 20 ms until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
