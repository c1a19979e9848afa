//! Small types shared by several objects.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// A count as a status field holds it (Go's `int`), saturated.
#[must_use]
pub fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `spec.metadata` of a Backup: only meaningful in a Schedule's template, whose labels are copied
/// onto the Backups it creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels for the created Backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

string_enum! {
    /// What a failing exec hook does to the backup or restore (`onError`).
    pub enum HookErrorMode {
        /// Log the error and go on.
        Continue = "Continue",
        /// Fail the backup or restore (the default when unset).
        Fail = "Fail",
    }
}

/// `status.hookStatus` of Backups and Restores.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookStatus {
    /// Number of hooks run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_attempted: Option<i64>,
    /// Number of hooks that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_failed: Option<i64>,
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
