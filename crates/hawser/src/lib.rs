//! hawser: a Kubernetes backup and restore server speaking Velero's `velero.io/v1` API.
//!
//! This crate is the `hawser` binary's: the command line ([`cli`]) and the embedded demo and
//! development setup ([`demo`]). The server is in `hawser-server`, the engines in
//! `hawser-engine`.

pub mod cli;
pub mod demo;
