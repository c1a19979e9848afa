//! The in-process handle: start a simulator, reach its URLs, inject faults, read the request log,
//! seed objects, shut it down.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::SimConfig;
use crate::faults::Faults;
use crate::http as h;
use crate::meta;
use crate::proxy::UpstreamClient;
use crate::reqlog::RequestRecord;
use crate::server;
use crate::shared::{ResourceRequest, Shared};
use crate::status::ApiError;
use crate::upstream::UpstreamError;
use crate::verbs::delete::{self, DeleteOptions};
use crate::verbs::request::WriteOpts;
use crate::verbs::{create, update};

/// Errors of the handle.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("binding {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing the upstream API server's client")]
    Upstream(#[source] UpstreamError),
    #[error("no served resource has apiVersion {api_version} and kind {kind}")]
    UnknownKind { api_version: String, kind: String },
    #[error("the API rejected the object")]
    Api(#[source] ApiError),
    #[error("reading or writing {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing YAML document {index} of {path}")]
    Yaml {
        path: String,
        index: usize,
        #[source]
        source: serde_yaml::Error,
    },
}

/// A running simulator. Dropping it without [`KubeSim::shutdown`] stops its tasks too.
#[derive(Debug)]
pub struct KubeSim {
    shared: Arc<Shared>,
    api_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl KubeSim {
    /// Binds the listeners, creates the default namespaces and starts serving. In proxy mode
    /// ([`SimConfig::upstream`]) it prepares the upstream's client instead of the namespaces
    /// and runs no controllers; the upstream is first contacted by the first request.
    pub async fn start(config: SimConfig) -> Result<KubeSim, SimError> {
        let upstream = match &config.upstream {
            Some(up) => Some(UpstreamClient::new(up).await.map_err(SimError::Upstream)?),
            None => None,
        };
        let proxying = upstream.is_some();
        let api_listener = h::bind(config.listen).map_err(|source| SimError::Bind {
            addr: config.listen,
            source,
        })?;
        let api_addr = api_listener.local_addr().map_err(|source| SimError::Bind {
            addr: config.listen,
            source,
        })?;
        let admin_listener = match config.admin_listen {
            Some(a) => Some(h::bind(a).map_err(|source| SimError::Bind { addr: a, source })?),
            None => None,
        };
        let admin_addr = match &admin_listener {
            Some(l) => Some(l.local_addr().map_err(|source| SimError::Bind {
                addr: api_addr,
                source,
            })?),
            None => None,
        };
        let default_ns = config.default_namespaces && !proxying;
        let shared = Arc::new(Shared::new(config, upstream));
        if default_ns {
            let store = SimStore {
                shared: shared.clone(),
            };
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                store
                    .insert(
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    )
                    .map_err(|e| match e {
                        SimError::Api(a) => SimError::Api(a),
                        other => other,
                    })?;
            }
        }
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        {
            let s = shared.clone();
            let svc = move |req| server::handle(s.clone(), req);
            tasks.push(tokio::spawn(h::api_loop(
                api_listener,
                api_addr,
                shared.faults.clone(),
                shutdown_rx.clone(),
                svc,
            )));
        }
        if let Some(l) = admin_listener {
            let s = shared.clone();
            let svc = move |req| crate::admin::handle(s.clone(), req);
            tasks.push(tokio::spawn(h::simple_loop(l, shutdown_rx.clone(), svc)));
        }
        if !proxying {
            tasks.push(tokio::spawn(crate::controller::run(
                shared.clone(),
                shutdown_rx,
            )));
        }
        Ok(KubeSim {
            shared,
            api_addr,
            admin_addr,
            shutdown,
            tasks,
        })
    }

    /// `http://127.0.0.1:PORT` of the API listener.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.api_addr)
    }

    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// `http://127.0.0.1:PORT` of the admin listener, if one was configured.
    pub fn admin_url(&self) -> Option<String> {
        self.admin_addr.map(|a| format!("http://{a}"))
    }

    /// A kubeconfig (plain http, no credentials) that kubectl and kube-rs accept.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.api_url())
    }

    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), SimError> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| SimError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// The fault table.
    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// The `pods/exec` script and the log of every exec (`exec` module docs).
    pub fn execs(&self) -> crate::exec::Execs {
        self.shared.execs.clone()
    }

    /// The whole request log (bounded).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.since(0)
    }

    /// Records with a sequence number greater than `seq`.
    pub fn requests_since(&self, seq: u64) -> Vec<RequestRecord> {
        self.shared.log.since(seq)
    }

    /// Sequence number of the newest logged request.
    pub fn last_request_seq(&self) -> u64 {
        self.shared.log.last_seq()
    }

    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// The upstream API server's URL in proxy mode.
    pub fn upstream_url(&self) -> Option<&str> {
        self.shared.upstream.as_ref().map(UpstreamClient::url)
    }

    /// Direct store access for seeding and inspecting objects.
    ///
    /// # Panics
    ///
    /// In proxy mode ([`SimConfig::upstream`]): the local store is not used there, so reading
    /// it would silently show nothing. Seed and inspect objects through the API instead.
    pub fn store(&self) -> SimStore {
        if let Some(url) = self.upstream_url() {
            panic!(
                "KubeSim::store() in proxy mode: requests go to the upstream API server {url} and \
                 the local store is not used; create and read objects through the API"
            );
        }
        SimStore {
            shared: self.shared.clone(),
        }
    }

    /// Stops the listeners (open connections are dropped) and the controllers.
    pub async fn shutdown(mut self) {
        self.stop();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    fn stop(&self) {
        self.shutdown.send_replace(true);
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The kubeconfig for a server URL.
pub fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n    server: {server}\ncontexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n    user: kube-sim\n    namespace: default\ncurrent-context: kube-sim\nusers:\n- name: kube-sim\n  user: {{}}\npreferences: {{}}\n"
    )
}

/// Seeding and inspection access to the store, going through the same create/update logic as
/// the API (defaults, uid, resourceVersion, watch events, CRD establishment).
#[derive(Debug, Clone)]
pub struct SimStore {
    shared: Arc<Shared>,
}

impl SimStore {
    fn served(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Arc<crate::catalog::Served>, SimError> {
        self.shared
            .catalog()
            .by_kind(api_version, kind)
            .ok_or_else(|| SimError::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })
    }

    /// Creates the object, or replaces it unconditionally if it exists. Namespaced objects
    /// without a namespace go to `default`; the namespace must exist.
    pub fn insert(&self, mut obj: Value) -> Result<Value, SimError> {
        let av = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let served = self.served(&av, &kind)?;
        let ns = if served.info.namespaced {
            let ns = meta::namespace(&obj);
            Some(if ns.is_empty() {
                "default".to_string()
            } else {
                ns.to_string()
            })
        } else {
            None
        };
        {
            let m = meta::meta_mut(&mut obj);
            m.remove("resourceVersion");
        }
        let opts = WriteOpts {
            dry_run: false,
            manager: "kube-sim".to_string(),
        };
        let name = meta::name(&obj).to_string();
        let exists = !name.is_empty()
            && self
                .shared
                .store
                .read()
                .get(&served.storage, ns.as_deref().unwrap_or(""), &name)
                .is_some();
        let stored = if exists {
            let r = ResourceRequest {
                served: served.clone(),
                verb: "update",
                namespace: ns,
                name: Some(name),
                subresource: None,
            };
            update::update(&self.shared, &r, obj, &opts)
                .map_err(SimError::Api)?
                .1
        } else {
            create::create(&self.shared, &served, ns.as_deref(), obj, &opts)
                .map_err(SimError::Api)?
        };
        Ok((*stored).clone())
    }

    /// Replaces the object's `status` (as a `/status` write would).
    pub fn set_status(&self, obj: &Value) -> Result<Value, SimError> {
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let served = self.served(av, kind)?;
        let ns = served.info.namespaced.then(|| {
            let n = meta::namespace(obj);
            if n.is_empty() {
                "default".to_string()
            } else {
                n.to_string()
            }
        });
        let mut body = obj.clone();
        meta::meta_mut(&mut body).remove("resourceVersion");
        let r = ResourceRequest {
            served,
            verb: "update",
            namespace: ns,
            name: Some(meta::name(obj).to_string()),
            subresource: Some("status".into()),
        };
        let opts = WriteOpts {
            dry_run: false,
            manager: "kube-sim".to_string(),
        };
        Ok((*update::update(&self.shared, &r, body, &opts)
            .map_err(SimError::Api)?
            .1)
            .clone())
    }

    /// The stored object, if any (`namespace` ignored for cluster-scoped kinds).
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let served = self.served(api_version, kind).ok()?;
        let ns = if served.info.namespaced {
            namespace
        } else {
            ""
        };
        let st = self.shared.store.read();
        st.get(&served.storage, ns, name).map(|o| (**o).clone())
    }

    /// All objects of a kind (`namespace` `None` = all namespaces), in key order.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let Ok(served) = self.served(api_version, kind) else {
            return Vec::new();
        };
        let st = self.shared.store.read();
        st.range(&served.storage, namespace, None)
            .map(|(_, v)| (**v).clone())
            .collect()
    }

    /// Deletes as `DELETE` with default options would (finalizers honoured).
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), SimError> {
        let served = self.served(api_version, kind)?;
        let ns = if served.info.namespaced {
            namespace
        } else {
            ""
        };
        let mut st = self.shared.store.write();
        delete::delete(
            &self.shared,
            &mut st,
            &served,
            ns,
            name,
            &DeleteOptions::default(),
        )
        .map(|_| ())
        .map_err(SimError::Api)
    }

    /// Number of objects of a kind.
    pub fn count(&self, api_version: &str, kind: &str) -> usize {
        match self.served(api_version, kind) {
            Ok(s) => self.shared.store.read().count(&s.storage),
            Err(_) => 0,
        }
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.read().rv()
    }

    /// Forgets all watch history: watches resuming from an older RV and older continue tokens
    /// get 410 Expired.
    pub fn compact_history(&self) {
        self.shared.store.write().compact();
    }

    /// Loads multi-document YAML (CRDs first, then namespaces, then everything else).
    pub fn load_yaml(&self, text: &str, path: &str) -> Result<usize, SimError> {
        use serde::Deserialize;
        let mut docs = Vec::new();
        for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let v = Value::deserialize(doc).map_err(|source| SimError::Yaml {
                path: path.to_string(),
                index,
                source,
            })?;
            match v {
                Value::Null => {}
                Value::Object(ref m)
                    if m.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    if let Some(Value::Array(items)) = m.get("items") {
                        docs.extend(items.iter().cloned());
                    }
                }
                other => docs.push(other),
            }
        }
        let rank = |v: &Value| match v.get("kind").and_then(Value::as_str) {
            Some("CustomResourceDefinition") => 0,
            Some("Namespace") => 1,
            _ => 2,
        };
        docs.sort_by_key(rank);
        let n = docs.len();
        for d in docs {
            self.insert(d)?;
        }
        Ok(n)
    }

    /// Loads a YAML file.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<usize, SimError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.load_yaml(&text, &path.display().to_string())
    }
}
