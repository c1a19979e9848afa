//! A real kube-apiserver for the process tests: one API server per test (kube-sim's test
//! fixture [`ApiServer`], shared with its conformance suites), on the etcd that
//! `scripts/real-cluster.sh up DIR` started (named by `HAWSER_TEST_REAL_KUBE=DIR`), under a key
//! prefix of its own, so tests running at once never see each other's objects.
//!
//! The test's own reads and writes (the setup a kube-sim test does through its store) go
//! straight to the API server through a kube client that runs on a runtime of its own, so they
//! can be called from synchronous helpers inside any test.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use super::real_kube::ApiServer;

/// One API server of a test's own (see [`ApiServer`]) and a client of it.
pub struct RealApi {
    server: ApiServer,
    runtime: Option<tokio::runtime::Runtime>,
    client: kube::Client,
    resources: Mutex<HashMap<(String, String), (ApiResource, ApiCapabilities)>>,
}

impl RealApi {
    /// Starts an API server on the shared etcd of the `up` directory named by
    /// `HAWSER_TEST_REAL_KUBE`.
    pub async fn start() -> Self {
        let server = ApiServer::for_test().await;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let kubeconfig = server.kubeconfig();
        let client = spawn_wait(&runtime, async move {
            let file = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        Self {
            server,
            runtime: Some(runtime),
            client,
            resources: Mutex::default(),
        }
    }

    /// The API server itself.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// Waits until a CRD's kind can be watched: a real server answers 429 "storage is
    /// (re)initializing" for a moment after the CRD is established.
    pub async fn until_watchable(
        &self,
        group: &str,
        version: &str,
        names: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionNames,
    ) {
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
        };
        let plural = &names.plural;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let api = api.clone();
            // A list from the watch cache (resourceVersion 0) is refused the same way while the
            // cache starts, and answers at once when it is ready.
            let started = self.run(async move {
                let params = ListParams::default().match_any().limit(1);
                api.list(&params).await.map(drop)
            });
            match started {
                Ok(()) => return,
                Err(e) => assert!(
                    std::time::Instant::now() < deadline,
                    "{plural} cannot be watched: {e}"
                ),
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    fn run<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> T {
        spawn_wait(self.runtime.as_ref().expect("running"), work)
    }

    fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<(Api<DynamicObject>, ApiCapabilities), String> {
        let key = (api_version.to_owned(), kind.to_owned());
        let found = self.resources.lock().unwrap().get(&key).cloned();
        let (resource, caps) = match found {
            Some(found) => found,
            None => {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                let gvk = GroupVersionKind::gvk(group, version, kind);
                let client = self.client.clone();
                let found = self
                    .run(async move { kube::discovery::pinned_kind(&client, &gvk).await })
                    .map_err(|e| format!("{api_version} {kind}: {e}"))?;
                self.resources.lock().unwrap().insert(key, found.clone());
                found
            }
        };
        let api = if caps.scope == Scope::Namespaced && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        Ok((api, caps))
    }

    /// Creates the object, or replaces the one of that name; a `status` in it is written
    /// through the status subresource where the kind has one, as a controller would.
    pub fn insert(&self, object: Value) -> Result<Value, String> {
        let (api_version, kind, namespace, name) = identity(&object);
        let (api, caps) = self.api(&api_version, &kind, &namespace)?;
        let status = object.get("status").cloned();
        let has_status = caps.subresources.iter().any(|(s, _)| s.plural == "status");
        self.run(async move {
            let mut wanted: DynamicObject =
                serde_json::from_value(object).map_err(|e| e.to_string())?;
            let pp = PostParams::default();
            // A resourceVersion read earlier is no precondition here: the object replaces
            // whatever is stored, as kube-sim's store does.
            wanted.metadata.resource_version = None;
            let mut stored = match api.create(&pp, &wanted).await {
                Ok(created) => created,
                Err(kube::Error::Api(s)) if s.code == 409 => replace(&api, &name, wanted).await?,
                Err(e) => return Err(format!("{kind} {namespace}/{name}: {e}")),
            };
            if let (Some(status), true) = (status, has_status) {
                stored.data["status"] = status;
                stored = api
                    .replace_status(&name, &pp, &stored)
                    .await
                    .map_err(|e| format!("status of {kind} {namespace}/{name}: {e}"))?;
            }
            Ok(with_type(stored, &api_version, &kind))
        })
    }

    /// Replaces the object's status, whatever its resourceVersion (as kube-sim's store does).
    pub fn set_status(&self, object: &Value) -> Result<Value, String> {
        let (api_version, kind, namespace, name) = identity(object);
        let (api, _) = self.api(&api_version, &kind, &namespace)?;
        let mut wanted: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
        self.run(async move {
            for _ in 0..10 {
                let current = api.get(&name).await.map_err(|e| e.to_string())?;
                wanted.metadata.resource_version = current.metadata.resource_version;
                match api
                    .replace_status(&name, &PostParams::default(), &wanted)
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    done => {
                        return done
                            .map(|stored| with_type(stored, &api_version, &kind))
                            .map_err(|e| e.to_string());
                    }
                }
            }
            Err(format!(
                "status of {kind} {name}: still changing after ten writes"
            ))
        })
    }

    /// A kubeconfig at `path` that reaches this API server directly (no proxy) as the
    /// ServiceAccount `namespace/name`, with a token the API server issues for it
    /// (TokenRequest), so that what the account may do is decided by the server's RBAC.
    pub fn write_service_account_kubeconfig(&self, namespace: &str, name: &str, path: &Path) {
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), namespace);
        let account = name.to_owned();
        let token = self
            .run(async move {
                let request = k8s_openapi::api::authentication::v1::TokenRequest {
                    spec: k8s_openapi::api::authentication::v1::TokenRequestSpec {
                        expiration_seconds: Some(3600),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                accounts
                    .create_token_request(&account, &PostParams::default(), &request)
                    .await
            })
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"))
            .status
            .expect("the TokenRequest's status")
            .token;
        let admin = std::fs::read_to_string(self.server.kubeconfig()).expect("the kubeconfig");
        let mut config: serde_yaml::Value = serde_yaml::from_str(&admin).expect("YAML");
        config["users"][0]["user"] =
            serde_yaml::to_value(serde_json::json!({"token": token})).expect("a user");
        config["contexts"][0]["context"]["namespace"] = namespace.into();
        std::fs::write(path, serde_yaml::to_string(&config).expect("YAML")).expect("written");
    }

    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let (api, _) = self.api(api_version, kind, namespace).ok()?;
        let (api_version, kind, name) = (api_version.to_owned(), kind.to_owned(), name.to_owned());
        let key = name.clone();
        self.run(async move { api.get_opt(&key).await })
            .unwrap_or_else(|e| panic!("GET {kind} {name}: {e}"))
            .map(|o| with_type(o, &api_version, &kind))
    }

    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let Ok((api, _)) = self.api(api_version, kind, namespace.unwrap_or_default()) else {
            return Vec::new();
        };
        let (api_version, kind) = (api_version.to_owned(), kind.to_owned());
        self.run(async move { api.list(&ListParams::default()).await })
            .unwrap_or_else(|e| panic!("LIST {kind}: {e}"))
            .items
            .into_iter()
            .map(|o| with_type(o, &api_version, &kind))
            .collect()
    }

    /// Whether a LIST of `kind` answers 200 now (after a restart the API server is ready a
    /// moment before it serves the custom resources again).
    pub fn serves(&self, api_version: &str, kind: &str, namespace: &str) -> bool {
        let Ok((api, _)) = self.api(api_version, kind, namespace) else {
            return false;
        };
        self.run(async move { api.list(&ListParams::default().limit(1)).await })
            .is_ok()
    }

    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), String> {
        let (api, _) = self.api(api_version, kind, namespace)?;
        let name = name.to_owned();
        self.run(async move { api.delete(&name, &DeleteParams::default()).await })
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

impl Drop for RealApi {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Replaces the stored object of that name, whatever its resourceVersion (a write of a
/// program under test in between is retried over, up to ten times).
async fn replace(
    api: &Api<DynamicObject>,
    name: &str,
    mut wanted: DynamicObject,
) -> Result<DynamicObject, String> {
    for _ in 0..10 {
        let current = api.get(name).await.map_err(|e| e.to_string())?;
        wanted.metadata.resource_version = current.metadata.resource_version;
        match api.replace(name, &PostParams::default(), &wanted).await {
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            done => return done.map_err(|e| e.to_string()),
        }
    }
    Err(format!("{name}: still changing after ten replaces"))
}

/// Runs `work` on `runtime` and blocks this thread until it ends (callable inside a test's
/// own runtime: the work never needs this thread).
fn spawn_wait<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    work: impl Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let _ = tx.send(work.await);
    });
    rx.recv().expect("the request task ends")
}

fn identity(object: &Value) -> (String, String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&object["apiVersion"]),
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

/// The object as JSON with its type (a list's items come without one).
fn with_type(object: DynamicObject, api_version: &str, kind: &str) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    value["apiVersion"] = Value::from(api_version);
    value["kind"] = Value::from(kind);
    value
}
