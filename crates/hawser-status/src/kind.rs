//! [`ObjectKey`]: which Backup or Restore a status is for. [`Kind`] and its phase rules live in
//! `hawser-api` ([`hawser_api::phase`]).

use std::fmt;

pub use hawser_api::phase::Kind;

/// Namespace/name of one Backup or Restore.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Backup or Restore.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key.
    #[must_use]
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_velero_v1() {
        let b = Kind::Backup.api_resource();
        assert_eq!(
            (b.api_version.as_str(), b.kind.as_str(), b.plural.as_str()),
            ("velero.io/v1", "Backup", "backups")
        );
        let r = Kind::Restore.api_resource();
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.plural.as_str()),
            ("velero.io/v1", "Restore", "restores")
        );
    }
}
