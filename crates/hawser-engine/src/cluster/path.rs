//! URL paths of collections and objects. Every segment that comes from a spec or an archive is
//! percent-encoded by [`encode`], which query values share.

use hawser_core::selection::ApiResource;

/// Percent-encodes a path segment or query value (everything but RFC 3986 unreserved
/// characters).
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where the objects of one type live: `/api/v1` or `/apis/<group>/<version>`, the plural,
/// and whether it is namespaced.
#[derive(Clone, Debug)]
pub(crate) struct Collection {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Collection {
    /// The collection of a discovered type, at its preferred version.
    pub(crate) fn of(r: &ApiResource) -> Self {
        Self {
            group: r.group.clone(),
            version: r.version.clone(),
            plural: r.plural.clone(),
            namespaced: r.namespaced,
        }
    }

    /// `apiVersion` of the objects at this version.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection URL (in `namespace` for namespaced types).
    pub(crate) fn path(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", encode(&self.version))
        } else {
            format!("/apis/{}/{}", encode(&self.group), encode(&self.version))
        };
        match namespace {
            Some(ns) => format!("{base}/namespaces/{}/{}", encode(ns), self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// The URL of one object.
    pub(crate) fn item_path(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{}", self.path(namespace), encode(name))
    }
}

/// The path of a Namespace object.
pub(crate) fn namespace_path(name: &str) -> String {
    format!("/api/v1/namespaces/{}", encode(name))
}

/// The path of a CustomResourceDefinition.
pub(crate) fn crd_path(name: &str) -> String {
    format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}",
        encode(name)
    )
}

/// A LIST URL: `path` with `limit`, an optional label selector and continue token.
pub(crate) fn page_url(path: &str, limit: u32, selector: &str, token: Option<&str>) -> String {
    let mut url = format!("{path}?limit={limit}");
    if !selector.is_empty() {
        url.push_str("&labelSelector=");
        url.push_str(&encode(selector));
    }
    if let Some(token) = token {
        url.push_str("&continue=");
        url.push_str(&encode(token));
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collection(group: &str, namespaced: bool) -> Collection {
        Collection {
            group: group.to_owned(),
            version: "v1".to_owned(),
            plural: "things".to_owned(),
            namespaced,
        }
    }

    #[test]
    fn paths_of_core_and_group_types() {
        assert_eq!(
            collection("", true).path(Some("shop")),
            "/api/v1/namespaces/shop/things"
        );
        assert_eq!(
            collection("example.com", false).path(None),
            "/apis/example.com/v1/things"
        );
        assert_eq!(collection("", false).api_version(), "v1");
        assert_eq!(
            collection("example.com", false).api_version(),
            "example.com/v1"
        );
    }

    #[test]
    fn untrusted_segments_cannot_leave_their_place() {
        let c = collection("", true);
        assert_eq!(
            c.item_path(Some("../kube-system"), "a/b?c"),
            "/api/v1/namespaces/..%2Fkube-system/things/a%2Fb%3Fc"
        );
        assert_eq!(namespace_path("x y"), "/api/v1/namespaces/x%20y");
    }

    #[test]
    fn list_urls_encode_selector_and_token() {
        assert_eq!(
            page_url("/api/v1/pods", 500, "", None),
            "/api/v1/pods?limit=500"
        );
        assert_eq!(
            page_url("/api/v1/pods", 2, "app in (a,b)", Some("t=1&x")),
            "/api/v1/pods?limit=2&labelSelector=app%20in%20%28a%2Cb%29&continue=t%3D1%26x"
        );
    }
}
