//! kube-sim: a loopback Kubernetes API server with fault injection.
//!
//! Start one in a test with [`KubeSim::start`], point kube-rs or kubectl at
//! [`KubeSim::kubeconfig_yaml`], inject faults through [`KubeSim::faults`] (or the admin HTTP
//! listener) and inspect what clients did with [`KubeSim::requests`]. `docs/kube-sim.md` lists
//! what is served and what is not reproduced.
//!
//! Inside, a request flows `server` (routing, faults, request log) → `api` (negotiation,
//! dispatch) → one module per verb under `verbs/`. They all read the state in `shared`, a leaf
//! that imports none of them; verbs hand background work to `controller` through `work`. A new
//! CRD's conditions are written by `establish`, at once or after an injected delay.
//!
//! In proxy mode ([`SimConfig::upstream`]) `server` hands requests to `proxy` instead of `api`:
//! a real API server answers, and faults and the request log work as before.
//!
//! [`csi`] plays the CSI side of a cluster (snapshot CRDs, a snapshot controller, a
//! provisioner) as an API client, opt-in, against kube-sim or a real API server.

pub mod csi;
pub mod openapi;
pub mod patch;
pub mod resource;
pub mod selector;
pub mod table;

mod admin;
mod api;
mod catalog;
mod config;
mod controller;
mod discovery;
mod establish;
mod exec;
mod faults;
mod http;
mod meta;
mod protobuf;
mod proxy;
mod render;
mod reqlog;
mod server;
mod shared;
mod sim;
mod status;
mod store;
mod upstream;
mod verbs;
mod work;

pub use config::SimConfig;
pub use exec::{ExecRecord, ExecReply, ExecRule, Execs};
pub use faults::{
    ActiveFault, DropResponseFault, EstablishDelayFault, FaultSpec, Faults, HangFault,
    LatencyFault, Matcher, Shape, StatusFault,
};
pub use reqlog::RequestRecord;
pub use sim::{KubeSim, SimError, SimStore, kubeconfig_yaml};
pub use status::ApiError;
pub use upstream::{ClientCert, Upstream, UpstreamError};
