//! kubectl, run as a process against the simulator's kubeconfig, sees what it sees on a cluster.
//!
//! kubectl is found through the `KUBECTL` environment variable, else `kubectl` on `PATH`; without
//! one these tests fail (they are part of the suite, not optional).
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

#[path = "kube_rs_common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube_sim::KubeSim;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

fn kubectl_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBECTL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("kubectl");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("kubectl not found: set KUBECTL to the path of a kubectl binary (CI installs one)");
}

/// A kubectl bound to one simulator: its own kubeconfig, discovery cache and HOME.
struct Kubectl {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(sim: &KubeSim) -> Kubectl {
        let dir = tempfile::tempdir().unwrap();
        sim.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        Kubectl {
            bin: kubectl_binary(),
            dir,
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Output {
        tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within 60s"))
            .expect("kubectl runs")
    }

    /// Runs and expects success; returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.simtest.example.com
spec:
  group: simtest.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET_YAML: &str = r#"apiVersion: simtest.example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  size: 3
"#;

/// Creates the Widget CRD and one Widget with `kubectl create -f`.
async fn create_widgets(k: &Kubectl) {
    let crd = k.write("crd.yaml", CRD_YAML);
    let out = k.ok(&["create", "-f", path_str(&crd)]).await;
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.simtest.example.com created"
    );
    k.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/widgets.simtest.example.com",
    ])
    .await;
    let w = k.write("widget.yaml", WIDGET_YAML);
    let out = k.ok(&["create", "-f", path_str(&w)]).await;
    assert_eq!(out.trim(), "widget.simtest.example.com/w1 created");
}

#[tokio::test]
async fn get_prints_a_table_and_json() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(
        &PostParams::default(),
        &config_map("cm1", &[("a", "1"), ("b", "2")]),
    )
    .await
    .unwrap();
    let k = Kubectl::new(&sim);

    let table = k.ok(&["get", "configmaps"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(lines[0].contains("AGE"), "{table}");
    let row = lines
        .iter()
        .find(|l| l.starts_with("cm1 "))
        .unwrap_or_else(|| panic!("row for cm1 in {table}"));
    let age = row.split_whitespace().last().unwrap();
    assert!(
        age.ends_with('s') && age[..age.len() - 1].parse::<u32>().is_ok(),
        "a relative age like 3s, got {age:?}"
    );

    let json: Value =
        serde_json::from_str(&k.ok(&["get", "configmap", "cm1", "-o", "json"]).await).unwrap();
    assert_eq!(json["kind"], "ConfigMap");
    assert_eq!(json["apiVersion"], "v1");
    assert_eq!(json["data"]["b"], "2");
    let list: Value = serde_json::from_str(&k.ok(&["get", "cm", "-o", "json"]).await).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"cm1"), "{names:?}");
}

#[tokio::test]
async fn create_from_file_and_custom_resource_table() {
    let (sim, _client) = start().await;
    let k = Kubectl::new(&sim);
    create_widgets(&k).await;
    // kubectl found `fieldValidation` in the OpenAPI v3 document and left validation to the server.
    let creates: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "widgets")
        .map(|r| r.path)
        .collect();
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert!(creates[0].contains("fieldValidation=Strict"), "{creates:?}");
    let table = k.ok(&["get", "widgets"]).await;
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "SIZE", "AGE"], "{table}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..2], &["w1", "3"], "{table}");
    // Short name and the kind resolve too.
    assert!(
        k.ok(&["get", "wd", "w1", "-o", "name"]).await.trim() == "widget.simtest.example.com/w1"
    );
    let err = k
        .run(&[
            "create",
            "-f",
            path_str(&k.write("again.yaml", WIDGET_YAML)),
        ])
        .await;
    assert_eq!(err.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("AlreadyExists"),
        "{}",
        String::from_utf8_lossy(&err.stderr)
    );
}

#[tokio::test]
async fn apply_creates_then_configures() {
    let (sim, _client) = start().await;
    let k = Kubectl::new(&sim);
    let v1 = k.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  mode: one\n  keep: x\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", path_str(&v1)]).await.trim(),
        "configmap/app created"
    );
    assert_eq!(
        k.ok(&["apply", "-f", path_str(&v1)]).await.trim(),
        "configmap/app unchanged"
    );
    let v2 = k.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  mode: two\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", path_str(&v2)]).await.trim(),
        "configmap/app configured"
    );
    let json: Value =
        serde_json::from_str(&k.ok(&["get", "configmap", "app", "-o", "json"]).await).unwrap();
    assert_eq!(
        json["data"],
        serde_json::json!({"mode": "two"}),
        "apply removed the key dropped from the file"
    );
    assert!(
        json["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
}

#[tokio::test]
async fn server_side_apply_through_kubectl() {
    let (sim, _client) = start().await;
    let k = Kubectl::new(&sim);
    let f = k.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n",
    );
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", path_str(&f)])
            .await
            .trim(),
        "configmap/ssa serverside-applied"
    );
    let json: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "configmap",
            "ssa",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(json["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(json["metadata"]["managedFields"][0]["operation"], "Apply");
}

#[tokio::test]
async fn patch_strategic_default_and_merge_on_custom_resource() {
    let (sim, _client) = start().await;
    let k = Kubectl::new(&sim);
    let dep = k.write(
        "dep.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: app, image: "app:1"}
      - {name: sidecar, image: "side:1"}
"#,
    );
    k.ok(&["create", "-f", path_str(&dep)]).await;
    let out = k
        .ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"side:2"}]}}}}"#])
        .await;
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let images = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image}",
        ])
        .await;
    assert_eq!(
        images.trim(),
        "app:1 side:2",
        "strategic merge kept the other container"
    );

    create_widgets(&k).await;
    let out = k
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":5}}"#,
        ])
        .await;
    assert_eq!(out.trim(), "widget.simtest.example.com/w1 patched");
    assert_eq!(
        k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"])
            .await
            .trim(),
        "5"
    );

    let strategic = k
        .run(&["patch", "widget", "w1", "-p", r#"{"spec":{"size":6}}"#])
        .await;
    assert_eq!(strategic.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&strategic.stderr);
    assert!(
        stderr.contains("UnsupportedMediaType") || stderr.contains("unknown format"),
        "{stderr}"
    );
}

#[tokio::test]
async fn label_delete_and_not_found() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("lbl", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("other", &[]))
        .await
        .unwrap();
    let k = Kubectl::new(&sim);
    assert_eq!(
        k.ok(&["label", "configmap", "lbl", "env=prod"])
            .await
            .trim(),
        "configmap/lbl labeled"
    );
    assert_eq!(
        k.ok(&["get", "configmaps", "-l", "env=prod", "-o", "name"])
            .await
            .trim(),
        "configmap/lbl"
    );
    assert_eq!(
        k.ok(&["get", "configmaps", "-l", "env!=prod", "-o", "name"])
            .await
            .lines()
            .filter(|l| *l == "configmap/lbl")
            .count(),
        0
    );

    assert_eq!(
        k.ok(&["delete", "configmap", "lbl"]).await.trim(),
        "configmap \"lbl\" deleted"
    );
    let missing = k.run(&["get", "configmap", "lbl"]).await;
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("Error from server (NotFound): configmaps \"lbl\" not found"),
        "{stderr}"
    );

    let bad = k.run(&["get", "configmaps", "-l", "bad key=x"]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("BadRequest")
            || String::from_utf8_lossy(&bad.stderr).contains("unable to parse")
    );
}

/// Reads lines into `seen` until one starts with `prefix`; false after 20 s or at end of output.
async fn read_until<R>(
    lines: &mut tokio::io::Lines<R>,
    prefix: &str,
    seen: &mut Vec<String>,
) -> bool
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(l)) = lines.next_line().await {
            let hit = l.starts_with(prefix);
            seen.push(l);
            if hit {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

#[tokio::test]
async fn get_watch_streams_rows() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("w-a", &[]))
        .await
        .unwrap();
    let k = Kubectl::new(&sim);
    let mut child = k
        .command(&["get", "configmaps", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    assert!(
        read_until(&mut lines, "w-a ", &mut seen).await,
        "initial row for w-a: {seen:?}"
    );
    assert!(seen[0].starts_with("NAME"), "{seen:?}");
    cms.create(&PostParams::default(), &config_map("w-b", &[]))
        .await
        .unwrap();
    assert!(
        read_until(&mut lines, "w-b ", &mut seen).await,
        "a new row appears for w-b: {seen:?}"
    );
    child.kill().await.unwrap();
}

#[tokio::test]
async fn api_resources_lists_builtins_and_the_crd() {
    let (sim, client) = start().await;
    install_widgets(&client).await;
    let k = Kubectl::new(&sim);
    let out = k.ok(&["api-resources"]).await;
    let find = |name: &str| {
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cols| cols.first() == Some(&name))
            .unwrap_or_else(|| panic!("{name} listed in\n{out}"))
    };
    let widgets = find("widgets");
    assert!(widgets.contains(&"simtest.example.com/v1"), "{widgets:?}");
    assert!(widgets.contains(&"Widget"), "{widgets:?}");
    assert!(widgets.contains(&"wd"), "{widgets:?}");
    let cms = find("configmaps");
    assert!(cms.contains(&"cm") && cms.contains(&"ConfigMap"), "{cms:?}");
    let deps = find("deployments");
    assert!(deps.contains(&"apps/v1"), "{deps:?}");
}
