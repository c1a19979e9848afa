//! hawser: a Kubernetes backup and restore server speaking Velero's `velero.io/v1` API.
//!
//! This library holds the server's parts; `main.rs` wires them together.

pub mod backup;
pub mod cli;
pub mod demo;
pub mod metrics;
pub mod restore;
pub mod server;
pub mod status;
