//! The backup archive `<backup>.tar.gz` (velero-compat §5.2): a streaming writer
//! ([`ArchiveWriter`]), a streaming reader for untrusted archives ([`ArchiveReader`]), the entry
//! paths ([`ItemPath`]), and gzip-JSON helpers for the side files ([`gzjson`]).
//!
//! Layout inside the archive (regular files only, no directory entries, mode `0755`):
//!
//! * `metadata/version` — `1.1.0\n`;
//! * `resources/<gr>/namespaces/<ns>/<name>.json` and `resources/<gr>/cluster/<name>.json`;
//! * the same bytes again under `resources/<gr>/<version>-preferredversion/…` for items read at
//!   their group's preferred version; non-preferred versions under `resources/<gr>/<version>/…`.
//!
//! `<gr>` is `GroupResource.String()`: `pods`, `deployments.apps`.

pub mod gzjson;
mod reader;
mod writer;

pub use reader::{
    ArchiveError, ArchiveItem, ArchiveReader, EntryError, EntryErrorKind, Items, ReadError,
    ReaderOptions,
};
pub use writer::{ArchiveStats, ArchiveWriteError, ArchiveWriter, ItemId, WriterOptions};

/// Backup format version written to `metadata/version` and `status.formatVersion`.
pub const FORMAT_VERSION: &str = "1.1.0";
/// Path of the format version entry.
pub const VERSION_PATH: &str = "metadata/version";
/// Top-level directory of the items.
pub const RESOURCES_DIR: &str = "resources";
/// Suffix of the directory holding the preferred-version copy.
pub const PREFERRED_VERSION_SUFFIX: &str = "-preferredversion";

/// Which copy of an item a path holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VersionDir {
    /// `resources/<gr>/…`: the copy a restore reads by default.
    Unversioned,
    /// `resources/<gr>/<version>-preferredversion/…`.
    Preferred(String),
    /// `resources/<gr>/<version>/…` (non-preferred version).
    Other(String),
}

/// The parsed path of one item entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemPath {
    /// `GroupResource.String()`, e.g. `deployments.apps`.
    pub group_resource: String,
    /// Which copy.
    pub version_dir: VersionDir,
    /// Namespace; `None` for cluster-scoped items.
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
}

/// Why a path is not an item path of the archive layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A component that could escape the archive root or is otherwise unusable.
    #[error("path component {0:?} is not allowed")]
    BadComponent(String),
    /// The path does not follow the layout.
    #[error(
        "path does not follow resources/<resource>/[<version>/]namespaces/<ns>/<name>.json or resources/<resource>/[<version>/]cluster/<name>.json"
    )]
    NotAnItemPath,
}

impl PathError {
    /// Stable short category.
    pub fn category(&self) -> &'static str {
        match self {
            Self::BadComponent(_) => "BadPathComponent",
            Self::NotAnItemPath => "NotAnItemPath",
        }
    }
}

/// Whether `c` is usable as one path component: non-empty, not `.` or `..`, and free of `/`,
/// `\` and NUL.
pub fn is_safe_component(c: &str) -> bool {
    !c.is_empty() && c != "." && c != ".." && !c.contains(['/', '\\', '\0'])
}

impl ItemPath {
    /// The entry path, e.g. `resources/deployments.apps/v1-preferredversion/namespaces/web/nginx.json`.
    pub fn to_path(&self) -> String {
        let mut path = format!("{RESOURCES_DIR}/{}/", self.group_resource);
        match &self.version_dir {
            VersionDir::Unversioned => {}
            VersionDir::Preferred(v) => path.push_str(&format!("{v}{PREFERRED_VERSION_SUFFIX}/")),
            VersionDir::Other(v) => path.push_str(&format!("{v}/")),
        }
        match &self.namespace {
            Some(ns) => path.push_str(&format!("namespaces/{ns}/")),
            None => path.push_str("cluster/"),
        }
        path.push_str(&self.name);
        path.push_str(".json");
        path
    }

    /// Parses an entry path (already stripped of a leading `./`).
    pub fn parse(path: &str) -> Result<Self, PathError> {
        let parts: Vec<&str> = path.split('/').collect();
        if let Some(bad) = parts.iter().find(|c| !is_safe_component(c)) {
            return Err(PathError::BadComponent((*bad).to_string()));
        }
        if parts.first() != Some(&RESOURCES_DIR) || parts.len() < 4 {
            return Err(PathError::NotAnItemPath);
        }
        let group_resource = parts[1].to_string();
        let (version_dir, scope) = match parts.len() {
            4 => (VersionDir::Unversioned, &parts[2..]),
            5 if parts[2] == "namespaces" => (VersionDir::Unversioned, &parts[2..]),
            5 | 6 => {
                let dir = parts[2];
                let version = match dir.strip_suffix(PREFERRED_VERSION_SUFFIX) {
                    Some(v) if !v.is_empty() => VersionDir::Preferred(v.to_string()),
                    Some(_) => return Err(PathError::NotAnItemPath),
                    None => VersionDir::Other(dir.to_string()),
                };
                (version, &parts[3..])
            }
            _ => return Err(PathError::NotAnItemPath),
        };
        let (namespace, file) = match scope {
            ["cluster", file] => (None, *file),
            ["namespaces", ns, file] => (Some((*ns).to_string()), *file),
            _ => return Err(PathError::NotAnItemPath),
        };
        let name = file
            .strip_suffix(".json")
            .filter(|n| !n.is_empty())
            .ok_or(PathError::NotAnItemPath)?;
        Ok(Self {
            group_resource,
            version_dir,
            namespace,
            name: name.to_string(),
        })
    }
}
