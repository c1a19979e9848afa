//! State the router, the verbs, the background controller and the handle share: [`Shared`] (the
//! store, the [`Catalog`] of served resources, faults, the request log, the work queue), the
//! parsed [`Route`] of a path and the [`ResourceRequest`] a verb receives.
//!
//! A leaf of the request path: `server` (the router) and `api` import it, and so do the verb
//! modules under `verbs/`; it imports none of them.

use std::sync::{Arc, RwLock};

use crate::catalog::{self, Served};
use crate::config::SimConfig;
use crate::faults::Faults;
use crate::proxy::UpstreamClient;
use crate::reqlog::RequestLog;
use crate::store::{State, Store};
use crate::work::WorkQueue;

/// Storage key of namespaces.
pub const NAMESPACES: &str = "/namespaces";
/// Storage key of CustomResourceDefinitions.
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// The served resources.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    entries: Vec<Arc<Served>>,
    builtin_count: usize,
    /// Storage keys of custom resources served while their CRD is not yet established; discovery
    /// leaves them out.
    installing: Vec<String>,
}

impl Catalog {
    pub fn new() -> Catalog {
        let entries: Vec<Arc<Served>> = catalog::builtins().into_iter().map(Arc::new).collect();
        let builtin_count = entries.len();
        Catalog {
            entries,
            builtin_count,
            installing: Vec::new(),
        }
    }

    /// The catalogue as discovery and OpenAPI show it: without the resources of CRDs that are
    /// not established yet.
    pub fn discoverable(&self) -> Catalog {
        let mut out = self.clone();
        if !self.installing.is_empty() {
            out.entries
                .retain(|s| !self.installing.iter().any(|i| *i == s.storage));
            out.installing.clear();
        }
        out
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Served>> {
        self.entries
            .iter()
            .find(|s| s.info.group == group && s.info.version == version && s.info.plural == plural)
            .cloned()
    }

    /// The entry for an object's `apiVersion` and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<Served>> {
        let (group, version) = split_api_version(api_version);
        self.entries
            .iter()
            .find(|s| s.info.group == group && s.info.version == version && s.info.kind == kind)
            .cloned()
    }

    /// Any served entry with this storage key.
    pub fn by_storage(&self, storage: &str) -> Option<Arc<Served>> {
        self.entries.iter().find(|s| s.storage == storage).cloned()
    }

    pub fn entries(&self) -> &[Arc<Served>] {
        &self.entries
    }

    /// Whether any resource is served under this group/version.
    pub fn serves_gv(&self, group: &str, version: &str) -> bool {
        self.entries
            .iter()
            .any(|s| s.info.group == group && s.info.version == version)
    }

    /// Groups (without core) in discovery order, each with its versions most-preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for s in &self.entries {
            if s.info.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == s.info.group) {
                Some((_, vs)) => {
                    if !vs.contains(&s.info.version) {
                        vs.push(s.info.version.clone());
                    }
                }
                None => out.push((s.info.group.clone(), vec![s.info.version.clone()])),
            }
        }
        for (_, vs) in &mut out {
            vs.sort_by(|a, b| catalog::compare_versions(a, b));
        }
        out
    }

    /// Recomputes the custom-resource entries from the stored CRDs.
    pub fn rebuild_custom(&mut self, state: &State) {
        self.entries.truncate(self.builtin_count);
        self.installing.clear();
        let mut custom: Vec<Served> = Vec::new();
        for crd in state.objects(CRDS).values() {
            let served = catalog::from_crd(crd);
            if !catalog::crd_condition(crd, "Established") {
                self.installing
                    .extend(served.first().map(|s| s.storage.clone()));
            }
            custom.extend(served);
        }
        custom.sort_by(|a, b| {
            a.info
                .group
                .cmp(&b.info.group)
                .then(a.info.plural.cmp(&b.info.plural))
        });
        self.entries.extend(custom.into_iter().map(Arc::new));
    }
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// State shared by the listeners, the background controller and the handle.
#[derive(Debug)]
pub struct Shared {
    pub config: SimConfig,
    pub store: Store,
    pub catalog: RwLock<Catalog>,
    pub faults: Faults,
    pub log: RequestLog,
    pub work: WorkQueue,
    /// The `pods/exec` script and log.
    pub execs: crate::exec::Execs,
    /// Proxy mode: where API requests go instead of the store (which then stays empty).
    pub upstream: Option<UpstreamClient>,
}

impl Shared {
    pub fn new(config: SimConfig, upstream: Option<UpstreamClient>) -> Shared {
        let store = Store::new(config.watch_history, 0);
        let log = RequestLog::new(config.request_log_capacity);
        Shared {
            config,
            store,
            catalog: RwLock::new(Catalog::new()),
            faults: Faults::new(),
            log,
            work: WorkQueue::default(),
            execs: crate::exec::Execs::default(),
            upstream,
        }
    }

    pub fn catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn rebuild_catalog(&self, state: &State) {
        self.catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .rebuild_custom(state);
    }
}

/// A request against a resource.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    pub served: Arc<Served>,
    pub verb: &'static str,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Where a path leads.
#[derive(Debug)]
pub enum Route {
    Resource(ResourceRequest),
    CoreVersions,
    GroupList,
    Group(String),
    ResourceList(String, String),
    Version,
    Health(String),
    OpenApiIndex,
    OpenApiDoc(String),
    NotFound,
    MethodNotAllowed,
    /// A verb the resource does not offer (e.g. create while its CRD terminates).
    VerbNotAllowed(Arc<Served>, &'static str),
}
