//! The controllers: one file per kind of object the server acts on.

pub(crate) mod backup;
pub(crate) mod bsl;
pub(crate) mod deletion;
pub(crate) mod gc;
pub(crate) mod restore;
pub(crate) mod schedule;
pub(crate) mod vsl;
