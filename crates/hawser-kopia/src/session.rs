//! Writer sessions, and one writer per repository.
//!
//! A kopia writer marks its session with a blob `s<hash>-<session ID>` (the encrypted JSON of
//! [`SessionInfo`]) before its first pack, names every pack it writes `…-<session ID>`, and
//! deletes its markers once the index blob naming its packs is stored. kopia's maintenance
//! keeps the packs of a session whose marker is recent, and so a running backup's packs are
//! not collected before its index names them.
//!
//! hawser writes the same markers, before anything else of a write (a run that uploads
//! nothing holds the repository too), refreshed every [`REFRESH`] while it writes, and deleted
//! when the write ends, committed or failed. It writes only where no other session is live: a
//! session is live while it has a marker and its newest marker or pack is younger than
//! [`LIVE`]. kopia writes its
//! marker once and packs as it goes, so a kopia (Velero) writer is followed by its packs; one
//! that stored nothing for [`LIVE`] (or has not stored its first pack yet) is not seen. Two
//! hawser writers starting at once both write their markers, look again, and the later one
//! (by start time, then session ID) steps back.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::KopiaError;
use crate::blobs::BlobMeta;
use crate::repo::Repository;

/// How long a session stays live after its last marker or pack.
pub const LIVE: Duration = Duration::from_secs(30 * 60);
/// How often a writer rewrites its marker.
pub const REFRESH: Duration = Duration::from_secs(5 * 60);

/// A session marker's content (kopia's `SessionInfo`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session ID (`s`, 16 hex digits, the month number in hex).
    pub id: String,
    /// When the session started.
    #[serde(rename = "startTime")]
    pub start_time: Timestamp,
    /// When the marker was written.
    #[serde(rename = "checkpointTime")]
    pub checkpoint_time: Timestamp,
    /// The writer's user.
    #[serde(rename = "username", default)]
    pub user: String,
    /// The writer's host.
    #[serde(rename = "hostname", default)]
    pub host: String,
}

/// kopia's session ID: `s`, 8 random bytes in hex, then the number of 30-day periods since
/// 2000-01-01 in hex.
pub(crate) fn session_id(now: Timestamp) -> String {
    let mut random = [0u8; 8];
    rand::fill(&mut random);
    let months = (now.as_second() - 946_684_800).max(0) / (30 * 86_400);
    format!("s{}{months:x}", hex::encode(random))
}

/// The session a blob belongs to: the first part after a `-` that starts with `s`.
pub(crate) fn session_of(blob: &str) -> Option<&str> {
    blob.split('-').skip(1).find(|part| part.starts_with('s'))
}

/// What a listing shows of one session.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Its newest marker's content, when it has one that opens.
    pub info: Option<SessionInfo>,
    /// Its marker blobs.
    pub markers: Vec<String>,
    /// The newest of its markers and packs, by the store's clock.
    pub last: Option<Timestamp>,
}

impl Seen {
    /// Whether the session is still open (it has a marker: a finished one deleted its
    /// markers) and was active within [`LIVE`] of `now`.
    pub fn live(&self, now: Timestamp) -> bool {
        !self.markers.is_empty()
            && self
                .last
                .is_some_and(|last| now.duration_since(last).unsigned_abs() < LIVE || last > now)
    }
}

/// The repository's sessions as `listing` shows them (markers and packs; index blobs end a
/// session and do not count). A marker that does not open is kept without its content.
pub(crate) async fn sessions(
    repo: &Repository,
    listing: &[BlobMeta],
) -> Result<HashMap<String, Seen>, KopiaError> {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for blob in listing {
        let Some(kind) = blob
            .id
            .chars()
            .next()
            .filter(|c| matches!(c, 's' | 'p' | 'q'))
        else {
            continue;
        };
        let Some(session) = session_of(&blob.id) else {
            continue;
        };
        let entry = seen.entry(session.to_owned()).or_default();
        entry.last = entry.last.max(Some(blob.modified));
        if kind == 's' {
            entry.markers.push(blob.id.clone());
            let info = repo
                .read_named_blob(&blob.id)
                .await
                .ok()
                .and_then(|plain| serde_json::from_slice::<SessionInfo>(&plain).ok());
            if let Some(info) = info
                && entry
                    .info
                    .as_ref()
                    .is_none_or(|have| have.checkpoint_time < info.checkpoint_time)
            {
                entry.info = Some(info);
            }
        }
    }
    Ok(seen)
}

/// The refusal to write while `session` is live.
fn busy(session: &str, seen: &Seen) -> KopiaError {
    KopiaError::Busy {
        session: session.to_owned(),
        holder: seen.info.as_ref().map_or_else(
            || "a writer without a session marker".to_owned(),
            |i| format!("{}@{} since {}", i.user, i.host, i.start_time),
        ),
        last: seen
            .last
            .map_or_else(|| "never".to_owned(), |t| t.to_string()),
    }
}

/// The user and host hawser's markers name: `hawser` and the host's name.
fn whoami() -> (String, String) {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    ("hawser".to_owned(), host)
}

/// This process's hold on a repository while it writes.
pub(crate) struct Lease {
    pub info: SessionInfo,
    markers: Vec<String>,
    refreshed: Instant,
}

impl Lease {
    /// Takes the repository for a write: refused while another session is live.
    ///
    /// # Errors
    /// [`KopiaError::Busy`], [`KopiaError::Storage`].
    pub async fn acquire(repo: &Repository) -> Result<Self, KopiaError> {
        let now = Timestamp::now();
        let (user, host) = whoami();
        let info = SessionInfo {
            id: session_id(now),
            start_time: now,
            checkpoint_time: now,
            user,
            host,
        };
        let listing = repo.blobs.list_meta().await?;
        let others = sessions(repo, &listing).await?;
        if let Some((id, seen)) = others.iter().find(|(_, s)| s.live(now)) {
            return Err(busy(id, seen));
        }
        let mut lease = Self {
            info,
            markers: Vec::new(),
            refreshed: Instant::now(),
        };
        lease.mark(repo).await?;
        // Another writer that started at the same moment: the earlier one keeps it.
        let listing = repo.blobs.list_meta().await?;
        let all = sessions(repo, &listing).await?;
        let ours = (lease.info.start_time, lease.info.id.clone());
        let earlier = all.iter().find(|(id, seen)| {
            **id != lease.info.id
                && seen.live(Timestamp::now())
                && seen
                    .info
                    .as_ref()
                    .is_none_or(|i| (i.start_time, i.id.clone()) < ours)
        });
        if let Some((id, seen)) = earlier {
            let refusal = busy(id, seen);
            lease.release(repo).await;
            return Err(refusal);
        }
        Ok(lease)
    }

    /// Writes a marker with the checkpoint time now.
    async fn mark(&mut self, repo: &Repository) -> Result<(), KopiaError> {
        self.info.checkpoint_time = Timestamp::now();
        let json = serde_json::to_vec(&self.info)
            .map_err(|e| KopiaError::malformed("a session marker", e))?;
        let blob = repo.put_named_blob("s", &self.info.id, &json).await?;
        self.markers.push(blob);
        self.refreshed = Instant::now();
        Ok(())
    }

    /// Rewrites the marker when [`REFRESH`] has passed, then drops the older ones; one that
    /// cannot be deleted now is kept, for [`Lease::release`] to delete.
    ///
    /// # Errors
    /// [`KopiaError::Storage`] when the new marker cannot be stored (the older ones stay).
    pub async fn keep(&mut self, repo: &Repository) -> Result<(), KopiaError> {
        if self.refreshed.elapsed() < REFRESH {
            return Ok(());
        }
        let older = self.markers.len();
        self.mark(repo).await?;
        let old: Vec<String> = self.markers.drain(..older).collect();
        for blob in old {
            if let Err(e) = repo.blobs.delete(&blob).await {
                tracing::warn!(blob, error = %e, "an older session marker is deleted at the end instead");
                self.markers.push(blob);
            }
        }
        Ok(())
    }

    /// Ends the session: its markers are deleted. A marker that cannot be deleted is logged
    /// and left to expire ([`LIVE`]): the write it guarded is over either way.
    pub async fn release(self, repo: &Repository) {
        for blob in &self.markers {
            if let Err(e) = repo.blobs.delete(blob).await {
                tracing::warn!(blob, error = %e, "a session marker stays until it expires");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn blobs_name_their_session() {
        assert_eq!(
            session_of("p0123456789abcdef0123456789abcdef-s9f8e7d6c5b4a39281c4"),
            Some("s9f8e7d6c5b4a39281c4")
        );
        assert_eq!(
            session_of("xn3_0123-s9f8e7d6c5b4a39281c4-c1"),
            Some("s9f8e7d6c5b4a39281c4")
        );
        assert_eq!(session_of("sabcdef-s0011"), Some("s0011"));
        assert_eq!(session_of("kopia.repository"), None);
    }

    #[test]
    fn a_session_is_live_for_its_window_after_its_last_blob() {
        let now = Timestamp::now();
        let at = |ago: i64| Seen {
            last: Some(now - jiff::SignedDuration::from_secs(ago)),
            markers: vec!["s00-s01".to_owned()],
            info: None,
        };
        assert!(at(0).live(now));
        assert!(at(29 * 60).live(now));
        assert!(!at(31 * 60).live(now));
        // A store clock ahead of ours is live, not negative.
        assert!(at(-600).live(now));
        assert!(!Seen::default().live(now));
        // Packs without a marker: a session that ended.
        let ended = Seen {
            markers: Vec::new(),
            ..at(0)
        };
        assert!(!ended.live(now));
    }

    #[test]
    fn session_ids_are_kopia_s_shape() {
        let id = session_id(Timestamp::from_second(1_765_000_000).unwrap());
        assert!(id.starts_with('s'));
        assert_eq!(id.len(), 1 + 16 + 3, "{id}");
        assert!(id[1..].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
