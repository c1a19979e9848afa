//! Which requests a fault applies to: the [`Matcher`] every request-level fault carries, what it
//! sees of a request ([`RequestKey`]), and the builder methods shared by the fault kinds.

use serde::{Deserialize, Serialize};

/// Which requests a fault applies to; every empty/absent matcher matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Matcher {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// Resource plurals, e.g. `backups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `status`, or `""` to match only main-resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Matcher {
    pub fn matches(&self, req: &RequestKey<'_>) -> bool {
        (self.verbs.is_empty() || self.verbs.iter().any(|v| v == req.verb))
            && (self.resources.is_empty() || self.resources.iter().any(|r| r == req.resource))
            && self.name.as_deref().is_none_or(|n| n == req.name)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == req.subresource)
            && self.namespace.as_deref().is_none_or(|n| n == req.namespace)
    }
}

/// What a fault matcher sees of a request.
#[derive(Debug, Clone, Copy)]
pub struct RequestKey<'a> {
    pub verb: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
}

/// The matcher builder methods (`verbs`, `resources`, `name`, `namespace`, `subresource`) of a
/// fault kind with a `matcher: Matcher` field.
macro_rules! matcher_builders {
    ($fault:ty) => {
        impl $fault {
            /// Only requests with one of these verbs.
            #[must_use]
            pub fn verbs(mut self, verbs: &[&str]) -> Self {
                self.matcher.verbs = verbs.iter().map(|s| (*s).to_string()).collect();
                self
            }
            /// Only requests for one of these resource plurals.
            #[must_use]
            pub fn resources(mut self, resources: &[&str]) -> Self {
                self.matcher.resources = resources.iter().map(|s| (*s).to_string()).collect();
                self
            }
            /// Only requests for the object with this name.
            #[must_use]
            pub fn name(mut self, name: &str) -> Self {
                self.matcher.name = Some(name.to_string());
                self
            }
            /// Only requests in this namespace.
            #[must_use]
            pub fn namespace(mut self, namespace: &str) -> Self {
                self.matcher.namespace = Some(namespace.to_string());
                self
            }
            /// Only requests for this subresource (`""` = main-resource requests only).
            #[must_use]
            pub fn subresource(mut self, subresource: &str) -> Self {
                self.matcher.subresource = Some(subresource.to_string());
                self
            }
        }
    };
}

/// The lifetime builder methods (`count`, `for_duration`) of a fault kind with `count` and
/// `seconds` fields.
macro_rules! limit_builders {
    ($fault:ty) => {
        impl $fault {
            /// Apply to the next `count` matching requests only.
            #[must_use]
            pub fn count(mut self, count: u64) -> Self {
                self.count = Some(count);
                self
            }
            /// Keep the fault for this long (default: until removed or cleared).
            #[must_use]
            pub fn for_duration(mut self, d: std::time::Duration) -> Self {
                self.seconds = Some(d.as_secs_f64());
                self
            }
        }
    };
}

pub(crate) use {limit_builders, matcher_builders};
