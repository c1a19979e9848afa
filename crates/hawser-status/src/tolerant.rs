//! Objects read one at a time, so that one object the server cannot parse does not fail the
//! LIST or the watch of all the others of its kind.
//!
//! The API server stores what its schema lets through: Velero's CRDs keep some fields unpruned
//! (a restore hook's init containers), and an object nested deeper than the JSON parser's limit
//! (128 levels) there is stored and served. Decoded as one document, a LIST holding it fails
//! whole, and so would every watch of its kind: no Backup (or Restore) would start any more.
//! [`Tolerant`] takes each item of a LIST or watch event as raw text first (which has no depth
//! limit), then parses it on its own: an item that does not parse becomes
//! [`Tolerant::Unreadable`], with the name, namespace, resourceVersion and phase read from its
//! shallow fields when they are readable, and the parser's error. Its text is never logged.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::{DynamicResourceScope, ObjectList, Resource};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One object of a LIST or a watch: parsed, or not.
#[derive(Clone, Debug)]
pub enum Tolerant {
    /// The object, parsed.
    Read(DynamicObject),
    /// An object that does not parse as JSON the server can hold.
    Unreadable(Unreadable),
}

/// What is known of an object that does not parse.
#[derive(Clone, Debug, Default)]
pub struct Unreadable {
    /// Its name, namespace, uid, resourceVersion and deletionTimestamp, when they parse on
    /// their own (else empty).
    pub metadata: ObjectMeta,
    /// Its `status.phase`, when readable.
    pub phase: String,
    /// Why it does not parse.
    pub error: String,
}

/// The shallow fields of an object; everything else is skipped without being parsed (the
/// `managedFields` too, which mirror the shape of the object's fields, depth included).
#[derive(Deserialize, Default)]
struct Head {
    #[serde(default)]
    metadata: HeadMeta,
    #[serde(default)]
    status: Option<HeadStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct HeadMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

#[derive(Deserialize, Default)]
struct HeadStatus {
    #[serde(default)]
    phase: Option<String>,
}

impl<'de> Deserialize<'de> for Tolerant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(Self::parse(raw.get()))
    }
}

impl Tolerant {
    /// The object in `text` (see the module docs).
    fn parse(text: &str) -> Self {
        match serde_json::from_str::<DynamicObject>(text) {
            Ok(object) => Self::Read(object),
            Err(e) => {
                let head: Head = serde_json::from_str(text).unwrap_or_default();
                let meta = head.metadata;
                Self::Unreadable(Unreadable {
                    metadata: ObjectMeta {
                        name: meta.name,
                        namespace: meta.namespace,
                        uid: meta.uid,
                        resource_version: meta.resource_version,
                        deletion_timestamp: meta.deletion_timestamp,
                        ..ObjectMeta::default()
                    },
                    phase: head.status.and_then(|s| s.phase).unwrap_or_default(),
                    error: e.to_string(),
                })
            }
        }
    }
}

impl Unreadable {
    /// `namespace/name`, or a placeholder when the name could not be read either.
    pub fn id(&self) -> String {
        match (&self.metadata.namespace, &self.metadata.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => name.clone(),
            (_, None) => "(an object whose name cannot be read)".to_owned(),
        }
    }
}

impl Resource for Tolerant {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(dt)
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(dt)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(dt)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::api_version(dt)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Read(object) => &object.metadata,
            Self::Unreadable(u) => &u.metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Read(object) => &mut object.metadata,
            Self::Unreadable(u) => &mut u.metadata,
        }
    }
}

/// Every object at the collection URL `url` (an `Api`'s `resource_url()`), each read on its
/// own: the ones that parse as JSON, and the ones that do not.
///
/// # Errors
/// The LIST's: the request could not be built or sent, or the API server refused it.
pub async fn list(
    client: &kube::Client,
    url: &str,
    params: &ListParams,
) -> Result<(Vec<Value>, Vec<Unreadable>), kube::Error> {
    let request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    let list: ObjectList<Tolerant> = client.request(request).await?;
    Ok(split(list.items))
}

/// The parsed objects as JSON, and the unreadable ones.
pub(crate) fn split(items: Vec<Tolerant>) -> (Vec<Value>, Vec<Unreadable>) {
    let mut read = Vec::with_capacity(items.len());
    let mut unreadable = Vec::new();
    for item in items {
        match item {
            Tolerant::Read(object) => {
                if let Ok(value) = serde_json::to_value(object) {
                    read.push(value);
                }
            }
            Tolerant::Unreadable(u) => unreadable.push(u),
        }
    }
    (read, unreadable)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    /// An object with a field nested `depth` levels deep.
    fn deep(name: &str, depth: usize) -> String {
        format!(
            r#"{{"apiVersion":"velero.io/v1","kind":"Restore","metadata":{{"name":"{name}","namespace":"velero","resourceVersion":"7","managedFields":[{{"fieldsV1":{nested}}}]}},"status":{{"phase":"New"}},"spec":{{"x":{nested}}}}}"#,
            nested = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
        )
    }

    #[test]
    fn one_object_too_deep_to_parse_leaves_the_others_of_its_list() {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{"resourceVersion":"9"}},"items":[{},{},{}]}}"#,
            deep("first", 3),
            deep("bomb", 10_000),
            deep("last", 3)
        );
        let list: ObjectList<Tolerant> = serde_json::from_str(&body).unwrap();
        let (read, unreadable) = split(list.items);
        let names: Vec<&str> = read
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["first", "last"]);
        assert_eq!(unreadable.len(), 1);
        let bomb = &unreadable[0];
        assert_eq!(bomb.id(), "velero/bomb");
        assert_eq!(bomb.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(bomb.phase, "New");
        assert!(bomb.error.contains("recursion limit"), "{}", bomb.error);
    }

    #[test]
    fn a_watch_event_of_an_unreadable_object_still_decodes() {
        let line = format!(r#"{{"type":"ADDED","object":{}}}"#, deep("bomb", 10_000));
        let event: kube::core::WatchEvent<Tolerant> = serde_json::from_str(&line).unwrap();
        let kube::core::WatchEvent::Added(Tolerant::Unreadable(u)) = event else {
            panic!("not an unreadable object");
        };
        assert_eq!(u.id(), "velero/bomb");
    }
}
