//! The Helm chart `charts/hawser`, linted and rendered by Helm's own CLI (built from its Go
//! module by `scripts/build-helm.sh`, named by `HELM`): with the same settings it renders exactly
//! the objects `hawser install --dry-run` writes (object by object, after removing Helm's own
//! labels; the Namespace is helm's `--create-namespace`), and its additions (Service,
//! ServiceMonitor, PrometheusRule, dashboard, Schedules) take their content from the repository's
//! files. `scripts/test` leaves it out without `HELM`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    repo().join("charts/hawser")
}

fn helm() -> Command {
    let helm = std::env::var_os("HELM")
        .expect("HELM is not set: run HELM=$(scripts/build-helm.sh) scripts/test");
    Command::new(helm)
}

fn output(command: &mut Command) -> Output {
    command.output().expect("the command starts")
}

fn succeeded(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every non-empty document of a YAML stream.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// The chart rendered in `namespace` with `values` (a YAML document), CRDs included.
fn render_chart(namespace: &str, values: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values).unwrap();
    documents(&succeeded(
        helm()
            .args(["template", "velero"])
            .arg(chart())
            .args(["--namespace", namespace, "--include-crds", "--values"])
            .arg(&file),
    ))
}

/// `hawser install --dry-run -o json` in `namespace` with `args`.
fn render_install(namespace: &str, args: &[&str]) -> Vec<Value> {
    let text = succeeded(
        Command::new(env!("CARGO_BIN_EXE_hawser"))
            .args([
                "install",
                "--dry-run",
                "-o",
                "json",
                "--namespace",
                namespace,
            ])
            .args(args),
    );
    let list: Value = serde_json::from_str(&text).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// The labels Helm's conventions add to every object of the chart (`hawser.labels`).
const HELM_LABELS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
];

type Key = (String, String, String);

fn key(object: &Value) -> Key {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

/// Objects by kind, namespace and name; with `strip_helm_labels`, without the labels Helm's
/// conventions add (the CRDs are the repository's file, as they are).
fn by_key(objects: Vec<Value>, strip_helm_labels: bool) -> BTreeMap<Key, Value> {
    objects
        .into_iter()
        .map(|mut object| {
            let labelled = strip_helm_labels && object["kind"] != "CustomResourceDefinition";
            if labelled && let Some(labels) = object["metadata"]["labels"].as_object_mut() {
                for label in HELM_LABELS {
                    assert!(
                        labels.remove(*label).is_some(),
                        "{label} on {:?}",
                        key(&object)
                    );
                }
            }
            (key(&object), object)
        })
        .collect()
}

/// Asserts that the chart with `values` and `hawser install` with `args` render the same
/// objects in `namespace`, and returns them.
fn same_as_install(namespace: &str, values: &str, args: &[&str]) -> BTreeMap<Key, Value> {
    let chart = by_key(render_chart(namespace, values), true);
    let mut install = by_key(render_install(namespace, args), false);
    let ns = install
        .remove(&("Namespace".to_owned(), String::new(), namespace.to_owned()))
        .expect("install creates the namespace");
    assert_eq!(ns["metadata"]["labels"], json!({"component": "velero"}));
    let names = |m: &BTreeMap<Key, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&chart), names(&install), "the same objects");
    for (key, expected) in &install {
        let mut differences = Vec::new();
        differ("", &chart[key], expected, &mut differences);
        assert!(
            differences.is_empty(),
            "{key:?} differs (chart, then install):\n{}",
            differences.join("\n")
        );
    }
    chart
}

/// Where `a` and `b` differ, as `path: a != b` lines.
fn differ(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (x, y) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differ(&format!("{path}/{k}"), x, y, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differ(&format!("{path}/{i}"), x, y, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} != {b}")),
        _ => {}
    }
}

const CREDENTIALS: &str = "[default]\naws_access_key_id=a\naws_secret_access_key=b\n";

fn credentials_file(dir: &Path) -> String {
    let file = dir.join("credentials");
    std::fs::write(&file, CREDENTIALS).unwrap();
    file.display().to_string()
}

#[test]
fn the_chart_lints_and_its_version_is_the_workspace_version() {
    let out = succeeded(helm().args(["lint", "--strict"]).arg(chart()));
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let meta: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn a_location_with_credentials_renders_as_install_does() {
    let dir = tempfile::tempdir().unwrap();
    let values = format!(
        r#"
credentials:
  secretContents:
    cloud: {CREDENTIALS:?}
configuration:
  defaultBackupTTL: 72h0m0s
  backupStorageLocation:
    - provider: aws
      bucket: b1
      prefix: cluster-a
      default: true
      config: {{region: us-east-1, s3Url: "http://minio:9000"}}
metrics:
  enabled: false
"#
    );
    let objects = same_as_install(
        "velero",
        &values,
        &[
            "--provider=aws",
            "--bucket=b1",
            "--prefix=cluster-a",
            "--backup-location-config=region=us-east-1,s3Url=http://minio:9000",
            &format!("--secret-file={}", credentials_file(dir.path())),
            "--default-backup-ttl=72h",
        ],
    );
    let kinds: Vec<&str> = objects.keys().map(|(kind, _, _)| kind.as_str()).collect();
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRoleBinding",
        "Secret",
        "Deployment",
        "BackupStorageLocation",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
}

#[test]
fn minimal_rbac_pod_settings_and_server_flags_render_as_install_does() {
    let dir = tempfile::tempdir().unwrap();
    let ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let ca_base64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(ca)
    };
    let values = format!(
        r#"
image: {{repository: registry.example/hawser, tag: v9}}
podAnnotations: {{team: storage, prometheus.io/port: "9000"}}
podLabels: {{tier: backup}}
priorityClassName: system-cluster-critical
resources:
  requests: {{cpu: 250m, memory: 64Mi}}
  limits: {{cpu: null, memory: 1Gi}}
rbac: {{minimal: true}}
serviceAccount:
  server:
    annotations: {{eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/hawser"}}
credentials:
  secretContents:
    cloud: {CREDENTIALS:?}
configuration:
  garbageCollectionFrequency: 30m0s
  restoreOnlyMode: true
  features: EnableCSI
  logLevel: debug
  extraArgs: ["--resource-timeout=5m"]
  backupStorageLocation:
    - provider: aws
      bucket: b2
      caCert: {ca_base64}
      default: true
metrics:
  enabled: false
"#
    );
    same_as_install(
        "backups",
        &values,
        &[
            "--image=registry.example/hawser:v9",
            "--provider=aws",
            "--bucket=b2",
            &format!("--cacert={}", ca_file.display()),
            &format!("--secret-file={}", credentials_file(dir.path())),
            "--pod-annotations=team=storage,prometheus.io/port=9000",
            "--pod-labels=tier=backup",
            "--server-priority-class-name=system-cluster-critical",
            "--velero-pod-cpu-request=250m",
            "--velero-pod-mem-request=64Mi",
            "--velero-pod-cpu-limit=0",
            "--velero-pod-mem-limit=1Gi",
            "--rbac=minimal",
            "--sa-annotations=eks.amazonaws.com/role-arn=arn:aws:iam::1:role/hawser",
            "--garbage-collection-frequency=30m",
            "--restore-only",
            "--features=EnableCSI",
            "--server-arg=--log-level=debug",
            "--server-arg=--resource-timeout=5m",
        ],
    );
}

#[test]
fn an_existing_account_without_credentials_or_location_renders_as_install_does() {
    let values = r"
serviceAccount:
  server: {create: false, name: backup-sa}
rbac: {clusterAdministrator: false}
credentials: {useSecret: false}
metrics:
  enabled: false
";
    let objects = same_as_install(
        "velero",
        values,
        &[
            "--service-account-name=backup-sa",
            "--no-default-backup-location",
        ],
    );
    let deployment = &objects[&(
        "Deployment".to_owned(),
        "velero".to_owned(),
        "velero".to_owned(),
    )];
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "backup-sa"
    );
}

#[test]
fn the_additions_take_their_content_from_the_repository() {
    let values = r#"
configuration:
  backupStorageLocation:
    - {name: primary, provider: aws, bucket: b1, default: true}
    - {name: other, provider: aws, bucket: b2, credential: {name: other-creds, key: cloud}}
  volumeSnapshotLocation:
    - {name: default, provider: aws, config: {region: us-east-1}}
credentials:
  secretContents: {cloud: "x"}
metrics:
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
  grafanaDashboard: {enabled: true}
schedules:
  nightly:
    schedule: "0 3 * * *"
    template: {ttl: 240h0m0s, includedNamespaces: [shop]}
  off: {disabled: true, schedule: "@daily"}
"#;
    let objects = by_key(render_chart("velero", values), true);
    let get = |kind: &str, name: &str| {
        objects
            .get(&(kind.to_owned(), "velero".to_owned(), name.to_owned()))
            .unwrap_or_else(|| panic!("{kind}/{name} in {:?}", objects.keys()))
    };
    // The Secret names the locations that use it, and only those.
    assert_eq!(
        get("Secret", "cloud-credentials")["metadata"]["annotations"]["hawser.io/locations"],
        "primary"
    );
    assert_eq!(
        get("BackupStorageLocation", "other")["spec"]["credential"],
        json!({"name": "other-creds", "key": "cloud"})
    );
    assert_eq!(
        get("VolumeSnapshotLocation", "default")["spec"]["provider"],
        "aws"
    );
    let schedule = get("Schedule", "velero-nightly");
    assert_eq!(schedule["spec"]["schedule"], "0 3 * * *");
    assert_eq!(
        schedule["spec"]["template"]["includedNamespaces"],
        json!(["shop"])
    );
    assert!(!objects.keys().any(|(_, _, name)| name == "velero-off"));
    assert_eq!(
        get("Service", "velero")["spec"]["ports"][0]["targetPort"],
        "metrics"
    );
    assert_eq!(
        get("ServiceMonitor", "velero")["spec"]["endpoints"][0]["port"],
        "http-monitoring"
    );
    let alerts: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("monitoring/hawser-alerts.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(get("PrometheusRule", "hawser")["spec"], alerts["spec"]);
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("monitoring/hawser-dashboard.json")).unwrap(),
    )
    .unwrap();
    let rendered: Value = serde_json::from_str(
        get("ConfigMap", "hawser-dashboard")["data"]["hawser-dashboard.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(rendered, dashboard);
}

#[test]
fn settings_hawser_cannot_honour_fail_the_render_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (values, reason) in [
        ("deployNodeAgent: true\n", "hawser has no node agent yet"),
        (
            "configuration:\n  backupStorageLocation:\n    - {provider: aws}\n",
            "provider and bucket are required",
        ),
        (
            "configuration:\n  backupStorageLocation:\n    - {provider: aws, bucket: a/b}\n",
            "put the path in prefix",
        ),
        (
            "schedules:\n  nightly: {template: {}}\n",
            "schedules.nightly.schedule is required",
        ),
    ] {
        let file = dir.path().join("values.yaml");
        std::fs::write(&file, values).unwrap();
        let out = output(
            helm()
                .args(["template", "velero"])
                .arg(chart())
                .arg("--values")
                .arg(&file),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{values}");
        assert!(stderr.contains(reason), "{values}: {stderr}");
    }
}
