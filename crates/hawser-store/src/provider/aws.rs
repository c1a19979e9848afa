//! Amazon S3 and S3-compatible servers (Velero's velero-plugin-for-aws).

use std::sync::Arc;

use object_store::TagSet;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::signer::Signer;

use super::{
    Clients, NO_CREDENTIAL, Provider, check_keys, client_options, non_empty, parse_bool, retry,
    signing,
};
use crate::credentials::parse_aws_credentials;
use crate::error::ConfigError;
use crate::policy::LocationPolicy;
use crate::spec::{LocationOptions, LocationSpec};

/// The `spec.config` keys of the provider.
const KEYS: &[&str] = &[
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
const UNSUPPORTED: &[&str] = &["customerKeyEncryptionFile"];

pub(super) fn build(
    spec: &LocationSpec,
    options: &LocationOptions,
    policy: &LocationPolicy,
) -> Result<Clients, ConfigError> {
    let provider = Provider::Aws;
    let config = &spec.config;
    check_keys(provider, config, KEYS, UNSUPPORTED)?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;
    use crate::provider::{self};

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
                provider::build(
                    Provider::Aws,
                    &spec(ok),
                    &options,
                    &LocationPolicy::default()
                )
                .is_ok(),
                "{ok:?}"
            );
        }
        let Err(err) = provider::build(
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
            let Err(err) = provider::build(Provider::Aws, &spec(url, "false"), &options, &policy)
            else {
                panic!("{url} without path style is refused");
            };
            assert!(
                err.to_string()
                    .starts_with("spec.config.s3Url is invalid: ")
                    && err.to_string().ends_with("set s3ForcePathStyle: \"true\""),
                "{err}"
            );
            assert!(
                provider::build(Provider::Aws, &spec(url, "true"), &options, &policy).is_ok(),
                "{url}"
            );
        }
        assert!(
            provider::build(
                Provider::Aws,
                &spec("http://minio.local:9000", "false"),
                &options,
                &policy
            )
            .is_ok()
        );
    }
}
