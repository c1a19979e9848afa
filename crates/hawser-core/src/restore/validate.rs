//! Validation of a Restore spec's selection fields (velero-compat §7.1), with Velero's messages
//! where Velero has one. An empty result means valid.

use crate::selection::Catalogue;
use crate::selection::excerpt;
use crate::selection::validate::{
    dns1123_label, echo, includes_excludes, namespaces_and_selectors, patterns,
};

use super::filters::{NON_RESTORABLE, RestoreFilters, RestoreStatusFilter};

/// The message for setting both selector kinds on a restore.
pub const RESTORE_BOTH_SELECTORS_MESSAGE: &str = "encountered labelSelector as well as orLabelSelectors in restore spec, only one can be specified";

/// All validation errors of `filters`; empty when valid. `catalogue` resolves included types
/// so that a never-restored kind written another way (`node`, `Event`) is still caught.
pub fn validate(filters: &RestoreFilters, catalogue: &Catalogue) -> Vec<String> {
    let mut errs = Vec::new();
    for entry in &filters.included_resources {
        let name = catalogue.canonical_name(entry);
        if NON_RESTORABLE.contains(&name.as_str()) || NON_RESTORABLE.contains(&entry.as_str()) {
            errs.push(format!("{} are non-restorable resources", echo(entry)));
        }
    }
    for e in includes_excludes(&filters.included_resources, &filters.excluded_resources) {
        errs.push(format!("Invalid included/excluded resource lists: {e}"));
    }
    // The same compiler the filters use: an invalid pattern is refused here rather than left
    // to make its list match nothing.
    let no_status = RestoreStatusFilter::default();
    let status = filters.restore_status.as_ref().unwrap_or(&no_status);
    let lists = [
        ("includedResources", &filters.included_resources),
        ("excludedResources", &filters.excluded_resources),
        (
            "restoreStatus.includedResources",
            &status.included_resources,
        ),
        (
            "restoreStatus.excludedResources",
            &status.excluded_resources,
        ),
    ];
    for (field, items) in lists {
        for e in patterns(field, items) {
            errs.push(format!("Invalid included/excluded resource lists: {e}"));
        }
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
    // Mapping keys are namespace names looked up exactly, not patterns.
    for (source, target) in &filters.namespace_mapping {
        for (role, ns) in [("source", source), ("target", target)] {
            for e in dns1123_label(ns) {
                errs.push(format!(
                    "invalid namespaceMapping {}: {}: {role} namespace {} {e}",
                    excerpt(source),
                    excerpt(target),
                    excerpt(ns)
                ));
            }
        }
    }
    errs
}
