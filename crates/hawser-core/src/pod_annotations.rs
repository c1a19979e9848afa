//! Velero's pod annotations that ask for work hawser does not do yet (file-system backup of pod
//! volumes; the hook annotations are acted on). A backup that meets a Pod carrying one still
//! runs; it gets one warning per annotation naming the pods ([`AnnotatedPods`]), so that a
//! `Completed` object never hides work that was asked for on a pod and skipped.

use std::collections::BTreeMap;

use serde_json::Value;

/// An annotation and what was left undone where it is set.
#[derive(Debug, Clone, Copy)]
pub struct Unacted {
    /// The annotation key.
    pub key: &'static str,
    /// What was not done, as the end of the warning.
    pub undone: &'static str,
}

/// Annotations a backup meets on the Pods it backs up (the file-system backup opt-in; its
/// hooks are run: [`crate::backup_hooks`]).
pub const BACKUP: &[Unacted] = &[Unacted {
    key: "backup.velero.io/backup-volumes",
    undone: "file-system backup of pod volumes is not built in hawser; the volumes these pods name have no data in this backup",
}];

/// Pods named in one warning; the others are counted.
const NAMES_PER_WARNING: usize = 10;

/// The pods met that carry one of a table's annotations: per annotation, how many and the first
/// [`NAMES_PER_WARNING`] names (memory stays bounded whatever the number of pods).
#[derive(Debug, Default, Clone)]
pub struct AnnotatedPods {
    found: BTreeMap<&'static str, (u64, Vec<String>)>,
}

impl AnnotatedPods {
    /// Notes `pod` (a Pod object) against `table`, named `namespace/name` as it stands in it.
    pub fn observe(&mut self, table: &'static [Unacted], pod: &Value) {
        self.observe_as(table, pod, || {
            let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
            format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"))
        });
    }

    /// Notes `pod` against `table` under the name `name()` (e.g. the namespace a restore
    /// maps it to), called only when the pod carries one of the annotations.
    pub fn observe_as(
        &mut self,
        table: &'static [Unacted],
        pod: &Value,
        name: impl FnOnce() -> String,
    ) {
        let Some(annotations) = pod
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            return;
        };
        let mut name = Some(name);
        let mut named = String::new();
        for unacted in table {
            let set = annotations
                .get(unacted.key)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty());
            if !set {
                continue;
            }
            let (count, names) = self.found.entry(unacted.key).or_default();
            *count += 1;
            if let Some(name) = name.take() {
                named = name();
            }
            if names.len() < NAMES_PER_WARNING {
                names.push(named.clone());
            }
        }
    }

    /// One warning per annotation met, in `table`'s order.
    #[must_use]
    pub fn warnings(&self, table: &[Unacted]) -> Vec<String> {
        table
            .iter()
            .filter_map(|unacted| {
                let (count, names) = self.found.get(unacted.key)?;
                let more = count.saturating_sub(names.len() as u64);
                let pods = if more > 0 {
                    format!("{} and {more} more", names.join(", "))
                } else {
                    names.join(", ")
                };
                let noun = if *count == 1 { "pod" } else { "pods" };
                Some(format!(
                    "pod annotation {} on {count} {noun} ({pods}): {}",
                    unacted.key, unacted.undone
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop", "annotations": annotations}})
    }

    #[test]
    fn each_annotation_met_is_one_warning_naming_its_pods() {
        let mut found = AnnotatedPods::default();
        found.observe(
            BACKUP,
            &pod(
                "db-0",
                json!({"pre.hook.backup.velero.io/command": "[\"fsfreeze\"]",
                       "backup.velero.io/backup-volumes": "data"}),
            ),
        );
        found.observe(
            BACKUP,
            &pod("db-1", json!({"backup.velero.io/backup-volumes": "logs"})),
        );
        found.observe(BACKUP, &pod("web", json!({"other": "x"})));
        found.observe(BACKUP, &json!({"metadata": {"name": "bare"}}));
        let warnings = found.warnings(BACKUP);
        assert_eq!(
            warnings,
            ["pod annotation backup.velero.io/backup-volumes on 2 pods (shop/db-0, shop/db-1): file-system backup of pod volumes is not built in hawser; the volumes these pods name have no data in this backup".to_owned()],
            "backup hooks run, so they are not warned"
        );
    }

    #[test]
    fn many_pods_are_counted_past_the_names_shown() {
        let mut found = AnnotatedPods::default();
        for i in 0..25 {
            found.observe(
                BACKUP,
                &pod(
                    &format!("p{i}"),
                    json!({"backup.velero.io/backup-volumes": "x"}),
                ),
            );
        }
        let warnings = found.warnings(BACKUP);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("on 25 pods (shop/p0, ")
                && warnings[0].contains("shop/p9 and 15 more)"),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_empty_value_asks_for_nothing() {
        let mut found = AnnotatedPods::default();
        found.observe(
            BACKUP,
            &pod("a", json!({"backup.velero.io/backup-volumes": " "})),
        );
        assert!(found.warnings(BACKUP).is_empty());
    }
}
