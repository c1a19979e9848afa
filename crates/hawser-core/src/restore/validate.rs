//! Validation of a Restore spec's selection fields (velero-compat §7.1), with Velero's messages
//! where Velero has one. An empty result means valid.

use crate::selection::Catalogue;
use crate::selection::validate::{dns1123_label, includes_excludes, namespaces_and_selectors};

use super::filters::{NON_RESTORABLE, RestoreFilters};

/// The message for setting both selector kinds on a restore.
pub const RESTORE_BOTH_SELECTORS_MESSAGE: &str = "encountered labelSelector as well as orLabelSelectors in restore spec, only one can be specified";

/// All validation errors of `filters`; empty when valid. `catalogue` resolves included types
/// so that a never-restored kind written another way (`node`, `Event`) is still caught.
pub fn validate(filters: &RestoreFilters, catalogue: &Catalogue) -> Vec<String> {
    let mut errs = Vec::new();
    for entry in &filters.included_resources {
        let name = catalogue.canonical_name(entry);
        if NON_RESTORABLE.contains(&name.as_str()) || NON_RESTORABLE.contains(&entry.as_str()) {
            errs.push(format!("{entry} are non-restorable resources"));
        }
    }
    for e in includes_excludes(&filters.included_resources, &filters.excluded_resources) {
        errs.push(format!("Invalid included/excluded resource lists: {e}"));
    }
    errs.extend(namespaces_and_selectors(
        &filters.included_namespaces,
        &filters.excluded_namespaces,
        filters.label_selector.as_ref(),
        filters.or_label_selectors.as_deref(),
        RESTORE_BOTH_SELECTORS_MESSAGE,
    ));
    match filters.existing_resource_policy.as_deref() {
        None | Some("" | "none" | "update") => {}
        Some(other) => errs.push(format!("invalid existingResourcePolicy: {other}")),
    }
    for (source, target) in &filters.namespace_mapping {
        for (role, ns) in [("source", source), ("target", target)] {
            for e in dns1123_label(ns) {
                errs.push(format!(
                    "invalid namespaceMapping {source:?}: {target:?}: {role} namespace {ns:?} {e}"
                ));
            }
        }
    }
    errs
}
