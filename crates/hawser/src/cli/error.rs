//! Errors of CLI commands, written for people, and the process exit codes.

use std::process::ExitCode;

/// The exit codes of `hawser`.
///
/// | code | meaning |
/// |---|---|
/// | 0 | success |
/// | 1 | the command failed (API error, object not found, unreachable cluster) |
/// | 2 | usage error: bad flags or flag values (clap's own parse errors use 2 too) |
/// | 3 | `--wait`: the backup or restore ended `Failed`, `PartiallyFailed` or `FailedValidation` |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exit code 0.
    Success,
    /// Exit code 1.
    Failure,
    /// Exit code 2.
    Usage,
    /// Exit code 3.
    Unsuccessful,
    /// Exit code 130: a wait stopped by Ctrl-C (SIGINT), the shells' code for it.
    Interrupted,
}

impl ExitStatus {
    /// The numeric exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Failure => 1,
            Self::Usage => 2,
            Self::Unsuccessful => 3,
            Self::Interrupted => 130,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        ExitCode::from(status.code())
    }
}

/// A failed command: what failed, on which object, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A flag value is invalid (exit 2).
    #[error("invalid value for {flag}: {reason}")]
    Usage {
        /// The flag, e.g. `--config`.
        flag: &'static str,
        /// Why the value is refused and what is expected.
        reason: String,
    },
    /// The Kubernetes client could not be configured.
    #[error("could not load the Kubernetes client configuration")]
    Config {
        /// The underlying cause.
        #[source]
        source: anyhow::Error,
    },
    /// A request to the API server failed.
    #[error("could not {action} {object}")]
    Api {
        /// What was attempted: `create`, `get`, `list`, ...
        action: &'static str,
        /// The object, as `kind namespace/name`.
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A referenced object does not exist.
    #[error("{object} not found")]
    NotFound {
        /// The object, as `kind namespace/name`.
        object: String,
        /// What to do about it.
        hint: String,
    },
    /// The watch of a `--wait` ended without a final phase.
    #[error("the watch of {object} ended before it reached a final phase")]
    WatchEnded {
        /// The object, as `Kind name`.
        object: String,
    },
    /// The object of a `--wait` was deleted before it reached a final phase.
    #[error("{object} was deleted before it reached a final phase")]
    DeletedWhileWaiting {
        /// The object, as `Kind name`.
        object: String,
    },
    /// A file named by a flag could not be read.
    #[error("could not read {path}")]
    File {
        /// The path as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Something did not happen in time.
    #[error("timed out after {}s waiting for {what}", after.as_secs())]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: std::time::Duration,
    },
    /// Watching an object failed.
    #[error("could not watch {object}")]
    Watch {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The watch error.
        #[source]
        source: anyhow::Error,
    },
    /// Downloading a file of a backup or restore failed.
    #[error("could not download {what}")]
    Download {
        /// The file, e.g. `the BackupLog file of b1`.
        what: String,
        /// The HTTP, decompression or write error.
        #[source]
        source: anyhow::Error,
    },
    /// `hawser server` could not start or stopped with an error.
    #[error("hawser server failed")]
    Server {
        /// The underlying cause.
        #[source]
        source: anyhow::Error,
    },
    /// A deletion was not confirmed at the prompt; nothing was deleted.
    #[error("nothing was deleted: the deletion was not confirmed")]
    NotConfirmed,
    /// The command refused to change an object whose current state conflicts with the request.
    #[error("could not {action} {object}: {reason}")]
    Refused {
        /// What was attempted, e.g. `set --default on`.
        action: &'static str,
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The conflict.
        reason: String,
        /// What to do about it.
        hint: String,
    },
    /// Printing or encoding output failed.
    #[error("could not write the output")]
    Output {
        /// The underlying cause.
        #[source]
        source: anyhow::Error,
    },
}

impl CliError {
    /// The exit status this error ends the process with.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Self::Usage { .. } => ExitStatus::Usage,
            _ => ExitStatus::Failure,
        }
    }

    /// The message printed on stderr: the error, its causes, and a hint when there is one.
    pub fn for_people(&self) -> String {
        let mut text = format!("error: {self}");
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(&format!("\n  caused by: {cause}"));
            source = cause.source();
        }
        if let Some(hint) = self.hint() {
            text.push_str(&format!("\n  hint: {hint}"));
        }
        text
    }

    fn hint(&self) -> Option<String> {
        match self {
            Self::NotFound { hint, .. } | Self::Refused { hint, .. } => Some(hint.clone()),
            Self::NotConfirmed => Some(
                "answer Y at the prompt, or pass --confirm to delete without asking".to_owned(),
            ),
            Self::WatchEnded { .. } => {
                Some("the object was created; follow it with the `describe` command".to_owned())
            }
            Self::Config { .. } => Some(
                "pass --kubeconfig (or set KUBECONFIG) and --kubecontext, or run inside a cluster"
                    .to_owned(),
            ),
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 403 => {
                Some("the credentials in use lack RBAC permission for this request".to_owned())
            }
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 409 => {
                Some("the object already exists; choose another name".to_owned())
            }
            Self::Api {
                source: kube::Error::Api(_),
                ..
            } => None,
            Self::Api { .. } => {
                Some("is the API server reachable? check --kubeconfig/--kubecontext".to_owned())
            }
            _ => None,
        }
    }

    /// Shorthand for an API error.
    pub fn api(action: &'static str, object: impl Into<String>, source: kube::Error) -> Self {
        Self::Api {
            action,
            object: object.into(),
            source,
        }
    }

    /// Shorthand for a usage error.
    pub fn usage(flag: &'static str, reason: impl Into<String>) -> Self {
        Self::Usage {
            flag,
            reason: reason.into(),
        }
    }
}
