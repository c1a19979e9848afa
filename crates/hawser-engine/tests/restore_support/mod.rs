//! Fixtures of the restore engine tests: a kube-sim cluster with an application namespace, a
//! filesystem location, a backup of it made by the backup engine, readers of the restore's
//! artifacts, and a builder of hand-written (hostile) archives.
#![allow(dead_code)] // each test binary uses a part of the fixtures

#[path = "../backup_support/mod.rs"]
mod backup_support;

use std::io::{Cursor, Write};
use std::time::Duration;

use hawser_api::{Backup, Restore};
use hawser_core::archive::gzjson::{ResourceList, Results, gunzip_limited, read_gz_json};
use hawser_core::layout::Layout;
use hawser_engine::backup::BackupOptions;
use hawser_engine::restore::{
    self, RestoreError, RestoreOptions, RestoreOutcome, ValidatedRestore,
};
use hawser_store::{Location, LocationSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};
use kube_sim::{KubeSim, SimConfig};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const WIDGET_CRD: &str = "widgets.shop.example.com";

pub struct Cluster {
    pub sim: KubeSim,
    pub client: Client,
}

/// An empty simulator (its default namespaces only).
pub async fn empty_cluster() -> Cluster {
    let sim = KubeSim::start(SimConfig::default())
        .await
        .expect("simulator starts");
    let url = sim.api_url().parse().expect("api_url is a URI");
    let client = Client::try_from(Config::new(url)).expect("client builds");
    Cluster { sim, client }
}

/// A simulator with namespace `shop` (labelled `team=shop`): ConfigMaps `cm-0`..`cm-3`
/// (`cm-0`, `cm-1` labelled `tier=front`), a Secret, a ServiceAccount, a Service with an
/// auto-assigned node port, a running Pod on a node, a finished Pod, two Widgets (custom
/// resources, one with a status); and namespace `other` with one ConfigMap.
pub async fn cluster() -> Cluster {
    let c = empty_cluster().await;
    install_widget_crd(&c.client).await;
    let store = c.sim.store();
    store
        .insert(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "labels": {"team": "shop"}, "annotations": {"owner": "ops"}}}))
        .unwrap();
    store
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
        .unwrap();
    for i in 0..4 {
        let tier = if i < 2 { "front" } else { "back" };
        store
            .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "shop", "labels": {"tier": tier}},
                "data": {"index": i.to_string()}}))
            .unwrap();
    }
    let objects = [
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "shop"}, "type": "Opaque", "data": {"pw": "c2VjcmV0"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "app", "namespace": "shop"}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}]}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "priority": 0, "containers": [{"name": "web", "image": "nginx:1.27"}]}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "migrate", "namespace": "shop"},
            "spec": {"containers": [{"name": "m", "image": "busybox"}]}}),
        json!({"apiVersion": "shop.example.com/v1", "kind": "Widget",
            "metadata": {"name": "small", "namespace": "shop"}, "spec": {"size": 1}}),
        json!({"apiVersion": "shop.example.com/v1", "kind": "Widget",
            "metadata": {"name": "large", "namespace": "shop"}, "spec": {"size": 9}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "elsewhere", "namespace": "other"}, "data": {"k": "v"}}),
    ];
    for obj in objects {
        store.insert(obj).unwrap();
    }
    store
        .set_status(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "migrate", "namespace": "shop"}, "status": {"phase": "Succeeded"}}))
        .unwrap();
    store
        .set_status(
            &json!({"apiVersion": "shop.example.com/v1", "kind": "Widget",
            "metadata": {"name": "large", "namespace": "shop"}, "status": {"ready": true}}),
        )
        .unwrap();
    c
}

pub async fn install_widget_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": WIDGET_CRD},
        "spec": {
            "group": "shop.example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds, WIDGET_CRD, conditions::is_crd_established()),
    )
    .await
    .expect("CRD established within 10s")
    .unwrap();
}

/// Installs Velero's CRDs and waits for each to be established.
pub async fn install_velero_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in hawser_api::crd::crds() {
        let name = crd.metadata.name.clone().unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(10),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .expect("CRD established within 10s")
        .unwrap();
    }
}

/// A filesystem location rooted in `dir`.
pub fn location(dir: &TempDir) -> Location {
    let spec =
        LocationSpec::new("filesystem", "bucket").with_config("root", dir.path().to_str().unwrap());
    Location::new(&spec).unwrap()
}

/// Backs up namespace `shop` as `name` with the backup engine.
pub async fn back_up_shop(client: &Client, location: &Location, name: &str) -> Backup {
    let backup = Backup::named(name).including_namespaces(&["shop"]);
    let outcome =
        backup_support::check_and_run(client.clone(), location, &backup, BackupOptions::default())
            .await
            .unwrap();
    assert_eq!(outcome.errors(), 0, "backup errors: {:?}", outcome.results);
    backup
}

/// A Restore of `backup` named `name`, with the spec fields of `spec` (JSON).
pub fn restore_of(name: &str, backup: &str, spec: Value) -> Restore {
    let mut restore = Restore::named(name).from_backup(backup);
    let mut merged = serde_json::to_value(&restore.spec).unwrap();
    if let (Some(m), Some(extra)) = (merged.as_object_mut(), spec.as_object()) {
        m.extend(extra.clone());
    }
    restore.spec = serde_json::from_value(merged).unwrap();
    restore
}

pub async fn run_restore(
    client: &Client,
    location: &Location,
    restore: &Restore,
    backup: &Backup,
) -> RestoreOutcome {
    check_and_run(client, location, restore, backup, RestoreOptions::default())
        .await
        .unwrap()
}

/// Checks `restore` of `backup` against the cluster (as the server does before it claims a
/// Restore), then runs it.
pub async fn check_and_run(
    client: &Client,
    location: &Location,
    restore: &Restore,
    backup: &Backup,
    options: RestoreOptions,
) -> Result<RestoreOutcome, RestoreError> {
    let budget = options.api_retry;
    let valid = ValidatedRestore::check(client, restore.clone(), backup.clone(), budget).await?;
    restore::run(client.clone(), location, &valid, options).await
}

pub async fn results(location: &Location, restore: &str) -> Results {
    let bytes = location
        .get(&Layout::new(None).restore_results(restore))
        .await
        .unwrap();
    read_gz_json(Cursor::new(bytes), 1 << 20).unwrap()
}

pub async fn restored_list(location: &Location, restore: &str) -> ResourceList {
    let bytes = location
        .get(&Layout::new(None).restore_resource_list(restore))
        .await
        .unwrap();
    read_gz_json(Cursor::new(bytes), 1 << 20).unwrap()
}

pub async fn log_text(location: &Location, restore: &str) -> String {
    let bytes = location
        .get(&Layout::new(None).restore_log(restore))
        .await
        .unwrap();
    String::from_utf8(gunzip_limited(Cursor::new(bytes), 1 << 20).unwrap()).unwrap()
}

/// The fields a user compares after a restore: labels, annotations, and everything outside
/// `metadata` and `status`.
pub fn user_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(m) = out.as_object_mut() {
        m.remove("status");
        let meta = m.remove("metadata").unwrap_or(Value::Null);
        let mut kept = serde_json::Map::new();
        for key in ["name", "labels", "annotations"] {
            if let Some(v) = meta.get(key) {
                kept.insert(key.into(), v.clone());
            }
        }
        m.insert("metadata".into(), Value::Object(kept));
    }
    out
}

/// A tar.gz written entry by entry, hostile entries included.
pub struct HandArchive {
    tar: tar::Builder<Vec<u8>>,
}

impl HandArchive {
    pub fn new() -> Self {
        Self {
            tar: tar::Builder::new(Vec::new()),
        }
    }

    pub fn raw(mut self, path: &[u8], kind: tar::EntryType, link: &[u8], data: &[u8]) -> Self {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..path.len()].copy_from_slice(path);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        h.set_cksum();
        self.tar.append(&h, data).unwrap();
        self
    }

    pub fn file(self, path: &str, data: &[u8]) -> Self {
        self.raw(path.as_bytes(), tar::EntryType::Regular, b"", data)
    }

    pub fn item(self, path: &str, obj: &Value) -> Self {
        self.file(path, obj.to_string().as_bytes())
    }

    pub fn gzipped(self) -> Vec<u8> {
        let tar = self.tar.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).unwrap();
        gz.finish().unwrap()
    }
}

/// Stores `archive` as the contents of backup `name` and returns the Backup object.
pub async fn store_archive(location: &Location, name: &str, archive: Vec<u8>) -> Backup {
    location
        .put(&Layout::new(None).backup_contents(name), archive.into())
        .await
        .unwrap();
    Backup::named(name)
}

pub fn names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

pub async fn change_cm_2(sim: &kube_sim::KubeSim) {
    let mut cm = sim.store().get("v1", "ConfigMap", "shop", "cm-2").unwrap();
    cm["data"] = json!({"index": "changed"});
    sim.store().insert(cm).unwrap();
}

pub fn config_map(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}})
}
