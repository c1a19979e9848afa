//! Velero's restore-side additional items: what a restored item brings with it when it is in
//! the archive, even if the restore's label selectors left it out (the type and namespace
//! filters still apply, see [`super::RestoreSelection::admits_as_additional`]).
//!
//! * a Pod: the PersistentVolumeClaims its volumes name, and its PriorityClass;
//! * a PersistentVolumeClaim: the PersistentVolume it is bound to (`spec.volumeName`).

use serde_json::Value;

use crate::selection::related::{PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS};

/// The PriorityClass type's canonical name.
pub const PRIORITY_CLASSES: &str = "priorityclasses.scheduling.k8s.io";

/// The types an item can be added as.
pub const ADDED_TYPES: [&str; 3] = [
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PRIORITY_CLASSES,
];

/// An item of the archive by type, source namespace and name.
pub type ItemId = (&'static str, Option<String>, String);

/// The items `obj` (of type `group_resource`, archived in `namespace`) brings with it.
pub fn needed_by(group_resource: &str, namespace: Option<&str>, obj: &Value) -> Vec<ItemId> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let mut needed = Vec::new();
    match group_resource {
        PODS => {
            let volumes = obj.pointer("/spec/volumes").and_then(Value::as_array);
            for volume in volumes.into_iter().flatten() {
                if let Some(claim) = text(volume.pointer("/persistentVolumeClaim/claimName")) {
                    needed.push((
                        PERSISTENT_VOLUME_CLAIMS,
                        namespace.map(str::to_owned),
                        claim,
                    ));
                }
            }
            if let Some(class) = text(obj.pointer("/spec/priorityClassName")) {
                needed.push((PRIORITY_CLASSES, None, class));
            }
        }
        PERSISTENT_VOLUME_CLAIMS => {
            if let Some(volume) = text(obj.pointer("/spec/volumeName")) {
                needed.push((PERSISTENT_VOLUMES, None, volume));
            }
        }
        _ => {}
    }
    needed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_needs_its_claims_and_priority_class_and_a_claim_its_volume() {
        let pod = json!({"spec": {"priorityClassName": "high", "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "b", "emptyDir": {}}]}});
        assert_eq!(
            needed_by(PODS, Some("shop"), &pod),
            [
                (
                    PERSISTENT_VOLUME_CLAIMS,
                    Some("shop".to_owned()),
                    "data".to_owned()
                ),
                (PRIORITY_CLASSES, None, "high".to_owned()),
            ]
        );
        let claim = json!({"spec": {"volumeName": "pv-1"}});
        assert_eq!(
            needed_by(PERSISTENT_VOLUME_CLAIMS, Some("shop"), &claim),
            [(PERSISTENT_VOLUMES, None, "pv-1".to_owned())]
        );
        assert!(needed_by(PERSISTENT_VOLUME_CLAIMS, Some("shop"), &json!({"spec": {}})).is_empty());
        assert!(needed_by("configmaps", Some("shop"), &pod).is_empty());
    }
}
