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

/// The namespace the restore maps application namespace `i` to.
pub fn restored(i: usize) -> String {
    format!("restored-{i}")
}

/// The namespace the floor creates application namespace `i`'s objects in.
pub fn floor(i: usize) -> String {
    format!("floor-{i}")
}

/// The namespace server run `run` maps application namespace `i` to.
pub fn served(run: usize, i: usize) -> String {
    format!("server{run}-{i}")
}

/// `app-<i>` → `to(i)` for every application namespace.
pub fn mapping(to: fn(usize) -> String) -> BTreeMap<String, String> {
    (0..NAMESPACES)
        .map(|i| (seed::namespace(i), to(i)))
        .collect()
}

/// The filesystem location under `root`.
pub fn location(root: &str) -> Result<Location> {
    Location::new(&LocationSpec::new("filesystem", "bench").with_config("root", root))
        .context("filesystem location")
}
