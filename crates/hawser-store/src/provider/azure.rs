//! Azure Blob Storage (Velero's velero-plugin-for-microsoft-azure).

use object_store::azure::MicrosoftAzureBuilder;

use super::{
    Clients, NO_CREDENTIAL, Provider, check_keys, client_options, endpoint, non_empty, retry,
    signing,
};
use crate::credentials::parse_env_file;
use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::{LocationOptions, LocationSpec};

/// The `spec.config` keys of the provider.
const KEYS: &[&str] = &[
    "storageAccount",
    "resourceGroup",
    "subscriptionId",
    "storageAccountKeyEnvVar",
    "storageAccountURI",
    "useAAD",
    "activeDirectoryAuthorityURI",
    "blockSizeInBytes",
];
const UNSUPPORTED: &[&str] = &["encryptionScope"];

pub(super) fn build(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Azure;
    let config = &spec.config;
    check_keys(provider, config, KEYS, UNSUPPORTED)?;
    let account = non_empty(config, "storageAccount").ok_or(ConfigError::Missing {
        field: "spec.config.storageAccount",
        provider: provider.name(),
    })?;
    let mut builder = if spec.credentials.is_some() {
        MicrosoftAzureBuilder::new()
    } else {
        // Managed identity, workload identity or the AZURE_* variables of the server.
        policy.check_ambient(provider, NO_CREDENTIAL)?;
        MicrosoftAzureBuilder::from_env()
    };
    builder = builder
        .with_account(account)
        .with_container_name(&spec.bucket)
        .with_retry(retry(options));
    if let Some(bytes) = &spec.credentials {
        let vars = parse_env_file(bytes).map_err(|source| ConfigError::Credentials {
            provider: provider.name(),
            source,
        })?;
        let var = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(key_var) = non_empty(config, "storageAccountKeyEnvVar") {
            let key = var(key_var).ok_or_else(|| ConfigError::Invalid {
                field: "spec.config.storageAccountKeyEnvVar".to_owned(),
                reason: format!("the credentials file has no variable `{key_var}`"),
            })?;
            builder = builder.with_access_key(key);
        } else {
            match (
                var("AZURE_TENANT_ID"),
                var("AZURE_CLIENT_ID"),
                var("AZURE_CLIENT_SECRET"),
            ) {
                (Some(tenant), Some(client), Some(secret)) => {
                    builder = builder.with_client_secret_authorization(client, secret, tenant);
                }
                // A client ID alone selects a managed or workload identity: the token comes
                // from the server's environment.
                (_, Some(client), None) => {
                    policy.check_ambient(
                        provider,
                        "the credentials file names only AZURE_CLIENT_ID (a managed or workload \
                         identity)",
                    )?;
                    builder = builder.with_client_id(client);
                }
                _ => {
                    return Err(ConfigError::Invalid {
                        field: "spec.credential".to_owned(),
                        reason: "the credentials file needs AZURE_TENANT_ID, AZURE_CLIENT_ID and \
                                 AZURE_CLIENT_SECRET, or set spec.config.storageAccountKeyEnvVar"
                            .to_owned(),
                    });
                }
            }
        }
    }
    let mut client = client_options(spec, options)?;
    // A shared key signs requests; any other credential is an OAuth bearer token.
    let shared_key =
        spec.credentials.is_some() && non_empty(config, "storageAccountKeyEnvVar").is_some();
    if let Some(uri) = endpoint(config, "storageAccountURI", &mut client)? {
        policy.check_endpoint(spec, "storageAccountURI", uri, !shared_key)?;
        builder = builder.with_endpoint(uri.to_owned());
    }
    if let Some(authority) = non_empty(config, "activeDirectoryAuthorityURI") {
        // The client secret itself goes to the authority.
        policy.check_endpoint(spec, "activeDirectoryAuthorityURI", authority, true)?;
        builder = builder.with_authority_host(authority);
    }
    builder = builder.with_client_options(client);
    let store = builder.build().map_err(|source| ConfigError::Client {
        provider: provider.name(),
        source,
    })?;
    Ok(signing(store))
}
