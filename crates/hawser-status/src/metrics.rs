//! Metrics of the status truth engine (`hawser_status_*`; Velero has no counterpart).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use hawser_api::phase::Kind;

/// `kind` label: which resource a status write was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum KindLabel {
    /// velero.io/v1 Backup.
    Backup,
    /// velero.io/v1 Restore.
    Restore,
}

impl From<Kind> for KindLabel {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Backup => Self::Backup,
            Kind::Restore => Self::Restore,
        }
    }
}

/// What one status-write attempt ended with: the status engine's classification and the
/// `outcome` label of its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum AttemptOutcome {
    /// The status was stored.
    Landed,
    /// The object already had the status (an earlier attempt landed without an answer).
    AlreadyLanded,
    /// Connection refused/reset, request timeout, 5xx, 429: retried.
    Transient,
    /// 409: re-read and re-applied.
    Conflict,
    /// 404: the object is gone; the write stops.
    Gone,
    /// 400/403/422 and other permanent answers: the write stops with a Warning Event.
    Rejected,
    /// The object moved to a phase the transition table does not allow leaving for this status.
    Stale,
}

/// Labels of `hawser_status_write_attempts_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AttemptLabels {
    /// Backup or restore.
    pub kind: KindLabel,
    /// What the attempt ended with.
    pub outcome: AttemptOutcome,
}

/// How recovery resolved an object whose work had started under a server that is gone: the
/// `resolution` label of `hawser_status_recovered_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum Resolution {
    /// Its recorded outcome was written.
    FromRecord,
    /// Its work was taken up again (a rerun, or its item operations followed on).
    Resumed,
    /// `Failed`: no record, and no rerun left.
    FailedWithoutRecord,
}

/// Labels of `hawser_status_recovered_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RecoveredLabels {
    /// Backup or restore.
    pub kind: KindLabel,
    /// How it was resolved.
    pub resolution: Resolution,
}

/// Labels with only the kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KindLabels {
    /// Backup or restore.
    pub kind: KindLabel,
}

fn landing_histogram() -> Histogram {
    // 10 ms … ~2.9 h: covers an immediate landing and a landing after a long outage.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.01, 4.0, 13,
    ))
}

/// Metrics of the status truth engine.
#[derive(Debug, Clone)]
pub struct StatusMetrics {
    attempts: Family<AttemptLabels, Counter>,
    landing: Family<KindLabels, Histogram, fn() -> Histogram>,
    pending: Family<KindLabels, Gauge>,
    recovered: Family<RecoveredLabels, Counter>,
}

impl Default for StatusMetrics {
    fn default() -> Self {
        Self {
            attempts: Family::default(),
            landing: Family::new_with_constructor(landing_histogram),
            pending: Family::default(),
            recovered: Family::default(),
        }
    }
}

impl StatusMetrics {
    /// Create the metrics and register them in `registry` under the `hawser_status` prefix.
    #[must_use]
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("hawser_status");
        sub.register(
            "write_attempts",
            "Status write attempts for Backups and Restores, by outcome",
            m.attempts.clone(),
        );
        sub.register(
            "write_landing_seconds",
            "Time from the first attempt of a status write to the moment it was stored",
            m.landing.clone(),
        );
        sub.register(
            "pending",
            "Final statuses computed but not yet stored in the API, held by the re-driver",
            m.pending.clone(),
        );
        sub.register(
            "recovered",
            "Backups and Restores left in flight by a server that is gone, resolved by recovery",
            m.recovered.clone(),
        );
        // Zero from the start, so that a dashboard or an alert reads 0 rather than no data.
        for kind in [KindLabel::Backup, KindLabel::Restore] {
            m.pending.get_or_create(&KindLabels { kind }).set(0);
            for resolution in [
                Resolution::FromRecord,
                Resolution::Resumed,
                Resolution::FailedWithoutRecord,
            ] {
                m.recovered
                    .get_or_create(&RecoveredLabels { kind, resolution })
                    .inc_by(0);
            }
        }
        m
    }

    pub(crate) fn attempt(&self, kind: Kind, outcome: AttemptOutcome) {
        self.attempts
            .get_or_create(&AttemptLabels {
                kind: kind.into(),
                outcome,
            })
            .inc();
    }

    pub(crate) fn landed_after(&self, kind: Kind, seconds: f64) {
        self.landing
            .get_or_create(&KindLabels { kind: kind.into() })
            .observe(seconds);
    }

    pub(crate) fn pending_inc(&self, kind: Kind) {
        self.pending
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }

    pub(crate) fn pending_dec(&self, kind: Kind) {
        self.pending
            .get_or_create(&KindLabels { kind: kind.into() })
            .dec();
    }

    pub(crate) fn recovered(&self, kind: Kind, resolution: Resolution) {
        self.recovered
            .get_or_create(&RecoveredLabels {
                kind: kind.into(),
                resolution,
            })
            .inc();
    }

    /// Objects of this kind recovery resolved so (for tests).
    #[must_use]
    pub fn recovered_count(&self, kind: Kind, resolution: Resolution) -> u64 {
        self.recovered
            .get(&RecoveredLabels {
                kind: kind.into(),
                resolution,
            })
            .map_or(0, |c| c.get())
    }

    /// Attempts so far with this kind and outcome (for tests and benchmarks).
    #[must_use]
    pub fn attempts(&self, kind: Kind, outcome: AttemptOutcome) -> u64 {
        self.attempts
            .get(&AttemptLabels {
                kind: kind.into(),
                outcome,
            })
            .map_or(0, |c| c.get())
    }

    /// Statuses of this kind currently pending in the re-driver.
    #[must_use]
    pub fn pending(&self, kind: Kind) -> i64 {
        self.pending
            .get(&KindLabels { kind: kind.into() })
            .map_or(0, |g| g.get())
    }
}
