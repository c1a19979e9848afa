//! Fault injection: the fault types (shared by the in-process handle and the admin API) and the
//! active-fault table the API server consults on every request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

/// Which requests a fault applies to; every empty/absent matcher matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Matcher {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// Resource plurals, e.g. `backups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `status`, or `""` to match only main-resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Matcher {
    pub fn matches(&self, req: &RequestKey<'_>) -> bool {
        (self.verbs.is_empty() || self.verbs.iter().any(|v| v == req.verb))
            && (self.resources.is_empty() || self.resources.iter().any(|r| r == req.resource))
            && self.name.as_deref().is_none_or(|n| n == req.name)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == req.subresource)
            && self.namespace.as_deref().is_none_or(|n| n == req.namespace)
    }
}

/// What a fault matcher sees of a request.
#[derive(Debug, Clone, Copy)]
pub struct RequestKey<'a> {
    pub verb: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
}

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
    #[must_use]
    pub fn verbs(mut self, verbs: &[&str]) -> StatusFault {
        self.matcher.verbs = verbs.iter().map(|s| (*s).to_string()).collect();
        self
    }
    #[must_use]
    pub fn resources(mut self, resources: &[&str]) -> StatusFault {
        self.matcher.resources = resources.iter().map(|s| (*s).to_string()).collect();
        self
    }
    #[must_use]
    pub fn name(mut self, name: &str) -> StatusFault {
        self.matcher.name = Some(name.to_string());
        self
    }
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> StatusFault {
        self.matcher.namespace = Some(namespace.to_string());
        self
    }
    #[must_use]
    pub fn subresource(mut self, subresource: &str) -> StatusFault {
        self.matcher.subresource = Some(subresource.to_string());
        self
    }
    #[must_use]
    pub fn count(mut self, count: u64) -> StatusFault {
        self.count = Some(count);
        self
    }
    #[must_use]
    pub fn for_duration(mut self, d: Duration) -> StatusFault {
        self.seconds = Some(d.as_secs_f64());
        self
    }
}

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
    #[must_use]
    pub fn verbs(mut self, verbs: &[&str]) -> LatencyFault {
        self.matcher.verbs = verbs.iter().map(|s| (*s).to_string()).collect();
        self
    }
    #[must_use]
    pub fn resources(mut self, resources: &[&str]) -> LatencyFault {
        self.matcher.resources = resources.iter().map(|s| (*s).to_string()).collect();
        self
    }
    #[must_use]
    pub fn count(mut self, count: u64) -> LatencyFault {
        self.count = Some(count);
        self
    }
    #[must_use]
    pub fn for_duration(mut self, d: Duration) -> LatencyFault {
        self.seconds = Some(d.as_secs_f64());
        self
    }
}

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
    CutWatches,
    /// Open and new watches stop sending anything (no events, bookmarks, or close at the
    /// timeout) until the stall ends.
    StallWatches {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
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

#[derive(Debug)]
struct Entry {
    id: u64,
    spec: FaultSpec,
    expires: Option<Instant>,
    remaining: Option<u64>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|e| now < e) && self.remaining != Some(0)
    }
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    entries: Vec<Entry>,
    /// Refusal in force: `Some(None)` = until cleared.
    refuse_until: Option<Option<Instant>>,
}

/// What the API listener should be doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerState {
    Serving,
    Refusing,
}

/// The fault table; cheap to clone, shared by the server, the admin API and the test handle.
#[derive(Debug, Clone)]
pub struct Faults {
    table: Arc<Mutex<Table>>,
    listener: Arc<watch::Sender<(ListenerState, u64)>>,
    cut: Arc<watch::Sender<u64>>,
    /// (stalled, epoch) of the watch stall.
    stall: Arc<watch::Sender<bool>>,
    stall_epoch: Arc<std::sync::atomic::AtomicU64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults::new()
    }
}

/// The decision for one request.
#[derive(Debug, Default)]
pub struct Decision {
    pub delay: Option<Duration>,
    pub error: Option<StatusFault>,
}

impl Faults {
    pub fn new() -> Faults {
        Faults {
            table: Arc::new(Mutex::new(Table::default())),
            listener: Arc::new(watch::channel((ListenerState::Serving, 0)).0),
            cut: Arc::new(watch::channel(0).0),
            stall: Arc::new(watch::channel(false).0),
            stall_epoch: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Installs any fault.
    pub fn add(&self, spec: FaultSpec) -> u64 {
        match spec {
            FaultSpec::Refuse { seconds } => {
                self.refuse(seconds.map(Duration::from_secs_f64));
                0
            }
            FaultSpec::CutWatches => {
                self.cut_watches();
                0
            }
            FaultSpec::StallWatches { seconds } => {
                self.stall_watches(seconds.map(Duration::from_secs_f64));
                0
            }
            FaultSpec::Status(ref f) => {
                let (seconds, count) = (f.seconds, f.count);
                self.push(spec, seconds, count)
            }
            FaultSpec::Latency(ref f) => {
                let (seconds, count) = (f.seconds, f.count);
                self.push(spec, seconds, count)
            }
        }
    }

    fn push(&self, spec: FaultSpec, seconds: Option<f64>, count: Option<u64>) -> u64 {
        let mut t = self.lock();
        t.next_id += 1;
        let id = t.next_id;
        let expires = seconds
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Instant::now() + Duration::from_secs_f64(s));
        t.entries.push(Entry {
            id,
            spec,
            expires,
            remaining: count,
        });
        id
    }

    /// Answer matching requests with an error.
    pub fn status(&self, fault: StatusFault) -> u64 {
        self.add(FaultSpec::Status(fault))
    }

    /// Delay matching requests.
    pub fn latency(&self, fault: LatencyFault) -> u64 {
        self.add(FaultSpec::Latency(fault))
    }

    /// Close the API listener and drop every connection; listen again on the same port after
    /// `duration` (or when cleared).
    pub fn refuse(&self, duration: Option<Duration>) {
        let until = duration.map(|d| Instant::now() + d);
        self.lock().refuse_until = Some(until);
        self.listener.send_modify(|(state, epoch)| {
            *state = ListenerState::Refusing;
            *epoch += 1;
        });
        if let Some(d) = duration {
            let me = self.clone();
            let epoch = self.listener.borrow().1;
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                if me.listener.borrow().1 == epoch {
                    me.stop_refusing();
                }
            });
        }
    }

    fn stop_refusing(&self) {
        self.lock().refuse_until = None;
        self.listener.send_modify(|(state, epoch)| {
            if *state == ListenerState::Refusing {
                *state = ListenerState::Serving;
                *epoch += 1;
            }
        });
    }

    /// Drop every open watch now.
    pub fn cut_watches(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Hang every watch (open and new) for `duration` or until cleared.
    pub fn stall_watches(&self, duration: Option<Duration>) {
        use std::sync::atomic::Ordering;
        let epoch = self.stall_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.stall.send_replace(true);
        if let Some(d) = duration {
            let me = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                if me.stall_epoch.load(Ordering::SeqCst) == epoch {
                    me.stall.send_replace(false);
                }
            });
        }
    }

    /// Changes when watches stall or resume.
    pub fn stall_signal(&self) -> watch::Receiver<bool> {
        self.stall.subscribe()
    }

    /// Remove every fault, resume stalled watches and start listening again if refusing.
    pub fn clear(&self) {
        self.lock().entries.clear();
        self.stall_epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.stall.send_replace(false);
        self.stop_refusing();
    }

    /// Remove one fault by id.
    pub fn remove(&self, id: u64) -> bool {
        let mut t = self.lock();
        let before = t.entries.len();
        t.entries.retain(|e| e.id != id);
        t.entries.len() != before
    }

    /// The active faults.
    pub fn list(&self) -> Vec<ActiveFault> {
        let now = Instant::now();
        let mut t = self.lock();
        t.entries.retain(|e| e.live(now));
        let mut out: Vec<ActiveFault> = Vec::new();
        if let Some(until) = t.refuse_until {
            out.push(ActiveFault {
                id: 0,
                spec: FaultSpec::Refuse {
                    seconds: until.map(|u| u.saturating_duration_since(now).as_secs_f64()),
                },
                remaining_seconds: until.map(|u| u.saturating_duration_since(now).as_secs_f64()),
                remaining_count: None,
            });
        }
        out.extend(t.entries.iter().map(|e| {
            ActiveFault {
                id: e.id,
                spec: e.spec.clone(),
                remaining_seconds: e
                    .expires
                    .map(|x| x.saturating_duration_since(now).as_secs_f64()),
                remaining_count: e.remaining,
            }
        }));
        out
    }

    /// Decides what happens to one request, consuming counted faults.
    pub fn decide(&self, req: &RequestKey<'_>) -> Decision {
        let now = Instant::now();
        let mut t = self.lock();
        if t.entries.is_empty() {
            return Decision::default();
        }
        t.entries.retain(|e| e.live(now));
        let mut decision = Decision::default();
        for e in &mut t.entries {
            match &e.spec {
                FaultSpec::Latency(f) if decision.delay.is_none() && f.matcher.matches(req) => {
                    decision.delay = Some(Duration::from_millis(f.millis));
                    if let Some(r) = e.remaining.as_mut() {
                        *r = r.saturating_sub(1);
                    }
                }
                FaultSpec::Status(f) if decision.error.is_none() && f.matcher.matches(req) => {
                    decision.error = Some(f.clone());
                    if let Some(r) = e.remaining.as_mut() {
                        *r = r.saturating_sub(1);
                    }
                }
                _ => {}
            }
        }
        decision
    }

    /// Listener state changes (state, epoch).
    pub fn listener_state(&self) -> watch::Receiver<(ListenerState, u64)> {
        self.listener.subscribe()
    }

    /// Changes whenever watches are to be cut.
    pub fn cut_signal(&self) -> watch::Receiver<u64> {
        self.cut.subscribe()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_json_parses_into_specs() {
        let s: FaultSpec = serde_json::from_str(
            r#"{"kind":"status","code":503,"retryAfterSeconds":2,"verbs":["patch"],"resources":["backups"],"count":3}"#,
        )
        .unwrap();
        let FaultSpec::Status(f) = s else {
            panic!("not status")
        };
        assert_eq!(f.code, 503);
        assert_eq!(f.retry_after_seconds, Some(2));
        assert_eq!(f.matcher.verbs, vec!["patch"]);
        assert_eq!(f.count, Some(3));
        let r: FaultSpec = serde_json::from_str(r#"{"kind":"refuse","seconds":1.5}"#).unwrap();
        assert_eq!(r, FaultSpec::Refuse { seconds: Some(1.5) });
        let c: FaultSpec = serde_json::from_str(r#"{"kind":"cut-watches"}"#).unwrap();
        assert_eq!(c, FaultSpec::CutWatches);
    }

    #[tokio::test]
    async fn counted_fault_answers_n_requests() {
        let f = Faults::new();
        f.status(StatusFault::new(503).verbs(&["get"]).count(2));
        let key = RequestKey {
            verb: "get",
            resource: "pods",
            name: "",
            subresource: "",
            namespace: "",
        };
        let other = RequestKey {
            verb: "list",
            ..key
        };
        assert!(f.decide(&other).error.is_none());
        assert!(f.decide(&key).error.is_some());
        assert!(f.decide(&key).error.is_some());
        assert!(f.decide(&key).error.is_none());
    }
}
