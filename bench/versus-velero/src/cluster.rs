//! The cluster of one run: a fresh API server on the shared etcd behind kube-sim, a server
//! installed into it, and the seeded ConfigMaps.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube_sim::{KubeSim, SimConfig, Upstream};
use serde_json::json;

use crate::BUCKET;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

/// One fresh API server on the shared etcd, kube-sim in front of it, and the files a server needs.
pub(crate) struct Cluster {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) proxy: KubeSim,
    pub(crate) client: kube::Client,
}

impl Cluster {
    pub(crate) async fn start(up: &Path) -> Result<Cluster> {
        let etcd = std::fs::read_to_string(up.join("etcd-url")).context("etcd-url")?;
        let dir = tempfile::tempdir()?;
        let api = dir.path().join("api");
        let prefix = format!("/versus-{}", uuid::Uuid::new_v4().simple());
        let out = std::process::Command::new(script("real-cluster.sh"))
            .arg("apiserver")
            .arg(&api)
            .arg(etcd.trim())
            .arg(&prefix)
            .output()?;
        if !out.status.success() {
            bail!("API server: {}", String::from_utf8_lossy(&out.stderr));
        }
        let real = api.join("kubeconfig");
        let proxy = KubeSim::start(SimConfig {
            upstream: Some(Upstream::from_kubeconfig(&real)?),
            ..SimConfig::default()
        })
        .await?;
        proxy.write_kubeconfig(dir.path().join("kubeconfig"))?;
        let file = kube::config::Kubeconfig::read_from(&real)?;
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
        Ok(Cluster {
            dir,
            proxy,
            client: kube::Client::try_from(config)?,
        })
    }

    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script("real-cluster.sh"))
            .arg("down")
            .arg(self.dir.path().join("api"))
            .status();
    }
}

pub(crate) fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "velero.io".into(),
        version: "v1".into(),
        api_version: "velero.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Velero's CRDs, the namespaces (`empty` stays empty: the start-up overhead's backup), Velero's
/// Deployment object and the default location under `prefix` of the bucket.
pub(crate) async fn install(c: &Cluster, s3: &str, prefix: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    for crd in hawser_api::crd::crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    for crd in hawser_api::crd::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = crds.get(&name).await?;
            let established = got.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not established");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    for ns in ["velero", "bench", "small", "empty"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    // Velero's restore reads its own Deployment (for the image of its restore helper), as a
    // `velero install` leaves it; no controller runs it here.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(c.client.clone(), "velero");
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "velero", "namespace": "velero"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"deploy": "velero"}},
            "template": {
                "metadata": {"labels": {"deploy": "velero"}},
                "spec": {"containers": [{"name": "velero", "image": "velero/velero:v1.18.3"}]}
            }
        }
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    let locations: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        "velero",
        &resource("BackupStorageLocation", "backupstoragelocations"),
    );
    let location: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": "velero"},
        "spec": {
            "provider": "aws", "default": true,
            "objectStorage": {"bucket": BUCKET, "prefix": prefix},
            "config": {"region": "us-east-1", "s3ForcePathStyle": "true", "s3Url": s3}
        }
    }))?;
    locations.create(&PostParams::default(), &location).await?;
    Ok(())
}

pub(crate) async fn seed(c: &Cluster, namespace: &str, count: usize) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), namespace);
    let payload = "x".repeat(1024);
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let payload = payload.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i:06}"), "labels": {"app": "bench"}},
                    "data": {"payload": payload, "index": i.to_string()}
                }))?;
                api.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
}
