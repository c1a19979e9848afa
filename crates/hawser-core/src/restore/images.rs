//! Velero's `change-image-name` restore action: the container images of workloads renamed by
//! the rows of a plugin ConfigMap (labelled `velero.io/plugin-config` and
//! `velero.io/change-image-name: RestoreItemAction`, read by the caller).
//!
//! Each data value is `old,new`: an image that contains `old` has every occurrence of it
//! replaced by `new` (both trimmed; `new` is what follows the first comma). The first row that
//! matches an image renames it. Velero takes the rows in Go's random map order, so with two
//! matching rows its result varies from run to run; here the rows are taken in the order of
//! their keys. A row without a comma, with nothing after it, or with nothing before it is not
//! a rule (Velero would insert `new` between every character of the image for the last).
//!
//! The images renamed are those of `containers` and `initContainers` of Pods, of the pod
//! template of Deployments, StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers and
//! Jobs, and of the job template of CronJobs.

use std::collections::BTreeMap;

use serde_json::Value;

/// The group resources whose images are renamed, and where their pod spec is.
const POD_SPECS: &[(&str, &str)] = &[
    ("pods", "/spec"),
    ("deployments.apps", "/spec/template/spec"),
    ("statefulsets.apps", "/spec/template/spec"),
    ("daemonsets.apps", "/spec/template/spec"),
    ("replicasets.apps", "/spec/template/spec"),
    ("replicationcontrollers", "/spec/template/spec"),
    ("jobs.batch", "/spec/template/spec"),
    ("cronjobs.batch", "/spec/jobTemplate/spec/template/spec"),
];

/// The image renaming rules of one ConfigMap, in the order they are tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageNames {
    rules: Vec<(String, String)>,
}

impl ImageNames {
    /// No rules.
    pub const EMPTY: Self = Self { rules: Vec::new() };

    /// The rules of a ConfigMap's `data`.
    pub fn from_data(data: &BTreeMap<String, String>) -> Self {
        let rules = data
            .values()
            .filter_map(|row| {
                let (old, new) = row.split_once(',')?;
                let (old, new) = (old.trim(), new.trim());
                (!old.is_empty() && !new.is_empty()).then(|| (old.to_owned(), new.to_owned()))
            })
            .collect();
        Self { rules }
    }

    /// Whether no rule renames anything.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// `image` renamed by the first rule whose old part it contains, if one does.
    pub fn rename(&self, image: &str) -> Option<String> {
        self.rules
            .iter()
            .find(|(old, _)| image.contains(old.as_str()))
            .map(|(old, new)| image.replace(old.as_str(), new))
    }

    /// Renames the container images of `obj`, an item of `group_resource` (nothing for the
    /// types not listed in the module docs).
    pub fn apply(&self, obj: &mut Value, group_resource: &str) {
        if self.is_empty() {
            return;
        }
        let Some((_, spec)) = POD_SPECS.iter().find(|(gr, _)| *gr == group_resource) else {
            return;
        };
        for list in ["containers", "initContainers"] {
            let containers = obj
                .pointer_mut(&format!("{spec}/{list}"))
                .and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                let renamed = container
                    .get("image")
                    .and_then(Value::as_str)
                    .and_then(|image| self.rename(image));
                if let Some(renamed) = renamed {
                    container["image"] = Value::from(renamed);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use serde_json::json;

    use super::*;

    fn names(rows: &[(&str, &str)]) -> ImageNames {
        ImageNames::from_data(
            &rows
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn the_first_matching_row_by_key_replaces_every_occurrence() {
        let n = names(&[
            ("a", "registry.old:5000 , registry.new:3000"),
            ("b", "registry.old,elsewhere"),
            ("c", "no comma here"),
            ("d", "trailing,"),
            ("e", ",leading"),
        ]);
        assert_eq!(
            n.rename("registry.old:5000/app:registry.old:5000").unwrap(),
            "registry.new:3000/app:registry.new:3000"
        );
        assert_eq!(n.rename("registry.old/app:1").unwrap(), "elsewhere/app:1");
        assert_eq!(n.rename("trailing/app"), None);
        assert_eq!(n.rename("other/app"), None);
        assert!(names(&[("c", "no comma")]).is_empty());
    }

    #[test]
    fn containers_and_init_containers_of_each_workload_kind_are_renamed() {
        let n = names(&[("a", "old.io,new.io")]);
        let spec = || {
            json!({"containers": [{"name": "a", "image": "old.io/a:1"}, {"name": "b"}],
                   "initContainers": [{"name": "i", "image": "old.io/i:1"}]})
        };
        for (gr, mut obj, at) in [
            ("pods", json!({"spec": spec()}), "/spec"),
            (
                "deployments.apps",
                json!({"spec": {"template": {"spec": spec()}}}),
                "/spec/template/spec",
            ),
            (
                "cronjobs.batch",
                json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": spec()}}}}}),
                "/spec/jobTemplate/spec/template/spec",
            ),
        ] {
            n.apply(&mut obj, gr);
            let spec = obj.pointer(at).unwrap();
            assert_eq!(spec["containers"][0]["image"], "new.io/a:1", "{gr}");
            assert_eq!(spec["containers"][1].get("image"), None, "{gr}");
            assert_eq!(spec["initContainers"][0]["image"], "new.io/i:1", "{gr}");
        }
        // Other types keep their images, even in a pod template.
        let mut template = json!({"spec": {"template": {"spec": spec()}}});
        let before = template.clone();
        n.apply(&mut template, "podtemplates");
        assert_eq!(template, before);
    }
}
