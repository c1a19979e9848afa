//! Errors of status writes and their classification.

use hawser_api::phase::Phase;
use std::time::Duration;

/// How the retry loop treats a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Try again after the backoff, and not before `retry_after` when the server gave one.
    Transient {
        /// The server's `Retry-After` (header, else `details.retryAfterSeconds`).
        retry_after: Option<Duration>,
    },
    /// 409: re-read the object, re-check the transition, try again.
    Conflict,
    /// 404: the object is gone; stop quietly.
    Gone,
    /// A permanent answer (400, 403, 422, …): stop, log, Warning Event.
    Rejected,
}

/// One failed attempt to read or write a Backup/Restore.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// Connection refused or reset, DNS, TLS: the request did not get an HTTP answer.
    #[error("could not reach the API server")]
    Transport(#[source] kube::Error),
    /// The attempt did not finish within its request timeout.
    #[error("the request did not complete within {0:?}")]
    TimedOut(Duration),
    /// The API server answered with an error status.
    #[error("the API server answered {code} {reason}: {message}")]
    Api {
        /// HTTP status code.
        code: u16,
        /// `Status.reason` (empty when the body was not a Status).
        reason: String,
        /// `Status.message`, or the raw body.
        message: String,
        /// `Retry-After` header, else `details.retryAfterSeconds`.
        retry_after: Option<Duration>,
    },
    /// A success answer that was not the JSON object expected.
    #[error("could not decode the API server's answer")]
    Decode(#[source] serde_json::Error),
    /// The request could not be built (a bug, or an invalid name).
    #[error("could not build the request")]
    Build(#[source] kube::core::request::Error),
    /// The object of that name is another one than the write is for: the one it was for was
    /// deleted and this one created in its place (its `metadata.uid` differs).
    #[error("the object was deleted and created again (uid {found} instead of {wanted})")]
    Replaced {
        /// The uid the write is for.
        wanted: String,
        /// The uid found.
        found: String,
    },
    /// The write was accepted but the stored phase did not change: the main resource ignores
    /// `.status` when the status subresource is enabled (the CRD changed since discovery).
    #[error("the API server accepted the write but kept phase \"{stored}\"")]
    NotApplied {
        /// The phase the server kept.
        stored: Phase,
    },
}

impl AttemptError {
    /// How the retry loop treats this error.
    #[must_use]
    pub fn class(&self) -> Class {
        match self {
            Self::Transport(_) | Self::TimedOut(_) | Self::Decode(_) | Self::NotApplied { .. } => {
                Class::Transient { retry_after: None }
            }
            Self::Build(_) => Class::Rejected,
            Self::Replaced { .. } => Class::Gone,
            Self::Api {
                code,
                reason,
                retry_after,
                ..
            } => match code {
                // A Status saying NotFound: the object is gone. A 404 without one comes from a
                // route that is not served (yet): the API server has just started and has not
                // loaded the CRD, which is an outage, not a deletion.
                404 if reason == "NotFound" => Class::Gone,
                404 => Class::Transient {
                    retry_after: *retry_after,
                },
                409 => Class::Conflict,
                // 401: credentials can be refreshed (token rotation); 408: request timeout.
                401 | 408 | 429 => Class::Transient {
                    retry_after: *retry_after,
                },
                c if *c >= 500 => Class::Transient {
                    retry_after: *retry_after,
                },
                _ => Class::Rejected,
            },
        }
    }

    /// A stable short category, used for Event reasons, metric labels and logs.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Transport(_) => "Unreachable",
            Self::TimedOut(_) => "RequestTimeout",
            Self::Decode(_) => "BadAnswer",
            Self::Build(_) => "BadRequestBuild",
            Self::NotApplied { .. } => "StatusIgnored",
            Self::Replaced { .. } => "ObjectReplaced",
            Self::Api { code, .. } => match code {
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                409 => "Conflict",
                422 => "Invalid",
                429 => "TooManyRequests",
                c if *c >= 500 => "ServerError",
                _ => "Rejected",
            },
        }
    }

    /// The HTTP code, when the server answered.
    #[must_use]
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Why a status write did not land (the success case is [`crate::Landing`]).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The Backup/Restore no longer exists: nothing to do.
    #[error("{kind} {namespace}/{name} no longer exists")]
    Gone {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
    },
    /// The object is in a phase the pending status may not replace (e.g. someone else already
    /// finalized it); the pending status was dropped.
    #[error(
        "{kind} {namespace}/{name} is in phase \"{current}\", which may not move to \"{wanted}\"; status dropped"
    )]
    Stale {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// The phase found on the object.
        current: Phase,
        /// The phase the write wanted.
        wanted: Phase,
    },
    /// The API server refused the write permanently (400/403/422…): a bug or missing RBAC.
    #[error("the API server refused the status of {kind} {namespace}/{name}")]
    Rejected {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// The refusal.
        #[source]
        source: AttemptError,
    },
    /// The deadline passed before the status landed; the background re-driver keeps trying.
    #[error(
        "status of {kind} {namespace}/{name} not stored after {attempts} attempts; handed to the re-driver"
    )]
    HandedOver {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// Attempts made before the deadline.
        attempts: u32,
        /// The last failure.
        #[source]
        source: AttemptError,
    },
    /// The deadline passed before a non-final status (e.g. a claim entering `InProgress`)
    /// landed. Such statuses are not re-driven: the caller decides (a claim that did not land
    /// means the work must not start).
    #[error("status of {kind} {namespace}/{name} not stored after {attempts} attempts")]
    Expired {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// Attempts made before the deadline.
        attempts: u32,
        /// The last failure.
        #[source]
        source: AttemptError,
    },
    /// The engine is shutting down; the status was not stored (recovery resolves it at the next
    /// start from the storage record).
    #[error("status of {kind} {namespace}/{name} not stored: the server is shutting down")]
    ShuttingDown {
        /// `backup` or `restore`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
    },
}

impl WriteError {
    /// A stable short category, used for Event reasons, metric labels and logs.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Gone { .. } => "ObjectGone",
            Self::Stale { .. } => "StaleStatusDropped",
            Self::Rejected { .. } => "StatusWriteRejected",
            Self::HandedOver { .. } => "StatusWritePending",
            Self::Expired { .. } => "StatusWriteExpired",
            Self::ShuttingDown { .. } => "ShuttingDown",
        }
    }

    /// True when the status will still land without the caller doing anything.
    #[must_use]
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::HandedOver { .. })
    }
}

/// Listing Backups/Restores for recovery failed.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The list request failed.
    #[error("could not list {kind}s")]
    List {
        /// `backup` or `restore`.
        kind: &'static str,
        /// The failure.
        #[source]
        source: AttemptError,
    },
}

impl RecoveryError {
    /// A stable short category.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::List { .. } => "ListFailed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, retry_after: Option<u64>) -> AttemptError {
        AttemptError::Api {
            code,
            // What a Status body says for a missing object.
            reason: if code == 404 { "NotFound" } else { "" }.to_owned(),
            message: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_404_without_a_status_is_an_unserved_route_not_a_deletion() {
        let plain = AttemptError::Api {
            code: 404,
            reason: String::new(),
            message: "404 page not found".to_owned(),
            retry_after: None,
        };
        assert_eq!(plain.class(), Class::Transient { retry_after: None });
        let replaced = AttemptError::Replaced {
            wanted: "a".to_owned(),
            found: "b".to_owned(),
        };
        assert_eq!(replaced.class(), Class::Gone);
    }

    #[test]
    fn http_codes_are_classified_as_the_guarantee_says() {
        let table = [
            (400, Class::Rejected, "BadRequest"),
            (403, Class::Rejected, "Forbidden"),
            (422, Class::Rejected, "Invalid"),
            (415, Class::Rejected, "Rejected"),
            (404, Class::Gone, "NotFound"),
            (409, Class::Conflict, "Conflict"),
            (
                429,
                Class::Transient { retry_after: None },
                "TooManyRequests",
            ),
            (500, Class::Transient { retry_after: None }, "ServerError"),
            (503, Class::Transient { retry_after: None }, "ServerError"),
            (504, Class::Transient { retry_after: None }, "ServerError"),
        ];
        for (code, class, category) in table {
            let e = api(code, None);
            assert_eq!(e.class(), class, "{code}");
            assert_eq!(e.category(), category, "{code}");
        }
    }

    #[test]
    fn retry_after_is_carried_into_the_class() {
        assert_eq!(
            api(429, Some(3)).class(),
            Class::Transient {
                retry_after: Some(Duration::from_secs(3))
            }
        );
        assert_eq!(
            api(503, Some(5)).class(),
            Class::Transient {
                retry_after: Some(Duration::from_secs(5))
            }
        );
    }

    #[test]
    fn timeouts_are_transient() {
        let e = AttemptError::TimedOut(Duration::from_secs(1));
        assert_eq!(e.class(), Class::Transient { retry_after: None });
        assert_eq!(e.category(), "RequestTimeout");
    }
}
