//! Velero's resource modifiers (`spec.resourceModifier`, velero-compat §7.5): rules read from a
//! ConfigMap in the restore's namespace that patch the items of a restore before they are
//! created.
//!
//! The ConfigMap holds one data key whose value is YAML, Velero's version `v1`:
//!
//! ```yaml
//! version: v1
//! resourceModifierRules:
//! - conditions:
//!     groupResource: deployments.apps      # a glob; `*` stops at `.`, `**` does not
//!     resourceNameRegex: "^web-.*$"        # optional, unanchored
//!     namespaces: [shop, "team-*"]         # optional; cluster-scoped items ignore it
//!     labelSelector: {matchLabels: {app: web}}
//!     matches: [{path: /spec/replicas, value: "3"}]   # JSON pointer tests, all must hold
//!   patches:                               # JSON Patch (RFC 6902), or
//!   - {operation: replace, path: /spec/replicas, value: "1"}
//!   mergePatches: [{patchData: "..."}]     # JSON Merge Patch (RFC 7386), or
//!   strategicPatches: [{patchData: "..."}] # strategic merge patch
//! ```
//!
//! As in Velero, unknown fields are refused, a rule carries exactly one kind of patch, every
//! rule's conditions are matched against the item as it was before any rule patched it, and a
//! JSON Patch whose `test` operation fails leaves the item as it was without an error. A JSON
//! Patch `value` is text read as Velero reads it: empty or quoted is a string (the quotes
//! removed), `null`, `true`, `false`, a number or text starting with `{` or `[` is JSON, anything
//! else a string. Unlike Velero, everything that can be checked without an item (the globs, the
//! name regex, the label selector, the patches' JSON) is checked when the ConfigMap is read, so
//! a mistake makes the restore `FailedValidation` instead of one error per item.
//!
//! A strategic merge patch needs the Go type of the item; it is applied to built-in Kubernetes
//! kinds with the list merge keys of [`crate::strategic`], and is an error for other kinds, as in
//! Velero, whose scheme lacks them.

use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::selection::{CompiledSelector, Glob, IncludesExcludes, LabelSelector, object_labels};

/// The only `spec.resourceModifier.kind` Velero reads (compared without case).
pub const CONFIGMAP_KIND: &str = "configmap";

/// The compiled size the regex engine may use for one `resourceNameRegex`.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The rules of one resource-modifier ConfigMap, checked and compiled.
#[derive(Debug, Clone)]
pub struct ResourceModifiers {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    namespaces: IncludesExcludes,
    group_resource: Glob,
    name: Option<Regex>,
    labels: Option<CompiledSelector>,
    /// JSON pointers and the values found there, all of which must hold.
    matches: Vec<(String, Value)>,
    patch: RulePatch,
}

#[derive(Debug, Clone)]
enum RulePatch {
    Json(json_patch::Patch),
    Merge(Vec<Value>),
    Strategic(Vec<Value>),
}

/// The file format, read strictly (unknown fields are errors).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    version: String,
    #[serde(default)]
    resource_modifier_rules: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleSpec {
    conditions: ConditionsSpec,
    #[serde(default)]
    patches: Vec<JsonPatchSpec>,
    #[serde(default)]
    merge_patches: Vec<PatchData>,
    #[serde(default)]
    strategic_patches: Vec<PatchData>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConditionsSpec {
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    group_resource: String,
    #[serde(default)]
    resource_name_regex: String,
    label_selector: Option<LabelSelector>,
    #[serde(default)]
    matches: Vec<MatchSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchSpec {
    #[serde(default)]
    path: String,
    #[serde(default, deserialize_with = "scalar_text")]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonPatchSpec {
    #[serde(default)]
    operation: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    path: String,
    #[serde(default, deserialize_with = "scalar_text")]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PatchData {
    #[serde(default, deserialize_with = "scalar_text")]
    patch_data: String,
}

/// A YAML scalar as the text a Go `string` field receives: numbers and booleans as written,
/// `null` as the empty string; a list or a map is an error.
fn scalar_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error as _;
    match serde_yaml::Value::deserialize(d)? {
        serde_yaml::Value::String(s) => Ok(s),
        serde_yaml::Value::Number(n) => Ok(n.to_string()),
        serde_yaml::Value::Bool(b) => Ok(b.to_string()),
        serde_yaml::Value::Null => Ok(String::new()),
        other => Err(D::Error::custom(format!(
            "expected a string, found {}",
            yaml_kind(&other)
        ))),
    }
}

fn yaml_kind(v: &serde_yaml::Value) -> &'static str {
    match v {
        serde_yaml::Value::Sequence(_) => "a list",
        serde_yaml::Value::Mapping(_) => "a map",
        _ => "a tagged value",
    }
}

/// Velero's reading of a JSON Patch `value` (see the module docs).
fn patch_value(text: &str) -> Result<Value, String> {
    if text.is_empty() {
        return Ok(Value::from(""));
    }
    if let Some(inner) = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|_| text.len() >= 2)
    {
        return Ok(Value::from(inner));
    }
    let lower = text.to_ascii_lowercase();
    let is_json = text == "null"
        || lower == "true"
        || lower == "false"
        || text.starts_with('{')
        || text.starts_with('[')
        || text.parse::<f64>().is_ok();
    if is_json {
        serde_json::from_str(text).map_err(|e| format!("value {text:?} is not valid JSON: {e}"))
    } else {
        Ok(Value::from(text))
    }
}

/// Where the rules were read from, for messages: `namespace/name`.
fn source(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl ResourceModifiers {
    /// Reads the rules from the `data` of ConfigMap `namespace/name`.
    ///
    /// # Errors
    /// The message for the Restore's `validationErrors`, in Velero's words: a ConfigMap without
    /// exactly one data key, YAML that is not the format, or rules that fail its checks.
    pub fn from_config_map(
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let at = source(namespace, name);
        let parse_error = |e: String| {
            format!("Error in parsing resource modifiers provided in configmap {at}: {e}")
        };
        let text = match data.values().collect::<Vec<_>>().as_slice() {
            [one] => one.as_str(),
            _ => {
                return Err(parse_error(format!(
                    "illegal resource modifiers {at} configmap"
                )));
            }
        };
        let file: File = serde_yaml::from_str(text).map_err(|e| {
            parse_error(format!(
                "failed to decode yaml data into resource modifiers, err: {e}"
            ))
        })?;
        Self::compile(file).map_err(|e| {
            format!("Validation error in resource modifiers provided in configmap {at}: {e}")
        })
    }

    fn compile(file: File) -> Result<Self, String> {
        if !file.version.eq_ignore_ascii_case("v1") {
            return Err(format!(
                "unsupported resource modifier version {}",
                file.version
            ));
        }
        if file.resource_modifier_rules.is_empty() {
            return Err("resource modifier rules cannot be empty".to_owned());
        }
        let rules = file
            .resource_modifier_rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                Rule::compile(rule).map_err(|e| format!("resourceModifierRules[{i}]: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { rules })
    }

    /// Applies every rule whose conditions `obj` (of type `group_resource`, with its archived
    /// namespace) meets, in order; the errors of the rules that failed, each leaving `obj` as
    /// the rule found it.
    pub fn apply(&self, obj: &mut Value, group_resource: &str) -> Vec<String> {
        // Conditions are matched against the item as no rule has patched it yet.
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|rule| rule.matches(obj, group_resource))
            .collect();
        matching
            .into_iter()
            .filter_map(|rule| rule.patch.apply(obj).err())
            .map(|e| format!("error in applying patch {e}"))
            .collect()
    }
}

impl Rule {
    fn compile(spec: RuleSpec) -> Result<Self, String> {
        let c = spec.conditions;
        if c.group_resource.is_empty() {
            return Err("groupResource cannot be empty".to_owned());
        }
        let group_resource = Glob::with_separator(&c.group_resource, '.')
            .map_err(|e| format!("groupResource: {e}"))?;
        let name = (!c.resource_name_regex.is_empty())
            .then(|| {
                RegexBuilder::new(&c.resource_name_regex)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| format!("resourceNameRegex: {e}"))
            })
            .transpose()?;
        let labels = c
            .label_selector
            .map(|s| s.compile().map_err(|e| format!("labelSelector: {e}")))
            .transpose()?;
        let mut matches = Vec::new();
        for m in &c.matches {
            if m.path.is_empty() {
                return Err("path is required for match rule".to_owned());
            }
            if !m.path.starts_with('/') {
                return Err(format!("matches: path {:?} is not a JSON pointer", m.path));
            }
            matches.push((m.path.clone(), patch_value(&m.value)?));
        }
        let kinds = [
            !spec.patches.is_empty(),
            !spec.merge_patches.is_empty(),
            !spec.strategic_patches.is_empty(),
        ];
        if kinds.iter().filter(|k| **k).count() > 1 {
            return Err(
                "only one of patches, mergePatches, strategicPatches can be specified".to_owned(),
            );
        }
        let patch = if kinds[0] {
            RulePatch::Json(json_patch_of(&spec.patches)?)
        } else if kinds[1] {
            RulePatch::Merge(patch_documents(&spec.merge_patches, "mergePatches")?)
        } else if kinds[2] {
            RulePatch::Strategic(patch_documents(
                &spec.strategic_patches,
                "strategicPatches",
            )?)
        } else {
            return Err("no patch data found".to_owned());
        };
        Ok(Self {
            namespaces: IncludesExcludes::new(&c.namespaces, &[]),
            group_resource,
            name,
            labels,
            matches,
            patch,
        })
    }

    fn matches(&self, obj: &Value, group_resource: &str) -> bool {
        let meta = |field: &str| {
            obj.pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let namespace = meta("namespace");
        if !namespace.is_empty() && !self.namespaces.should_include(namespace) {
            return false;
        }
        if !self.group_resource.is_match(group_resource) {
            return false;
        }
        if self
            .name
            .as_ref()
            .is_some_and(|r| !r.is_match(meta("name")))
        {
            return false;
        }
        if self
            .labels
            .as_ref()
            .is_some_and(|s| !s.matches(&object_labels(obj)))
        {
            return false;
        }
        // A missing path or another value is no match.
        self.matches
            .iter()
            .all(|(pointer, value)| obj.pointer(pointer) == Some(value))
    }
}

impl RulePatch {
    fn apply(&self, obj: &mut Value) -> Result<(), String> {
        match self {
            Self::Json(patch) => match json_patch::patch(obj, &patch.0) {
                Ok(()) => Ok(()),
                // A failed `test` leaves the item unpatched, without an error (as in Velero).
                Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => Ok(()),
                Err(e) => Err(format!("error in applying JSON Patch {e}")),
            },
            Self::Merge(patches) => {
                for patch in patches {
                    json_patch::merge(obj, patch);
                }
                Ok(())
            }
            Self::Strategic(patches) => {
                let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
                let api_version = obj
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !is_built_in(api_version) {
                    return Err(format!(
                        "error in applying Strategic Patch: {kind} of {api_version} is not a built-in Kubernetes kind, and a strategic merge patch needs the kind's type; use patches or mergePatches"
                    ));
                }
                let mut work = obj.clone();
                for patch in patches {
                    crate::strategic::strategic_merge_patch(&mut work, patch)
                        .map_err(|e| format!("error in applying Strategic Patch {e}"))?;
                }
                *obj = work;
                Ok(())
            }
        }
    }
}

/// Whether `api_version` is of a group whose kinds are compiled into Kubernetes: the core
/// group, the unqualified ones (`apps`, `batch`, `autoscaling`, `policy`) and `*.k8s.io`.
fn is_built_in(api_version: &str) -> bool {
    match api_version.rsplit_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

/// The JSON Patch of a rule's `patches`, each operation checked as Velero checks it.
fn json_patch_of(specs: &[JsonPatchSpec]) -> Result<json_patch::Patch, String> {
    const OPERATIONS: [&str; 6] = ["add", "remove", "replace", "test", "move", "copy"];
    let mut ops = Vec::new();
    for (i, p) in specs.iter().enumerate() {
        let at = |e: String| format!("patches[{i}]: {e}");
        if p.operation.is_empty() {
            return Err(at("operation cannot be empty".to_owned()));
        }
        if !OPERATIONS.contains(&p.operation.to_ascii_lowercase().as_str()) {
            return Err(at(format!("unsupported operation {}", p.operation)));
        }
        if p.path.is_empty() {
            return Err(at("path cannot be empty".to_owned()));
        }
        let mut op = serde_json::json!({
            "op": p.operation, "path": p.path, "value": patch_value(&p.value).map_err(at)?,
        });
        if !p.from.is_empty() {
            op["from"] = Value::from(p.from.clone());
        }
        ops.push(op);
    }
    decode_patch(ops).map_err(|e| format!("patches: {e}"))
}

fn decode_patch(ops: Vec<Value>) -> Result<json_patch::Patch, String> {
    serde_json::from_value(Value::Array(ops))
        .map_err(|e| format!("error in decoding json patch {e}"))
}

/// The JSON documents of `patchData` texts (YAML or JSON).
fn patch_documents(patches: &[PatchData], field: &str) -> Result<Vec<Value>, String> {
    patches
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_yaml::from_str::<Value>(&p.patch_data)
                .map_err(|e| format!("{field}[{i}]: error in converting YAML to JSON {e}"))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
#[path = "modifiers_tests.rs"]
mod tests;
