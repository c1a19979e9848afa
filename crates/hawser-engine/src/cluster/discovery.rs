//! Discovery: the preferred version of every served group, read from the legacy discovery
//! documents (`/api`, `/api/v1`, `/apis`, `/apis/<group>/<preferred>`), into a
//! [`Catalogue`]. The raw documents are used because they carry short and singular names,
//! which resource filters may use.

use futures::{StreamExt, TryStreamExt};
use hawser_core::selection::{ApiResource, Catalogue};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList, APIVersions};
use kube::Client;

/// Group documents fetched at the same time.
const CONCURRENT_GROUPS: usize = 4;

/// A discovery document could not be read.
#[derive(Debug, thiserror::Error)]
#[error("discovering the API resources ({path})")]
pub struct DiscoveryError {
    /// The discovery document requested.
    pub path: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

async fn get<T: serde::de::DeserializeOwned>(
    client: &Client,
    path: &str,
) -> Result<T, DiscoveryError> {
    let failed = |source| DiscoveryError {
        path: path.to_owned(),
        source,
    };
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| failed(kube::Error::HttpError(e)))?;
    client.request::<T>(request).await.map_err(failed)
}

/// Builds the catalogue: the core group first, then the groups in the server's order, each at
/// its preferred version; subresources are left out.
///
/// # Errors
/// [`DiscoveryError`] naming the document that could not be read.
pub async fn catalogue(client: &Client) -> Result<Catalogue, DiscoveryError> {
    let core: APIVersions = get(client, "/api").await?;
    let mut paths: Vec<(String, String, String)> = Vec::new();
    // The core group serves one version in practice; take the first (Kubernetes lists `v1`).
    if let Some(version) = core.versions.first() {
        paths.push((String::new(), version.clone(), format!("/api/{version}")));
    }
    let groups: APIGroupList = get(client, "/apis").await?;
    for group in groups.groups {
        let version = match group
            .preferred_version
            .as_ref()
            .or_else(|| group.versions.first())
        {
            Some(v) => v.version.clone(),
            None => continue,
        };
        paths.push((
            group.name.clone(),
            version.clone(),
            format!("/apis/{}/{version}", group.name),
        ));
    }
    let lists: Vec<(String, String, APIResourceList)> = futures::stream::iter(paths)
        .map(|(group, version, path)| async move {
            let list: APIResourceList = get(client, &path).await?;
            Ok::<_, DiscoveryError>((group, version, list))
        })
        .buffered(CONCURRENT_GROUPS)
        .try_collect()
        .await?;
    let mut resources = Vec::new();
    for (group, version, list) in lists {
        for r in list.resources {
            if r.name.contains('/') {
                continue;
            }
            resources.push(ApiResource {
                group: group.clone(),
                version: version.clone(),
                kind: r.kind,
                plural: r.name,
                singular: r.singular_name,
                short_names: r.short_names.unwrap_or_default(),
                namespaced: r.namespaced,
                verbs: r.verbs,
            });
        }
    }
    Ok(Catalogue::new(resources))
}
