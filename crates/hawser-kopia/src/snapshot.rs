//! Manifests and the snapshots among them, and directory listings.
//!
//! Manifests are contents with prefix `m`, each a gzip stream of JSON
//! `{"entries":[{"id","labels","modified","deleted"?,"data"}]}`; the same manifest ID may be in
//! several contents, the latest `modified` wins, and a winner marked deleted is gone. Snapshot
//! manifests carry the labels `type=snapshot`, `hostname`, `username` and `path` (Velero:
//! `default`, `default`, `snapshot-pod-volume/kopia/<ns>/<pod>/<volume>` or
//! `snapshot-data-upload-download/kopia/<ns>/<claim>`), and their data names the root directory
//! entry. A directory object is JSON `{"stream":"kopia:directory","entries":[…]}`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;

use jiff::Timestamp;
use serde::Deserialize;

use crate::KopiaError;
use crate::object::ObjectId;
use crate::repo::Repository;

#[derive(Deserialize)]
struct ManifestContent {
    #[serde(default)]
    entries: Vec<ManifestEntry>,
}

#[derive(Deserialize)]
struct ManifestEntry {
    id: String,
    /// `null` in some entries kopia writes (a deleted one's, for one).
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    modified: Timestamp,
    #[serde(default)]
    deleted: bool,
    #[serde(default)]
    data: serde_json::Value,
}

/// One entry of a directory (and a snapshot's root).
#[derive(Deserialize, Debug, Clone)]
pub struct DirEntry {
    /// Its name in the directory (kopia leaves an empty one out).
    #[serde(default)]
    pub name: String,
    /// `d` directory, `f` file, `s` symbolic link.
    #[serde(rename = "type")]
    pub kind: String,
    /// Go's file mode bits as text (`0755`; setuid, setgid and sticky are Go's bits).
    #[serde(default)]
    pub mode: String,
    /// The file's size (a link's target length).
    #[serde(default)]
    pub size: u64,
    /// Its modification time (kopia leaves the Unix epoch out).
    #[serde(default = "epoch")]
    pub mtime: Timestamp,
    /// Owner.
    #[serde(default)]
    pub uid: u32,
    /// Group.
    #[serde(default)]
    pub gid: u32,
    /// The object holding its data or listing.
    pub obj: String,
}

fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

/// Most bytes a manifest content may gunzip to.
const MAX_MANIFEST: u64 = 256 << 20;

impl DirEntry {
    /// The Unix permission bits (with setuid, setgid and sticky) of Go's mode text.
    #[must_use]
    pub fn unix_mode(&self) -> u32 {
        let text = self.mode.trim();
        let go_mode = if let Some(hex) = text.strip_prefix("0x") {
            u32::from_str_radix(hex, 16).unwrap_or(0)
        } else if text.len() > 1 && text.starts_with('0') {
            u32::from_str_radix(&text[1..], 8).unwrap_or(0)
        } else {
            text.parse().unwrap_or(0)
        };
        let mut mode = go_mode & 0o777;
        for (go, unix) in [(1 << 23, 0o4000), (1 << 22, 0o2000), (1 << 20, 0o1000)] {
            if go_mode & go != 0 {
                mode |= unix;
            }
        }
        mode
    }
}

#[derive(Deserialize)]
struct Directory {
    stream: String,
    /// kopia writes an empty directory's as `null`.
    #[serde(default)]
    entries: Option<Vec<DirEntry>>,
}

/// A snapshot: what was backed up, when, and its root.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The manifest ID (what Velero stores as the snapshot ID).
    pub id: String,
    /// Source host (`default` for Velero).
    pub host: String,
    /// Source user (`default` for Velero).
    pub user: String,
    /// Source path.
    pub path: String,
    /// When it started.
    pub start_time: Option<Timestamp>,
    /// When it ended.
    pub end_time: Option<Timestamp>,
    /// Its tags (the labels besides kopia's own).
    pub tags: BTreeMap<String, String>,
    /// The root directory (or file).
    pub root: DirEntry,
    /// What the writer counted.
    pub stats: Stats,
}

/// A snapshot's counts, as its writer recorded them (kopia's `stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Stats {
    /// Files in the snapshot.
    pub file_count: u64,
    /// Files taken from a parent snapshot without being read.
    pub cached_files: u64,
    /// Files read.
    pub non_cached_files: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotData {
    #[serde(default)]
    start_time: Option<Timestamp>,
    #[serde(default)]
    end_time: Option<Timestamp>,
    root_entry: DirEntry,
    #[serde(default)]
    stats: Stats,
}

impl Repository {
    /// Every snapshot of the repository, oldest first.
    ///
    /// # Errors
    /// Those of reading contents; [`KopiaError::Malformed`] for a manifest that does not parse.
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>, KopiaError> {
        self.snapshots_checked(false).await
    }

    /// [`Repository::snapshots`], where a snapshot manifest that does not parse is an error
    /// (garbage collection must know every snapshot).
    pub(crate) async fn snapshots_strict(&self) -> Result<Vec<Snapshot>, KopiaError> {
        self.snapshots_checked(true).await
    }

    async fn snapshots_checked(&self, strict: bool) -> Result<Vec<Snapshot>, KopiaError> {
        let mut latest: HashMap<String, ManifestEntry> = HashMap::new();
        let ids: Vec<_> = self
            .contents_with_prefix('m')
            .map(|e| e.id.clone())
            .collect();
        for id in ids {
            let what = format!("manifest content {id}");
            let gzipped = self.read_content(&id).await?;
            let mut json = Vec::new();
            flate2::read::GzDecoder::new(&gzipped[..])
                .take(MAX_MANIFEST + 1)
                .read_to_end(&mut json)
                .map_err(|e| KopiaError::malformed(&what, e))?;
            if json.len() as u64 > MAX_MANIFEST {
                return Err(KopiaError::malformed(what, "unpacks to more than 256 MiB"));
            }
            let content: ManifestContent =
                serde_json::from_slice(&json).map_err(|e| KopiaError::malformed(&what, e))?;
            for entry in content.entries {
                match latest.get(&entry.id) {
                    Some(have) if have.modified >= entry.modified => {}
                    _ => {
                        latest.insert(entry.id.clone(), entry);
                    }
                }
            }
        }
        let mut snapshots = Vec::new();
        for (id, entry) in latest {
            let mut labels = entry.labels.unwrap_or_default();
            if entry.deleted || labels.get("type").map(String::as_str) != Some("snapshot") {
                continue;
            }
            // One manifest that does not parse hides no other snapshot.
            let data: SnapshotData = match serde_json::from_value(entry.data) {
                Ok(data) => data,
                Err(error) if strict => {
                    return Err(KopiaError::malformed(
                        format!("snapshot manifest {id}"),
                        error,
                    ));
                }
                Err(error) => {
                    tracing::warn!(manifest = %id, %error, "snapshot manifest does not parse; left out");
                    continue;
                }
            };
            let mut take = |key: &str| labels.remove(key).unwrap_or_default();
            let (host, user, path) = (take("hostname"), take("username"), take("path"));
            labels.remove("type");
            snapshots.push(Snapshot {
                id,
                host,
                user,
                path,
                start_time: data.start_time,
                end_time: data.end_time,
                tags: labels,
                root: data.root_entry,
                stats: data.stats,
            });
        }
        snapshots.sort_by(|a, b| (a.start_time, &a.id).cmp(&(b.start_time, &b.id)));
        Ok(snapshots)
    }

    /// The entries of directory object `obj`.
    ///
    /// # Errors
    /// Those of [`Repository::read_object`]; [`KopiaError::Malformed`] for a listing that is
    /// not kopia's.
    pub async fn directory(&self, obj: &str) -> Result<Vec<DirEntry>, KopiaError> {
        let what = format!("directory {obj}");
        let id = ObjectId::parse(obj)?;
        // kopia writes listings as `k` contents, which are checked against their IDs when read:
        // a listing can never list itself.
        if id.prefix() != Some('k') {
            return Err(KopiaError::malformed(
                what,
                "a directory's object is not a k content",
            ));
        }
        let bytes = self.read_object(&id).await?;
        let dir: Directory =
            serde_json::from_slice(&bytes).map_err(|e| KopiaError::malformed(&what, e))?;
        if dir.stream != "kopia:directory" {
            return Err(KopiaError::malformed(
                what,
                format!("stream {:?}", dir.stream),
            ));
        }
        Ok(dir.entries.unwrap_or_default())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn entry(mode: &str) -> DirEntry {
        serde_json::from_value(serde_json::json!({
            "name": "f", "type": "f", "mode": mode, "mtime": "2026-12-07T02:38:25.123456789Z", "obj": "k00"
        }))
        .unwrap()
    }

    #[test]
    fn an_entry_without_name_or_time_is_kopia_s_empty_name_and_the_epoch() {
        let entry: DirEntry =
            serde_json::from_value(serde_json::json!({"type": "f", "obj": "k00"})).unwrap();
        assert_eq!(
            (entry.name.as_str(), entry.mtime),
            ("", Timestamp::UNIX_EPOCH)
        );
    }

    #[test]
    fn go_mode_bits_become_unix_ones() {
        assert_eq!(entry("0644").unix_mode(), 0o644);
        assert_eq!(
            entry("040000755").unix_mode(),
            0o4755,
            "setuid is Go's 1<<23"
        );
        assert_eq!(
            entry("04000777").unix_mode(),
            0o1777,
            "sticky is Go's 1<<20"
        );
        assert_eq!(entry("").unix_mode(), 0);
    }
}
