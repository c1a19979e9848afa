//! From a BackupStorageLocation name to an open [`Location`]: read the BSL, the Secret key its
//! `spec.credential` names and its CA certificate Secret, then build the store client.

use hawser_api::{BackupStorageLocation, BackupStorageLocationPhase, BackupStorageLocationSpec};
use hawser_core::errors::chain_text;
use std::sync::Arc;

use hawser_store::{
    ConfigError, FileUrls, Location, LocationOptions, LocationPolicy, LocationSpec,
};
use k8s_openapi::api::core::v1::{Secret, SecretKeySelector};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};

/// Why a storage location cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    /// No BackupStorageLocation of that name in the server namespace.
    #[error("BackupStorageLocation {name} does not exist in namespace {namespace}")]
    NotFound {
        /// The name looked up.
        name: String,
        /// The server namespace.
        namespace: String,
    },
    /// The BSL or one of its Secrets could not be read from the API.
    #[error("reading {what} failed")]
    Api {
        /// What was being read.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A Secret or Secret key the BSL names does not exist.
    #[error("{what} does not exist")]
    MissingSecret {
        /// `Secret ns/name key k`.
        what: String,
    },
    /// The BSL object does not parse (e.g. a `validationFrequency` that is not a Go duration).
    #[error("BackupStorageLocation {name} cannot be read")]
    Malformed {
        /// The BSL.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The BSL's spec cannot describe a store.
    #[error("BackupStorageLocation {name} is not usable")]
    Config {
        /// The BSL.
        name: String,
        /// Which field is wrong.
        #[source]
        source: ConfigError,
    },
}

impl LocationError {
    /// A stable short category for logs and Event reasons.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "LocationNotFound",
            Self::Api { .. } => "ApiUnavailable",
            Self::MissingSecret { .. } => "SecretNotFound",
            Self::Config { .. } => "InvalidLocationConfig",
            Self::Malformed { .. } => "MalformedLocation",
        }
    }

    /// The whole cause chain in one line.
    #[must_use]
    pub fn full_message(&self) -> String {
        chain_text(self)
    }

    /// True when the API could not answer: trying again later may succeed.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Api { .. })
    }
}

/// Reads BSLs and their Secrets in the server namespace.
#[derive(Clone)]
pub struct Locations {
    client: kube::Client,
    namespace: String,
    /// The filesystem roots and ambient credentials locations may use.
    policy: Arc<LocationPolicy>,
    /// Who serves the files of `filesystem` locations (hawser server's download listener).
    files: Option<Arc<FileUrls>>,
}

impl Locations {
    /// BSLs in `namespace`, read through `client`, opened within `policy`.
    #[must_use]
    pub fn new(client: kube::Client, namespace: String, policy: LocationPolicy) -> Self {
        Self {
            client,
            namespace,
            policy: Arc::new(policy),
            files: None,
        }
    }

    /// These locations with the files of `filesystem` ones served through `files`, so that
    /// they have download URLs ([`Location::download_url`]).
    #[must_use]
    pub fn served_by(mut self, files: Arc<FileUrls>) -> Self {
        self.files = Some(files);
        self
    }

    /// The BSL named `name`; `Ok(None)` when it does not exist. It is read untyped and parsed
    /// here, so that a malformed BSL is an error of its own, not an API outage.
    ///
    /// # Errors
    /// [`LocationError::Api`] when the API cannot answer, [`LocationError::Malformed`] when the
    /// object does not parse.
    pub async fn get(&self, name: &str) -> Result<Option<BackupStorageLocation>, LocationError> {
        // No object has such a name (and no request can be built for some of them).
        if !hawser_core::label::is_dns_subdomain(name) {
            return Ok(None);
        }
        let resource = ApiResource::erase::<BackupStorageLocation>(&());
        let object =
            Api::<DynamicObject>::namespaced_with(self.client.clone(), &self.namespace, &resource)
                .get_opt(name)
                .await
                .map_err(|source| LocationError::Api {
                    what: format!("BackupStorageLocation {}/{name}", self.namespace),
                    source,
                })?;
        let Some(object) = object else {
            return Ok(None);
        };
        serde_json::to_value(object)
            .and_then(serde_json::from_value)
            .map(Some)
            .map_err(|source| LocationError::Malformed {
                name: name.to_owned(),
                source,
            })
    }

    /// The location of a Backup that names none: the BSL with `spec.default: true` (the most
    /// recently created when several are), else `flag` (`--default-backup-storage-location`),
    /// Velero's order.
    ///
    /// # Errors
    /// [`LocationError::Api`] when the API cannot answer.
    pub async fn default_name(&self, flag: &str) -> Result<String, LocationError> {
        let resource = ApiResource::erase::<BackupStorageLocation>(&());
        let list =
            Api::<DynamicObject>::namespaced_with(self.client.clone(), &self.namespace, &resource)
                .list(&kube::api::ListParams::default())
                .await
                .map_err(|source| LocationError::Api {
                    what: format!("BackupStorageLocations in {}", self.namespace),
                    source,
                })?;
        let defaults = ranked_defaults(list.items.iter());
        Ok(defaults
            .into_iter()
            .next()
            .unwrap_or_else(|| flag.to_owned()))
    }

    /// The BSL named `name`, opened.
    ///
    /// # Errors
    /// [`LocationError`].
    pub async fn open_named(&self, name: &str) -> Result<Location, LocationError> {
        let bsl = self
            .get(name)
            .await?
            .ok_or_else(|| LocationError::NotFound {
                name: name.to_owned(),
                namespace: self.namespace.clone(),
            })?;
        self.open(name, &bsl.spec).await
    }

    /// A store client for `spec` (the BSL named `name`).
    ///
    /// # Errors
    /// [`LocationError`].
    pub async fn open(
        &self,
        name: &str,
        spec: &BackupStorageLocationSpec,
    ) -> Result<Location, LocationError> {
        let (credentials, endorsed) = match &spec.credential {
            Some(sel) => {
                let (bytes, endorsed) = self.secret_key(sel, name).await?;
                (Some(bytes), endorsed)
            }
            None => (None, false),
        };
        let ca_cert = match &spec.object_storage.ca_cert_ref {
            Some(sel) => Some(self.secret_key(sel, name).await?.0),
            None => None,
        };
        let config_error = |source| LocationError::Config {
            name: name.to_owned(),
            source,
        };
        // The archive key is the server's business, not the provider's: taken out of the config
        // the provider checks.
        let mut bsl_spec = spec.clone();
        let archive_secret = bsl_spec
            .config
            .as_mut()
            .and_then(|c| c.remove(ARCHIVE_KEY_CONFIG));
        let archive_key = match archive_secret {
            Some(reference) => Some(self.archive_key(name, &reference).await?),
            None => None,
        };
        let mut spec =
            LocationSpec::from_bsl(&bsl_spec, credentials, ca_cert).map_err(config_error)?;
        spec.endpoints_endorsed = endorsed;
        let mut location = Location::with_policy(&spec, LocationOptions::default(), &self.policy)
            .map_err(config_error)?;
        if let Some(key) = archive_key {
            location = location.with_archive_key(key);
        }
        Ok(match &self.files {
            Some(files) => location.served_by(files.clone(), name),
            None => location,
        })
    }

    /// The BSL `name` opened, when it is `Available` (one never validated is validated now).
    /// `Err(Some(why))`: it cannot be used, and `why` says so ("BackupStorageLocation x is in
    /// Unavailable status: …"); `Err(None)`: the API could not answer.
    pub async fn usable(
        &self,
        name: &str,
        bsl: &BackupStorageLocation,
    ) -> Result<Location, Option<String>> {
        let location = match self.open(name, &bsl.spec).await {
            Ok(l) => l,
            Err(e) if e.is_transient() => return Err(None),
            Err(e) => {
                return Err(Some(format!(
                    "BackupStorageLocation {name} cannot be used: {}",
                    e.full_message()
                )));
            }
        };
        let status = bsl.status.as_ref();
        let message = match status.and_then(|s| s.phase.clone()) {
            Some(BackupStorageLocationPhase::Available) => return Ok(location),
            None => match hawser_store::validate(&location).await {
                Ok(()) => return Ok(location),
                Err(e) => e.reason(),
            },
            Some(_) => status.and_then(|s| s.message.clone()).unwrap_or_default(),
        };
        let mut why = format!("BackupStorageLocation {name} is in Unavailable status");
        if !message.is_empty() {
            why.push_str(": ");
            why.push_str(&message);
        }
        Err(Some(why))
    }

    /// The archive key of the location `location`, from `reference` (`<secret>/<key>` in the
    /// server namespace).
    async fn archive_key(
        &self,
        location: &str,
        reference: &str,
    ) -> Result<hawser_store::crypt::ArchiveKey, LocationError> {
        let invalid = |reason: String| LocationError::Config {
            name: location.to_owned(),
            source: ConfigError::Invalid {
                field: format!("spec.config.{ARCHIVE_KEY_CONFIG}"),
                reason,
            },
        };
        let Some((secret, key)) = reference
            .split_once('/')
            .filter(|(s, k)| !s.is_empty() && !k.is_empty())
        else {
            return Err(invalid(format!(
                "`{reference}` is not `<secret name>/<key>`"
            )));
        };
        let selector = SecretKeySelector {
            name: secret.to_owned(),
            key: key.to_owned(),
            optional: None,
        };
        let (bytes, _) = self.secret_key(&selector, location).await?;
        hawser_store::crypt::ArchiveKey::from_secret(&bytes).map_err(|why| {
            invalid(format!(
                "Secret {}/{secret} key {key} is not an archive key: {why}",
                self.namespace
            ))
        })
    }

    /// The bytes of the Secret key `sel`, and whether the Secret names the location `location`
    /// in its [`LOCATIONS_ANNOTATION`].
    async fn secret_key(
        &self,
        sel: &SecretKeySelector,
        location: &str,
    ) -> Result<(Vec<u8>, bool), LocationError> {
        let what = format!("Secret {}/{} key {}", self.namespace, sel.name, sel.key);
        let secret = Api::<Secret>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(&sel.name)
            .await
            .map_err(|source| LocationError::Api {
                what: what.clone(),
                source,
            })?
            .ok_or_else(|| LocationError::MissingSecret { what: what.clone() })?;
        let endorsed = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LOCATIONS_ANNOTATION))
            .is_some_and(|names| names_location(names, location));
        secret
            .data
            .and_then(|mut d| d.remove(&sel.key))
            .map(|b| (b.0, endorsed))
            .ok_or(LocationError::MissingSecret { what })
    }
}

/// `spec.config` key of a location whose backup archives are sealed: `<secret>/<key>`, a Secret
/// of the server namespace holding 32 bytes (or their base64). See [`hawser_store::crypt`].
pub const ARCHIVE_KEY_CONFIG: &str = "archiveEncryptionSecret";

/// Annotation of a credential Secret: the BackupStorageLocations (comma-separated names, or
/// `*`) whose custom endpoints may receive its credentials.
pub const LOCATIONS_ANNOTATION: &str = "hawser.io/locations";

/// Whether the annotation value `names` names `location`.
fn names_location(names: &str, location: &str) -> bool {
    names
        .split(',')
        .map(str::trim)
        .any(|n| n == "*" || n == location)
}

/// The names of the locations with `spec.default: true`, the one that is the default first:
/// the most recently created (then the greatest name, so that the choice never depends on
/// listing order). Velero keeps the newest and turns the others' flag off.
pub(crate) fn ranked_defaults<'a>(
    locations: impl Iterator<Item = &'a DynamicObject>,
) -> Vec<String> {
    let mut defaults: Vec<(Option<jiff::Timestamp>, String)> = locations
        .filter(|l| {
            l.data
                .pointer("/spec/default")
                .and_then(serde_json::Value::as_bool)
                == Some(true)
        })
        .filter_map(|l| {
            let created = l.metadata.creation_timestamp.as_ref().map(|t| t.0);
            l.metadata.name.clone().map(|n| (created, n))
        })
        .collect();
    defaults.sort_by(|a, b| b.cmp(a));
    defaults.into_iter().map(|(_, name)| name).collect()
}

#[cfg(test)]
#[allow(clippy::expect_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn bsl(name: &str, default: Option<bool>, created: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"default": default, "provider": "aws", "objectStorage": {"bucket": "b"}}
        }))
        .expect("a BSL object")
    }

    #[test]
    fn the_newest_default_wins() {
        let list = [
            bsl("old", Some(true), "2026-01-01T00:00:00Z"),
            bsl("plain", None, "2026-06-01T00:00:00Z"),
            bsl("new", Some(true), "2026-03-01T00:00:00Z"),
            bsl("off", Some(false), "2026-07-01T00:00:00Z"),
        ];
        assert_eq!(ranked_defaults(list.iter()), ["new", "old"]);
        assert!(ranked_defaults(list[1..2].iter()).is_empty());
    }
}
