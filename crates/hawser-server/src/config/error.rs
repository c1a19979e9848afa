//! What is wrong with a flag ([`ArgsError`]), and the checks the flags share.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hawser_core::duration::GoDuration;

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
    /// Two durations that must be ordered are not.
    #[error("--{shorter} ({shorter_value}) must be shorter than --{longer} ({longer_value})")]
    Order {
        /// The flag that must be shorter.
        shorter: &'static str,
        /// Its value.
        shorter_value: GoDuration,
        /// The flag that must be longer.
        longer: &'static str,
        /// Its value.
        longer_value: GoDuration,
    },
    /// `--download-address` or `--download-url` cannot be used.
    #[error("--{flag} {value:?} cannot be used: {reason}")]
    Download {
        /// The flag's long name.
        flag: &'static str,
        /// The value given.
        value: String,
        /// Why.
        reason: String,
    },
    /// A `--filesystem-root` is not an absolute path.
    #[error("--filesystem-root {value:?} must be an absolute path")]
    FilesystemRoot {
        /// The value given.
        value: PathBuf,
    },
    /// `--disable-controllers` names no controller that can be disabled (Velero's message).
    #[error(
        "Invalid value for --disable-controllers flag provided: {name}. Valid values are: {valid}"
    )]
    DisableControllers {
        /// The name given.
        name: String,
        /// Every name that can be disabled, comma-separated.
        valid: String,
    },
    /// `--leader-elect-resource-name` is not a valid object name.
    #[error(
        "--leader-elect-resource-name {value:?} is not a valid Lease name (lowercase letters, \
         digits, '-' and '.', starting and ending with a letter or digit)"
    )]
    LeaseName {
        /// The value given.
        value: String,
    },
}

pub(super) fn positive(flag: &'static str, value: GoDuration) -> Result<Duration, ArgsError> {
    match value.to_std() {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(ArgsError::Duration {
            flag,
            requirement: "greater than 0s",
            value,
        }),
    }
}

pub(super) fn non_negative(flag: &'static str, value: GoDuration) -> Result<Duration, ArgsError> {
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

/// `shorter` must be less than `longer` (both already checked positive).
pub(super) fn ordered(
    shorter: (&'static str, GoDuration, Duration),
    longer: (&'static str, GoDuration, Duration),
) -> Result<(), ArgsError> {
    if shorter.2 < longer.2 {
        Ok(())
    } else {
        Err(ArgsError::Order {
            shorter: shorter.0,
            shorter_value: shorter.1,
            longer: longer.0,
            longer_value: longer.1,
        })
    }
}

/// An RFC 1123 subdomain, as the API server checks `metadata.name`.
pub(super) fn is_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(alnum)
                && label.ends_with(alnum)
                && label.chars().all(|c| alnum(c) || c == '-')
        })
}
