//! The server's configuration: the flags ([`ServerArgs`], Velero's names and defaults), their
//! checks ([`ArgsError`]), and the settings tree every part of the server reads
//! ([`Settings`]). Nothing here imports the rest of the server: the flags are checked once, and
//! each part takes its branch of the settings.

mod args;
mod controllers;
mod downloads;
mod error;
mod settings;

#[cfg(test)]
pub(crate) use args::DEFAULT_LEASE_NAME;
pub use args::ServerArgs;
#[cfg(test)]
pub(crate) use controllers::CONTROLLERS;
pub(crate) use controllers::Enabled;
pub use downloads::DownloadArgs;
pub(crate) use downloads::DownloadSettings;
pub use error::ArgsError;
pub(crate) use settings::{BackupSettings, LeaderElectionSettings, Settings};
