//! The flags of `hawser server`, with Velero's names and defaults, and their checked form.

use std::net::SocketAddr;
use std::time::Duration;

use hawser_core::duration::GoDuration;
use hawser_core::restore::Priorities;

use crate::settings::{
    BackupSettings, ClientSettings, LocationSettings, RestoreSettings, Settings, StatusSettings,
};

/// Flags of `hawser server`. Every flag also reads the environment variable `HAWSER_<NAME>`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Deadline of a status write's retries on the reconcile path (then the re-driver takes
    /// over), and how long a restore waits for a restored CRD to be established.
    #[arg(long, env = "HAWSER_RESOURCE_TIMEOUT", default_value = "10m")]
    pub resource_timeout: GoDuration,

    /// How often each BackupStorageLocation is validated; `0s` disables periodic validation.
    #[arg(long, env = "HAWSER_STORE_VALIDATION_FREQUENCY", default_value = "1m")]
    pub store_validation_frequency: GoDuration,

    /// TTL of a Backup whose spec.ttl is unset.
    #[arg(long, env = "HAWSER_DEFAULT_BACKUP_TTL", default_value = "720h")]
    pub default_backup_ttl: GoDuration,

    /// Location of a Backup that names none, when no BackupStorageLocation has spec.default=true.
    #[arg(
        long,
        env = "HAWSER_DEFAULT_BACKUP_STORAGE_LOCATION",
        default_value = "default"
    )]
    pub default_backup_storage_location: String,

    /// Sustained Kubernetes API requests per second (0: no limit).
    #[arg(long, env = "HAWSER_CLIENT_QPS", default_value_t = 100.0)]
    pub client_qps: f64,

    /// Kubernetes API requests allowed in a burst above --client-qps (must be > 0).
    #[arg(long, env = "HAWSER_CLIENT_BURST", default_value_t = 100)]
    pub client_burst: u32,

    /// Items per page of the LISTs a backup makes (0: no paging).
    #[arg(long, env = "HAWSER_CLIENT_PAGE_SIZE", default_value_t = 500)]
    pub client_page_size: u32,

    /// Address of the HTTP server with /metrics, /livez and /readyz (`:8085` is all interfaces).
    #[arg(long, env = "HAWSER_METRICS_ADDRESS", default_value = ":8085")]
    pub metrics_address: String,

    /// Backups that run at the same time (must be > 0).
    #[arg(long, env = "HAWSER_CONCURRENT_BACKUPS", default_value_t = 1)]
    pub concurrent_backups: usize,

    /// Order in which a restore creates resources (comma list; a lone `-` separates high from
    /// low priorities). Unset: Velero's built-in order.
    #[arg(long, env = "HAWSER_RESTORE_RESOURCE_PRIORITIES")]
    pub restore_resource_priorities: Option<String>,

    /// Cap of the backoff between status-write attempts.
    #[arg(long, env = "HAWSER_STATUS_PATCH_MAX_BACKOFF", default_value = "5s")]
    pub status_patch_max_backoff: GoDuration,

    /// How often unfinished Backups/Restores owned by no live worker are looked for and resolved.
    #[arg(long, env = "HAWSER_STATUS_RESYNC_PERIOD", default_value = "1m")]
    pub status_resync_period: GoDuration,
}

/// A flag value `hawser server` cannot run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// A duration that must be positive (or, where allowed, zero) is not.
    #[error("--{flag} must be {requirement}, got {value}")]
    Duration {
        /// The flag's long name.
        flag: &'static str,
        /// What the flag needs, e.g. "greater than 0s".
        requirement: &'static str,
        /// The value given.
        value: GoDuration,
    },
    /// A number out of its range.
    #[error("--{flag} {requirement}, got {value}")]
    Number {
        /// The flag's long name.
        flag: &'static str,
        /// What the flag needs.
        requirement: &'static str,
        /// The value given.
        value: String,
    },
    /// `--metrics-address` is not `host:port` or `:port`.
    #[error("--metrics-address {value:?} is not HOST:PORT or :PORT ({reason})")]
    Address {
        /// The value given.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
    /// `--restore-resource-priorities` does not parse.
    #[error("--restore-resource-priorities")]
    Priorities(#[source] hawser_core::restore::PrioritiesError),
    /// `--default-backup-storage-location` is empty.
    #[error("--default-backup-storage-location must not be empty")]
    EmptyLocation,
}

fn positive(flag: &'static str, value: GoDuration) -> Result<Duration, ArgsError> {
    match value.to_std() {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(ArgsError::Duration {
            flag,
            requirement: "greater than 0s",
            value,
        }),
    }
}

fn non_negative(flag: &'static str, value: GoDuration) -> Result<Duration, ArgsError> {
    value.to_std().ok_or(ArgsError::Duration {
        flag,
        requirement: "0s or more",
        value,
    })
}

/// Parses Go-style listen addresses: `:8085` (all interfaces), `host:8085`, `[::1]:8085`.
pub(crate) fn parse_listen_address(value: &str) -> Result<SocketAddr, ArgsError> {
    let err = |reason: String| ArgsError::Address {
        value: value.to_owned(),
        reason,
    };
    let full = if value.starts_with(':') {
        format!("0.0.0.0{value}")
    } else if let Some(port) = value.strip_prefix("localhost:") {
        format!("127.0.0.1:{port}")
    } else {
        value.to_owned()
    };
    full.parse::<SocketAddr>().map_err(|e| err(e.to_string()))
}

impl ServerArgs {
    /// Checks every value and converts the flags to the server's settings tree. The flags are
    /// destructured without `..`, so a new flag that is not given a place fails to compile.
    pub(crate) fn settings(&self) -> Result<Settings, ArgsError> {
        let Self {
            resource_timeout,
            store_validation_frequency,
            default_backup_ttl,
            default_backup_storage_location,
            client_qps,
            client_burst,
            client_page_size,
            metrics_address,
            concurrent_backups,
            restore_resource_priorities,
            status_patch_max_backoff,
            status_resync_period,
        } = self.clone();
        if !client_qps.is_finite() || client_qps < 0.0 {
            return Err(ArgsError::Number {
                flag: "client-qps",
                requirement: "must be 0 or more",
                value: client_qps.to_string(),
            });
        }
        if client_burst == 0 {
            return Err(ArgsError::Number {
                flag: "client-burst",
                requirement: "must be greater than 0",
                value: "0".to_owned(),
            });
        }
        if concurrent_backups == 0 {
            return Err(ArgsError::Number {
                flag: "concurrent-backups",
                requirement: "must be greater than 0",
                value: "0".to_owned(),
            });
        }
        if default_backup_storage_location.trim().is_empty() {
            return Err(ArgsError::EmptyLocation);
        }
        let resource_timeout = positive("resource-timeout", resource_timeout)?;
        let validation_frequency =
            non_negative("store-validation-frequency", store_validation_frequency)?;
        non_negative("default-backup-ttl", default_backup_ttl)?;
        Ok(Settings {
            client: ClientSettings {
                qps: (client_qps > 0.0).then_some(client_qps),
                burst: client_burst,
                page_size: (client_page_size > 0).then_some(client_page_size),
            },
            status: StatusSettings {
                resource_timeout,
                max_backoff: positive("status-patch-max-backoff", status_patch_max_backoff)?,
                resync_period: positive("status-resync-period", status_resync_period)?,
            },
            backup: BackupSettings {
                default_ttl: default_backup_ttl,
                default_location: default_backup_storage_location,
                concurrency: concurrent_backups,
            },
            restore: RestoreSettings {
                resource_priorities: Priorities::from_flag(restore_resource_priorities.as_deref())
                    .map_err(ArgsError::Priorities)?,
                crd_ready_timeout: resource_timeout,
            },
            locations: LocationSettings {
                validation_frequency: (!validation_frequency.is_zero())
                    .then_some(validation_frequency),
            },
            metrics_address: parse_listen_address(&metrics_address)?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        server: ServerArgs,
    }

    fn parse(args: &[&str]) -> Result<ServerArgs, clap::Error> {
        let mut all = vec!["hawser"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.server)
    }

    #[test]
    fn defaults_are_veleros() {
        let s = parse(&[]).unwrap().settings().unwrap();
        assert_eq!(s.status.resource_timeout, Duration::from_secs(600));
        assert_eq!(s.restore.crd_ready_timeout, Duration::from_secs(600));
        assert_eq!(
            s.locations.validation_frequency,
            Some(Duration::from_secs(60))
        );
        assert_eq!(s.backup.default_ttl.to_string(), "720h0m0s");
        assert_eq!(s.backup.default_location, "default");
        assert_eq!(s.client.qps, Some(100.0));
        assert_eq!(s.client.burst, 100);
        assert_eq!(s.client.page_size, Some(500));
        assert_eq!(s.metrics_address, "0.0.0.0:8085".parse().unwrap());
        assert_eq!(s.backup.concurrency, 1);
        assert_eq!(s.restore.resource_priorities, Priorities::default());
        assert_eq!(s.status.max_backoff, Duration::from_secs(5));
        assert_eq!(s.status.resync_period, Duration::from_secs(60));
    }

    #[test]
    fn zero_disables_validation_paging_and_rate_limit() {
        let s = parse(&[
            "--store-validation-frequency=0s",
            "--client-page-size=0",
            "--client-qps=0",
        ])
        .unwrap()
        .settings()
        .unwrap();
        assert_eq!(s.locations.validation_frequency, None);
        assert_eq!(s.client.page_size, None);
        assert_eq!(s.client.qps, None);
    }

    #[test]
    fn bad_values_are_rejected_with_the_flag_name() {
        let bad_duration = parse(&["--resource-timeout=10 minutes"]).unwrap_err();
        assert!(bad_duration.to_string().contains("--resource-timeout"));

        for (args, flag) in [
            (&["--client-burst=0"][..], "--client-burst"),
            (&["--client-qps=-1"][..], "--client-qps"),
            (&["--concurrent-backups=0"][..], "--concurrent-backups"),
            (&["--resource-timeout=0s"][..], "--resource-timeout"),
            (
                &["--status-resync-period=-1m"][..],
                "--status-resync-period",
            ),
            (
                &["--store-validation-frequency=-1s"][..],
                "--store-validation-frequency",
            ),
            (&["--metrics-address=8085"][..], "--metrics-address"),
            (
                &["--restore-resource-priorities=pods,,secrets"][..],
                "--restore-resource-priorities",
            ),
        ] {
            let err = parse(args).unwrap().settings().unwrap_err();
            assert!(err.to_string().contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn listen_addresses_in_go_form() {
        assert_eq!(
            parse_listen_address("127.0.0.1:9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(
            parse_listen_address("localhost:0").unwrap(),
            "127.0.0.1:0".parse().unwrap()
        );
        assert_eq!(
            parse_listen_address("[::1]:80").unwrap(),
            "[::1]:80".parse().unwrap()
        );
    }
}
