//! Simulator configuration.

use std::net::SocketAddr;
use std::time::Duration;

use crate::upstream::Upstream;

/// How to start a simulator. `SimConfig::default()` listens on an ephemeral loopback port and
/// starts an admin listener on another.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// API listener address; port 0 picks a free port (kept across `refuse` faults).
    pub listen: SocketAddr,
    /// Admin (fault injection) listener; `None` = no admin listener (the handle still works).
    pub admin_listen: Option<SocketAddr>,
    /// How many change events are kept for watch resumption and continue tokens; older
    /// resourceVersions get 410 Expired.
    pub watch_history: usize,
    /// Interval between BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Largest accepted request body (the real default is 3 MiB).
    pub max_body_bytes: usize,
    /// Request log capacity (oldest entries are dropped).
    pub request_log_capacity: usize,
    /// Create the namespaces a real cluster starts with.
    pub default_namespaces: bool,
    /// Delete objects none of whose `ownerReferences` uids exists any more, as the real garbage
    /// collector does (off by default so fixtures with made-up owners survive).
    pub garbage_collection: bool,
    /// Proxy mode: forward every API request to this real API server instead of serving it from
    /// the local store (faults and the request log still apply; the store, the watch history and
    /// garbage collection are not used). Clients still talk plain HTTP without credentials to
    /// kube-sim.
    pub upstream: Option<Upstream>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            watch_history: 100_000,
            bookmark_interval: Duration::from_secs(60),
            max_body_bytes: 3 * 1024 * 1024,
            request_log_capacity: 100_000,
            default_namespaces: true,
            garbage_collection: false,
            upstream: None,
        }
    }
}
