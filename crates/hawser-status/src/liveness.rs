//! Which server instances are alive, for recovery: an object in flight whose owner annotation
//! names another instance is left to that instance while it is alive, and resolved once it is
//! not. Each instance that runs workers keeps a `coordination.k8s.io/v1` Lease named after its
//! instance id in the server namespace, renewed every heartbeat (the resync period, between 1 s
//! and 5 s); an owner is dead when its Lease is missing or has not been renewed for its
//! `leaseDurationSeconds` (three heartbeats) by the reader's clock. A server that stops deletes its Lease, so its objects are resolved at the
//! next round instead of after the duration.

use std::time::Duration;

use hawser_core::clock::Clock;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams};

/// How often an instance renews its Lease, for a resync period: as often as recovery looks,
/// at least every 5 s and at most every second.
pub(crate) fn heartbeat(resync_period: Duration) -> Duration {
    resync_period.clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// Heartbeats an instance may miss before it counts as dead.
const MISSED_BEATS: u32 = 3;

/// The instance Leases of one namespace.
#[derive(Clone)]
pub(crate) struct Liveness {
    api: Api<Lease>,
    instance: String,
    clock: Clock,
    interval: Duration,
}

impl Liveness {
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        instance: &str,
        clock: Clock,
        interval: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            instance: instance.to_owned(),
            clock,
            interval,
        }
    }

    /// How often [`beat`](Self::beat) is to be called.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Renews (or creates) this instance's Lease.
    pub(crate) async fn beat(&self) -> Result<(), kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.instance.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.instance.clone()),
                lease_duration_seconds: Some(
                    i32::try_from((self.interval * MISSED_BEATS).as_secs()).unwrap_or(i32::MAX),
                ),
                renew_time: Some(MicroTime(self.clock.now())),
                ..LeaseSpec::default()
            }),
        };
        let mut value = serde_json::to_value(&lease).map_err(kube::Error::SerdeError)?;
        value["apiVersion"] = "coordination.k8s.io/v1".into();
        value["kind"] = "Lease".into();
        self.api
            .patch(
                &self.instance,
                &PatchParams::apply("hawser").force(),
                &Patch::Apply(value),
            )
            .await
            .map(drop)
    }

    /// Deletes this instance's Lease (the instance stops).
    pub(crate) async fn release(&self) {
        if let Err(e) = self
            .api
            .delete(&self.instance, &DeleteParams::default())
            .await
        {
            tracing::debug!(error = %e, "deleting the instance Lease failed; it expires by itself");
        }
    }

    /// Whether `owner`, another instance, renewed its Lease recently enough. For this instance
    /// itself the answer is `false`: which of its objects are worked on is known in memory (the
    /// engine's workers and re-driver), and one it owns but holds no longer is an orphan.
    pub(crate) async fn is_alive(&self, owner: &str) -> Result<bool, kube::Error> {
        if owner == self.instance {
            return Ok(false);
        }
        let Some(lease) = self.api.get_opt(owner).await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec else {
            return Ok(false);
        };
        let (Some(renewed), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else {
            return Ok(false);
        };
        let valid_for = jiff::SignedDuration::from_secs(i64::from(seconds.max(0)));
        Ok(renewed
            .0
            .checked_add(valid_for)
            .is_ok_and(|until| until > self.clock.now()))
    }
}
