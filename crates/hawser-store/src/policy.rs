//! What a server lets a location reach beyond what its own spec carries: the directories a
//! `filesystem` location may be rooted in, and whether credentials found in the server's
//! environment (environment variables, a web-identity token, instance metadata, application
//! default credentials, a managed identity) serve locations that name no `spec.credential`.
//!
//! Anyone who can write a BackupStorageLocation chooses its root and its endpoint; without these
//! limits a location could read and write any directory the server can, or borrow the server's
//! own cloud identity for a bucket its author has no access to.

use std::path::{Component, Path, PathBuf};

use crate::error::ConfigError;
use crate::provider::Provider;

/// Limits on what locations may use. [`Default`] is unrestricted (any root, ambient credentials
/// allowed): what a program that opens locations it wrote itself wants. A server builds one from
/// its flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationPolicy {
    /// `None`: any directory; `Some`: only these and what is under them.
    filesystem_roots: Option<Vec<PathBuf>>,
    ambient_credentials: bool,
}

impl Default for LocationPolicy {
    fn default() -> Self {
        Self {
            filesystem_roots: None,
            ambient_credentials: true,
        }
    }
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
}
