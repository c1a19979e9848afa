//! Flags and helpers shared by the commands: `key=value` lists and Go durations, label
//! selectors, labels and annotations of the new object, list flags, and the lookups of
//! referenced objects.

use std::collections::BTreeMap;

use clap::Args;
use hawser_api::{BackupStorageLocation, GoDuration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ListParams;
use kube::api::ObjectMeta;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::CliError;
use super::label_selector::{parse_or_selectors, parse_selector};
use super::output::{OutputFormat, Table, encode};

/// Parses `key=value,key=value` lists (already split on commas by clap).
pub fn parse_key_values(
    flag: &'static str,
    items: &[String],
) -> Result<BTreeMap<String, String>, CliError> {
    let mut map = BTreeMap::new();
    for item in items.iter().filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(CliError::usage(flag, format!("{item:?} is not key=value")));
        };
        if key.trim().is_empty() {
            return Err(CliError::usage(flag, format!("{item:?} has an empty key")));
        }
        map.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    Ok(map)
}

/// Parses a Go duration flag value.
pub fn parse_duration(flag: &'static str, value: &str) -> Result<GoDuration, CliError> {
    GoDuration::parse(value).map_err(|err| {
        CliError::usage(
            flag,
            format!("{value:?} is not a duration like 90s or 1h30m: {err}"),
        )
    })
}

/// `-l/--selector` and `--or-selector` of `create`.
#[derive(Args, Debug, Clone, Default)]
pub struct SelectorArgs {
    /// Only items whose labels match this selector (`app=web,tier!=db,env in (a,b),!legacy`).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Items matching any of these selectors, separated by ` or ` (`"a=b or c=d"`); cannot be
    /// combined with --selector.
    #[arg(long)]
    pub or_selector: Option<String>,
}

/// The selectors of the spec: `labelSelector`, `orLabelSelectors`.
pub type Selectors = (Option<LabelSelector>, Option<Vec<LabelSelector>>);

impl SelectorArgs {
    /// Parses both flags; setting both is a usage error, as Velero's server would refuse it.
    pub fn resolve(&self) -> Result<Selectors, CliError> {
        if self.selector.is_some() && self.or_selector.is_some() {
            return Err(CliError::usage(
                "--or-selector",
                "it cannot be combined with --selector; use one of them",
            ));
        }
        let selector = self
            .selector
            .as_deref()
            .map(|s| parse_selector(s).map_err(|e| CliError::usage("--selector", e)))
            .transpose()?;
        let or_selectors = self
            .or_selector
            .as_deref()
            .map(|s| parse_or_selectors(s).map_err(|e| CliError::usage("--or-selector", e)))
            .transpose()?;
        Ok((selector, or_selectors))
    }
}

/// `--labels` and `--annotations` of the created object.
#[derive(Args, Debug, Clone, Default)]
pub struct MetaArgs {
    /// Labels of the new object, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Annotations of the new object, `key=value,...`.
    #[arg(long, value_delimiter = ',')]
    pub annotations: Vec<String>,
}

impl MetaArgs {
    /// The metadata of a new object `namespace/name` with these labels and annotations.
    pub fn metadata(&self, namespace: &str, name: &str) -> Result<ObjectMeta, CliError> {
        let labels = parse_key_values("--labels", &self.labels)?;
        let annotations = parse_key_values("--annotations", &self.annotations)?;
        Ok(ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: non_empty_map(labels),
            annotations: non_empty_map(annotations),
            ..ObjectMeta::default()
        })
    }
}

fn non_empty_map(map: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!map.is_empty()).then_some(map)
}

/// A list flag as a spec field: empty items dropped, `None` when nothing is left.
pub fn list(values: &[String]) -> Option<Vec<String>> {
    let items: Vec<String> = values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect();
    (!items.is_empty()).then_some(items)
}

/// Reads `name`, turning absence into [`CliError::NotFound`] with `hint`.
pub async fn get_required<K>(
    api: &Api<K>,
    object: String,
    name: &str,
    hint: String,
) -> Result<K, CliError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api
        .get_opt(name)
        .await
        .map_err(|err| CliError::api("get", object.clone(), err))?
    {
        Some(found) => Ok(found),
        None => Err(CliError::NotFound { object, hint }),
    }
}

/// Checks that the BackupStorageLocation `location` exists (`--storage-location` of `backup
/// create` and `schedule create`, as Velero's CLI checks it).
pub async fn require_location(
    client: &kube::Client,
    namespace: &str,
    location: &str,
) -> Result<(), CliError> {
    let locations: Api<BackupStorageLocation> = Api::namespaced(client.clone(), namespace);
    get_required(
        &locations,
        format!("BackupStorageLocation {namespace}/{location}"),
        location,
        format!(
            "list the locations with `hawser backup-location get`, or create one with \
             `hawser backup-location create {location} --provider P --bucket B`"
        ),
    )
    .await
    .map(drop)
}

/// The objects of a `get`/`describe`: the named ones (each must exist), or all that match
/// `selector` when no name is given. `kind` names the objects in messages (`Backup`), `command`
/// is the command group of the hint (`backup`).
pub async fn fetch<K>(
    api: &Api<K>,
    namespace: &str,
    (kind, command): (&str, &str),
    names: &[String],
    selector: Option<&str>,
) -> Result<Vec<K>, CliError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    if !names.is_empty() && selector.is_some() {
        return Err(CliError::usage(
            "--selector",
            "it cannot be combined with names",
        ));
    }
    if names.is_empty() {
        let mut params = ListParams::default();
        let checked = selector.map(super::label_selector::checked_list_selector);
        if let Some(selector) = checked.transpose()?.flatten() {
            params = params.labels(selector);
        }
        let object = format!("{kind}s in namespace {namespace}");
        return Ok(api
            .list(&params)
            .await
            .map_err(|err| CliError::api("list", object, err))?
            .items);
    }
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        found.push(
            get_required(
                api,
                format!("{kind} {namespace}/{name}"),
                name,
                format!("list them with `hawser {command} get`"),
            )
            .await?,
        );
    }
    Ok(found)
}

/// How a `get` prints: `-o` and `--show-labels`.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct Listing {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Show each object's labels in a last column of the table.
    #[arg(long)]
    pub show_labels: bool,
}

/// Prints the objects of a `get`: one object as itself when one name was asked for, otherwise a
/// `v1` List. `table` renders the table format.
pub fn print_objects<K: Serialize + Resource>(
    objects: &[K],
    single: bool,
    listing: &Listing,
    table: impl FnOnce(&[K]) -> Table,
) -> Result<(), CliError> {
    match (listing.output, objects) {
        (OutputFormat::Table, _) if listing.show_labels => print!(
            "{}",
            table(objects).with_labels(objects.iter().map(|o| o.meta().labels.as_ref()))
        ),
        (OutputFormat::Table, _) => print!("{}", table(objects)),
        (format, [one]) if single => print!("{}", encode(one, format)?),
        (format, _) => print!(
            "{}",
            encode(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}),
                format
            )?
        ),
    }
    Ok(())
}

/// The reference to ConfigMap `name` of a Backup's `resourcePolicy` or a Restore's
/// `resourceModifier`, as Velero's CLI writes it: the core group, kind `configmap`.
pub fn config_map_ref(name: &str) -> k8s_openapi::api::core::v1::TypedLocalObjectReference {
    k8s_openapi::api::core::v1::TypedLocalObjectReference {
        api_group: Some(String::new()),
        kind: hawser_core::restore::modifiers::CONFIGMAP_KIND.to_owned(),
        name: name.to_owned(),
    }
}

/// The metadata of a new object of the CLI: its name and namespace, and its labels when there
/// are any.
pub fn new_object_meta(
    name: &str,
    namespace: &str,
    labels: std::collections::BTreeMap<String, String>,
) -> kube::api::ObjectMeta {
    kube::api::ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: (!labels.is_empty()).then_some(labels),
        ..kube::api::ObjectMeta::default()
    }
}
