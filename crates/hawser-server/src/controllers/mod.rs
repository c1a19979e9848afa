//! The controllers: one file per kind of object the server acts on.

pub(crate) mod backup;
pub(crate) mod bsl;
pub(crate) mod restore;
