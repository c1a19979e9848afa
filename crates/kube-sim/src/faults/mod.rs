//! Fault injection: the fault kinds (in `spec`, shared by the in-process handle and the admin
//! API), their request matchers (in `matcher`) and the active-fault table the API server consults
//! on every request and the CRD controller on every CRD creation.

mod matcher;
mod spec;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

pub use matcher::{Matcher, RequestKey};
pub use spec::{
    ActiveFault, DropResponseFault, EstablishDelayFault, FaultSpec, HangFault, LatencyFault, Shape,
    StatusFault, default_reason,
};

#[derive(Debug)]
struct Entry {
    id: u64,
    spec: FaultSpec,
    expires: Option<Instant>,
    remaining: Option<u64>,
    /// Flipped to `true` when the fault is removed; requests it holds let go then.
    removed: watch::Sender<bool>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|e| now < e) && self.remaining != Some(0)
    }

    fn consume(&mut self) {
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(1);
        }
    }

    /// How a request this fault catches is held: until `hold_seconds` pass, the fault expires or
    /// it is removed (`cleared` = the table's clear signal).
    fn hold(&self, now: Instant, hold_seconds: Option<f64>, cleared: &watch::Sender<u64>) -> Hold {
        let own = hold_seconds
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map(|d| now + d);
        let until = match (own, self.expires) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Hold {
            until,
            removed: self.removed.subscribe(),
            cleared: cleared.subscribe(),
        }
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
    /// Whether watches are stalled; `stall_epoch` tells a timed stall's end from a newer stall.
    stall: Arc<watch::Sender<bool>>,
    stall_epoch: Arc<AtomicU64>,
    /// Bumped by `clear`: every held request lets go, also those of used-up counted faults.
    cleared: Arc<watch::Sender<u64>>,
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
    /// Not answered normally: hung, or answer dropped.
    pub interrupt: Option<Interrupt>,
}

/// A request whose answer never arrives.
#[derive(Debug)]
pub enum Interrupt {
    /// Hold the request without serving it, then close the connection.
    Hang(Hold),
    /// Serve the request, then close the connection without the answer (after holding it, if
    /// set).
    DropResponse(Option<Hold>),
}

/// How long a request caught by a fault is held.
#[derive(Debug)]
pub struct Hold {
    /// When the hold ends by itself (`None` = only when the fault is removed or cleared).
    until: Option<Instant>,
    removed: watch::Receiver<bool>,
    cleared: watch::Receiver<u64>,
}

impl Hold {
    /// Resolves when the hold ends.
    pub async fn wait(self) {
        let Hold {
            until,
            mut removed,
            mut cleared,
        } = self;
        let removed = async move {
            while !*removed.borrow_and_update() {
                // A closed channel means a used-up or expired fault was pruned from the table:
                // only its time limit (`until`) or a clear ends the hold then.
                if removed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        let cleared = async move {
            if cleared.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let timer = async move {
            match until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = removed => {}
            () = cleared => {}
            () = timer => {}
        }
    }
}

impl Faults {
    pub fn new() -> Faults {
        Faults {
            table: Arc::new(Mutex::new(Table::default())),
            listener: Arc::new(watch::channel((ListenerState::Serving, 0)).0),
            cut: Arc::new(watch::channel(0).0),
            stall: Arc::new(watch::channel(false).0),
            stall_epoch: Arc::new(AtomicU64::new(0)),
            cleared: Arc::new(watch::channel(0).0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Installs any fault; answers its id (0 for the global ones: refuse, cut and stall
    /// watches).
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
            FaultSpec::Status(_)
            | FaultSpec::Latency(_)
            | FaultSpec::Hang(_)
            | FaultSpec::DropResponse(_)
            | FaultSpec::DelayEstablished(_) => {
                let (seconds, count) = spec.limits().unwrap_or_default();
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
            removed: watch::channel(false).0,
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

    /// Hold matching requests unserved, then close their connections.
    pub fn hang(&self, fault: HangFault) -> u64 {
        self.add(FaultSpec::Hang(fault))
    }

    /// Serve matching requests, then close their connections instead of answering.
    pub fn drop_response(&self, fault: DropResponseFault) -> u64 {
        self.add(FaultSpec::DropResponse(fault))
    }

    /// Delay the `Established` condition of newly created CRDs.
    pub fn delay_established(&self, fault: EstablishDelayFault) -> u64 {
        self.add(FaultSpec::DelayEstablished(fault))
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

    /// Remove every fault, let go of held requests, resume stalled watches and start listening
    /// again if refusing.
    pub fn clear(&self) {
        self.lock().entries.clear();
        self.cleared.send_modify(|n| *n += 1);
        self.stall_epoch.fetch_add(1, Ordering::SeqCst);
        self.stall.send_replace(false);
        self.stop_refusing();
    }

    /// Remove one fault by id (letting go of the requests it holds).
    pub fn remove(&self, id: u64) -> bool {
        let mut t = self.lock();
        let Some(pos) = t.entries.iter().position(|e| e.id == id) else {
            return false;
        };
        t.entries.remove(pos).removed.send_replace(true);
        true
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

    /// Decides what happens to one request, consuming counted faults. The first matching fault
    /// that changes the answer (status, hang, drop-response) wins; a latency fault adds its delay
    /// to any of them.
    pub fn decide(&self, req: &RequestKey<'_>) -> Decision {
        let now = Instant::now();
        let mut t = self.lock();
        if t.entries.is_empty() {
            return Decision::default();
        }
        t.entries.retain(|e| e.live(now));
        let mut decision = Decision::default();
        let cleared = &self.cleared;
        for e in &mut t.entries {
            let answered = decision.error.is_some() || decision.interrupt.is_some();
            match &e.spec {
                FaultSpec::Latency(f) if decision.delay.is_none() && f.matcher.matches(req) => {
                    decision.delay = Some(Duration::from_millis(f.millis));
                    e.consume();
                }
                FaultSpec::Status(f) if !answered && f.matcher.matches(req) => {
                    decision.error = Some(f.clone());
                    e.consume();
                }
                FaultSpec::Hang(f) if !answered && f.matcher.matches(req) => {
                    decision.interrupt =
                        Some(Interrupt::Hang(e.hold(now, f.hold_seconds, cleared)));
                    e.consume();
                }
                FaultSpec::DropResponse(f) if !answered && f.matcher.matches(req) => {
                    let hold = (f.hold || f.hold_seconds.is_some())
                        .then(|| e.hold(now, f.hold_seconds, cleared));
                    decision.interrupt = Some(Interrupt::DropResponse(hold));
                    e.consume();
                }
                _ => {}
            }
        }
        decision
    }

    /// The establishment delay for a CRD being created now, consuming a counted fault.
    pub fn establish_delay(&self, crd: &str) -> Option<EstablishDelayFault> {
        let now = Instant::now();
        let mut t = self.lock();
        if t.entries.is_empty() {
            return None;
        }
        t.entries.retain(|e| e.live(now));
        t.entries.iter_mut().find_map(|e| match &e.spec {
            FaultSpec::DelayEstablished(f) if f.name.as_deref().is_none_or(|n| n == crd) => {
                let f = f.clone();
                e.consume();
                Some(f)
            }
            _ => None,
        })
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
