//! The controllers: one file per kind of object the server acts on, all started from one
//! table ([`table::CONTROLLERS`]).

pub(crate) mod backup;
pub(crate) mod bsl;
pub(crate) mod deletion;
pub(crate) mod download;
pub(crate) mod gc;
pub(crate) mod operations;
mod periodic;
mod requests;
pub(crate) mod restore;
pub(crate) mod restore_files;
pub(crate) mod schedule;
pub(crate) mod server_status;
pub(crate) mod sync;
pub(crate) mod table;
pub(crate) mod vsl;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod in_process_tests;
