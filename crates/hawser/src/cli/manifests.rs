//! The objects `hawser install` creates, built from its settings (pure: no API calls).
//!
//! In order: the `velero.io` CRDs, the Namespace, the ServiceAccount `velero` and a
//! ClusterRoleBinding of it to `cluster-admin` (as Velero's install does; neither when
//! `--service-account-name` names an existing account) or, with `--rbac minimal`, the
//! ClusterRole, Role and bindings of [`super::rbac`] instead of that binding, a Role and
//! RoleBinding `hawser-leader-election` granting it the `coordination.k8s.io` Leases of the
//! namespace (leader election; stated on its own so that the server's needs are visible and a
//! narrower ClusterRole can replace `cluster-admin`), the Secret `cloud-credentials` (key
//! `cloud`) when a credentials file is given, the Deployment `velero` running `hawser server`,
//! and the BackupStorageLocation `default` when a provider and bucket are given.
//!
//! The Deployment uses `strategy: Recreate`: the old server stops (finishing its work within
//! `--shutdown-grace-period` and releasing the Lease) before the new one starts. A rolling
//! update would never finish: the new Pod follows, so it is never ready, while the old one
//! leads. It carries Velero's Prometheus scrape annotations, probes `/livez` (liveness) and
//! `/readyz` (readiness) on the metrics port, and its
//! `terminationGracePeriodSeconds` ([`TERMINATION_GRACE_SECONDS`]) is above the server's
//! default shutdown grace period (60 s), so the kubelet does not kill a server that is still
//! finishing a backup.
//!
//! In both RBAC modes the Pod and its container run restricted: as a non-root user
//! ([`RUN_AS_USER`]), with a read-only root filesystem (the server writes no files of its own;
//! archives stream to and from the store), no privilege escalation, no capabilities and the
//! runtime's default seccomp profile.

use std::collections::BTreeMap;

use hawser_api::{BackupStorageLocation, BackupStorageLocationSpec, ObjectStorageLocation};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements, SeccompProfile, Secret, SecretKeySelector, SecretVolumeSource,
    SecurityContext, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use kube::api::{ApiResource, ObjectMeta};
use serde::Serialize;
use serde_json::Value;

use super::error::CliError;

/// The image of the Deployment when `--image` is not given.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/hawser/hawser:v", env!("CARGO_PKG_VERSION"));
/// Name of the ServiceAccount and the Deployment.
pub const NAME: &str = "velero";
/// Name of the credentials Secret.
pub const SECRET_NAME: &str = "cloud-credentials";
/// Key of the credentials in the Secret.
pub const SECRET_KEY: &str = "cloud";
/// Where the credentials Secret is mounted in the server's container.
pub const CREDENTIALS_DIR: &str = "/credentials";
/// Where the server's temporary files go (`TMPDIR`): an `emptyDir` volume named `scratch`, as in
/// Velero's Deployment, since the root filesystem is read-only. A restore keeps the archive's
/// items there until their turn, a backup its resource list.
pub const SCRATCH_DIR: &str = "/scratch";
/// Name of the BackupStorageLocation install creates.
pub const LOCATION_NAME: &str = "default";
/// Name of the Role and RoleBinding granting the server the Leases of its namespace.
pub const LEADER_ELECTION_NAME: &str = "hawser-leader-election";
/// The Pod's `terminationGracePeriodSeconds`: above the server's default
/// `--shutdown-grace-period` (60 s), with room to release the Lease.
pub const TERMINATION_GRACE_SECONDS: i64 = 90;
/// The uid and gid the server runs as (the conventional `nonroot` user of distroless images).
pub const RUN_AS_USER: i64 = 65532;
/// Name of the container port of `/metrics`, `/livez` and `/readyz`.
const METRICS_PORT_NAME: &str = "metrics";

/// What to install.
#[derive(Debug, Clone, Default)]
pub struct InstallPlan {
    /// Namespace of the server and its objects.
    pub namespace: String,
    /// Image of the server.
    pub image: String,
    /// Arguments after `server`.
    pub server_args: Vec<String>,
    /// Contents of the credentials file, if any.
    pub credentials: Option<Vec<u8>>,
    /// The BackupStorageLocation, if any.
    pub location: Option<LocationPlan>,
    /// Only the CRDs.
    pub crds_only: bool,
    /// The server's Pod.
    pub pod: PodPlan,
    /// What the server's account is granted.
    pub rbac: RbacMode,
}

/// `hawser install --rbac`: the permissions of the server's account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RbacMode {
    /// A ClusterRoleBinding to `cluster-admin`, as Velero's install creates.
    #[default]
    ClusterAdmin,
    /// Only what the server calls ([`super::rbac`]); Secrets only in the server namespace.
    Minimal,
}

/// How the server's Pod runs.
#[derive(Debug, Clone, Default)]
pub struct PodPlan {
    /// An existing ServiceAccount to run as; `None`: create and bind `velero`.
    pub service_account: Option<String>,
    /// Annotations of the created ServiceAccount.
    pub service_account_annotations: BTreeMap<String, String>,
    /// Annotations added to (and overriding) the Prometheus ones.
    pub annotations: BTreeMap<String, String>,
    /// Labels added to the Pod's; `deploy: velero` stays (the Deployment selects on it).
    pub labels: BTreeMap<String, String>,
    /// CPU and memory requests and limits.
    pub resources: PodResources,
    /// PriorityClass of the Pod.
    pub priority_class_name: Option<String>,
}

/// Requests and limits of the server's container; `"0"` or empty leaves one out (unbounded), as
/// Velero.
#[derive(Debug, Clone)]
pub struct PodResources {
    /// CPU request.
    pub cpu_request: String,
    /// Memory request.
    pub memory_request: String,
    /// CPU limit.
    pub cpu_limit: String,
    /// Memory limit.
    pub memory_limit: String,
}

/// Velero's defaults for its server Pod.
impl Default for PodResources {
    fn default() -> Self {
        Self {
            cpu_request: "500m".to_owned(),
            memory_request: "128Mi".to_owned(),
            cpu_limit: "1000m".to_owned(),
            memory_limit: "512Mi".to_owned(),
        }
    }
}

impl PodResources {
    fn requirements(&self) -> Option<ResourceRequirements> {
        let pair = |cpu: &str, memory: &str| {
            let map: BTreeMap<String, Quantity> = [("cpu", cpu), ("memory", memory)]
                .into_iter()
                .filter(|(_, value)| !value.is_empty() && *value != "0")
                .map(|(name, value)| (name.to_owned(), Quantity(value.to_owned())))
                .collect();
            (!map.is_empty()).then_some(map)
        };
        let requests = pair(&self.cpu_request, &self.memory_request);
        let limits = pair(&self.cpu_limit, &self.memory_limit);
        (requests.is_some() || limits.is_some()).then(|| ResourceRequirements {
            requests,
            limits,
            ..ResourceRequirements::default()
        })
    }
}

/// Velero's annotations of its server Pod: Prometheus scrapes `/metrics` on port 8085.
fn prometheus_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("prometheus.io/scrape".to_owned(), "true".to_owned()),
        ("prometheus.io/port".to_owned(), "8085".to_owned()),
        ("prometheus.io/path".to_owned(), "/metrics".to_owned()),
    ])
}

/// The BackupStorageLocation `default`.
#[derive(Debug, Clone, Default)]
pub struct LocationPlan {
    /// Object-store provider.
    pub provider: String,
    /// Bucket.
    pub bucket: String,
    /// Path inside the bucket.
    pub prefix: Option<String>,
    /// Provider settings.
    pub config: BTreeMap<String, String>,
    /// PEM CA bundle of the object store (`--cacert`).
    pub ca_cert: Option<Vec<u8>>,
}

/// One object to install, with what is needed to address it through the API.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Kind, version, group and plural.
    pub resource: ApiResource,
    /// Namespace for namespaced objects, `None` for cluster-scoped ones.
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
    /// The full object.
    pub object: Value,
}

impl Manifest {
    fn of<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Result<Self, CliError> {
        let meta = object.meta();
        Ok(Self {
            resource: ApiResource::erase::<K>(&()),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            object: serde_json::to_value(object)
                .map_err(|err| CliError::Output { source: err.into() })?,
        })
    }

    /// `Kind/name`, for reports.
    pub fn label(&self) -> String {
        format!("{}/{}", self.resource.kind, self.name)
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("component".to_owned(), "velero".to_owned())])
}

pub(super) fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

/// Every object of the plan, in the order they are applied.
pub fn manifests(plan: &InstallPlan) -> Result<Vec<Manifest>, CliError> {
    let ns = plan.namespace.as_str();
    let mut out = Vec::new();
    for crd in hawser_api::crd::crds() {
        out.push(Manifest::of(&crd)?);
    }
    if plan.crds_only {
        return Ok(out);
    }
    out.push(Manifest::of(&Namespace {
        metadata: meta(ns, None),
        ..Namespace::default()
    })?);
    if plan.pod.service_account.is_none() {
        let mut metadata = meta(NAME, Some(ns));
        let annotations = &plan.pod.service_account_annotations;
        metadata.annotations = (!annotations.is_empty()).then(|| annotations.clone());
        out.push(Manifest::of(&ServiceAccount {
            metadata,
            ..ServiceAccount::default()
        })?);
        if plan.rbac == RbacMode::ClusterAdmin {
            out.push(Manifest::of(&cluster_role_binding(ns))?);
        }
    }
    if plan.rbac == RbacMode::Minimal {
        let (cluster_role, cluster_binding, role, binding) =
            super::rbac::minimal(ns, service_account(plan), &binding_name(ns));
        out.push(Manifest::of(&cluster_role)?);
        out.push(Manifest::of(&cluster_binding)?);
        out.push(Manifest::of(&role)?);
        out.push(Manifest::of(&binding)?);
    }
    let (role, binding) = leader_election_rbac(ns, service_account(plan));
    out.push(Manifest::of(&role)?);
    out.push(Manifest::of(&binding)?);
    if let Some(credentials) = &plan.credentials {
        // The Secret names the location it is for: the server sends its credentials to that
        // location's endpoint (`s3Url`, …) and to no other location's.
        let mut metadata = meta(SECRET_NAME, Some(ns));
        metadata.annotations = Some(BTreeMap::from([(
            "hawser.io/locations".to_owned(),
            LOCATION_NAME.to_owned(),
        )]));
        out.push(Manifest::of(&Secret {
            metadata,
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(
                SECRET_KEY.to_owned(),
                ByteString(credentials.clone()),
            )])),
            ..Secret::default()
        })?);
    }
    out.push(Manifest::of(&deployment(plan))?);
    if let Some(location) = &plan.location {
        out.push(Manifest::of(&backup_location(plan, location))?);
    }
    Ok(out)
}

/// Velero names the binding `velero` in the `velero` namespace and `velero-<ns>` elsewhere, so
/// that installs in several namespaces do not overwrite each other's binding.
pub(super) fn binding_name(namespace: &str) -> String {
    if namespace == "velero" {
        "velero".to_owned()
    } else {
        format!("velero-{namespace}")
    }
}

fn cluster_role_binding(namespace: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(&binding_name(namespace), None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: "cluster-admin".to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: NAME.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// The ServiceAccount the server runs as.
fn service_account(plan: &InstallPlan) -> &str {
    plan.pod.service_account.as_deref().unwrap_or(NAME)
}

/// What leader election and the instance Leases need: read, create, renew and (when an instance
/// stops) delete the Leases of the namespace.
fn leader_election_rbac(namespace: &str, account: &str) -> (Role, RoleBinding) {
    let role = Role {
        metadata: meta(LEADER_ELECTION_NAME, Some(namespace)),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
            resources: Some(vec!["leases".to_owned()]),
            verbs: ["get", "create", "update", "patch", "delete"]
                .map(str::to_owned)
                .to_vec(),
            ..PolicyRule::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta(LEADER_ELECTION_NAME, Some(namespace)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: LEADER_ELECTION_NAME.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: account.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    };
    (role, binding)
}

/// An HTTP probe of `path` on the metrics port.
fn probe(path: &str, period_seconds: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(METRICS_PORT_NAME.to_owned()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

fn deployment(plan: &InstallPlan) -> Deployment {
    let ns = plan.namespace.as_str();
    let mut pod_labels = labels();
    pod_labels.extend(plan.pod.labels.clone());
    pod_labels.insert("deploy".to_owned(), NAME.to_owned());
    let mut annotations = prometheus_annotations();
    annotations.extend(plan.pod.annotations.clone());
    // The image's entrypoint is the hawser binary; the arguments pick the subcommand.
    let mut args = vec!["server".to_owned()];
    args.extend(plan.server_args.iter().cloned());
    let mut env_vars = vec![EnvVar {
        name: "VELERO_NAMESPACE".to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.namespace".to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }];
    env_vars.push(env("TMPDIR", SCRATCH_DIR));
    let mut volumes = vec![Volume {
        name: "scratch".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: "scratch".to_owned(),
        mount_path: SCRATCH_DIR.to_owned(),
        ..VolumeMount::default()
    }];
    if plan.credentials.is_some() {
        let file = format!("{CREDENTIALS_DIR}/{SECRET_KEY}");
        // The variables each provider SDK reads its credentials file from, as Velero sets them.
        for name in [
            "AWS_SHARED_CREDENTIALS_FILE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AZURE_CREDENTIALS_FILE",
        ] {
            env_vars.push(env(name, &file));
        }
        volumes.push(Volume {
            name: SECRET_NAME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(SECRET_NAME.to_owned()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(VolumeMount {
            name: SECRET_NAME.to_owned(),
            mount_path: CREDENTIALS_DIR.to_owned(),
            ..VolumeMount::default()
        });
    }
    let container = Container {
        name: NAME.to_owned(),
        image: Some(plan.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(args),
        env: Some(env_vars),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.to_owned()),
            container_port: 8085,
            ..ContainerPort::default()
        }]),
        // A follower is alive but not ready; a stopping server is alive until it exits.
        liveness_probe: Some(probe("/livez", 10)),
        readiness_probe: Some(probe("/readyz", 5)),
        resources: plan.pod.resources.requirements(),
        volume_mounts: Some(mounts),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS_USER),
            run_as_group: Some(RUN_AS_USER),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                ..Capabilities::default()
            }),
            seccomp_profile: Some(runtime_default()),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    Deployment {
        metadata: meta(NAME, Some(ns)),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("deploy".to_owned(), NAME.to_owned())])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(service_account(plan).to_owned()),
                    priority_class_name: plan.pod.priority_class_name.clone(),
                    restart_policy: Some("Always".to_owned()),
                    termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(RUN_AS_USER),
                        run_as_group: Some(RUN_AS_USER),
                        fs_group: Some(RUN_AS_USER),
                        seccomp_profile: Some(runtime_default()),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..SeccompProfile::default()
    }
}

fn backup_location(plan: &InstallPlan, location: &LocationPlan) -> BackupStorageLocation {
    let spec = BackupStorageLocationSpec {
        provider: location.provider.clone(),
        config: (!location.config.is_empty()).then(|| location.config.clone()),
        credential: plan.credentials.as_ref().map(|_| SecretKeySelector {
            name: SECRET_NAME.to_owned(),
            key: SECRET_KEY.to_owned(),
            optional: None,
        }),
        object_storage: ObjectStorageLocation {
            bucket: location.bucket.clone(),
            prefix: location.prefix.clone().filter(|p| !p.is_empty()),
            ca_cert: location.ca_cert.clone().map(ByteString),
            ..ObjectStorageLocation::default()
        },
        default: true,
        ..BackupStorageLocationSpec::default()
    };
    let mut bsl = BackupStorageLocation::new(LOCATION_NAME, spec);
    bsl.metadata = meta(LOCATION_NAME, Some(&plan.namespace));
    bsl
}

#[cfg(test)]
#[path = "manifests_tests.rs"]
mod tests;
