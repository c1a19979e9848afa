//! Velero's resource policies (`spec.resourcePolicy` of a Backup): a ConfigMap in the backup's
//! namespace whose one data key holds YAML, version `v1`, with `includeExcludePolicy` (scoped
//! resource filters merged into the backup's, see [`super::Selection::with_policy`]) and
//! `volumePolicies` (conditions on volumes with an action: `skip`, `snapshot`, `fs-backup` or
//! `custom`). The file is read strictly, as Velero reads it: unknown fields are errors.
//!
//! hawser applies the include/exclude policy, and the volume policies whose action is `skip`
//! (no snapshot of the volume) or `snapshot` (a CSI snapshot, as without a policy). `fs-backup`
//! and `custom` are read and checked but not acted on: the backup says so in a warning (see
//! [`ResourcePolicies::unapplied`]) and the volumes they select are handled as without them.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::IncludeExcludePolicy;
use super::volume_policies::VolumePolicy;

/// The volume-policy actions Velero knows.
const ACTIONS: [&str; 4] = ["skip", "snapshot", "fs-backup", "custom"];

/// The rules of one resource-policy ConfigMap, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourcePolicies {
    /// `includeExcludePolicy`.
    pub include_exclude: Option<IncludeExcludePolicy>,
    /// `volumePolicies`, in order.
    pub volume_policies: Vec<VolumePolicy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    version: String,
    #[serde(default)]
    volume_policies: Vec<VolumePolicySpec>,
    include_exclude_policy: Option<IncludeExcludePolicy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VolumePolicySpec {
    #[serde(default)]
    conditions: serde_yaml::Value,
    action: Action,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)] // read to be checked as YAML, not used
    parameters: Option<serde_yaml::Value>,
}

impl ResourcePolicies {
    /// Reads the policies from the `data` of ConfigMap `namespace/name`.
    ///
    /// # Errors
    /// The message for the Backup's `validationErrors`, in Velero's words: a ConfigMap without
    /// exactly one data key, YAML that is not the format, or a policy Velero refuses.
    pub fn from_config_map(
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let at = format!("{namespace}/{name}");
        let text = match data.values().collect::<Vec<_>>().as_slice() {
            [one] => one.as_str(),
            _ => {
                return Err(format!(
                    "fail to read the ResourcePolicies from ConfigMap {at} with error illegal resource policies {at} configmap"
                ));
            }
        };
        let file: File = serde_yaml::from_str(text).map_err(|e| {
            format!(
                "fail to read the ResourcePolicies from ConfigMap {at} with error failed to decode yaml data into resource policies {e}"
            )
        })?;
        let invalid = |e: String| {
            format!("fail to validate ResourcePolicies in ConfigMap {at} with error {e}")
        };
        if file.version != "v1" {
            return Err(invalid(format!(
                "incompatible version number {} with supported version v1",
                file.version
            )));
        }
        let mut volume_policies = Vec::new();
        for policy in file.volume_policies {
            if !ACTIONS.contains(&policy.action.kind.as_str()) {
                return Err(invalid(format!(
                    "invalid action type {}",
                    policy.action.kind
                )));
            }
            if let Some(labels) = policy.conditions.get("pvcLabels")
                && !labels.is_mapping()
            {
                return Err(invalid(
                    "pvcLabels must be a map of string to string".to_owned(),
                ));
            }
            volume_policies
                .push(VolumePolicy::new(policy.conditions, policy.action.kind).map_err(invalid)?);
        }
        if let Some(policy) = &file.include_exclude_policy {
            let errors = super::validate::policy_patterns(policy);
            if !errors.is_empty() {
                return Err(invalid(errors.join("; ")));
            }
        }
        Ok(Self {
            include_exclude: file.include_exclude_policy,
            volume_policies,
        })
    }

    /// The action of the first volume policy whose conditions `claim` and its `volume` meet.
    pub fn volume_action(
        &self,
        claim: &serde_json::Value,
        volume: &serde_json::Value,
    ) -> Option<&str> {
        self.volume_policies
            .iter()
            .find(|p| p.matches(claim, volume))
            .map(|p| p.action.as_str())
    }

    /// The warning of a backup whose ConfigMap `name` has volume policies with an action
    /// hawser does not take (`fs-backup`, `custom`); `None` without any.
    pub fn unapplied(&self, name: &str) -> Option<String> {
        let mut actions: Vec<&str> = self
            .volume_policies
            .iter()
            .map(|p| p.action.as_str())
            .filter(|a| !matches!(*a, "skip" | "snapshot"))
            .collect();
        if actions.is_empty() {
            return None;
        }
        let count = actions.len();
        actions.sort_unstable();
        actions.dedup();
        Some(format!(
            "spec.resourcePolicy: {count} volume policies of ConfigMap {name} have actions hawser does not take ({}); the volumes they select were handled as without them (a CSI snapshot where snapshotVolumes allows one, no file-system backup)",
            actions.join(", ")
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<ResourcePolicies, String> {
        let data = BTreeMap::from([("policies.yaml".to_owned(), yaml.to_owned())]);
        ResourcePolicies::from_config_map("velero", "policies", &data)
    }

    #[test]
    fn the_include_exclude_policy_and_the_volume_actions_are_read() {
        let p = read(
            r#"
version: v1
volumePolicies:
- conditions: {capacity: "0,100Gi", storageClass: [gp2]}
  action: {type: skip}
- conditions: {nfs: {server: nfs.example.com}}
  action: {type: fs-backup, parameters: {x: 1}}
includeExcludePolicy:
  excludedClusterScopedResources: [storageclasses]
  includedNamespaceScopedResources: ["*"]
"#,
        )
        .unwrap();
        let actions: Vec<&str> = p
            .volume_policies
            .iter()
            .map(|v| v.action.as_str())
            .collect();
        assert_eq!(actions, ["skip", "fs-backup"]);
        let policy = p.include_exclude.as_ref().unwrap();
        assert_eq!(policy.excluded_cluster_scoped_resources, ["storageclasses"]);
        let warning = p.unapplied("policies").unwrap();
        assert!(
            warning.contains("1 volume policies of ConfigMap policies have actions hawser does not take (fs-backup)"),
            "{warning}"
        );
        assert_eq!(read("version: v1\n").unwrap().unapplied("p"), None);
    }

    #[test]
    fn a_config_map_velero_refuses_is_named_with_the_problem() {
        let two = BTreeMap::from([
            ("a".to_owned(), "version: v1".to_owned()),
            ("b".to_owned(), "version: v1".to_owned()),
        ]);
        for data in [BTreeMap::new(), two] {
            let e = ResourcePolicies::from_config_map("velero", "p", &data).unwrap_err();
            assert!(
                e.contains("illegal resource policies velero/p configmap"),
                "{e}"
            );
        }
        for (yaml, expected) in [
            (
                "version: v2\n",
                "incompatible version number v2 with supported version v1",
            ),
            (
                "version: v1\nvolumePolicy: []\n",
                "failed to decode yaml data into resource policies",
            ),
            (
                "version: v1\nvolumePolicies: [{action: {type: move}}]\n",
                "invalid action type move",
            ),
            (
                "version: v1\nvolumePolicies: [{conditions: {pvcLabels: [a]}, action: {type: skip}}]\n",
                "pvcLabels must be a map of string to string",
            ),
            (
                "version: v1\nincludeExcludePolicy: {includedClusterScopedResources: ['[z-a]']}\n",
                "includedClusterScopedResources",
            ),
            (
                "version: v1\nincludeExcludePolicy: {includedResources: [pods]}\n",
                "failed to decode yaml data",
            ),
            (
                "version: v1\nvolumePolicies: [{conditions: {capacity: '10Gi'}, action: {type: skip}}]\n",
                "wrong format of Capacity 10Gi",
            ),
        ] {
            let e = read(yaml).unwrap_err();
            assert!(e.contains(expected), "{yaml} → {e}");
            assert!(e.contains("ConfigMap velero/policies"), "{e}");
        }
    }
}
