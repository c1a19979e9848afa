//! What the parent and the workers agree on: the backup's and the restore's names, the
//! location in a directory, and the namespaces each measured run writes into.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use bench_common::seed::{self, NAMESPACES};
use hawser_store::{Location, LocationSpec};

/// The backup the restore reads.
pub const BACKUP: &str = "bench";
/// The restore.
pub const RESTORE: &str = "bench-restore";

/// What a measured run of round `round` creates: the floor's parts and the restore each write
/// into namespaces of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Restore,
    /// The floor that reads and parses the archive inside its clock.
    ParseCreate,
    /// The floor that creates only (the archive read and parsed before its clock).
    CreatesOnly,
}

impl Target {
    /// The namespace round `round` of this target maps application namespace `i` to.
    pub fn namespace(self, round: usize, i: usize) -> String {
        let word = match self {
            Self::Restore => "restored",
            Self::ParseCreate => "floor",
            Self::CreatesOnly => "creates",
        };
        format!("{word}{round}-{i}")
    }
}

/// The namespace server run `run` maps application namespace `i` to.
pub fn served(run: usize, i: usize) -> String {
    format!("server{run}-{i}")
}

/// `app-<i>` → `to(i)` for every application namespace.
pub fn mapping(to: impl Fn(usize) -> String) -> BTreeMap<String, String> {
    (0..NAMESPACES)
        .map(|i| (seed::namespace(i), to(i)))
        .collect()
}

/// The filesystem location under `root`.
pub fn location(root: &str) -> Result<Location> {
    Location::new(&LocationSpec::new("filesystem", "bench").with_config("root", root))
        .context("filesystem location")
}
