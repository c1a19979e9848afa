//! gzip and gzip-JSON helpers for the side files of a backup or restore (logs, resource list,
//! results, …) and their formats (velero-compat §5.1).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Errors of the gzip-JSON helpers.
#[derive(Debug, thiserror::Error)]
pub enum GzJsonError {
    /// Compressing or writing failed.
    #[error("writing gzip data")]
    Write(#[source] io::Error),
    /// Reading or decompressing failed (not gzip, truncated).
    #[error("reading gzip data")]
    Read(#[source] io::Error),
    /// The decompressed data is larger than allowed.
    #[error("gzip data decompresses to more than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// Encoding JSON failed.
    #[error("encoding JSON")]
    Encode(#[source] serde_json::Error),
    /// The data is not the expected JSON.
    #[error("decoding JSON")]
    Decode(#[source] serde_json::Error),
}

impl GzJsonError {
    /// Stable short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Write(_) => "GzipWriteFailed",
            Self::Read(_) => "GzipReadFailed",
            Self::TooLarge { .. } => "GzipTooLarge",
            Self::Encode(_) => "JsonEncodeFailed",
            Self::Decode(_) => "JsonDecodeFailed",
        }
    }
}

/// A gzip writer over `w` (for streaming logs): write text, then `finish()`.
pub fn gzip_writer<W: Write>(w: W) -> GzEncoder<W> {
    GzEncoder::new(w, Compression::default())
}

/// `bytes` gzip-compressed (for text artifacts such as logs).
pub fn gzip_bytes(bytes: &[u8]) -> Result<Vec<u8>, GzJsonError> {
    let mut gz = gzip_writer(Vec::new());
    gz.write_all(bytes).map_err(GzJsonError::Write)?;
    gz.finish().map_err(GzJsonError::Write)
}

/// Writes `value` as compact JSON, gzip-compressed, to `w`; returns `w`.
pub fn write_gz_json<W: Write, T: Serialize + ?Sized>(w: W, value: &T) -> Result<W, GzJsonError> {
    let mut gz = gzip_writer(w);
    serde_json::to_writer(&mut gz, value).map_err(GzJsonError::Encode)?;
    gz.finish().map_err(GzJsonError::Write)
}

/// `value` as gzip-compressed compact JSON bytes.
pub fn to_gz_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, GzJsonError> {
    write_gz_json(Vec::new(), value)
}

/// Decompresses `r` completely, refusing more than `limit` bytes of output.
pub fn gunzip_limited<R: Read>(r: R, limit: u64) -> Result<Vec<u8>, GzJsonError> {
    let mut out = Vec::new();
    GzDecoder::new(r)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(GzJsonError::Read)?;
    if out.len() as u64 > limit {
        return Err(GzJsonError::TooLarge { limit });
    }
    Ok(out)
}

/// Reads gzip-compressed JSON of type `T`, refusing more than `limit` decompressed bytes.
pub fn read_gz_json<R: Read, T: DeserializeOwned>(r: R, limit: u64) -> Result<T, GzJsonError> {
    let data = gunzip_limited(r, limit)?;
    serde_json::from_slice(&data).map_err(GzJsonError::Decode)
}

/// `<backup>-resource-list.json.gz`: `{"<apiVersion>/<Kind>": ["ns/name" or "name", …]}`, each
/// list sorted and without repeats. (Restores use the same shape with `(created)`-style
/// suffixes.)
///
/// Held compactly, as it grows with every item of a backup or restore: per key, the entries'
/// text back to back and where each ends (about the entry's length plus 8 bytes, against some
/// 90 for a set of strings). Entries added in ascending order (a LIST's order) are kept so;
/// otherwise they are sorted when read.
#[derive(Debug, Clone, Default)]
pub struct ResourceList {
    entries: BTreeMap<String, Names>,
}

/// The entries of one key.
#[derive(Debug, Clone, Default)]
struct Names {
    text: String,
    ends: Vec<usize>,
    /// Every entry is greater than the one before it.
    ascending: bool,
}

impl Names {
    fn last(&self) -> Option<&str> {
        let end = *self.ends.last()?;
        let start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i]);
        self.text.get(start..end)
    }

    fn push(&mut self, entry: &str) {
        match self.last() {
            Some(last) if last == entry => return,
            Some(last) if last > entry => self.ascending = false,
            None => self.ascending = true,
            Some(_) => {}
        }
        self.text.push_str(entry);
        self.ends.push(self.text.len());
    }

    /// The entries, sorted, without repeats.
    fn sorted(&self) -> Vec<&str> {
        let mut start = 0;
        let mut names: Vec<&str> = self
            .ends
            .iter()
            .map(|&end| {
                let name = &self.text[start..end];
                start = end;
                name
            })
            .collect();
        if !self.ascending {
            names.sort_unstable();
            names.dedup();
        }
        names
    }
}

impl ResourceList {
    /// Records one item: key `apps/v1/Deployment`, entry `ns/name` (or `name`).
    pub fn add(&mut self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
        let entry = match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        };
        let key = format!("{api_version}/{kind}");
        match self.entries.get_mut(&key) {
            Some(names) => names.push(&entry),
            None => self.entries.entry(key).or_default().push(&entry),
        }
    }

    /// Entries of one `apiVersion/Kind`, sorted.
    pub fn get(&self, key: &str) -> Vec<&str> {
        self.entries.get(key).map(Names::sorted).unwrap_or_default()
    }

    /// Every `apiVersion/Kind` with its entries, both sorted.
    pub fn iter(&self) -> impl Iterator<Item = (&str, impl Iterator<Item = &str>)> {
        self.entries
            .iter()
            .map(|(key, names)| (key.as_str(), names.sorted().into_iter()))
    }

    /// Number of items listed.
    pub fn len(&self) -> usize {
        self.entries.values().map(|n| n.sorted().len()).sum()
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl PartialEq for ResourceList {
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|((k1, n1), (k2, n2))| k1 == k2 && n1.sorted() == n2.sorted())
    }
}

impl Eq for ResourceList {}

impl Serialize for ResourceList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.entries
                .iter()
                .map(|(key, names)| (key, names.sorted())),
        )
    }
}

impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, Vec<String>>::deserialize(deserializer)?;
        let mut list = Self::default();
        for (key, mut names) in map {
            names.sort_unstable();
            let kept = list.entries.entry(key).or_default();
            for name in &names {
                kept.push(name);
            }
        }
        Ok(list)
    }
}

/// Where a message belongs in a results file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// About the server, or the backup or restore as a whole.
    Velero,
    /// About cluster-scoped objects.
    Cluster,
    /// About objects of one namespace.
    Namespace(String),
}

impl Scope {
    /// The scope of an object in `namespace`: cluster-scoped when it has none.
    pub fn of(namespace: Option<&str>) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => Self::Namespace(ns.to_owned()),
            _ => Self::Cluster,
        }
    }
}

/// Velero's `Result`: messages for the server, for cluster-scoped objects, and per namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultMessages {
    /// Messages about the server itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub velero: Vec<String>,
    /// Messages about cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<String>,
    /// Messages per namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Vec<String>>,
}

impl ResultMessages {
    /// Adds a message: under `namespace` when given, else under `velero`.
    pub fn add(&mut self, namespace: Option<&str>, message: impl Into<String>) {
        match namespace {
            Some(ns) if !ns.is_empty() => self
                .namespaces
                .entry(ns.to_string())
                .or_default()
                .push(message.into()),
            _ => self.velero.push(message.into()),
        }
    }

    /// Adds a message under `scope`.
    pub fn push(&mut self, scope: &Scope, message: impl Into<String>) {
        match scope {
            Scope::Velero => self.velero.push(message.into()),
            Scope::Cluster => self.cluster.push(message.into()),
            Scope::Namespace(ns) => self.add(Some(ns), message),
        }
    }

    /// Total number of messages.
    pub fn count(&self) -> usize {
        self.velero.len()
            + self.cluster.len()
            + self.namespaces.values().map(Vec::len).sum::<usize>()
    }
}

/// `<backup>-results.gz` / `restore-<restore>-results.gz`: `{"errors": …, "warnings": …}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Results {
    /// Error messages.
    #[serde(default)]
    pub errors: ResultMessages,
    /// Warning messages.
    #[serde(default)]
    pub warnings: ResultMessages,
}
