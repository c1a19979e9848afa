//! A local directory: hawser's own provider.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;

use super::{Provider, check_keys, non_empty};
use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::LocationSpec;

/// The `spec.config` keys of the provider.
const KEYS: &[&str] = &["root"];

pub(super) fn build(
    spec: &LocationSpec,
    policy: &LocationPolicy,
) -> Result<Arc<dyn ObjectStore>, ConfigError> {
    let provider = Provider::Filesystem;
    check_keys(provider, &spec.config, KEYS, &[])?;
    let root = non_empty(&spec.config, "root").ok_or(ConfigError::Missing {
        field: "spec.config.root",
        provider: provider.name(),
    })?;
    let root = PathBuf::from(root);
    let invalid = |reason: String| ConfigError::Invalid {
        field: "spec.config.root".to_owned(),
        reason,
    };
    if !root.is_absolute() {
        return Err(invalid(format!(
            "`{}` is not an absolute path",
            root.display()
        )));
    }
    let root = policy.check_root(&root)?;
    if !root.is_dir() {
        return Err(invalid(format!(
            "`{}` is not an existing directory",
            root.display()
        )));
    }
    // The bucket is a directory under the root, created on first use, readable by the server's
    // user only (what is below it is too: see `durable`).
    let bucket_dir = root.join(&spec.bucket);
    create_private_dir(&bucket_dir).map_err(|e| {
        invalid(format!(
            "cannot create bucket directory `{}`: {e}",
            bucket_dir.display()
        ))
    })?;
    // An existing bucket directory may be a link out of the allowed directories.
    let bucket_dir = policy.check_root(&bucket_dir)?;
    let store = LocalFileSystem::new_with_prefix(&bucket_dir)
        .map_err(|source| ConfigError::Client {
            provider: provider.name(),
            source,
        })?
        // Deleting a backup removes its then-empty directory too.
        .with_automatic_cleanup(true);
    // Uploads answer once they are on disk (fsync); `bucket_dir` is canonical, the path the
    // store resolves objects under.
    Ok(Arc::new(crate::durable::Synced::new(store, bucket_dir)))
}

/// Creates `dir` (its parent exists) with mode 0700; an existing directory is left as it is.
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
