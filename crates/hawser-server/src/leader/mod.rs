//! Leader election: one active server per namespace, on a `coordination.k8s.io/v1` Lease.
//!
//! Every server of a namespace competes for the Lease `--leader-elect-resource-name` (default
//! [`DEFAULT_LEASE_NAME`](crate::config::DEFAULT_LEASE_NAME)) in that namespace. Its holder identity is the status engine's
//! instance id, the same id the owner annotation `hawser.io/owner` carries, so the Lease and
//! the objects name the same instance. Only the holder runs the controllers and recovery.
//!
//! - **Following** ([`Elector::acquire`]): every `--leader-elect-retry-period` (with up to 20 %
//!   jitter) read the Lease. No Lease: create it, holding it. No holder (released): take it. A
//!   holder: take it once this follower has seen the Lease *unchanged* for the lease duration
//!   the Lease states, measured on the follower's own monotonic clock (not by comparing
//!   `renewTime` with its wall clock, so clock skew between nodes does not matter). A leader
//!   killed with SIGKILL is thus replaced within one lease duration (plus a retry period) of
//!   its last renewal.
//! - **Leading** ([`Elector::hold`]): renew every retry period. A renewal that has not
//!   succeeded within `--leader-elect-renew-deadline` of the last one, or a Lease found naming
//!   another holder, means the Lease is lost ([`LeaseLost`]); the server then stops its
//!   controllers and work at once and follows again, in the same process (`crate::serve`). The
//!   deadline is shorter than the lease duration, so the old leader stops before a follower may
//!   take over. A candidate that finds the Lease still naming itself (nobody took it meanwhile)
//!   renews it and leads again.
//! - **Releasing**: on shutdown the leader keeps renewing while its work finishes, then
//!   releases the Lease (no holder, `leaseDurationSeconds: 1`), so a follower takes it at its
//!   next try instead of waiting for it to expire.
//!
//! Every write is a read-modify-replace carrying the `resourceVersion` read, so two candidates
//! racing for the Lease cannot both win: the API server answers the second with 409.
//!
//! Why a module of its own rather than a crate: of the crates for this, only
//! `kube-lease-manager` (0.13) builds against kube 5 / k8s-openapi 0.29 (`kube-leader-election`
//! needs kube 4, kubert's lease kube 1.1, `kube-coordinate` kube 2). It has no renew deadline: a
//! leader whose renewals fail keeps reporting that it leads while it backs off (up to 30 s)
//! past its Lease's expiry, so two servers could run the controllers at once; it does not expose
//! when it last renewed, so the deadline cannot be added on top; it decides expiry by comparing
//! the holder's `renewTime` with the local wall clock (skew-sensitive); and it counts durations
//! in whole seconds, too coarse for a sub-second retry period. client-go's algorithm above is a
//! page of code.

mod record;

use std::time::Duration;

use hawser_core::clock::Clock;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use rand::Rng as _;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::record::{Observed, Plan};
use crate::config::LeaderElectionSettings;

/// The field manager of the Lease writes.
const FIELD_MANAGER: &str = "hawser-leader-election";

/// One read-and-write of the Lease failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseError {
    /// Reading the Lease failed.
    #[error("reading the Lease failed")]
    Read(#[source] kube::Error),
    /// Writing the Lease failed.
    #[error("writing the Lease failed")]
    Write(#[source] kube::Error),
    /// Someone else wrote the Lease between this candidate's read and write (409).
    #[error("the Lease changed while it was being written")]
    Conflict,
    /// The request did not answer in time.
    #[error("the Lease request did not answer within {0:?}")]
    Timeout(Duration),
}

impl LeaseError {
    /// A stable short category, for logs.
    pub(crate) fn category(&self) -> &'static str {
        match self {
            Self::Read(_) => "LeaseRead",
            Self::Write(_) => "LeaseWrite",
            Self::Conflict => "LeaseConflict",
            Self::Timeout(_) => "LeaseTimeout",
        }
    }
}

/// The leader lost its Lease: it must stop running the controllers at once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseLost {
    /// The Lease names another holder, or none.
    #[error(
        "the Lease {lease} now names {}: another server may lead",
        holder.as_deref().map_or_else(|| "no holder".to_owned(), |h| format!("holder {h}"))
    )]
    TakenOver {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The holder found.
        holder: Option<String>,
    },
    /// No renewal succeeded within the renew deadline.
    #[error(
        "the Lease {lease} could not be renewed within --leader-elect-renew-deadline ({deadline:?})"
    )]
    NotRenewed {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The renew deadline.
        deadline: Duration,
        /// The last renewal's failure.
        #[source]
        source: LeaseError,
    },
    /// The task holding the Lease ended abnormally (a panic).
    #[error("the task renewing the Lease {lease} stopped unexpectedly")]
    Crashed {
        /// `namespace/name` of the Lease.
        lease: String,
    },
}

/// The outcome of one successful read-and-write.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// This candidate holds the Lease now.
    Held,
    /// Another candidate holds it (and it has not expired).
    HeldBy(String),
    /// This candidate was leading and the Lease names another holder or none.
    Lost(Option<String>),
}

/// A candidate for the Lease of one namespace.
pub(crate) struct Elector {
    api: Api<Lease>,
    /// `namespace/name`, for messages.
    lease: String,
    name: String,
    identity: String,
    settings: LeaderElectionSettings,
    clock: Clock,
    observed: Observed,
    leading: bool,
    /// When the attempt that last took or renewed the Lease started.
    renewed: Instant,
}

impl Elector {
    /// A candidate named `identity` for the Lease `settings.lease_name` in `namespace`, reading
    /// and writing through `client` and stamping times from `clock`.
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        identity: &str,
        settings: LeaderElectionSettings,
        clock: Clock,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            lease: format!("{namespace}/{}", settings.lease_name),
            name: settings.lease_name.clone(),
            identity: identity.to_owned(),
            settings,
            clock,
            observed: Observed::default(),
            leading: false,
            renewed: Instant::now(),
        }
    }

    /// `namespace/name` of the Lease.
    pub(crate) fn lease(&self) -> &str {
        &self.lease
    }

    /// Returns once this candidate holds the Lease; until then tries every retry period and
    /// tells `following` who holds it whenever that changes. Never fails: a Lease that cannot
    /// be read is tried again (cancel by dropping the future).
    pub(crate) async fn acquire(&mut self, mut following: impl FnMut(Option<&str>)) {
        let mut known: Option<Option<String>> = None;
        let mut failing = false;
        loop {
            let holder = match self.attempt().await {
                Ok(Attempt::Held) => {
                    tracing::info!(lease = %self.lease, identity = %self.identity, "leading: this server holds the Lease");
                    return;
                }
                Ok(Attempt::HeldBy(holder)) => {
                    failing = false;
                    Some(holder)
                }
                // Only a leading candidate loses; here the attempt simply did not win.
                Ok(Attempt::Lost(_)) => None,
                Err(e) => {
                    if failing {
                        tracing::debug!(lease = %self.lease, category = e.category(), error = %e, "trying the Lease again");
                    } else {
                        tracing::warn!(lease = %self.lease, category = e.category(), error = %e, "could not try the Lease; trying again every retry period");
                    }
                    failing = true;
                    known.clone().flatten()
                }
            };
            if known.as_ref() != Some(&holder) {
                if let Some(h) = &holder {
                    tracing::info!(lease = %self.lease, leader = %h, "following: another server holds the Lease");
                }
                following(holder.as_deref());
                known = Some(holder);
            }
            let jitter = self
                .settings
                .retry_period
                .mul_f64(rand::rng().random_range(0.0..0.2));
            tokio::time::sleep(self.settings.retry_period + jitter).await;
        }
    }

    /// Renews the Lease every retry period until `stop` fires, then releases it. Call after
    /// [`acquire`](Self::acquire) returned.
    ///
    /// # Errors
    ///
    /// [`LeaseLost`] as soon as the Lease names another holder, or no renewal has succeeded
    /// within the renew deadline of the last one: the caller must stop leading at once.
    pub(crate) async fn hold(mut self, stop: CancellationToken) -> Result<(), LeaseLost> {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.settings.retry_period) => {}
            }
            if !self.renew(&stop).await? {
                break;
            }
        }
        self.release().await;
        Ok(())
    }

    /// Renews until it succeeds (`Ok(true)`), `stop` fires (`Ok(false)`), or the Lease is lost.
    async fn renew(&mut self, stop: &CancellationToken) -> Result<bool, LeaseLost> {
        let deadline = self.renewed + self.settings.renew_deadline;
        loop {
            let failure = match self.attempt_until(deadline).await {
                Ok(Attempt::Held) => return Ok(true),
                Ok(Attempt::HeldBy(holder)) => Some(holder),
                Ok(Attempt::Lost(holder)) => holder,
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(LeaseLost::NotRenewed {
                            lease: self.lease.clone(),
                            deadline: self.settings.renew_deadline,
                            source: e,
                        });
                    }
                    tracing::warn!(lease = %self.lease, category = e.category(), error = %e, "renewing the Lease failed; trying again until the renew deadline");
                    tokio::select! {
                        () = stop.cancelled() => return Ok(false),
                        () = tokio::time::sleep_until(
                            (Instant::now() + self.settings.retry_period).min(deadline)
                        ) => {}
                    }
                    continue;
                }
            };
            return Err(LeaseLost::TakenOver {
                lease: self.lease.clone(),
                holder: failure,
            });
        }
    }

    /// Gives the Lease up if this candidate still holds it (best effort: a Lease that cannot be
    /// released expires after its duration).
    async fn release(&mut self) {
        let limit = self.settings.renew_deadline;
        let released = tokio::time::timeout(limit, async {
            let Some(mut lease) = self
                .api
                .get_opt(&self.name)
                .await
                .map_err(LeaseError::Read)?
            else {
                return Ok(false);
            };
            let spec = lease.spec.clone().unwrap_or_default();
            if record::holder(&spec) != Some(self.identity.as_str()) {
                return Ok(false);
            }
            lease.spec = Some(record::released(&spec, self.clock.now()));
            settle(self.api.replace(&self.name, &write_params(), &lease).await).map(|()| true)
        })
        .await
        .unwrap_or(Err(LeaseError::Timeout(limit)));
        self.leading = false;
        match released {
            Ok(true) => tracing::info!(lease = %self.lease, "released the Lease"),
            Ok(false) => {
                tracing::info!(lease = %self.lease, "the Lease was no longer held; nothing to release")
            }
            Err(e) => tracing::warn!(lease = %self.lease, category = e.category(), error = %e,
                "could not release the Lease; another server takes it once it expires"),
        }
    }

    /// One attempt, bounded by the renew deadline.
    async fn attempt(&mut self) -> Result<Attempt, LeaseError> {
        let deadline = Instant::now() + self.settings.renew_deadline;
        self.attempt_until(deadline).await
    }

    /// One read-and-write of the Lease, abandoned at `deadline`.
    async fn attempt_until(&mut self, deadline: Instant) -> Result<Attempt, LeaseError> {
        let started = Instant::now();
        let limit = deadline.saturating_duration_since(started);
        let outcome = tokio::time::timeout(limit, self.try_acquire_or_renew(started))
            .await
            .unwrap_or(Err(LeaseError::Timeout(limit)));
        if matches!(outcome, Ok(Attempt::Held)) {
            self.leading = true;
            self.renewed = started;
        }
        outcome
    }

    async fn try_acquire_or_renew(&mut self, started: Instant) -> Result<Attempt, LeaseError> {
        let now = self.clock.now();
        let duration = self.settings.lease_duration;
        let Some(mut lease) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(LeaseError::Read)?
        else {
            if self.leading {
                // Deleted under the leader: someone else may have created and taken it since.
                return Ok(Attempt::Lost(None));
            }
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(record::claimed(None, &self.identity, now, duration)),
            };
            settle(self.api.create(&write_params(), &lease).await)?;
            return Ok(Attempt::Held);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observed.see(&spec, started);
        let unchanged = self.observed.unchanged_for(Instant::now());
        match record::plan(&spec, &self.identity, self.leading, unchanged, duration) {
            Plan::Wait { holder } => Ok(Attempt::HeldBy(holder)),
            Plan::Lost { holder } => Ok(Attempt::Lost(holder)),
            Plan::Take | Plan::Renew => {
                let claimed = record::claimed(Some(&spec), &self.identity, now, duration);
                lease.spec = Some(claimed.clone());
                settle(self.api.replace(&self.name, &write_params(), &lease).await)?;
                self.observed.see(&claimed, started);
                Ok(Attempt::Held)
            }
        }
    }
}

/// The parameters of every Lease write.
fn write_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// The answer to a Lease write; 409 (a conflict, or a Lease created meanwhile) is
/// [`LeaseError::Conflict`].
fn settle(answer: Result<Lease, kube::Error>) -> Result<(), LeaseError> {
    match answer {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(LeaseError::Conflict),
        Err(e) => Err(LeaseError::Write(e)),
    }
}

#[cfg(test)]
mod tests;
