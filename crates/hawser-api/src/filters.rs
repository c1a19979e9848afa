//! From a Backup's or a Restore's spec to the filters `hawser-core` plans with: the typed
//! boundary between the API objects and the pure logic, with no JSON in between.

use hawser_core::backup_hooks::{ExecHook, HookSelection, HookSpec};
use hawser_core::restore::exec_hooks::ExecHook as RestoreExecHook;
use hawser_core::restore::{ExecHookSpec, InitHookSpec, RestoreFilters, RestoreStatusFilter};
use hawser_core::selection::{BackupFilters, LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::backup::BackupSpec;
use crate::restore::RestoreSpec;

/// A `metav1.LabelSelector` as hawser-core's selector (checked later, with the rest).
fn selector(s: &meta::LabelSelector) -> LabelSelector {
    LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|r| LabelSelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

fn selectors(list: Option<&Vec<meta::LabelSelector>>) -> Option<Vec<LabelSelector>> {
    list.map(|l| l.iter().map(selector).collect())
}

fn list(value: Option<&Vec<String>>) -> Vec<String> {
    value.cloned().unwrap_or_default()
}

impl From<&BackupSpec> for BackupFilters {
    fn from(spec: &BackupSpec) -> Self {
        Self {
            included_namespaces: list(spec.included_namespaces.as_ref()),
            excluded_namespaces: list(spec.excluded_namespaces.as_ref()),
            included_resources: list(spec.included_resources.as_ref()),
            excluded_resources: list(spec.excluded_resources.as_ref()),
            include_cluster_resources: spec.include_cluster_resources,
            included_cluster_scoped_resources: list(
                spec.included_cluster_scoped_resources.as_ref(),
            ),
            excluded_cluster_scoped_resources: list(
                spec.excluded_cluster_scoped_resources.as_ref(),
            ),
            included_namespace_scoped_resources: list(
                spec.included_namespace_scoped_resources.as_ref(),
            ),
            excluded_namespace_scoped_resources: list(
                spec.excluded_namespace_scoped_resources.as_ref(),
            ),
            label_selector: spec.label_selector.as_ref().map(selector),
            or_label_selectors: selectors(spec.or_label_selectors.as_ref()),
        }
    }
}

impl From<&RestoreSpec> for RestoreFilters {
    fn from(spec: &RestoreSpec) -> Self {
        Self {
            included_namespaces: list(spec.included_namespaces.as_ref()),
            excluded_namespaces: list(spec.excluded_namespaces.as_ref()),
            included_resources: list(spec.included_resources.as_ref()),
            excluded_resources: list(spec.excluded_resources.as_ref()),
            include_cluster_resources: spec.include_cluster_resources,
            namespace_mapping: spec.namespace_mapping.clone().unwrap_or_default(),
            label_selector: spec.label_selector.as_ref().map(selector),
            or_label_selectors: selectors(spec.or_label_selectors.as_ref()),
            restore_status: spec.restore_status.as_ref().map(|s| RestoreStatusFilter {
                included_resources: list(s.included_resources.as_ref()),
                excluded_resources: list(s.excluded_resources.as_ref()),
            }),
            preserve_node_ports: spec.preserve_node_ports,
            existing_resource_policy: spec.existing_resource_policy.clone(),
        }
    }
}

/// The selection fields of a Backup's or a Restore's `spec.hooks.resources[]` entry (two types
/// with the same fields).
macro_rules! hook_selection {
    ($entry:expr) => {
        HookSelection {
            name: $entry.name.clone(),
            included_namespaces: list($entry.included_namespaces.as_ref()),
            excluded_namespaces: list($entry.excluded_namespaces.as_ref()),
            included_resources: list($entry.included_resources.as_ref()),
            excluded_resources: list($entry.excluded_resources.as_ref()),
            label_selector: $entry.label_selector.as_ref().map(selector),
        }
    };
}

impl BackupSpec {
    /// The hook specs of `spec.hooks.resources`, one per entry, in order.
    #[must_use]
    pub fn hook_specs(&self) -> Vec<HookSpec> {
        let resources = self.hooks.as_ref().and_then(|h| h.resources.as_deref());
        let exec = |hooks: Option<&Vec<crate::backup::BackupResourceHook>>| -> Vec<ExecHook> {
            hooks
                .into_iter()
                .flatten()
                .map(|h| ExecHook {
                    container: h.exec.container.clone(),
                    command: h.exec.command.clone(),
                    continue_on_error: h.exec.on_error == Some(crate::HookErrorMode::Continue),
                    timeout: h.exec.timeout.and_then(|t| t.to_std()),
                })
                .collect()
        };
        resources
            .unwrap_or_default()
            .iter()
            .map(|r| HookSpec {
                selection: hook_selection!(r),
                pre: exec(r.pre.as_ref()),
                post: exec(r.post.as_ref()),
            })
            .collect()
    }
}

impl RestoreSpec {
    /// The exec hooks of `spec.hooks.resources`, one per entry, in order.
    #[must_use]
    pub fn exec_hook_specs(&self) -> Vec<ExecHookSpec> {
        let resources = self.hooks.as_ref().and_then(|h| h.resources.as_deref());
        resources
            .unwrap_or_default()
            .iter()
            .map(|r| ExecHookSpec {
                selection: hook_selection!(r),
                hooks: r
                    .post_hooks
                    .iter()
                    .flatten()
                    .filter_map(|hook| hook.exec.as_ref())
                    .map(|e| RestoreExecHook {
                        container: e.container.clone(),
                        command: e.command.clone(),
                        fail_on_error: e.on_error == Some(crate::HookErrorMode::Fail),
                        exec_timeout: e.exec_timeout.and_then(|t| t.to_std()),
                        wait_timeout: e.wait_timeout.and_then(|t| t.to_std()),
                        wait_for_ready: e.wait_for_ready == Some(true),
                    })
                    .collect(),
            })
            .collect()
    }

    /// The init-container hooks of `spec.hooks.resources`, one per entry, in order.
    #[must_use]
    pub fn init_hook_specs(&self) -> Vec<InitHookSpec> {
        let resources = self.hooks.as_ref().and_then(|h| h.resources.as_deref());
        resources
            .unwrap_or_default()
            .iter()
            .map(|r| InitHookSpec {
                name: r.name.clone(),
                included_namespaces: list(r.included_namespaces.as_ref()),
                excluded_namespaces: list(r.excluded_namespaces.as_ref()),
                label_selector: r.label_selector.as_ref().map(selector),
                containers: r
                    .post_hooks
                    .iter()
                    .flatten()
                    .filter_map(|hook| hook.init.as_ref())
                    .flat_map(|init| init.init_containers.iter().flatten())
                    .map(|raw| raw.0.clone())
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use serde_json::json;

    use super::*;

    /// The typed conversion reads a spec exactly as reading the spec's JSON into the filters
    /// does (the form the filters deserialise from), for every filter field.
    #[test]
    fn conversions_agree_with_the_spec_json() {
        let selector = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        });
        let backup = json!({
            "includedNamespaces": ["shop"], "excludedNamespaces": ["kube-system"],
            "includedResources": ["secrets"], "excludedResources": ["pods"],
            "includeClusterResources": false,
            "includedClusterScopedResources": ["nodes"],
            "excludedClusterScopedResources": ["persistentvolumes"],
            "includedNamespaceScopedResources": ["configmaps"],
            "excludedNamespaceScopedResources": ["events"],
            "labelSelector": selector, "orLabelSelectors": [selector, {"matchLabels": {"x": "y"}}],
            "ttl": "1h0m0s", "storageLocation": "default"
        });
        let spec: BackupSpec = serde_json::from_value(backup.clone()).unwrap();
        let via_json: BackupFilters = serde_json::from_value(backup).unwrap();
        assert_eq!(BackupFilters::from(&spec), via_json);
        assert_eq!(
            BackupFilters::from(&BackupSpec::default()),
            BackupFilters::default()
        );

        let restore = json!({
            "backupName": "b1",
            "includedNamespaces": ["shop"], "excludedNamespaces": ["x"],
            "includedResources": ["*"], "excludedResources": ["nodes"],
            "includeClusterResources": true,
            "namespaceMapping": {"shop": "shop-copy"},
            "labelSelector": selector, "orLabelSelectors": [selector],
            "restoreStatus": {"includedResources": ["widgets.example.com"], "excludedResources": []},
            "preserveNodePorts": true, "existingResourcePolicy": "update"
        });
        let spec: RestoreSpec = serde_json::from_value(restore.clone()).unwrap();
        let via_json: RestoreFilters = serde_json::from_value(restore).unwrap();
        assert_eq!(RestoreFilters::from(&spec), via_json);
        assert_eq!(
            RestoreFilters::from(&RestoreSpec::default()),
            RestoreFilters::default()
        );
    }
}
