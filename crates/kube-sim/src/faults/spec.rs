//! The fault kinds, shared by the in-process handle and the admin API: each kind's parameters
//! and builder, [`FaultSpec`] (the JSON body of `POST /faults`) and [`ActiveFault`] (what
//! `GET /faults` lists).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::matcher::{Matcher, limit_builders, matcher_builders};

/// Body shape of an injected error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// A full `metav1.Status`.
    #[default]
    Status,
    /// Plain text, as priority-and-fairness answers a 429.
    Plain,
}

/// Answer matching requests with an error status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusFault {
    pub code: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
    #[serde(default)]
    pub shape: Shape,
    /// Overrides the default message for the code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Overrides the default reason for the code (e.g. `ServerTimeout` on a 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub matcher: Matcher,
    /// Active for this many seconds (absent = until cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Answer only the next N matching requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl StatusFault {
    /// A fault answering every request with `code`.
    pub fn new(code: u16) -> StatusFault {
        StatusFault {
            code,
            retry_after_seconds: None,
            shape: Shape::Status,
            message: None,
            reason: None,
            matcher: Matcher::default(),
            seconds: None,
            count: None,
        }
    }
    #[must_use]
    pub fn message(mut self, message: &str) -> StatusFault {
        self.message = Some(message.to_string());
        self
    }
    #[must_use]
    pub fn reason(mut self, reason: &str) -> StatusFault {
        self.reason = Some(reason.to_string());
        self
    }
    #[must_use]
    pub fn retry_after(mut self, seconds: u64) -> StatusFault {
        self.retry_after_seconds = Some(seconds);
        self
    }
    #[must_use]
    pub fn plain(mut self) -> StatusFault {
        self.shape = Shape::Plain;
        self
    }
}

matcher_builders!(StatusFault);
limit_builders!(StatusFault);

/// Delay matching requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyFault {
    pub millis: u64,
    #[serde(flatten)]
    pub matcher: Matcher,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl LatencyFault {
    pub fn new(delay: Duration) -> LatencyFault {
        LatencyFault {
            millis: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            matcher: Matcher::default(),
            seconds: None,
            count: None,
        }
    }
}

matcher_builders!(LatencyFault);
limit_builders!(LatencyFault);

/// Hold matching requests without serving them, then close their connection unanswered: the
/// server that stopped answering. Nothing is applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HangFault {
    #[serde(flatten)]
    pub matcher: Matcher,
    /// How long each request is held; absent = until the fault ends (`seconds` pass, or it is
    /// removed or cleared). A client that gives up first just sees its own timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<f64>,
    /// Active for this many seconds (absent = until cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Hang only the next N matching requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl HangFault {
    /// A fault hanging every request until it ends.
    pub fn new() -> HangFault {
        HangFault::default()
    }
    /// Hold each request this long (instead of until the fault ends), then close it.
    #[must_use]
    pub fn hold_for(mut self, d: Duration) -> HangFault {
        self.hold_seconds = Some(d.as_secs_f64());
        self
    }
}

matcher_builders!(HangFault);
limit_builders!(HangFault);

/// Serve matching requests for real (writes land in the store, watchers see them), then close
/// the connection instead of answering: the answer lost on the way back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DropResponseFault {
    #[serde(flatten)]
    pub matcher: Matcher,
    /// Hold the answer before closing: until the client gives up, `holdSeconds` pass or the
    /// fault ends (absent/false = close at once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
    /// How long to hold the answer (implies `hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<f64>,
    /// Active for this many seconds (absent = until cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Drop only the answers of the next N matching requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl DropResponseFault {
    /// A fault dropping the answer of every request.
    pub fn new() -> DropResponseFault {
        DropResponseFault::default()
    }
    /// Hold the answer until the client gives up (or the fault ends), then close.
    #[must_use]
    pub fn hold(mut self) -> DropResponseFault {
        self.hold = true;
        self
    }
    /// Hold the answer this long (or until the client gives up), then close.
    #[must_use]
    pub fn hold_for(mut self, d: Duration) -> DropResponseFault {
        self.hold = true;
        self.hold_seconds = Some(d.as_secs_f64());
        self
    }
}

matcher_builders!(DropResponseFault);
limit_builders!(DropResponseFault);

/// Newly created CRDs become `Established` only `delaySeconds` after their creation, as on a
/// slow or HA server. Until then the naming controller's state shows (`NamesAccepted=True`,
/// `Established=False` with reason `Installing`) and discovery does not list the resources; with
/// `delayNames` the CRD has no conditions at all and its custom resources are not served either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EstablishDelayFault {
    pub delay_seconds: f64,
    /// Only the CRD with this name (`<plural>.<group>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hold back the naming controller too (no conditions, custom resource paths 404).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delay_names: bool,
    /// Active for this many seconds (absent = until cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Delay only the next N CRD creations that match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl EstablishDelayFault {
    /// A fault delaying the establishment of every new CRD by `delay`.
    pub fn new(delay: Duration) -> EstablishDelayFault {
        EstablishDelayFault {
            delay_seconds: delay.as_secs_f64(),
            name: None,
            delay_names: false,
            seconds: None,
            count: None,
        }
    }
    /// Only the CRD with this name (`<plural>.<group>`).
    #[must_use]
    pub fn name(mut self, name: &str) -> EstablishDelayFault {
        self.name = Some(name.to_string());
        self
    }
    /// Hold back `NamesAccepted` too, so the custom resources are not served until established.
    #[must_use]
    pub fn delay_names(mut self) -> EstablishDelayFault {
        self.delay_names = true;
        self
    }
    /// The delay as a duration (negative or invalid values count as none).
    pub fn delay(&self) -> Duration {
        Duration::try_from_secs_f64(self.delay_seconds).unwrap_or(Duration::ZERO)
    }
}

limit_builders!(EstablishDelayFault);

/// A fault as posted to the admin API's `POST /faults`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FaultSpec {
    Refuse {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
    Status(StatusFault),
    Latency(LatencyFault),
    Hang(HangFault),
    DropResponse(DropResponseFault),
    DelayEstablished(EstablishDelayFault),
    CutWatches,
    /// Open and new watches stop sending anything (no events, bookmarks, or close at the
    /// timeout) until the stall ends.
    StallWatches {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
}

impl FaultSpec {
    /// (`seconds`, `count`) of a fault kept in the table; `None` for one-shot and global faults.
    pub(super) fn limits(&self) -> Option<(Option<f64>, Option<u64>)> {
        match self {
            FaultSpec::Status(f) => Some((f.seconds, f.count)),
            FaultSpec::Latency(f) => Some((f.seconds, f.count)),
            FaultSpec::Hang(f) => Some((f.seconds, f.count)),
            FaultSpec::DropResponse(f) => Some((f.seconds, f.count)),
            FaultSpec::DelayEstablished(f) => Some((f.seconds, f.count)),
            FaultSpec::Refuse { .. } | FaultSpec::CutWatches | FaultSpec::StallWatches { .. } => {
                None
            }
        }
    }
}

/// A currently active fault, as `GET /faults` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveFault {
    pub id: u64,
    #[serde(flatten)]
    pub spec: FaultSpec,
    /// Seconds left, for timed faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_seconds: Option<f64>,
    /// Requests left, for counted faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_count: Option<u64>,
}

/// The default message of an injected error code, and its reason.
pub fn default_reason(code: u16) -> (&'static str, &'static str) {
    match code {
        400 => (
            "BadRequest",
            "the server rejected our request for an unknown reason",
        ),
        401 => ("Unauthorized", "Unauthorized"),
        403 => ("Forbidden", "forbidden"),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        409 => ("Conflict", "the server reported a conflict"),
        410 => ("Expired", "the resource version is too old"),
        422 => (
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        500 => ("InternalError", "Internal error occurred: injected fault"),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "Timeout: request did not complete within the allotted timeout",
        ),
        _ if code >= 500 => ("InternalError", "Internal error occurred: injected fault"),
        _ => ("", "injected fault"),
    }
}
