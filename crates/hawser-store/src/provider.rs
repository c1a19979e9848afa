//! From a [`LocationSpec`] to an object-store client, one function per provider.
//!
//! Config keys follow Velero's object-store plugins (velero-plugin-for-aws, -gcp,
//! -microsoft-azure); like those plugins, unknown keys are refused with the list of valid ones.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::signer::Signer;
use object_store::{BackoffConfig, Certificate, ClientOptions, ObjectStore, RetryConfig, TagSet};

use crate::credentials::{parse_aws_credentials, parse_env_file};
use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::{LocationOptions, LocationSpec};

/// The providers this crate implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Amazon S3 and S3-compatible servers.
    Aws,
    /// Google Cloud Storage.
    Gcp,
    /// Azure Blob Storage.
    Azure,
    /// A local directory (hawser's own provider).
    Filesystem,
}

impl Provider {
    /// Every provider, in the order of the docs.
    pub const ALL: [Self; 4] = [Self::Aws, Self::Gcp, Self::Azure, Self::Filesystem];

    /// The object-store plugin name a Velero server would report for this provider
    /// (`velero.io/aws`); [`parse`](Self::parse) accepts it as `spec.provider` too.
    #[must_use]
    pub fn plugin_name(self) -> String {
        format!("velero.io/{}", self.name())
    }

    /// Parses `spec.provider`. Velero's `velero.io/<name>` plugin names are accepted too.
    ///
    /// # Errors
    /// [`ConfigError::UnknownProvider`].
    pub fn parse(provider: &str) -> Result<Self, ConfigError> {
        match provider.strip_prefix("velero.io/").unwrap_or(provider) {
            "aws" => Ok(Self::Aws),
            "gcp" => Ok(Self::Gcp),
            "azure" => Ok(Self::Azure),
            "filesystem" => Ok(Self::Filesystem),
            _ => Err(ConfigError::UnknownProvider {
                provider: provider.to_owned(),
            }),
        }
    }

    /// The provider's name as written in `spec.provider`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Gcp => "gcp",
            Self::Azure => "azure",
            Self::Filesystem => "filesystem",
        }
    }
}

pub(crate) const AWS_KEYS: &[&str] = &[
    "region",
    "s3Url",
    "s3ForcePathStyle",
    "insecureSkipTLSVerify",
    "profile",
    "publicUrl",
    "serverSideEncryption",
    "kmsKeyId",
    "enableSharedConfig",
    "checksumAlgorithm",
    "tagging",
];
/// Keys Velero's AWS plugin knows that hawser refuses rather than silently ignores.
const AWS_UNSUPPORTED: &[&str] = &["customerKeyEncryptionFile"];
pub(crate) const GCP_KEYS: &[&str] = &["serviceAccount", "storeEndpoint"];
const GCP_UNSUPPORTED: &[&str] = &["kmsKeyName"];
pub(crate) const AZURE_KEYS: &[&str] = &[
    "storageAccount",
    "resourceGroup",
    "subscriptionId",
    "storageAccountKeyEnvVar",
    "storageAccountURI",
    "useAAD",
    "activeDirectoryAuthorityURI",
    "blockSizeInBytes",
];
const AZURE_UNSUPPORTED: &[&str] = &["encryptionScope"];
pub(crate) const FILESYSTEM_KEYS: &[&str] = &["root"];

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
        Provider::Aws => aws(spec, options, policy),
        Provider::Gcp => gcp(spec, options, policy),
        Provider::Azure => azure(spec, options, policy),
        Provider::Filesystem => filesystem(spec, policy).map(|store| Clients {
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

fn aws(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Aws;
    let config = &spec.config;
    check_keys(provider, config, AWS_KEYS, AWS_UNSUPPORTED)?;
    let s3_url = non_empty(config, "s3Url");
    let path_style = parse_bool(config, "s3ForcePathStyle")?;
    let insecure = parse_bool(config, "insecureSkipTLSVerify")?;
    let region = match (non_empty(config, "region"), s3_url) {
        (Some(region), _) => region.to_owned(),
        // S3-compatible servers mostly ignore the region; the SDKs sign with us-east-1 then.
        (None, Some(_)) => "us-east-1".to_owned(),
        (None, None) => {
            return Err(ConfigError::Missing {
                field: "spec.config.region",
                provider: provider.name(),
            });
        }
    };

    // Without a credentials Secret the usual AWS environment applies (env vars, web identity,
    // instance metadata), as with Velero's plugin, when the server allows it.
    let mut builder = if spec.credentials.is_some() {
        AmazonS3Builder::new()
    } else {
        policy.check_ambient(provider, NO_CREDENTIAL)?;
        AmazonS3Builder::from_env()
    };
    builder = builder
        .with_bucket_name(&spec.bucket)
        .with_region(region)
        .with_retry(retry(options));

    if let Some(bytes) = &spec.credentials {
        let profile = non_empty(config, "profile").unwrap_or("default");
        let creds =
            parse_aws_credentials(bytes, profile).map_err(|source| ConfigError::Credentials {
                provider: provider.name(),
                source,
            })?;
        builder = builder
            .with_access_key_id(creds.access_key_id)
            .with_secret_access_key(creds.secret_access_key);
        if let Some(token) = creds.session_token {
            builder = builder.with_token(token);
        }
    }

    let mut client = client_options(spec, options)?;
    if let Some(url) = s3_url {
        policy.check_endpoint(spec, "s3Url", url, false)?;
        let endpoint = S3Endpoint::parse(url, "s3Url")?;
        if endpoint.scheme == "http" {
            client = client.with_allow_http(true);
        }
        builder = endpoint.apply(builder, &spec.bucket, path_style)?;
    } else {
        builder = builder.with_virtual_hosted_style_request(!path_style);
    }
    if insecure {
        client = client.with_allow_invalid_certificates(true);
    }
    builder = builder.with_client_options(client);
    // `publicUrl`: download URLs are signed for this endpoint instead of `s3Url` (the address
    // clients outside the cluster reach the same storage at), as Velero's AWS plugin does.
    let public = non_empty(config, "publicUrl")
        .map(|url| S3Endpoint::parse(url, "publicUrl"))
        .transpose()?;

    // Velero's plugin sends a checksum of each upload (CRC32 unless told otherwise); `""`
    // turns it off, which S3-compatible servers without checksum support need. hawser sends
    // none unless SHA256 is asked for: the one algorithm its S3 client computes.
    match config.get("checksumAlgorithm").map(|v| v.trim()) {
        None | Some("") => {}
        Some(sha) if sha.eq_ignore_ascii_case("SHA256") => {
            builder = builder.with_checksum_algorithm(object_store::aws::Checksum::SHA256);
        }
        Some(other) => {
            return Err(ConfigError::Invalid {
                field: "spec.config.checksumAlgorithm".to_owned(),
                reason: format!(
                    "`{other}` is not supported by hawser: use \"\" (no checksum) or SHA256"
                ),
            });
        }
    }

    match (
        non_empty(config, "kmsKeyId"),
        non_empty(config, "serverSideEncryption"),
    ) {
        (Some(kms), None | Some("aws:kms")) => builder = builder.with_sse_kms_encryption(kms),
        (Some(_), Some(other)) => {
            return Err(ConfigError::Invalid {
                field: "spec.config.serverSideEncryption".to_owned(),
                reason: format!("`{other}` cannot be combined with kmsKeyId (use aws:kms)"),
            });
        }
        (None, Some(sse @ ("AES256" | "aws:kms"))) => {
            let key: AmazonS3ConfigKey =
                "aws_server_side_encryption"
                    .parse()
                    .map_err(|source| ConfigError::Client {
                        provider: provider.name(),
                        source,
                    })?;
            builder = builder.with_config(key, sse);
        }
        (None, Some(other)) => {
            return Err(ConfigError::Invalid {
                field: "spec.config.serverSideEncryption".to_owned(),
                reason: format!("`{other}` is not AES256 or aws:kms"),
            });
        }
        (None, None) => {}
    }

    let client_error = |source| ConfigError::Client {
        provider: provider.name(),
        source,
    };
    let public_signer = match public {
        Some(endpoint) => {
            let signer = endpoint
                .apply(builder.clone(), &spec.bucket, path_style)?
                .build()
                .map_err(client_error)?;
            Some(Arc::new(signer) as Arc<dyn Signer>)
        }
        None => None,
    };
    let mut clients = signing(builder.build().map_err(client_error)?);
    if public_signer.is_some() {
        clients.signer = public_signer;
    }
    if let Some(tagging) = non_empty(config, "tagging") {
        clients.tags = parse_tagging(tagging)?;
    }
    Ok(clients)
}

/// `tagging`: the tags of every object written, in the form of a URL query (`key1=value1&
/// key2=value2`, percent-encoded), as Velero's AWS plugin takes it for S3's `x-amz-tagging`.
fn parse_tagging(tagging: &str) -> Result<TagSet, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        field: "spec.config.tagging".to_owned(),
        reason,
    };
    let decode = |part: &str| {
        percent_encoding::percent_decode_str(&part.replace('+', " "))
            .decode_utf8()
            .map(std::borrow::Cow::into_owned)
            .map_err(|_| invalid(format!("`{part}` is not UTF-8 once percent-decoded")))
    };
    let mut tags = TagSet::default();
    for pair in tagging.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key)?;
        if key.is_empty() {
            return Err(invalid(format!(
                "`{pair}` has no tag key (use key1=value1&key2=value2)"
            )));
        }
        tags.push(&key, &decode(value)?);
    }
    Ok(tags)
}

/// A parsed `s3Url` (or `publicUrl`).
struct S3Endpoint {
    scheme: String,
    host: String,
    rest: String,
    /// The config key it was read from (`s3Url`, `publicUrl`), for messages.
    key: String,
}

impl S3Endpoint {
    fn parse(url: &str, key: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid {
            field: format!("spec.config.{key}"),
            reason: format!("`{url}` {reason}"),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("has no scheme (use http:// or https://)"))?;
        if scheme != "http" && scheme != "https" {
            return Err(invalid("must start with http:// or https://"));
        }
        let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
        if host.is_empty() {
            return Err(invalid("has no host"));
        }
        let path = path.trim_end_matches('/');
        let rest = if path.is_empty() {
            String::new()
        } else {
            format!("/{path}")
        };
        Ok(Self {
            scheme: scheme.to_owned(),
            host: host.to_owned(),
            rest,
            key: key.to_owned(),
        })
    }

    /// `builder` pointed at this endpoint, path style or with the bucket in the host.
    ///
    /// # Errors
    /// Virtual-hosted style against an IP address: `<bucket>.<address>` is no host name (and
    /// the S3 client would fail on it at the first request).
    fn apply(
        &self,
        builder: AmazonS3Builder,
        bucket: &str,
        path_style: bool,
    ) -> Result<AmazonS3Builder, ConfigError> {
        if path_style {
            return Ok(builder
                .with_endpoint(self.base())
                .with_virtual_hosted_style_request(false));
        }
        if self.is_ip_address() {
            return Err(ConfigError::Invalid {
                field: format!("spec.config.{}", self.key),
                reason: format!(
                    "`{}` is an IP address, which cannot carry the bucket in its host name: set s3ForcePathStyle: \"true\"",
                    self.base()
                ),
            });
        }
        // Virtual-hosted style against a custom endpoint: the bucket becomes part of the host.
        Ok(builder
            .with_endpoint(self.with_bucket_host(bucket))
            .with_virtual_hosted_style_request(true))
    }

    /// Whether the host (without its port) is an IPv4 or a bracketed IPv6 address.
    fn is_ip_address(&self) -> bool {
        if self.host.starts_with('[') {
            return true;
        }
        let name = self
            .host
            .rsplit_once(':')
            .map_or(self.host.as_str(), |(h, _)| h);
        name.parse::<std::net::Ipv4Addr>().is_ok()
    }

    fn base(&self) -> String {
        format!("{}://{}{}", self.scheme, self.host, self.rest)
    }

    fn with_bucket_host(&self, bucket: &str) -> String {
        format!("{}://{}.{}{}", self.scheme, bucket, self.host, self.rest)
    }
}

fn gcp(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Gcp;
    let config = &spec.config;
    check_keys(provider, config, GCP_KEYS, GCP_UNSUPPORTED)?;
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

fn azure(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Azure;
    let config = &spec.config;
    check_keys(provider, config, AZURE_KEYS, AZURE_UNSUPPORTED)?;
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

fn filesystem(
    spec: &LocationSpec,
    policy: &LocationPolicy,
) -> Result<Arc<dyn ObjectStore>, ConfigError> {
    let provider = Provider::Filesystem;
    check_keys(provider, &spec.config, FILESYSTEM_KEYS, &[])?;
    let root = non_empty(&spec.config, "root").ok_or(ConfigError::Missing {
        field: "spec.config.root",
        provider: provider.name(),
    })?;
    let root = PathBuf::from(root);
    let invalid = |reason: String| ConfigError::Invalid {
        field: "spec.config.root".to_owned(),
        reason,
    };
    if !root.is_absolute() {
        return Err(invalid(format!(
            "`{}` is not an absolute path",
            root.display()
        )));
    }
    let root = policy.check_root(&root)?;
    if !root.is_dir() {
        return Err(invalid(format!(
            "`{}` is not an existing directory",
            root.display()
        )));
    }
    // The bucket is a directory under the root, created on first use, readable by the server's
    // user only (what is below it is too: see `durable`).
    let bucket_dir = root.join(&spec.bucket);
    create_private_dir(&bucket_dir).map_err(|e| {
        invalid(format!(
            "cannot create bucket directory `{}`: {e}",
            bucket_dir.display()
        ))
    })?;
    // An existing bucket directory may be a link out of the allowed directories.
    let bucket_dir = policy.check_root(&bucket_dir)?;
    let store = LocalFileSystem::new_with_prefix(&bucket_dir)
        .map_err(|source| ConfigError::Client {
            provider: provider.name(),
            source,
        })?
        // Deleting a backup removes its then-empty directory too.
        .with_automatic_cleanup(true);
    // Uploads answer once they are on disk (fsync); `bucket_dir` is canonical, the path the
    // store resolves objects under.
    Ok(Arc::new(crate::durable::Synced::new(store, bucket_dir)))
}

/// Creates `dir` (its parent exists) with mode 0700; an existing directory is left as it is.
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn checksum_algorithm_empty_or_sha256_is_accepted_others_refused() {
        let spec = |value: &str| {
            LocationSpec::new("aws", "b")
                .with_config("region", "r")
                .with_config("checksumAlgorithm", value)
        };
        let options = LocationOptions::default();
        for ok in ["", "SHA256", "sha256"] {
            assert!(
                build(
                    Provider::Aws,
                    &spec(ok),
                    &options,
                    &LocationPolicy::default()
                )
                .is_ok(),
                "{ok:?}"
            );
        }
        let Err(err) = build(
            Provider::Aws,
            &spec("CRC32"),
            &options,
            &LocationPolicy::default(),
        ) else {
            panic!("CRC32 is refused");
        };
        assert_eq!(
            err.to_string(),
            "spec.config.checksumAlgorithm is invalid: `CRC32` is not supported by hawser: use \"\" (no checksum) or SHA256"
        );
    }

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
    fn tagging_is_a_url_query_of_tags() {
        let tags = parse_tagging("backup-tool=hawser&team=platform%20ops&empty=&x+y=1").unwrap();
        assert_eq!(
            tags.encoded(),
            "backup-tool=hawser&team=platform+ops&empty=&x+y=1"
        );
        let err = parse_tagging("a=1&=v").unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.config.tagging is invalid: `=v` has no tag key (use key1=value1&key2=value2)"
        );
        assert!(parse_tagging("a=%FF").is_err());
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
    fn s3_endpoint_hosts() {
        let e = S3Endpoint::parse("http://127.0.0.1:9000/", "s3Url").unwrap();
        assert_eq!(e.base(), "http://127.0.0.1:9000");
        assert_eq!(e.with_bucket_host("b"), "http://b.127.0.0.1:9000");
        let e = S3Endpoint::parse("https://minio.example/s3", "s3Url").unwrap();
        assert_eq!(e.base(), "https://minio.example/s3");
        assert!(S3Endpoint::parse("minio:9000", "s3Url").is_err());
        assert!(S3Endpoint::parse("ftp://x", "s3Url").is_err());
    }

    #[test]
    fn virtual_hosted_style_against_an_ip_address_is_refused() {
        let options = LocationOptions::default();
        let policy = LocationPolicy::default();
        let spec = |url: &str, path_style: &str| {
            LocationSpec::new("aws", "b")
                .with_config("s3Url", url)
                .with_config("s3ForcePathStyle", path_style)
        };
        for url in [
            "http://127.0.0.1:9000",
            "http://10.0.0.7",
            "http://[::1]:9000",
        ] {
            let Err(err) = build(Provider::Aws, &spec(url, "false"), &options, &policy) else {
                panic!("{url} without path style is refused");
            };
            assert!(
                err.to_string()
                    .starts_with("spec.config.s3Url is invalid: ")
                    && err.to_string().ends_with("set s3ForcePathStyle: \"true\""),
                "{err}"
            );
            assert!(
                build(Provider::Aws, &spec(url, "true"), &options, &policy).is_ok(),
                "{url}"
            );
        }
        assert!(
            build(
                Provider::Aws,
                &spec("http://minio.local:9000", "false"),
                &options,
                &policy
            )
            .is_ok()
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
