//! What a server lets a location reach beyond what its own spec carries: the directories a
//! `filesystem` location may be rooted in, and whether credentials found in the server's
//! environment (environment variables, a web-identity token, instance metadata, application
//! default credentials, a managed identity) serve locations that name no `spec.credential`.
//!
//! Anyone who can write a BackupStorageLocation chooses its root and its endpoint; without these
//! limits a location could read and write any directory the server can, borrow the server's own
//! cloud identity for a bucket its author has no access to, or send another location's
//! credentials to an endpoint of its choosing. So credentials go to a custom endpoint only when
//! the server lists it (`--trusted-endpoint`) or the credential Secret names the location
//! (`hawser.io/locations`), and a bearer token never goes over plain `http://` to an endpoint the
//! server does not list with that scheme.

use std::path::{Component, Path, PathBuf};

use crate::error::ConfigError;
use crate::spec::LocationSpec;
use crate::spec::Provider;

/// Limits on what locations may use. [`Default`] is unrestricted (any root, ambient credentials
/// allowed, any endpoint trusted): what a program that opens locations it wrote itself wants. A
/// server builds one from its flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationPolicy {
    /// `None`: any directory; `Some`: only these and what is under them.
    filesystem_roots: Option<Vec<PathBuf>>,
    ambient_credentials: bool,
    /// `None`: any endpoint; `Some`: the origins (`scheme://host:port`) credentials may go to
    /// besides the provider's own endpoints and those the credential Secret endorses.
    trusted_endpoints: Option<Vec<String>>,
}

impl Default for LocationPolicy {
    fn default() -> Self {
        Self {
            filesystem_roots: None,
            ambient_credentials: true,
            trusted_endpoints: None,
        }
    }
}

/// `scheme://host:port` of `url`, lower-cased, the port made explicit; `None` when `url` is not
/// an `http://` or `https://` URL.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority
        .rsplit('@')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if host_port.is_empty() {
        return None;
    }
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        && !host_port.ends_with(']');
    Some(if has_port {
        format!("{scheme}://{host_port}")
    } else {
        format!("{scheme}://{host_port}:{default_port}")
    })
}

impl LocationPolicy {
    /// `filesystem` locations only under `roots` (none at all when `roots` is empty).
    #[must_use]
    pub fn with_filesystem_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        self.filesystem_roots = Some(roots.into_iter().collect());
        self
    }

    /// Whether a location without `spec.credential` may use the server's ambient credentials.
    #[must_use]
    pub fn with_ambient_credentials(mut self, allowed: bool) -> Self {
        self.ambient_credentials = allowed;
        self
    }

    /// Custom endpoints (`s3Url`, `storeEndpoint`, `storageAccountURI`,
    /// `activeDirectoryAuthorityURI`) that credentials may be sent to, as URLs; compared by
    /// scheme, host and port. Without this call every endpoint is trusted.
    #[must_use]
    pub fn with_trusted_endpoints(mut self, endpoints: impl IntoIterator<Item = String>) -> Self {
        self.trusted_endpoints = Some(
            endpoints
                .into_iter()
                .map(|e| origin(&e).unwrap_or(e))
                .collect(),
        );
        self
    }

    /// Checks the custom endpoint `url` of `spec.config.<key>`: credentials go to it only when
    /// this policy trusts it or the location's credential Secret endorses it
    /// ([`LocationSpec::endpoints_endorsed`]), and a bearer token (`bearer`: the provider
    /// authenticates with one) goes over plain `http://` only to an endpoint this policy lists
    /// with that scheme.
    pub(crate) fn check_endpoint(
        &self,
        spec: &LocationSpec,
        key: &str,
        url: &str,
        bearer: bool,
    ) -> Result<(), ConfigError> {
        let Some(trusted) = &self.trusted_endpoints else {
            return Ok(());
        };
        let listed = origin(url).is_some_and(|o| trusted.contains(&o));
        if !listed && !spec.endpoints_endorsed {
            return Err(ConfigError::UntrustedEndpoint {
                field: format!("spec.config.{key}"),
                url: url.to_owned(),
            });
        }
        if bearer && !listed && url.to_ascii_lowercase().starts_with("http://") {
            return Err(ConfigError::PlainHttpToken {
                field: format!("spec.config.{key}"),
                url: url.to_owned(),
            });
        }
        Ok(())
    }

    /// The directories `filesystem` locations may be rooted in; `None`: any.
    #[must_use]
    pub fn filesystem_roots(&self) -> Option<&[PathBuf]> {
        self.filesystem_roots.as_deref()
    }

    /// Whether ambient credentials may be used.
    #[must_use]
    pub fn allows_ambient_credentials(&self) -> bool {
        self.ambient_credentials
    }

    /// Checks that `root` (absolute) is one of the allowed directories or under one, once `..`
    /// and the symbolic links of its existing part are resolved. Returns the resolved root.
    pub(crate) fn check_root(&self, root: &Path) -> Result<PathBuf, ConfigError> {
        let resolved = resolve(root);
        let Some(allowed) = &self.filesystem_roots else {
            return Ok(resolved);
        };
        let shown = if resolved == root {
            format!("`{}`", root.display())
        } else {
            format!(
                "`{}` (resolved to `{}`)",
                root.display(),
                resolved.display()
            )
        };
        if allowed.is_empty() {
            return Err(ConfigError::FilesystemDisabled { root: shown });
        }
        if allowed.iter().any(|dir| resolved.starts_with(resolve(dir))) {
            return Ok(resolved);
        }
        Err(ConfigError::RootNotAllowed {
            root: shown,
            allowed: allowed
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Refuses ambient credentials when they are not allowed; `what` says why the location
    /// would need them.
    pub(crate) fn check_ambient(
        &self,
        provider: Provider,
        what: &'static str,
    ) -> Result<(), ConfigError> {
        if self.ambient_credentials {
            Ok(())
        } else {
            Err(ConfigError::AmbientCredentials {
                provider: provider.name(),
                what,
            })
        }
    }
}

/// `path` with `.` and `..` applied and the symbolic links of its longest existing ancestor
/// resolved; the part that does not exist yet is appended as written.
fn resolve(path: &Path) -> PathBuf {
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                lexical.pop();
            }
            other => lexical.push(other.as_os_str()),
        }
    }
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            // A `..` after a symbolic link is resolved lexically above: the remaining part does
            // not exist, so it has no links to follow.
            return rest
                .iter()
                .rev()
                .fold(canonical, |path, name| path.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn dot_dot_and_links_are_resolved_before_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let allowed = base.join("allowed");
        let outside = base.join("outside");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
        let policy = LocationPolicy::default().with_filesystem_roots([allowed.clone()]);

        assert_eq!(policy.check_root(&allowed).unwrap(), allowed);
        assert_eq!(
            policy.check_root(&allowed.join("new/dir")).unwrap(),
            allowed.join("new/dir")
        );
        for escape in [
            allowed.join("../outside"),
            allowed.join("link"),
            allowed.join("link/not-yet"),
            base.clone(),
            PathBuf::from("/"),
        ] {
            let err = policy.check_root(&escape).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("--filesystem-root"), "{text}");
            assert!(text.contains(&escape.display().to_string()), "{text}");
            assert_eq!(err.category(), "FilesystemRootNotAllowed");
        }
        // A sibling whose name starts like the allowed one is not under it.
        let sibling = base.join("allowed-not");
        assert!(policy.check_root(&sibling).is_err());
    }

    #[test]
    fn no_roots_means_no_filesystem_locations() {
        let policy = LocationPolicy::default().with_filesystem_roots([]);
        let err = policy.check_root(Path::new("/srv/backups")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "filesystem locations are disabled on this server: start it with \
             --filesystem-root DIR, DIR being spec.config.root `/srv/backups` or a directory \
             above it"
        );
        assert!(LocationPolicy::default().check_root(Path::new("/")).is_ok());
    }

    #[test]
    fn ambient_credentials_can_be_refused() {
        let policy = LocationPolicy::default();
        assert!(policy.check_ambient(Provider::Aws, "x").is_ok());
        let err = policy
            .with_ambient_credentials(false)
            .check_ambient(Provider::Gcp, "spec.credential is not set")
            .unwrap_err();
        assert_eq!(err.category(), "AmbientCredentialsDisabled");
        assert!(
            err.to_string()
                .starts_with("provider `gcp`: spec.credential is not set"),
            "{err}"
        );
        assert!(
            err.to_string().contains("--allow-ambient-credentials"),
            "{err}"
        );
    }

    fn spec(endorsed: bool) -> LocationSpec {
        let mut spec = LocationSpec::new("aws", "b").with_credentials("x");
        spec.endpoints_endorsed = endorsed;
        spec
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(
            origin("http://MinIO:9000/path").as_deref(),
            Some("http://minio:9000")
        );
        assert_eq!(
            origin("https://s3.example").as_deref(),
            Some("https://s3.example:443")
        );
        assert_eq!(
            origin("https://u:p@h:8443").as_deref(),
            Some("https://h:8443")
        );
        assert_eq!(
            origin("https://[::1]").as_deref(),
            Some("https://[::1]:443")
        );
        assert_eq!(origin("ftp://h"), None);
        assert_eq!(origin("h:9000"), None);
    }

    #[test]
    fn credentials_go_only_to_listed_or_endorsed_endpoints() {
        let open = LocationPolicy::default();
        assert!(
            open.check_endpoint(&spec(false), "s3Url", "http://evil:9000", true)
                .is_ok()
        );
        let server = LocationPolicy::default()
            .with_trusted_endpoints(["https://minio.internal:9000/".to_owned()]);
        assert!(
            server
                .check_endpoint(&spec(false), "s3Url", "https://minio.internal:9000", false)
                .is_ok()
        );
        let refused = server.check_endpoint(&spec(false), "s3Url", "https://evil.example", false);
        assert!(
            matches!(refused, Err(ConfigError::UntrustedEndpoint { .. })),
            "{refused:?}"
        );
        // Another scheme or port is another endpoint.
        assert!(
            server
                .check_endpoint(&spec(false), "s3Url", "http://minio.internal:9000", false)
                .is_err()
        );
        // The Secret naming the location endorses its endpoints, but not a token in clear.
        assert!(
            server
                .check_endpoint(&spec(true), "s3Url", "https://evil.example", true)
                .is_ok()
        );
        assert!(
            server
                .check_endpoint(&spec(true), "s3Url", "http://minio:9000", false)
                .is_ok()
        );
        let clear = server.check_endpoint(&spec(true), "storeEndpoint", "http://gcs:4443", true);
        assert!(
            matches!(clear, Err(ConfigError::PlainHttpToken { .. })),
            "{clear:?}"
        );
        // Listed with http://, a local emulator may get one.
        let emulator =
            LocationPolicy::default().with_trusted_endpoints(["http://gcs:4443".to_owned()]);
        assert!(
            emulator
                .check_endpoint(&spec(false), "storeEndpoint", "http://gcs:4443/", true)
                .is_ok()
        );
    }
}
