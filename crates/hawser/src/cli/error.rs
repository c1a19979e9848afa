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
    /// Reading or writing a kopia repository failed.
    #[error("could not {what}")]
    Repository {
        /// What was attempted, e.g. `restore snapshot 0123…`.
        what: String,
        /// The repository's error.
        #[source]
        source: hawser_kopia::KopiaError,
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
    /// A Velero flag that asks for what hawser does not do yet (exit 2): refused, so that
    /// nothing is asked for that would not happen.
    #[error("{flag} asks for {what}, which hawser does not do yet")]
    NotBuilt {
        /// The flag, e.g. `--snapshot-move-data`.
        flag: &'static str,
        /// What it asks for.
        what: &'static str,
    },
    /// `plugin add|remove`: hawser loads no plugin images (exit 2, nothing changed).
    #[error(
        "hawser runs no plugins, so `plugin {verb}` changes nothing: its object stores (velero.io/aws, velero.io/azure, velero.io/gcp, velero.io/filesystem) are built in"
    )]
    NoPlugins {
        /// `add` or `remove`.
        verb: &'static str,
    },
    /// The client configuration file (`client config`) cannot be read or written.
    #[error("the client configuration file {path} cannot be used")]
    ClientConfig {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: anyhow::Error,
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
            Self::Usage { .. } | Self::NotBuilt { .. } | Self::NoPlugins { .. } => {
                ExitStatus::Usage
            }
            _ => ExitStatus::Failure,
        }
    }

    /// The message printed on stderr: one line saying what failed and why (the API server's
    /// own message, or the innermost cause of a connection failure; never a debug dump, each
    /// message once), and a hint when there is one.
    pub fn for_people(&self) -> String {
        let mut text = format!("error: {}", self.line());
        if let Some(hint) = self.hint() {
            text.push_str(&format!("\n  hint: {hint}"));
        }
        text
    }

    /// What failed and why, in one line (see [`for_people`](Self::for_people)).
    pub fn line(&self) -> String {
        match std::error::Error::source(self) {
            Some(cause) => format!("{self}: {}", cause_line(cause)),
            None => self.to_string(),
        }
    }

    /// What to do about it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
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
            Self::Api { source, .. } => api_case(source).hint(),
            Self::NotBuilt { flag, .. } => Some(format!(
                "leave {flag} out (or give it its default); Velero's other flags work as in Velero"
            )),
            Self::NoPlugins { .. } => {
                Some("`hawser plugin get` lists what the server has built in".to_owned())
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

/// What kind of API failure an error is, for its hint.
#[derive(Debug, PartialEq, Eq)]
enum ApiCase {
    /// The API server does not serve the resource: the CRDs are not installed.
    NotServed,
    /// The namespace named does not exist.
    NoNamespace,
    /// The name is taken.
    AlreadyExists,
    /// The object was refused as invalid.
    Invalid { name: bool },
    /// RBAC refused the request.
    Forbidden,
    /// The API server is overloaded or restarting (429, 5xx).
    Unavailable,
    /// The API server could not be reached at all.
    Unreachable,
    /// Anything else.
    Other,
}

impl ApiCase {
    fn hint(&self) -> Option<String> {
        let text = match self {
            Self::NotServed => {
                "the velero.io CRDs are not installed in this cluster: run `hawser install` (or `hawser install --crds-only`)"
            }
            Self::NoNamespace => {
                "the namespace does not exist: pass -n NAMESPACE (or set VELERO_NAMESPACE), or run `hawser install`"
            }
            Self::AlreadyExists => "the name is taken; choose another name",
            Self::Invalid { name: true } => {
                "a name is at most 253 lowercase letters, digits, '-' and '.', and starts and ends with a letter or digit"
            }
            Self::Forbidden => {
                "the credentials in use lack RBAC permission for this request (the message names the verb and resource)"
            }
            Self::Unavailable => "the API server is overloaded or restarting; try again later",
            Self::Unreachable => "is the API server reachable? check --kubeconfig/--kubecontext",
            Self::Invalid { name: false } | Self::Other => return None,
        };
        Some(text.to_owned())
    }
}

fn api_case(error: &kube::Error) -> ApiCase {
    match error {
        kube::Error::Api(status) => match status.code {
            404 if status.message.contains("page not found")
                || status.message == "the server could not find the requested resource" =>
            {
                ApiCase::NotServed
            }
            404 if status
                .details
                .as_ref()
                .is_some_and(|d| d.kind == "namespaces") =>
            {
                ApiCase::NoNamespace
            }
            409 if status.reason == "AlreadyExists" => ApiCase::AlreadyExists,
            422 => ApiCase::Invalid {
                name: status.message.contains("metadata.name"),
            },
            403 => ApiCase::Forbidden,
            429 | 500..=599 => ApiCase::Unavailable,
            _ => ApiCase::Other,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => ApiCase::Unreachable,
        _ => ApiCase::Other,
    }
}

/// The cause of an error in one line: for an API answer its message (with the code when the
/// message does not say it); for a failed connection the innermost cause; otherwise each
/// distinct message of the chain, outermost first, joined by `: `.
fn cause_line(cause: &(dyn std::error::Error + 'static)) -> String {
    let mut next = Some(cause);
    while let Some(error) = next {
        match error.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) => {
                let message = if status.message.is_empty() {
                    status.reason.as_str()
                } else {
                    status.message.as_str()
                };
                return match status.code {
                    429 | 500..=599 => {
                        format!("the API server answered {}: {message}", status.code)
                    }
                    _ => message.to_owned(),
                };
            }
            Some(kube::Error::HyperError(_) | kube::Error::Service(_)) => {
                let mut inner: &(dyn std::error::Error + 'static) = error;
                while let Some(deeper) = inner.source() {
                    inner = deeper;
                }
                return format!("cannot reach the API server ({inner})");
            }
            _ => next = error.source(),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(cause);
    while let Some(error) = next {
        let message = error.to_string();
        if !parts.iter().any(|p| p.contains(&message)) {
            parts.push(message);
        }
        next = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use kube::core::Status;

    use super::*;

    fn api(code: u16, reason: &str, message: &str, kind: &str) -> CliError {
        let mut status = Status::failure(message, reason).with_code(code);
        status.details = Some(serde_json::from_value(serde_json::json!({"kind": kind})).unwrap());
        CliError::api(
            "create",
            "Backup velero/b1",
            kube::Error::Api(Box::new(status)),
        )
    }

    #[test]
    fn an_api_error_is_one_line_with_the_servers_message_and_a_hint() {
        let cases = [
            (
                api(404, "Failed to parse error data", "404 page not found", ""),
                "error: could not create Backup velero/b1: 404 page not found\n  hint: the velero.io CRDs are not installed",
            ),
            (
                api(
                    404,
                    "NotFound",
                    "namespaces \"velero\" not found",
                    "namespaces",
                ),
                "error: could not create Backup velero/b1: namespaces \"velero\" not found\n  hint: the namespace does not exist",
            ),
            (
                api(
                    409,
                    "AlreadyExists",
                    "backups.velero.io \"b1\" already exists",
                    "backups",
                ),
                "error: could not create Backup velero/b1: backups.velero.io \"b1\" already exists\n  hint: the name is taken",
            ),
            (
                api(
                    422,
                    "Invalid",
                    "Backup.velero.io \"Bad_Name\" is invalid: metadata.name: Invalid value",
                    "backups",
                ),
                "error: could not create Backup velero/b1: Backup.velero.io \"Bad_Name\" is invalid: metadata.name: Invalid value\n  hint: a name is at most 253",
            ),
            (
                api(
                    403,
                    "Forbidden",
                    "backups.velero.io is forbidden: User \"u\" cannot create resource \"backups\"",
                    "backups",
                ),
                "error: could not create Backup velero/b1: backups.velero.io is forbidden: User \"u\" cannot create resource \"backups\"\n  hint: the credentials in use lack RBAC",
            ),
            (
                api(
                    503,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                    "",
                ),
                "error: could not create Backup velero/b1: the API server answered 503: the server is currently unable to handle the request\n  hint: the API server is overloaded",
            ),
        ];
        for (error, start) in cases {
            let text = error.for_people();
            assert!(text.starts_with(start), "{text}");
            assert_eq!(text.lines().count(), 2, "{text}");
            assert!(
                !text.contains("Status {") && !text.contains("Some("),
                "{text}"
            );
        }
    }

    #[test]
    fn a_chain_says_each_message_once() {
        let source = anyhow::anyhow!("Connection refused (os error 111)")
            .context("tcp connect error")
            .context("client error (Connect): tcp connect error");
        let error = CliError::Watch {
            object: "Backup velero/b1".to_owned(),
            source,
        };
        assert_eq!(
            error.for_people(),
            "error: could not watch Backup velero/b1: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
    }
}
