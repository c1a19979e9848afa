//! The description of one served resource: what discovery, routing, tables and OpenAPI share.

use serde::{Deserialize, Serialize};

/// One resource served by the simulator, built in or defined by a CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    /// Lowercase plural used in URLs, e.g. `configmaps`.
    pub plural: String,
    /// Lowercase singular, e.g. `configmap`.
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Verbs as discovery lists them.
    pub verbs: Vec<String>,
    /// Whether `/status` is a subresource (writes to the main resource then leave status alone).
    pub status_subresource: bool,
    /// Whether writes bump `metadata.generation` (all CRs and workloads; not ConfigMap/Secret).
    pub uses_generation: bool,
    /// Printer columns for Table output beyond `Name`; empty means the default `Age` column.
    pub printer_columns: Vec<PrinterColumn>,
}

impl ResourceInfo {
    /// `v1` for the core group, `group/version` otherwise.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` for the core group, `plural.group` otherwise (as error messages name resources).
    #[must_use]
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// A CRD's `additionalPrinterColumns` entry (built-in kinds may carry their own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub format: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub priority: i32,
    /// A simple JSONPath such as `.status.phase` or `.metadata.creationTimestamp`.
    pub json_path: String,
}
