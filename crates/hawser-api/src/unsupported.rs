//! Spec fields hawser reads but does not act on. A Backup or Restore that sets one still runs,
//! and its results and log carry one warning per field saying what was not done, so that a
//! `Completed` object never hides work that was asked for and skipped.

use crate::{BackupSpec, RestoreSpec};

impl BackupSpec {
    /// One warning per field of this spec that hawser does not act on, naming the field and
    /// what was left undone; empty when every field set is implemented.
    #[must_use]
    pub fn unsupported_fields(&self) -> Vec<String> {
        let mut warnings: Vec<String> = Vec::new();
        // The field the user set is named (the deprecated one only when it alone asks).
        let fs_backup = if self.default_volumes_to_fs_backup == Some(true) {
            Some("defaultVolumesToFsBackup")
        } else {
            (self.default_volumes_to_restic == Some(true)).then_some("defaultVolumesToRestic")
        };
        if let Some(field) = fs_backup {
            warnings.push(format!(
                "spec.{field}: file-system backup of pod volumes is not built in hawser; no volume data is in this backup"
            ));
        }
        if self.snapshot_move_data == Some(true) {
            warnings.push(
                "spec.snapshotMoveData: moving snapshot data to the storage location is not built in hawser; no volume data is in this backup"
                    .to_owned(),
            );
        }
        if let Some(policy) = self
            .resource_policy
            .as_ref()
            .filter(|p| !is_config_map(&p.kind))
        {
            warnings.push(format!(
                "spec.resourcePolicy: resource policies are read only from a ConfigMap (kind configmap); the {} {} was not read and every selected item was backed up",
                policy.kind, policy.name
            ));
        }
        if self
            .volume_group_snapshot_label_key
            .as_ref()
            .is_some_and(|k| !k.is_empty())
        {
            warnings.push(
                "spec.volumeGroupSnapshotLabelKey: volume group snapshots are not built in hawser; each claim's volume was snapshotted on its own, not as one group"
                    .to_owned(),
            );
        }
        if let Some(mover) = self.data_mover.as_ref().filter(|m| !m.is_empty()) {
            warnings.push(format!(
                "spec.datamover: snapshot data movement is not built in hawser; the data mover {mover:?} was not used"
            ));
        }
        if self.uploader_config.is_some() {
            warnings.push(
                "spec.uploaderConfig: hawser uploads no volume data (no file-system backup or data movement), so the uploader settings were not used"
                    .to_owned(),
            );
        }
        if self
            .volume_snapshot_locations
            .as_ref()
            .is_some_and(|l| !l.is_empty())
        {
            warnings.push(
                "spec.volumeSnapshotLocations: hawser takes no native (VolumeSnapshotLocation) snapshots, only CSI ones, so the named locations were not used"
                    .to_owned(),
            );
        }
        warnings
    }

    /// The warning for `claims` PersistentVolumeClaims backed up while volume snapshots were
    /// not turned off (`spec.snapshotVolumes` unset or true): their data is not in the backup.
    #[must_use]
    pub fn unsnapshotted_claims(&self, claims: u64) -> Option<String> {
        (claims > 0 && self.snapshot_volumes != Some(false)).then(|| {
            format!(
                "spec.snapshotVolumes: {claims} PersistentVolumeClaims were backed up as objects only (unbound, or their volumes are not CSI volumes, which are the only ones hawser snapshots), so their data is not in this backup (set snapshotVolumes: false to say that this is intended)"
            )
        })
    }
}

impl RestoreSpec {
    /// One warning per field of this spec that hawser does not act on, naming the field and
    /// what was left undone; empty when every field set is implemented.
    #[must_use]
    pub fn unsupported_fields(&self) -> Vec<String> {
        let mut warnings: Vec<String> = Vec::new();
        if let Some(modifier) = self
            .resource_modifier
            .as_ref()
            .filter(|m| !is_config_map(&m.kind))
        {
            warnings.push(format!(
                "spec.resourceModifier: resource modifiers are read only from a ConfigMap (kind configmap); the {} {} was not read and items were restored unmodified",
                modifier.kind, modifier.name
            ));
        }
        if self.uploader_config.is_some() {
            warnings.push(
                "spec.uploaderConfig: hawser restores no volume data from file-system backups or moved snapshots, so the uploader settings were not used"
                    .to_owned(),
            );
        }
        warnings
    }
}

/// Whether a `TypedLocalObjectReference` kind names a ConfigMap as Velero reads it.
fn is_config_map(kind: &str) -> bool {
    kind.eq_ignore_ascii_case(hawser_core::restore::modifiers::CONFIGMAP_KIND)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // failed unwraps are failed tests
mod tests {
    use super::*;

    /// What hawser does with a spec field that is set.
    enum Outcome {
        /// Acted on (the reason says where, for the reader).
        Acted(&'static str),
        /// Nothing a user asked for can be left undone (the reason says why).
        NothingToDo(&'static str),
        /// Not acted on: a spec with this field set to the value (JSON) gets a warning naming it.
        Warned(&'static str),
    }
    use Outcome::{Acted, NothingToDo, Warned};

    const BACKUP_FIELDS: &[(&str, Outcome)] = &[
        ("metadata", Acted("labels of backups made from a Schedule")),
        ("includedNamespaces", Acted("selection")),
        ("excludedNamespaces", Acted("selection")),
        ("includedResources", Acted("selection")),
        ("excludedResources", Acted("selection")),
        ("includedClusterScopedResources", Acted("selection")),
        ("excludedClusterScopedResources", Acted("selection")),
        ("includedNamespaceScopedResources", Acted("selection")),
        ("excludedNamespaceScopedResources", Acted("selection")),
        ("labelSelector", Acted("selection")),
        ("orLabelSelectors", Acted("selection")),
        (
            "snapshotVolumes",
            Acted("CSI snapshots, or the unsnapshotted-claims warning"),
        ),
        ("ttl", Acted("expiration and garbage collection")),
        ("volumeGroupSnapshotLabelKey", Warned(r#""group""#)),
        ("includeClusterResources", Acted("selection")),
        (
            "hooks",
            Acted("backup hooks run around the snapshots of a pod's claims"),
        ),
        ("storageLocation", Acted("the location written to")),
        ("volumeSnapshotLocations", Warned(r#"["aws-default"]"#)),
        ("defaultVolumesToRestic", Warned("true")),
        ("defaultVolumesToFsBackup", Warned("true")),
        ("orderedResources", Acted("archive order")),
        ("csiSnapshotTimeout", Acted("the wait for CSI snapshots")),
        (
            "itemOperationTimeout",
            Acted("the wait for item operations"),
        ),
        // A ConfigMap's include/exclude policy is applied (its volume policies are warned by
        // the backup); another kind is warned here.
        (
            "resourcePolicy",
            Warned(r#"{"kind": "Secret", "name": "policy"}"#),
        ),
        ("snapshotMoveData", Warned("true")),
        ("datamover", Warned(r#""velero""#)),
        ("uploaderConfig", Warned(r#"{"parallelFilesUpload": 4}"#)),
    ];

    const RESTORE_FIELDS: &[(&str, Outcome)] = &[
        ("backupName", Acted("the backup restored")),
        ("scheduleName", Acted("the newest backup of the Schedule")),
        ("includedNamespaces", Acted("selection")),
        ("excludedNamespaces", Acted("selection")),
        ("includedResources", Acted("selection")),
        ("excludedResources", Acted("selection")),
        (
            "namespaceMapping",
            Acted("restored into the mapped namespaces"),
        ),
        ("labelSelector", Acted("selection")),
        ("orLabelSelectors", Acted("selection")),
        ("restorePVs", Acted("volumes restored or left out")),
        ("restoreStatus", Acted("status written for the named kinds")),
        ("preserveNodePorts", Acted("node ports kept or cleared")),
        ("includeClusterResources", Acted("selection")),
        (
            "hooks",
            Acted("init containers put into the pods, exec hooks run in them"),
        ),
        (
            "existingResourcePolicy",
            Acted("existing items updated or left"),
        ),
        (
            "itemOperationTimeout",
            NothingToDo("a restore here starts no asynchronous item operations"),
        ),
        // A ConfigMap's rules are applied to the items; another kind is warned.
        (
            "resourceModifier",
            Warned(r#"{"kind": "Secret", "name": "modifiers"}"#),
        ),
        ("uploaderConfig", Warned(r#"{"writeSparseFiles": true}"#)),
        (
            "resourcePolicy",
            Acted("refused in validation: the filter policies are not applied"),
        ),
    ];

    /// The `spec` properties of the CRD of `kind`.
    fn spec_fields(kind: &str) -> Vec<String> {
        let crd = crate::crd::crds()
            .into_iter()
            .find(|c| c.spec.names.kind == kind)
            .unwrap();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        let mut fields: Vec<String> = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        fields.sort();
        fields
    }

    fn listed(table: &[(&str, Outcome)]) -> Vec<String> {
        let mut names: Vec<String> = table.iter().map(|(f, _)| (*f).to_owned()).collect();
        names.sort();
        names
    }

    /// Checks `table` against the spec fields of the CRD of `kind`: each field has an outcome,
    /// an acted-on one says why, and a warned one, set alone, gets a warning naming it.
    fn check_outcomes<S: serde::de::DeserializeOwned>(
        kind: &str,
        table: &[(&str, Outcome)],
        warnings_of: impl Fn(&S) -> Vec<String>,
    ) {
        assert_eq!(spec_fields(kind), listed(table), "{kind}");
        for (field, outcome) in table {
            match outcome {
                Warned(value) => {
                    let spec: S =
                        serde_json::from_str(&format!(r#"{{"{field}": {value}}}"#)).unwrap();
                    let warnings = warnings_of(&spec);
                    assert!(
                        warnings
                            .iter()
                            .any(|w| w.starts_with(&format!("spec.{field}: "))),
                        "{kind} {field}: {warnings:?}"
                    );
                }
                Acted(why) | NothingToDo(why) => assert!(!why.is_empty(), "{field} says why"),
            }
        }
    }

    /// Every spec field of the CRDs has an outcome: a field added to a type without one fails
    /// here, and every field not acted on gets its warning.
    #[test]
    fn every_spec_field_is_acted_on_or_warned() {
        check_outcomes("Backup", BACKUP_FIELDS, BackupSpec::unsupported_fields);
        check_outcomes("Restore", RESTORE_FIELDS, RestoreSpec::unsupported_fields);
    }

    #[test]
    fn a_plain_spec_has_nothing_unsupported() {
        assert!(BackupSpec::default().unsupported_fields().is_empty());
        assert!(RestoreSpec::default().unsupported_fields().is_empty());
    }

    #[test]
    fn claims_warn_unless_snapshots_are_off() {
        let mut spec = BackupSpec::default();
        assert_eq!(spec.unsnapshotted_claims(0), None);
        assert!(
            spec.unsnapshotted_claims(3)
                .unwrap()
                .contains("3 PersistentVolumeClaims")
        );
        spec.snapshot_volumes = Some(true);
        assert!(spec.unsnapshotted_claims(1).is_some());
        spec.snapshot_volumes = Some(false);
        assert_eq!(spec.unsnapshotted_claims(3), None);
    }
}
