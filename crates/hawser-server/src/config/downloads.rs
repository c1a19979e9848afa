//! The download listener's flags (`crate::downloads` serves the files).

use std::net::SocketAddr;

use super::error::{ArgsError, parse_listen_address};

/// The download listener's flags (hawser's own; Velero has no such listener).
#[derive(clap::Args, Debug, Clone)]
pub struct DownloadArgs {
    /// Address of the HTTP listener that serves the files of `filesystem` locations to
    /// DownloadRequest URLs (`hawser backup logs`, `download`). Loopback by default; port 0
    /// picks a free port.
    #[arg(long, env = "HAWSER_DOWNLOAD_ADDRESS", default_value = "127.0.0.1:0")]
    pub download_address: String,
    /// Base URL clients reach the download listener at when it is exposed (e.g. through a
    /// Service: `http://hawser-downloads.velero.svc:8086`); default: the listener's own address.
    #[arg(long, env = "HAWSER_DOWNLOAD_URL")]
    pub download_url: Option<String>,
}

/// The checked form of [`DownloadArgs`].
#[derive(Debug, Clone)]
pub(crate) struct DownloadSettings {
    pub(crate) address: SocketAddr,
    pub(crate) public_url: Option<String>,
}

impl DownloadArgs {
    pub(crate) fn settings(&self) -> Result<DownloadSettings, ArgsError> {
        let address =
            parse_listen_address(&self.download_address).map_err(|e| ArgsError::Download {
                flag: "download-address",
                value: self.download_address.clone(),
                reason: e.to_string(),
            })?;
        let public_url = match self.download_url.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                Some(url.trim_end_matches('/').to_owned())
            }
            Some(url) => {
                return Err(ArgsError::Download {
                    flag: "download-url",
                    value: url.to_owned(),
                    reason: "it must start with http:// or https://".to_owned(),
                });
            }
        };
        Ok(DownloadSettings {
            address,
            public_url,
        })
    }
}
