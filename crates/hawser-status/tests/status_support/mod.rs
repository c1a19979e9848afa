//! Shared setup of the status tests: a kube-sim with Velero's CRDs, a `velero` namespace, and a
//! status engine pointed at it with short timeouts.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use hawser_api::SharedStatus;
use hawser_core::clock::Clock;
use hawser_engine::cluster::client::client_without_retries;
use hawser_status::metrics::StatusMetrics;
use hawser_status::{Kind, StatusConfig, StatusEngine};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{KubeSim, RequestRecord, SimConfig};
use serde_json::{Value, json};

pub const NS: &str = "velero";

pub struct Harness {
    pub sim: KubeSim,
    pub engine: StatusEngine,
    pub metrics: StatusMetrics,
    pub client: kube::Client,
}

/// Short real-time settings: waiting happens on a real loopback socket, so tokio's paused clock
/// cannot be used here.
pub fn short_config(instance: &str) -> StatusConfig {
    StatusConfig {
        instance_id: instance.to_owned(),
        resource_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(500),
        request_timeout: Duration::from_secs(1),
        resync_period: Duration::from_secs(1),
        namespace: Some(NS.to_owned()),
        redrive_concurrency: 16,
        rng_seed: Some(7),
        clock: Clock::system(),
        resume_attempts: 0,
    }
}

pub async fn start_sim(status_subresource: bool) -> KubeSim {
    let sim = KubeSim::start(SimConfig::default())
        .await
        .expect("kube-sim starts");
    let store = sim.store();
    for crd in hawser_api::crd::crds() {
        let mut v = serde_json::to_value(crd).unwrap();
        for version in v["spec"]["versions"].as_array_mut().unwrap() {
            if status_subresource {
                version["subresources"] = json!({"status": {}});
            } else if let Some(subs) = version
                .get_mut("subresources")
                .and_then(Value::as_object_mut)
            {
                // Velero's CRDs have none: make sure, whatever the generator emits.
                subs.remove("status");
            }
        }
        store.insert(v).expect("CRD installs");
    }
    store
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .unwrap();
    sim
}

pub async fn client_for(sim: &KubeSim) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    client_without_retries(config, Duration::from_secs(2)).unwrap()
}

pub async fn engine_for(
    sim: &KubeSim,
    config: StatusConfig,
) -> (StatusEngine, StatusMetrics, kube::Client) {
    let client = client_for(sim).await;
    let metrics = StatusMetrics::default();
    let engine = StatusEngine::new(client.clone(), config, metrics.clone());
    (engine, metrics, client)
}

pub async fn start(config: StatusConfig) -> Harness {
    start_with(config, false).await
}

pub async fn start_with(config: StatusConfig, status_subresource: bool) -> Harness {
    let sim = start_sim(status_subresource).await;
    let (engine, metrics, client) = engine_for(&sim, config).await;
    Harness {
        sim,
        engine,
        metrics,
        client,
    }
}

fn kind_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Backup => "Backup",
        Kind::Restore => "Restore",
    }
}

/// A status delta that sets `failureReason`.
pub fn failure_reason(why: &str) -> SharedStatus {
    SharedStatus {
        failure_reason: Some(why.to_owned()),
        ..SharedStatus::default()
    }
}

/// A status delta that sets `startTimestamp` (`start`) or `completionTimestamp`, to a fixed
/// time.
pub fn timestamp(start: bool) -> SharedStatus {
    let at = Some(Time("2026-12-02T10:00:00Z".parse().expect("a timestamp")));
    SharedStatus {
        start_timestamp: at.clone().filter(|_| start),
        completion_timestamp: at.filter(|_| !start),
        ..SharedStatus::default()
    }
}

/// Create a Backup/Restore in `phase`, optionally annotated as owned by `owner`.
pub fn create(sim: &KubeSim, kind: Kind, name: &str, phase: &str, owner: Option<&str>) -> Value {
    let mut annotations = serde_json::Map::new();
    if let Some(o) = owner {
        annotations.insert(hawser_api::labels::HAWSER_OWNER.to_owned(), json!(o));
    }
    let spec = match kind {
        Kind::Backup => json!({"includedNamespaces": ["*"]}),
        Kind::Restore => json!({"backupName": "b1"}),
    };
    let obj = json!({
        "apiVersion": "velero.io/v1",
        "kind": kind_of(kind),
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": spec,
        "status": {"phase": phase},
    });
    let stored = sim.store().insert(obj).unwrap();
    if stored.pointer("/status/phase").and_then(Value::as_str) != Some(phase) {
        // The status subresource is on: the create dropped the status.
        let mut with_status = stored.clone();
        with_status["status"] = json!({"phase": phase});
        return sim.store().set_status(&with_status).unwrap();
    }
    stored
}

pub fn get(sim: &KubeSim, kind: Kind, name: &str) -> Option<Value> {
    sim.store().get("velero.io/v1", kind_of(kind), NS, name)
}

pub fn phase(sim: &KubeSim, kind: Kind, name: &str) -> String {
    get(sim, kind, name)
        .and_then(|o| {
            o.pointer("/status/phase")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

pub fn rv(obj: &Value) -> String {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned()
}

/// Set the stored status directly (another writer).
pub fn set_phase(sim: &KubeSim, kind: Kind, name: &str, phase: &str) {
    let mut obj = get(sim, kind, name).unwrap();
    obj["status"]["phase"] = json!(phase);
    if sim.store().set_status(&obj).is_err() {
        sim.store().insert(obj).unwrap();
    }
}

/// Events (events.k8s.io/v1) about `name` with `reason`.
pub fn events(sim: &KubeSim, name: &str, reason: &str) -> Vec<Value> {
    sim.store()
        .list("events.k8s.io/v1", "Event", Some(NS))
        .into_iter()
        .filter(|e| {
            e.pointer("/regarding/name").and_then(Value::as_str) == Some(name)
                && e.get("reason").and_then(Value::as_str) == Some(reason)
        })
        .collect()
}

/// Requests of `verb` on the named Backup/Restore (any subresource).
pub fn requests(sim: &KubeSim, resource: &str, name: &str, verb: &str) -> Vec<RequestRecord> {
    sim.requests()
        .into_iter()
        .filter(|r| r.resource == resource && r.name == name && r.verb == verb)
        .collect()
}

/// Seconds since the epoch of a request-log time.
pub fn time_of(r: &RequestRecord) -> f64 {
    let ts: jiff::Timestamp = r.time.parse().unwrap();
    ts.as_millisecond() as f64 / 1000.0
}

/// Wait (real time) until `f` holds, at most `limit`; returns the time it took.
pub async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f().then(|| start.elapsed())
}
