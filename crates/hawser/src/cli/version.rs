//! `hawser version`: the client's version and the server's, asked through a
//! ServerStatusRequest (velero-compat §1.7), printed in Velero's layout.

use std::time::Duration;

use clap::Args;
use hawser_api::phase::ServerStatusRequestPhase;
use hawser_api::{ServerStatusRequest, ServerStatusRequestSpec};
use hawser_core::duration::GoDuration;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::error::{CliError, ExitStatus};
use super::global::GlobalArgs;

/// `version`.
#[derive(Args, Debug)]
pub struct VersionArgs {
    /// How long to wait for the server to report its version.
    #[arg(long, default_value = "5s")]
    pub timeout: GoDuration,
    /// Only print the client's version; do not ask the server.
    #[arg(long)]
    pub client_only: bool,
}

/// The client part of the output.
pub fn client_text() -> String {
    format!(
        "Client:\n\tVersion: v{}\n\tGit commit: {}\n",
        env!("CARGO_PKG_VERSION"),
        option_env!("HAWSER_GIT_SHA").unwrap_or("<unknown>")
    )
}

/// The server part of the output, with Velero's warning when the minor versions differ.
pub fn server_text(server_version: &str) -> String {
    let mut text = format!("Server:\n\tVersion: {server_version}\n");
    let client = format!("v{}", env!("CARGO_PKG_VERSION"));
    if let Some(upgrade) = upgrade(&client, server_version) {
        text.push_str(&format!(
            "# WARNING: the client version does not match the server version. Please update {upgrade}\n"
        ));
    }
    text
}

/// Which side is behind when the major.minor versions differ (`None` when they match).
fn upgrade(client: &str, server: &str) -> Option<&'static str> {
    let major_minor = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.trim_start_matches('v').split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    let (c, s) = (major_minor(client), major_minor(server));
    if c == s {
        return None;
    }
    Some(if c > s { "server" } else { "client" })
}

/// Runs `hawser version`.
pub async fn run(global: &GlobalArgs, args: VersionArgs) -> Result<ExitStatus, CliError> {
    print!("{}", client_text());
    if args.client_only {
        return Ok(ExitStatus::Success);
    }
    let timeout = positive_timeout(&args.timeout)?;
    let client = global.client().await?;
    let request = server_status(&client, &global.namespace, timeout).await;
    match request.map(|r| r.status.and_then(|s| s.server_version).unwrap_or_default()) {
        Ok(version) => {
            print!("{}", server_text(&version));
            Ok(ExitStatus::Success)
        }
        Err(e) => Ok(no_answer("server version", &e)),
    }
}

/// Velero's line when the server did not answer, on stdout where the answer would be, saying
/// the failure once (`<error getting WHAT: …>`); what to do about it on stderr.
pub fn no_answer(what: &str, e: &CliError) -> ExitStatus {
    println!("<error getting {what}: {}>", e.line());
    if let Some(hint) = e.hint() {
        eprintln!("hint: {hint}");
    }
    e.exit_status()
}

/// `--timeout` as a wait: more than zero.
pub fn positive_timeout(timeout: &GoDuration) -> Result<Duration, CliError> {
    timeout
        .to_std()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| CliError::usage("--timeout", "it must be greater than 0s"))
}

/// Creates a ServerStatusRequest (`generateName: velero-cli-`, as Velero's CLI) and watches it
/// until the server has processed it; the processed request.
pub async fn server_status(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> Result<ServerStatusRequest, CliError> {
    let api: Api<ServerStatusRequest> = Api::namespaced(client.clone(), namespace);
    let mut request = ServerStatusRequest::new("", ServerStatusRequestSpec {});
    request.metadata = ObjectMeta {
        generate_name: Some("velero-cli-".to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    };
    let object = format!("ServerStatusRequest {namespace}/velero-cli-*");
    let created = api
        .create(&PostParams::default(), &request)
        .await
        .map_err(|e| CliError::api("create", object.clone(), e))?;
    let name = created.metadata.name.unwrap_or_default();
    let object = format!("ServerStatusRequest {namespace}/{name}");
    super::download::answer_of(
        api,
        &name,
        object,
        timeout,
        "is hawser server running?",
        |r: ServerStatusRequest| {
            let processed = r.status.as_ref().map(|s| &s.phase);
            (processed == Some(&ServerStatusRequestPhase::Processed)).then_some(r)
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velero_layout() {
        assert!(client_text().starts_with("Client:\n\tVersion: v"));
        assert!(client_text().contains("\n\tGit commit: "));
        let client = format!("v{}", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            server_text(&client),
            format!("Server:\n\tVersion: {client}\n")
        );
    }

    #[test]
    fn mismatch_warning_names_the_side_behind() {
        assert_eq!(upgrade("v1.2.0", "v1.2.9"), None);
        assert_eq!(upgrade("v1.3.0", "v1.2.0"), Some("server"));
        assert_eq!(upgrade("v1.2.0", "v1.10.0"), Some("client"));
    }
}
