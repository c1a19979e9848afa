//! Velero's restore actions for API-extension objects: CustomResourceDefinitions and admission
//! webhook configurations archived in a form the `v1` API refuses.

use serde_json::Value;

/// A `v1` CRD with `spec.preserveUnknownFields: true` (which `v1` refuses): the field set to
/// false and `x-kubernetes-preserve-unknown-fields: true` put on each version's schema instead.
pub(super) fn clean_crd(obj: &mut Value) {
    if obj.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1") {
        return;
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("preserveUnknownFields") != Some(&Value::Bool(true)) {
        return;
    }
    spec.insert("preserveUnknownFields".into(), Value::Bool(false));
    for version in spec
        .get_mut("versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(schema) = version
            .pointer_mut("/schema/openAPIV3Schema")
            .and_then(Value::as_object_mut)
        {
            schema.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
        }
    }
}

/// `admissionregistration.k8s.io/v1` webhooks whose `sideEffects` is not `None` or
/// `NoneOnDryRun` (values only `v1beta1` accepted) get `None`.
pub(super) fn reset_side_effects(obj: &mut Value) {
    if obj.get("apiVersion").and_then(Value::as_str) != Some("admissionregistration.k8s.io/v1") {
        return;
    }
    for webhook in obj
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let valid = matches!(
            webhook.get("sideEffects").and_then(Value::as_str),
            Some("None" | "NoneOnDryRun")
        );
        if !valid {
            webhook.insert("sideEffects".into(), Value::from("None"));
        }
    }
}
