//! Where a proxying simulator forwards API requests: [`Upstream`] (the server URL and the
//! credentials kube-sim presents there), built by hand or read from a kubeconfig file.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

/// A real Kubernetes API server to forward every API request to (proxy mode, see
/// [`SimConfig::upstream`](crate::SimConfig::upstream)). Clients keep talking plain HTTP without
/// credentials to kube-sim; kube-sim presents these credentials upstream.
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    /// Base URL of the API server (`https://127.0.0.1:6443`; a path prefix is kept).
    pub url: String,
    /// Bearer token sent as `Authorization: Bearer ...`.
    pub token: Option<String>,
    /// TLS client certificate and key (PEM).
    pub client_cert: Option<ClientCert>,
    /// CA certificates (PEM) the server certificate is checked against; `None` = the platform's
    /// roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Accept any server certificate (`insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
}

/// A TLS client identity (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for Upstream {
    // Credentials stay out of logs and panic messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "client_cert",
                &self.client_cert.as_ref().map(|_| "<redacted>"),
            )
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .finish()
    }
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCert(<redacted>)")
    }
}

/// Errors reading an upstream's kubeconfig or preparing its client.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing the kubeconfig {path}")]
    Parse {
        path: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("the kubeconfig {path} has no current-context")]
    NoCurrentContext { path: String },
    #[error("the kubeconfig {path} has no {what} named {name:?}")]
    Missing {
        path: String,
        what: &'static str,
        name: String,
    },
    #[error("the cluster {cluster:?} in {path} has no server URL")]
    NoServer { path: String, cluster: String },
    #[error("decoding {field} in {path}")]
    Base64 {
        path: String,
        field: &'static str,
        #[source]
        source: base64::DecodeError,
    },
    #[error("invalid upstream URL {url:?}")]
    Url {
        url: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("the upstream token is not a valid header value")]
    Token(#[source] http::header::InvalidHeaderValue),
    #[error("preparing the TLS client for {url}")]
    Tls {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl UpstreamError {
    /// A stable short category, for log fields.
    pub fn category(&self) -> &'static str {
        match self {
            UpstreamError::Read { .. } => "read",
            UpstreamError::Parse { .. }
            | UpstreamError::NoCurrentContext { .. }
            | UpstreamError::Missing { .. }
            | UpstreamError::NoServer { .. }
            | UpstreamError::Base64 { .. } => "kubeconfig",
            UpstreamError::Url { .. } => "url",
            UpstreamError::Token(_) => "credentials",
            UpstreamError::Tls { .. } => "tls",
        }
    }
}

impl Upstream {
    /// An upstream at `url` without credentials, verifying its certificate against the platform's
    /// roots.
    pub fn new(url: impl Into<String>) -> Upstream {
        Upstream {
            url: url.into(),
            token: None,
            client_cert: None,
            ca_pem: None,
            insecure_skip_tls_verify: false,
        }
    }

    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Upstream {
        self.token = Some(token.into());
        self
    }

    #[must_use]
    pub fn client_cert(mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Upstream {
        self.client_cert = Some(ClientCert { cert_pem, key_pem });
        self
    }

    #[must_use]
    pub fn ca_pem(mut self, pem: Vec<u8>) -> Upstream {
        self.ca_pem = Some(pem);
        self
    }

    #[must_use]
    pub fn insecure_skip_tls_verify(mut self) -> Upstream {
        self.insecure_skip_tls_verify = true;
        self
    }

    /// Reads the current context of a kubeconfig file: its cluster's `server`,
    /// `insecure-skip-tls-verify` and `certificate-authority(-data)`, its user's `token` (or
    /// `tokenFile`) and `client-certificate(-data)`/`client-key(-data)`. Relative file paths are
    /// relative to the kubeconfig's directory. Exec and auth-provider plugins are not supported.
    pub fn from_kubeconfig(path: impl AsRef<Path>) -> Result<Upstream, UpstreamError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| UpstreamError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Upstream::from_kubeconfig_yaml(&text, &path.display().to_string(), &dir)
    }

    /// [`Upstream::from_kubeconfig`] on kubeconfig text; `path` names it in errors and `dir`
    /// anchors relative file paths.
    pub fn from_kubeconfig_yaml(
        text: &str,
        path: &str,
        dir: &Path,
    ) -> Result<Upstream, UpstreamError> {
        let kc: Kubeconfig = serde_yaml::from_str(text).map_err(|source| UpstreamError::Parse {
            path: path.to_string(),
            source,
        })?;
        let missing = |what: &'static str, name: &str| UpstreamError::Missing {
            path: path.to_string(),
            what,
            name: name.to_string(),
        };
        let current = kc
            .current_context
            .filter(|c| !c.is_empty())
            .ok_or_else(|| UpstreamError::NoCurrentContext {
                path: path.to_string(),
            })?;
        let context = kc
            .contexts
            .into_iter()
            .find(|c| c.name == current)
            .ok_or_else(|| missing("context", &current))?
            .context;
        let cluster = kc
            .clusters
            .into_iter()
            .find(|c| c.name == context.cluster)
            .ok_or_else(|| missing("cluster", &context.cluster))?
            .cluster;
        let user = match context.user.as_deref().filter(|u| !u.is_empty()) {
            Some(name) => {
                kc.users
                    .into_iter()
                    .find(|u| u.name == name)
                    .ok_or_else(|| missing("user", name))?
                    .user
            }
            None => User::default(),
        };
        let server =
            cluster
                .server
                .filter(|s| !s.is_empty())
                .ok_or_else(|| UpstreamError::NoServer {
                    path: path.to_string(),
                    cluster: context.cluster.clone(),
                })?;
        let files = Files { path, dir };
        let ca_pem = files.data_or_file(
            "certificate-authority-data",
            cluster.certificate_authority_data,
            cluster.certificate_authority,
        )?;
        let token = match (user.token, user.token_file) {
            (Some(t), _) if !t.is_empty() => Some(t),
            (_, Some(f)) if !f.is_empty() => {
                Some(String::from_utf8_lossy(&files.read(&f)?).trim().to_string())
            }
            _ => None,
        };
        let cert = files.data_or_file(
            "client-certificate-data",
            user.client_certificate_data,
            user.client_certificate,
        )?;
        let key = files.data_or_file("client-key-data", user.client_key_data, user.client_key)?;
        Ok(Upstream {
            url: server,
            token,
            client_cert: cert
                .zip(key)
                .map(|(cert_pem, key_pem)| ClientCert { cert_pem, key_pem }),
            ca_pem,
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
        })
    }
}

/// Reads the files a kubeconfig points to.
struct Files<'a> {
    path: &'a str,
    dir: &'a Path,
}

impl Files<'_> {
    fn read(&self, file: &str) -> Result<Vec<u8>, UpstreamError> {
        let p = PathBuf::from(file);
        let p = if p.is_relative() { self.dir.join(p) } else { p };
        std::fs::read(&p).map_err(|source| UpstreamError::Read {
            path: p.display().to_string(),
            source,
        })
    }

    /// Inline base64 data wins over a file path, as in kubectl.
    fn data_or_file(
        &self,
        field: &'static str,
        data: Option<String>,
        file: Option<String>,
    ) -> Result<Option<Vec<u8>>, UpstreamError> {
        if let Some(d) = data.filter(|d| !d.is_empty()) {
            return base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .map(Some)
                .map_err(|source| UpstreamError::Base64 {
                    path: self.path.to_string(),
                    field,
                    source,
                });
        }
        match file.filter(|f| !f.is_empty()) {
            Some(f) => self.read(&f).map(Some),
            None => Ok(None),
        }
    }
}

// The parts of a kubeconfig the proxy uses.

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
}

#[derive(Deserialize)]
struct Context {
    cluster: String,
    user: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: other
  cluster:
    server: https://other:6443
- name: real
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
    certificate-authority-data: Q0EK
users:
- name: admin
  user:
    token: s3cret
contexts:
- name: real
  context:
    cluster: real
    user: admin
    namespace: default
current-context: real
";

    #[test]
    fn reads_the_current_context() {
        let up = Upstream::from_kubeconfig_yaml(KUBECONFIG, "kc", Path::new("/")).unwrap();
        assert_eq!(up.url, "https://127.0.0.1:6443");
        assert_eq!(up.token.as_deref(), Some("s3cret"));
        assert!(up.insecure_skip_tls_verify);
        assert_eq!(up.ca_pem.as_deref(), Some(&b"CA\n"[..]));
        assert!(up.client_cert.is_none());
        assert!(
            !format!("{up:?}").contains("s3cret"),
            "Debug hides the token"
        );
    }

    #[test]
    fn reads_token_and_certificates_from_relative_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "tok\n").unwrap();
        std::fs::write(dir.path().join("c.pem"), "CERT").unwrap();
        std::fs::write(dir.path().join("k.pem"), "KEY").unwrap();
        let text = "clusters: [{name: c, cluster: {server: 'https://h'}}]
users: [{name: u, user: {tokenFile: token, client-certificate: c.pem, client-key: k.pem}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
";
        let up = Upstream::from_kubeconfig_yaml(text, "kc", dir.path()).unwrap();
        assert_eq!(up.token.as_deref(), Some("tok"));
        let cert = up.client_cert.unwrap();
        assert_eq!(cert.cert_pem, b"CERT");
        assert_eq!(cert.key_pem, b"KEY");
        assert!(!up.insecure_skip_tls_verify);
    }

    #[test]
    fn names_what_is_missing() {
        let text =
            "clusters: []\ncontexts: [{name: x, context: {cluster: gone}}]\ncurrent-context: x\n";
        let err = Upstream::from_kubeconfig_yaml(text, "kc", Path::new("/")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the kubeconfig kc has no cluster named \"gone\""
        );
        let err =
            Upstream::from_kubeconfig_yaml("clusters: []\n", "kc", Path::new("/")).unwrap_err();
        assert_eq!(err.category(), "kubeconfig");
    }
}
