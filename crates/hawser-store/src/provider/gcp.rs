//! Google Cloud Storage (Velero's velero-plugin-for-gcp).

use object_store::gcp::GoogleCloudStorageBuilder;

use super::{
    Clients, NO_CREDENTIAL, Provider, check_keys, client_options, endpoint, retry, signing,
};
use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::{LocationOptions, LocationSpec};

/// The `spec.config` keys of the provider.
const KEYS: &[&str] = &["serviceAccount", "storeEndpoint"];
const UNSUPPORTED: &[&str] = &["kmsKeyName"];

pub(super) fn build(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Gcp;
    let config = &spec.config;
    check_keys(provider, config, KEYS, UNSUPPORTED)?;
    let mut builder = if spec.credentials.is_some() {
        GoogleCloudStorageBuilder::new()
    } else {
        policy.check_ambient(provider, NO_CREDENTIAL)?;
        // Application default credentials (workload identity, GOOGLE_APPLICATION_CREDENTIALS).
        GoogleCloudStorageBuilder::from_env()
    };
    builder = builder
        .with_bucket_name(&spec.bucket)
        .with_retry(retry(options));
    if let Some(bytes) = &spec.credentials {
        let key = String::from_utf8(bytes.clone()).map_err(|_| ConfigError::Credentials {
            provider: provider.name(),
            source: crate::credentials::CredentialsError::NotText,
        })?;
        builder = builder.with_service_account_key(key);
    }
    let mut client = client_options(spec, options)?;
    if let Some(endpoint) = endpoint(config, "storeEndpoint", &mut client)? {
        // GCS authenticates every request with an OAuth bearer token.
        policy.check_endpoint(spec, "storeEndpoint", endpoint, true)?;
        builder = builder.with_base_url(endpoint);
    }
    builder = builder.with_client_options(client);
    let store = builder.build().map_err(|source| ConfigError::Client {
        provider: provider.name(),
        source,
    })?;
    Ok(signing(store))
}
