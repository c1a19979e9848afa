//! kube-sim: a loopback Kubernetes API server with fault injection.

pub mod openapi;
pub mod patch;
pub mod resource;
pub mod selector;
pub mod table;
