//! The engines' Kubernetes adapter: every request the backup and restore engines make to the
//! API server goes through here.
//!
//! - [`path`]: URLs of collections and objects, with one percent-encoder for every segment and
//!   query value (names come from specs and untrusted archives);
//! - [`request`]: raw GET, POST, PUT and merge-patch requests over JSON, paged LISTs, and the
//!   reading of API errors (code, `AlreadyExists`, text);
//! - `exec`: a command in a container (`pods/exec`), for hooks;
//! - [`discovery`]: the served resources at their preferred versions, as a
//!   [`Catalogue`](hawser_core::selection::Catalogue).
//!
//! Requests are untyped (`serde_json::Value`): the engines handle every type, including custom
//! resources, and an object that does not parse must become an item error, not a failed run.

pub mod client;
pub mod discovery;
pub(crate) mod exec;
pub(crate) mod path;
pub mod request;

pub use discovery::{DiscoveryError, catalogue};
