//! The human text of `backup describe`, `restore describe` and `schedule describe`, laid out
//! line for line as Velero's CLI lays it out (its `output` describers: the same sections, labels,
//! placeholders and order, aligned as Go's `tabwriter` aligns them, phases coloured as Velero
//! colours them), so that what a Velero user reads and what their scripts grep stays where it
//! was. Pure: the object and what was read for it in, text out.

mod backup;
mod restore;
mod schedule;
mod tab;
mod volumes;

use std::collections::BTreeMap;

use hawser_core::archive::gzjson::{ResourceList, ResultMessages, Results};
use hawser_core::duration::GoDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::api::ObjectMeta;

use super::label_selector::format_selector;
use super::output::when;

pub use backup::{BackupExtras, backup};
pub use restore::{RestoreExtras, RestoreOperation, RestoreVolumeInfo, restore};
pub use schedule::schedule;
pub use volumes::{CsiSnapshotInfo, NativeSnapshotInfo, VolumeInfo};

/// Prints described objects as Velero's `describe` does: two blank lines between two objects.
pub fn print(texts: &[String]) {
    print!("{}", texts.join("\n\n"));
}

/// A file read from the storage location for a description: `Ok` with its content, or why not.
pub type Read<T> = Result<T, Unread>;

/// Why a file of a description could not be read.
#[derive(Debug, Clone)]
pub enum Unread {
    /// The storage location has no such file (an older backup, or one that never finished).
    NotFound,
    /// Reading it failed.
    Failed(String),
    /// It was read but is not what it should be (not JSON of the expected shape).
    Undecodable(String),
}

impl Unread {
    /// Velero's verb in the error line: `getting` when the file could not be read,
    /// `undecodable` (`reading`, or `decoding` for results) when it could not be decoded.
    fn verb(&self, undecodable: &'static str) -> &'static str {
        match self {
            Self::Undecodable(_) => undecodable,
            Self::NotFound | Self::Failed(_) => "getting",
        }
    }
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound => f.write_str("file not found"),
            Self::Failed(why) | Self::Undecodable(why) => f.write_str(why),
        }
    }
}

/// Text written as Velero's describer writes it: pieces with tabs between cells, each prefixed
/// with the current prefix (a schedule's backup template is indented by one), aligned at the end.
///
/// What a description holds may come from a bucket (result messages) or from whoever wrote the
/// object, so every piece is made [terminal-safe](hawser_core::errors::terminal_safe) as it is
/// added; only the colour sequences of [`Describer::paint`] (whose text is made safe the same
/// way) reach the terminal, through [`Describer::put_painted`].
struct Describer {
    text: String,
    prefix: &'static str,
    colour: bool,
}

/// Appends `format!(...)` to a [`Describer`], prefix first (Velero's `Printf`).
macro_rules! put {
    ($d:expr, $($arg:tt)*) => {
        $d.put(&format!($($arg)*))
    };
}
use put;

impl Describer {
    fn new(colour: bool) -> Self {
        Self {
            text: String::new(),
            prefix: "",
            colour,
        }
    }

    fn put(&mut self, piece: &str) {
        self.text.push_str(self.prefix);
        self.text
            .push_str(&hawser_core::errors::terminal_safe(piece));
    }

    /// A piece whose untrusted parts were made safe already (painted text, [`safe`] names).
    fn put_painted(&mut self, piece: &str) {
        self.text.push_str(self.prefix);
        self.text.push_str(piece);
    }

    /// An empty line (with the prefix, as Velero's `Println()`).
    fn blank(&mut self) {
        self.put("\n");
    }

    fn finish(self) -> String {
        tab::align(&self.text)
    }

    fn paint(&self, code: &str, reset: &str, text: &str) -> String {
        let text = safe(text);
        if self.colour {
            format!("\u{1b}[{code}m{text}\u{1b}[{reset}m")
        } else {
            text.to_owned()
        }
    }

    fn green(&self, text: &str) -> String {
        self.paint("32", "0", text)
    }

    fn red(&self, text: &str) -> String {
        self.paint("31", "0", text)
    }

    /// Name, namespace, labels and annotations (one pair a line, sorted by key).
    fn metadata(&mut self, metadata: &ObjectMeta) {
        let name = self.paint("1", "22", metadata.name.as_deref().unwrap_or_default());
        self.put_painted(&format!("Name:\t{name}\n"));
        put!(
            self,
            "Namespace:\t{}\n",
            metadata.namespace.as_deref().unwrap_or_default()
        );
        self.map("Labels", metadata.labels.as_ref());
        self.map("Annotations", metadata.annotations.as_ref());
    }

    /// `name:` and the pairs of `map`, one a line, or `<none>`.
    fn map(&mut self, name: &str, map: Option<&BTreeMap<String, String>>) {
        put!(self, "{name}:\t");
        match map.filter(|m| !m.is_empty()) {
            None => self.put("<none>\n"),
            Some(map) => {
                for (i, (key, value)) in map.iter().enumerate() {
                    let indent = if i == 0 { "" } else { "\t" };
                    put!(self, "{indent}{key}={value}\n");
                }
            }
        }
    }

    /// `name:` and `items`, one a line, indented by `indent` tabs, or `<none>`.
    fn slice(&mut self, indent: usize, name: &str, items: &[String]) {
        let tabs = "\t".repeat(indent);
        put!(self, "{tabs}{name}:\t");
        if items.is_empty() {
            put!(self, "{tabs}<none>\n");
        }
        for (i, item) in items.iter().enumerate() {
            let lead = if i == 0 {
                String::new()
            } else {
                format!("{tabs}\t")
            };
            put!(self, "{lead}{item}\n");
        }
    }

    /// `Validation errors:` and each error in red.
    fn validation_errors(&mut self, errors: Option<&[String]>) {
        let Some(errors) = errors.filter(|e| !e.is_empty()) else {
            return;
        };
        self.blank();
        self.put("Validation errors:");
        for error in errors {
            let error = self.red(error);
            self.put_painted(&format!("\t{error}\n"));
        }
    }

    /// The warnings and errors of a results file, for the counts that are not zero.
    fn results(&mut self, results: &Results, warnings: i64, errors: i64) {
        if warnings > 0 {
            self.blank();
            self.messages("Warnings", &results.warnings);
        }
        if errors > 0 {
            self.blank();
            self.messages("Errors", &results.errors);
        }
    }

    /// The results file could not be read: both sections say why (Velero's lines).
    fn unread_results(&mut self, e: &Unread) {
        let verb = e.verb("decoding");
        put!(
            self,
            "Warnings:\t<error {verb} warnings: {e}>\n\nErrors:\t<error {verb} errors: {e}>\n"
        );
    }

    fn messages(&mut self, title: &str, messages: &ResultMessages) {
        put!(self, "{title}:\n");
        self.slice(1, "Velero", &messages.velero);
        self.slice(1, "Cluster", &messages.cluster);
        if messages.namespaces.is_empty() {
            self.put("\tNamespaces: <none>\n");
        } else {
            self.put("\tNamespaces:\n");
            for (namespace, items) in &messages.namespaces {
                self.slice(2, namespace, items);
            }
        }
    }

    /// `Resource List:` with every `group/version/Kind` and its items; `what` is `backup` or
    /// `restore`.
    fn resource_list(&mut self, what: &str, list: &Read<ResourceList>) {
        match list {
            Err(Unread::NotFound) => {
                put!(self, "Resource List:\t<{what} resource list not found>\n")
            }
            Err(e) => {
                let verb = e.verb("reading");
                put!(
                    self,
                    "Resource List:\t<error {verb} {what} resource list: {e}>\n"
                );
            }
            Ok(list) => {
                self.put("Resource List:\n");
                for (kind, items) in list.iter() {
                    let items: Vec<&str> = items.collect();
                    put!(self, "\t{kind}:\n\t\t- {}\n", items.join("\n\t\t- "));
                }
            }
        }
    }

    /// The resource filters of the older family: included, excluded, cluster-scoped.
    fn old_resource_filters(
        &mut self,
        included: Option<&[String]>,
        excluded: Option<&[String]>,
        cluster: Option<bool>,
    ) {
        put!(self, "\tIncluded:\t{}\n", list_or(included, "*"));
        put!(self, "\tExcluded:\t{}\n", list_or(excluded, "<none>"));
        let scope = tristate(cluster, "excluded", "included", "auto");
        put!(self, "\tCluster-scoped:\t{scope}\n");
    }

    fn selectors(&mut self, selector: Option<&LabelSelector>, or: Option<&[LabelSelector]>) {
        let shown = selector.map_or_else(|| "<none>".to_owned(), format_selector);
        put!(self, "Label selector:\t{shown}\n");
        self.blank();
        let or = match or.filter(|o| !o.is_empty()) {
            None => "<none>".to_owned(),
            Some(list) => list
                .iter()
                .map(format_selector)
                .collect::<Vec<_>>()
                .join(" or "),
        };
        put!(self, "Or label selector:\t{or}\n");
    }
}

/// `text` made safe to print on a terminal.
fn safe(text: &str) -> String {
    hawser_core::errors::terminal_safe(text).into_owned()
}

/// Velero's `BoolPointerString`.
fn tristate<'a>(value: Option<bool>, no: &'a str, yes: &'a str, unset: &'a str) -> &'a str {
    match value {
        None => unset,
        Some(true) => yes,
        Some(false) => no,
    }
}

/// A list joined by `, `, or `empty`.
fn list_or(items: Option<&[String]>, empty: &str) -> String {
    match items {
        Some(items) if !items.is_empty() => items.join(", "),
        _ => empty.to_owned(),
    }
}

/// A duration as Go prints a `metav1.Duration` (`0s` when unset).
fn duration(value: Option<GoDuration>) -> String {
    value.unwrap_or_default().to_string()
}

/// A start or completion time, `<n/a>` when unset.
fn time_or_na(time: Option<&Time>) -> String {
    time.map_or_else(|| "<n/a>".to_owned(), |t| when(Some(t)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn a_restore(status: serde_json::Value) -> hawser_api::Restore {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "r\u{1b}]52;x", "namespace": "velero"},
            "spec": {"backupName": "b"},
            "status": status,
        }))
        .unwrap()
    }

    fn extras(operations: Option<Read<Vec<RestoreOperation>>>) -> RestoreExtras {
        RestoreExtras {
            details: operations.is_some(),
            results: None,
            resources: None,
            operations,
            volumes: Err(Unread::NotFound),
            pod_volumes: Vec::new(),
        }
    }

    #[test]
    fn nothing_from_an_object_reaches_the_terminal_as_a_control_sequence() {
        let odd = a_restore(
            serde_json::json!({"phase": "\u{1b}[2J", "validationErrors": ["\u{1b}]0;t"]}),
        );
        for colour in [false, true] {
            let text = restore(&odd, &extras(None), colour);
            let escapes: Vec<&str> = text
                .match_indices('\u{1b}')
                .map(|(i, _)| &text[i..])
                .collect();
            // Only the colour sequences this module writes: bold name, red validation error.
            for escape in escapes {
                assert!(
                    ["\u{1b}[1m", "\u{1b}[22m", "\u{1b}[31m", "\u{1b}[0m"]
                        .iter()
                        .any(|ours| escape.starts_with(ours)),
                    "{text:?}"
                );
            }
            assert!(text.contains("\\u{1b}[2J"), "{text}");
        }
    }

    #[test]
    fn restore_item_operations_are_counted_or_listed_with_details() {
        let counted = a_restore(serde_json::json!({
            "phase": "Completed",
            "restoreItemOperationsAttempted": 2, "restoreItemOperationsCompleted": 1,
            "restoreItemOperationsFailed": 1,
        }));
        let brief = restore(&counted, &extras(None), false);
        assert!(
            brief.contains("Restore Item Operations:  1 of 2 completed successfully, 1 failed (specify --details for more information)\n"),
            "{brief}"
        );
        let operation: RestoreOperation = serde_json::from_value(serde_json::json!({
            "spec": {"restoreName": "r", "restoreItemAction": "velero.io/dataupload",
                     "resourceIdentifier": {"Group": "", "Resource": "persistentvolumeclaims",
                                            "Namespace": "shop", "Name": "data"},
                     "operationID": "op-1"},
            "status": {"phase": "Failed", "error": "no space", "nCompleted": 1, "nTotal": 3,
                       "operationUnits": "GB"},
        }))
        .unwrap();
        let detailed = restore(&counted, &extras(Some(Ok(vec![operation]))), false);
        assert!(
            detailed.contains(
                "Restore Item Operations:\n  Operation for persistentvolumeclaims shop/data:\n    Restore Item Action Plugin:  velero.io/dataupload\n    Operation ID:                op-1\n    Phase:                       Failed\n    Operation Error:             no space\n    Progress:                    1 of 3 complete (GB)\n"
            ),
            "{detailed}"
        );
        let unread = restore(
            &counted,
            &extras(Some(Err(Unread::Undecodable("eof".into())))),
            false,
        );
        assert!(
            unread.contains("Restore Item Operations:  <error reading operation info: eof>\n"),
            "{unread}"
        );
    }
}
