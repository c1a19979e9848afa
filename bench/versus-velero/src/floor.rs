//! The real API server's own create floor: the objects a restore of the `bench` namespace
//! creates, made by plain POSTs (a namespace, then every ConfigMap with the restore's
//! concurrency, the restore engine's default) through the same proxy the servers use, once
//! with the client limits the servers get and once with none. The restore's time divided by
//! the first is how far hawser is from what the API server allows a client with those limits.

use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use hawser_engine::cluster::client::{client_without_retries, throttled_client_without_retries};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::cluster::Cluster;

/// The read timeout of the floor's clients (as the server's).
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Seconds to create the `bench` namespace's ConfigMaps in a new namespace (named after `run`):
/// with `qps`/`burst` (the servers' limits; a `qps` of 0 is none), and with no limit.
pub(crate) async fn creates(
    c: &Cluster,
    (qps, burst): (u32, u32),
    expected: usize,
    run: &str,
) -> Result<(f64, f64)> {
    let source: Api<ConfigMap> = Api::namespaced(c.client.clone(), "bench");
    let objects: Vec<ConfigMap> = source
        .list(&ListParams::default().labels("app=bench"))
        .await?
        .items
        .into_iter()
        .map(|cm| ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: cm.metadata.name,
                labels: cm.metadata.labels,
                ..kube::api::ObjectMeta::default()
            },
            data: cm.data,
            ..ConfigMap::default()
        })
        .collect();
    anyhow::ensure!(
        objects.len() == expected,
        "the floor read {} of the {expected} ConfigMaps of bench",
        objects.len()
    );
    let file = kube::config::Kubeconfig::read_from(c.kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    // `--client-qps 0` is no limit, for the servers and here.
    let limited = match qps {
        0 => client_without_retries(config.clone(), READ_TIMEOUT)?,
        qps => {
            throttled_client_without_retries(config.clone(), READ_TIMEOUT, f64::from(qps), burst)?
        }
    };
    let unlimited = client_without_retries(config, READ_TIMEOUT)?;
    let concurrency = hawser_engine::restore::RestoreOptions::default().concurrency;
    let mut seconds = Vec::new();
    for (client, label) in [(limited, "limited"), (unlimited, "unlimited")] {
        let namespace = format!("floor-{label}-{run}");
        let started = Instant::now();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
        let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
        futures::stream::iter(objects.iter())
            .map(|cm| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), cm).await.map(drop) }
            })
            .buffer_unordered(concurrency)
            .try_collect::<()>()
            .await?;
        seconds.push(started.elapsed().as_secs_f64());
    }
    Ok((seconds[0], seconds[1]))
}
