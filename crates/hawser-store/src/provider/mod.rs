//! From a [`LocationSpec`] to an object-store client, one file per provider.
//!
//! Config keys follow Velero's object-store plugins (velero-plugin-for-aws, -gcp,
//! -microsoft-azure); like those plugins, unknown keys are refused with the list of valid ones.

mod aws;
mod azure;
mod filesystem;
mod gcp;

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::signer::Signer;
use object_store::{BackoffConfig, Certificate, ClientOptions, ObjectStore, RetryConfig, TagSet};

use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::{LocationOptions, LocationSpec, Provider};

/// A location's clients: the store, what signs its download URLs (`None` for `filesystem`,
/// whose files hawser server serves itself), and the tags every stored object gets.
pub(crate) struct Clients {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) signer: Option<Arc<dyn Signer>>,
    pub(crate) tags: TagSet,
}

/// The same client storing and signing.
fn signing<S: ObjectStore + Signer>(store: S) -> Clients {
    let store = Arc::new(store);
    Clients {
        store: store.clone(),
        signer: Some(store),
        tags: TagSet::default(),
    }
}

/// Why a location without `spec.credential` needs the server's ambient credentials.
const NO_CREDENTIAL: &str = "spec.credential is not set";

/// Builds the object-store client of `spec`, rooted at the bucket (the prefix is applied by the
/// caller), within what `policy` allows.
pub(crate) fn build(
    provider: Provider,
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    check_bucket(provider, &spec.bucket)?;
    match provider {
        Provider::Aws => aws::build(spec, options, policy),
        Provider::Gcp => gcp::build(spec, options, policy),
        Provider::Azure => azure::build(spec, options, policy),
        Provider::Filesystem => filesystem::build(spec, policy).map(|store| Clients {
            store,
            signer: None,
            tags: TagSet::default(),
        }),
    }
}

fn check_bucket(provider: Provider, bucket: &str) -> Result<(), ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        field: "spec.objectStorage.bucket".to_owned(),
        reason: reason.to_owned(),
    };
    if bucket.is_empty() {
        return Err(ConfigError::Missing {
            field: "spec.objectStorage.bucket",
            provider: provider.name(),
        });
    }
    // Velero rejects a bucket containing `/` unless it is an S3 access-point ARN.
    if bucket.contains('/') && !(provider == Provider::Aws && bucket.starts_with("arn:aws:s3:")) {
        return Err(invalid(
            "it must not contain `/` (put sub-directories in spec.objectStorage.prefix)",
        ));
    }
    if bucket == "." || bucket == ".." {
        return Err(invalid("`.` and `..` are not bucket names"));
    }
    Ok(())
}

fn check_keys(
    provider: Provider,
    config: &BTreeMap<String, String>,
    valid: &[&str],
    unsupported: &[&str],
) -> Result<(), ConfigError> {
    if let Some(key) = config.keys().find(|k| unsupported.contains(&k.as_str())) {
        return Err(ConfigError::Invalid {
            field: format!("spec.config.{key}"),
            reason: format!("hawser does not support this `{}` setting", provider.name()),
        });
    }
    let unknown: Vec<&str> = config
        .keys()
        .map(String::as_str)
        .filter(|k| !valid.contains(k))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::UnknownKeys {
            provider: provider.name(),
            keys: unknown.join(", "),
            valid: valid.join(", "),
        })
    }
}

fn non_empty<'a>(config: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    config.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// Velero's plugins parse booleans with Go's `strconv.ParseBool`.
fn parse_bool(config: &BTreeMap<String, String>, key: &str) -> Result<bool, ConfigError> {
    match non_empty(config, key) {
        None => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(ConfigError::Invalid {
            field: format!("spec.config.{key}"),
            reason: format!("`{other}` is not a boolean (use \"true\" or \"false\")"),
        }),
    }
}

fn client_options(
    spec: &LocationSpec,
    options: &LocationOptions,
) -> Result<ClientOptions, ConfigError> {
    let mut client = ClientOptions::new()
        .with_timeout(options.request_timeout)
        .with_connect_timeout(options.connect_timeout);
    if let Some(pem) = &spec.ca_cert {
        let certs = Certificate::from_pem_bundle(pem).map_err(|source| ConfigError::Invalid {
            field: "spec.objectStorage.caCert".to_owned(),
            reason: format!("not a PEM certificate bundle ({source})"),
        })?;
        for cert in certs {
            client = client.with_root_certificate(cert);
        }
    }
    Ok(client)
}

/// A custom endpoint from `config[key]` (`storeEndpoint`, `storageAccountURI`), without a
/// trailing `/`; an `http://` one allows plain HTTP in `client`.
///
/// # Errors
/// [`ConfigError::Invalid`] when the value is not an `http://` or `https://` URL.
fn endpoint<'a>(
    config: &'a BTreeMap<String, String>,
    key: &str,
    client: &mut ClientOptions,
) -> Result<Option<&'a str>, ConfigError> {
    let Some(url) = non_empty(config, key) else {
        return Ok(None);
    };
    if url.starts_with("http://") {
        *client = std::mem::take(client).with_allow_http(true);
    } else if !url.starts_with("https://") {
        return Err(ConfigError::Invalid {
            field: format!("spec.config.{key}"),
            reason: format!("`{url}` must start with http:// or https://"),
        });
    }
    Ok(Some(url.trim_end_matches('/')))
}

fn retry(options: &LocationOptions) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: options.max_retries,
        retry_timeout: options.retry_timeout,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    /// `storeEndpoint` and `storageAccountURI` take `http://` (a local emulator, a proxy) as
    /// `s3Url` does, and refuse what is not a URL.
    #[test]
    fn custom_endpoints_of_gcp_and_azure() {
        let options = LocationOptions::default();
        let policy = LocationPolicy::default();
        let gcp = |url: &str| {
            LocationSpec::new("gcp", "b")
                .with_config("storeEndpoint", url)
                .with_credentials("{}")
        };
        let azure = |url: &str| {
            LocationSpec::new("azure", "b")
                .with_config("storageAccount", "acct")
                .with_config("storageAccountURI", url)
                .with_config("storageAccountKeyEnvVar", "KEY")
                .with_credentials("KEY=a2V5")
        };
        for (provider, spec, key) in [
            (
                Provider::Gcp,
                gcp as fn(&str) -> LocationSpec,
                "storeEndpoint",
            ),
            (Provider::Azure, azure, "storageAccountURI"),
        ] {
            let mut client = ClientOptions::new();
            let config = spec("http://127.0.0.1:4443/").config;
            assert_eq!(
                endpoint(&config, key, &mut client).unwrap(),
                Some("http://127.0.0.1:4443")
            );
            let Err(err) = build(provider, &spec("127.0.0.1:4443"), &options, &policy) else {
                panic!("{key} without a scheme is refused");
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "spec.config.{key} is invalid: `127.0.0.1:4443` must start with http:// or https://"
                )
            );
        }
    }

    #[test]
    fn provider_names() {
        assert_eq!(Provider::parse("aws").unwrap(), Provider::Aws);
        assert_eq!(Provider::parse("velero.io/aws").unwrap(), Provider::Aws);
        let err = Provider::parse("ibm").unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.provider `ibm` is not supported (supported: aws, gcp, azure, filesystem)"
        );
    }

    #[test]
    fn go_booleans() {
        let mut c = BTreeMap::new();
        c.insert("s3ForcePathStyle".to_owned(), "TRUE".to_owned());
        assert!(parse_bool(&c, "s3ForcePathStyle").unwrap());
        c.insert("s3ForcePathStyle".to_owned(), "yes".to_owned());
        let err = parse_bool(&c, "s3ForcePathStyle").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("spec.config.s3ForcePathStyle is invalid"),
            "{err}"
        );
        assert!(!parse_bool(&c, "absent").unwrap());
    }
}
