//! What can go wrong reading a repository. Every error names what it was reading; an unknown
//! algorithm or format is refused by name, never guessed at.

use hawser_store::StoreError;

/// A repository could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KopiaError {
    /// The storage failed or a blob is missing.
    #[error("reading blob {blob}")]
    Storage {
        /// The blob.
        blob: String,
        /// The cause (boxed: the store's errors are large).
        #[source]
        source: Box<StoreError>,
    },
    /// The password does not open the repository's format blob.
    #[error(
        "the password does not open the repository (kopia.repository does not decrypt with it)"
    )]
    WrongPassword,
    /// Something the repository uses that this reader does not implement.
    #[error("unsupported {what}: {value}")]
    Unsupported {
        /// Which setting.
        what: &'static str,
        /// Its value.
        value: String,
    },
    /// A blob or content that does not have the shape kopia writes.
    #[error("malformed {what}: {why}")]
    Malformed {
        /// What was being read.
        what: String,
        /// What is wrong with it.
        why: String,
    },
    /// A content or blob failed authentication: corrupted, or not this repository's.
    #[error("{what} does not authenticate (corrupted, or written with other keys)")]
    Authentication {
        /// What was being read.
        what: String,
    },
    /// A repository is there already.
    #[error("a repository exists there already (kopia.repository)")]
    AlreadyExists,
    /// Another writer holds the repository ([`crate::session`]).
    #[error(
        "the repository is being written by session {session} ({holder}, last active {last}); one writer at a time"
    )]
    Busy {
        /// The live session.
        session: String,
        /// Who holds it, as its marker says.
        holder: String,
        /// When it last wrote a marker or a pack.
        last: String,
    },
    /// A content the repository's index does not hold.
    #[error("content {0} is not in the repository's index")]
    MissingContent(String),
    /// No snapshot with this ID.
    #[error("snapshot {0} not found")]
    MissingSnapshot(String),
    /// Writing the restored tree failed.
    #[error("restoring {path}")]
    Restore {
        /// The path being written.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Reading the tree being snapshotted failed.
    #[error("reading {path}")]
    Source {
        /// The path being read.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl KopiaError {
    /// A [`KopiaError::Restore`] maker for `path`.
    pub(crate) fn restoring(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Restore {
            path: path.display().to_string(),
            source,
        }
    }

    /// A [`KopiaError::Source`] maker for `path`.
    pub(crate) fn reading(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Source {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn malformed(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        Self::Malformed {
            what: what.into(),
            why: why.to_string(),
        }
    }
}
