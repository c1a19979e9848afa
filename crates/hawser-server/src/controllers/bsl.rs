//! The BackupStorageLocation controller: validates every location when it has never been
//! validated, when its spec changed, and then every validation frequency (`spec.validationFrequency`,
//! else `--store-validation-frequency`; zero means once), and writes `status.phase`
//! (`Available`/`Unavailable`), `status.message` (what is wrong and what to do) and
//! `status.lastValidationTime`, as Velero's controller does. Validation is the store's answer to
//! a listing of the prefix (velero-compat §2.4). `velero_backup_location_status_gauge` follows.
//!
//! Objects are read as untyped JSON so that one malformed location cannot stop the validation of
//! the others: it is marked `Unavailable` with the parse error.
//!
//! Two locations whose prefixes nest in one bucket are both `Unavailable`, each naming the
//! other, without a look at the store ([`overlaps`]). Locations are validated each in a task
//! of its own within [`VALIDATION_DEADLINE`]: one whose store never answers is `Unavailable`
//! and holds up no other. An `Available` location with `insecureSkipTLSVerify` carries a
//! warning in `status.message`, and the log says so at each validation.
//!
//! Only one location is the default: when several have `spec.default: true`, the most
//! recently created keeps it and the others' flag is set to false, as Velero does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

use hawser_api::{BackupStorageLocation, BackupStorageLocationPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::periodic::{self, Pass};
use crate::context::Context;
use crate::locations::ranked_defaults;
use crate::objects::{self, velero_api};
use crate::readiness::Watch;

/// Longest time between two looks at the locations.
const TICK: Duration = Duration::from_secs(10);

/// Runs until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "BackupStorageLocation", "backupstoragelocations");
    let locations = Locations {
        api,
        seen: HashMap::new(),
    };
    periodic::run(ctx, locations, health).await;
}

struct Locations {
    api: Api<DynamicObject>,
    /// The spec each location had when this process last validated it, and whether it nested
    /// with another.
    seen: HashMap<String, (Value, Option<String>)>,
}

impl Pass for Locations {
    const LISTS: &'static str = "storage locations";

    type Listed = Vec<DynamicObject>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<DynamicObject>, kube::Error> {
        objects::list_once(ctx, &self.api).await
    }

    async fn handle(&mut self, ctx: &Context, locations: Vec<DynamicObject>) -> Duration {
        for older in ranked_defaults(locations.iter()).iter().skip(1) {
            unset_default(&self.api, older).await;
        }
        let parsed: Vec<(String, BackupStorageLocation)> = locations
            .iter()
            .filter_map(|o| {
                let bsl = serde_json::from_value(serde_json::to_value(o).ok()?).ok()?;
                Some((o.metadata.name.clone()?, bsl))
            })
            .collect();
        let overlapping = overlaps(parsed.iter().map(|(n, b)| (n.as_str(), b)));
        // The locations are looked at side by side, each within a deadline, and each status
        // is written as soon as it is known: one that never answers holds up no other (the
        // next pass comes once it has answered or run out of time).
        let known = self.seen.clone();
        let mut decisions: FuturesUnordered<_> = locations
            .into_iter()
            .map(|object| {
                let overlap = object
                    .metadata
                    .name
                    .as_ref()
                    .and_then(|n| overlapping.get(n))
                    .cloned();
                decide(ctx, &known, object, overlap)
            })
            .collect();
        while let Some(decision) = decisions.next().await {
            if let Some(decision) = decision {
                record(ctx, &self.api, &mut self.seen, decision).await;
            }
        }
        self.retry_after(ctx)
    }

    fn retry_after(&self, ctx: &Context) -> Duration {
        ctx.settings
            .locations
            .validation_frequency
            .map_or(TICK, |f| f.min(TICK))
            .max(Duration::from_millis(200))
    }
}

/// How long one location's validation may take before it counts as not answering.
const VALIDATION_DEADLINE: Duration = Duration::from_secs(60);

/// The status one location is to get.
struct Decision {
    name: String,
    /// Its spec and nesting message, as [`seen`](run) keeps them.
    spec: (Value, Option<String>),
    phase: BackupStorageLocationPhase,
    message: Option<String>,
    at: jiff::Timestamp,
}

/// The status of `object`, when it is to be validated now (new, changed or due); `None`
/// otherwise, or when the API could not answer.
async fn decide(
    ctx: &Context,
    seen: &HashMap<String, (Value, Option<String>)>,
    object: DynamicObject,
    overlap: Option<String>,
) -> Option<Decision> {
    let name = object.metadata.name.clone()?;
    let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
    let spec = (spec, overlap);
    let changed = seen.get(&name) != Some(&spec);
    let now = ctx.clock.now();
    let (phase, message) = match serde_json::from_value::<BackupStorageLocation>(
        serde_json::to_value(&object).unwrap_or(Value::Null),
    ) {
        Err(e) => {
            if !changed {
                return None;
            }
            (
                BackupStorageLocationPhase::Unavailable,
                Some(format!("the BackupStorageLocation cannot be read: {e}")),
            )
        }
        Ok(_) if spec.1.is_some() => {
            if !changed {
                return None;
            }
            (BackupStorageLocationPhase::Unavailable, spec.1.clone())
        }
        Ok(bsl) => {
            if !changed && !due(ctx, &bsl, now) {
                return None;
            }
            match tokio::time::timeout(VALIDATION_DEADLINE, validate(ctx, &name, &bsl)).await {
                Ok(Ok(())) => (BackupStorageLocationPhase::Available, unverified_tls(&bsl)),
                Ok(Err(Some(message))) => (BackupStorageLocationPhase::Unavailable, Some(message)),
                Ok(Err(None)) => return None,
                Err(_elapsed) => (
                    BackupStorageLocationPhase::Unavailable,
                    Some(format!(
                        "the storage location did not answer within {}s",
                        VALIDATION_DEADLINE.as_secs()
                    )),
                ),
            }
        }
    };
    Some(Decision {
        name,
        spec,
        phase,
        message,
        at: now,
    })
}

/// The warning an `Available` location carries in `status.message` when it does not check
/// its endpoint's certificate.
fn unverified_tls(bsl: &BackupStorageLocation) -> Option<String> {
    let config = bsl.spec.config.as_ref()?;
    (config.get("insecureSkipTLSVerify").map(String::as_str) == Some("true")).then(|| {
        "warning: insecureSkipTLSVerify is set: the endpoint's TLS certificate is not verified, \
         so whoever sits between the server and the endpoint can read and change its backups"
            .to_owned()
    })
}

/// Writes `decision`; remembers the spec it was made for once it is stored.
async fn record(
    ctx: &Context,
    api: &Api<DynamicObject>,
    seen: &mut HashMap<String, (Value, Option<String>)>,
    decision: Decision,
) {
    let Decision {
        name,
        spec,
        phase,
        message,
        at,
    } = decision;
    let patch = json!({"status": {
        "phase": phase,
        "message": message,
        "lastValidationTime": Time(at),
    }});
    match crate::objects::merge_patch_once(api, &name, &patch).await {
        Ok(_) => {
            let available = phase == BackupStorageLocationPhase::Available;
            match (&message, available) {
                (None, _) => tracing::info!(location = %name, "storage location available"),
                (Some(m), true) => {
                    tracing::warn!(location = %name, message = %m, "storage location available")
                }
                (Some(m), false) => {
                    tracing::warn!(location = %name, message = %m, "storage location unavailable")
                }
            }
            ctx.metrics.location_status(&name, available);
            seen.insert(name, spec);
        }
        Err(e) => {
            tracing::warn!(location = %name, error = %e, "storing the location's status failed; trying again")
        }
    }
}

/// Turns `spec.default` off on `name`, a default location older than another.
async fn unset_default(api: &Api<DynamicObject>, name: &str) {
    let patch = json!({"spec": {"default": false}});
    match crate::objects::merge_patch_once(api, name, &patch).await {
        Ok(_) => tracing::info!(
            location = %name,
            "a more recently created location is the default; spec.default of this one is now false"
        ),
        Err(e) => {
            tracing::warn!(location = %name, error = %e, "turning spec.default off failed; trying again")
        }
    }
}

/// Whether the validation frequency has passed since the last validation.
fn due(ctx: &Context, bsl: &BackupStorageLocation, now: jiff::Timestamp) -> bool {
    let Some(last) = bsl
        .status
        .as_ref()
        .and_then(|s| s.last_validation_time.as_ref())
    else {
        return true;
    };
    let frequency = match bsl.spec.validation_frequency {
        Some(f) => f.to_std().filter(|d| !d.is_zero()),
        None => ctx.settings.locations.validation_frequency,
    };
    let Some(frequency) = frequency else {
        return false;
    };
    let elapsed = now.duration_since(last.0);
    elapsed.is_negative() || elapsed.unsigned_abs() >= frequency
}

/// The config keys that name where a location's bucket is: two locations of one provider and
/// bucket with the same values here share their objects.
const ENDPOINT_KEYS: [&str; 4] = ["s3Url", "storeEndpoint", "storageAccount", "root"];

/// Locations whose prefixes nest in one bucket, each with the message that names the other
/// (velero-compat §2.4: a location owns the directories under its prefix). A prefix-less
/// location and one with prefix `backups` on one bucket would read each other's backups as
/// their own, and one's deletions and garbage collection would reach the other's files: both
/// are `Unavailable` until one of them moves.
fn overlaps<'a>(
    locations: impl IntoIterator<Item = (&'a str, &'a BackupStorageLocation)>,
) -> HashMap<String, String> {
    let place = |bsl: &BackupStorageLocation| {
        let config = bsl.spec.config.clone().unwrap_or_default();
        let endpoint: Vec<Option<String>> = ENDPOINT_KEYS
            .iter()
            .map(|k| config.get(*k).map(|v| v.trim_end_matches('/').to_owned()))
            .collect();
        let provider = bsl
            .spec
            .provider
            .trim_start_matches("velero.io/")
            .to_owned();
        (provider, bsl.spec.object_storage.bucket.clone(), endpoint)
    };
    let segments = |bsl: &BackupStorageLocation| -> Vec<String> {
        bsl.spec
            .object_storage
            .prefix
            .as_deref()
            .unwrap_or_default()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let all: Vec<(&str, _, Vec<String>)> = locations
        .into_iter()
        .map(|(name, bsl)| (name, place(bsl), segments(bsl)))
        .collect();
    let mut found = HashMap::new();
    for (i, (a, place_a, prefix_a)) in all.iter().enumerate() {
        for (b, place_b, prefix_b) in &all[i + 1..] {
            let nest = prefix_a.starts_with(prefix_b) || prefix_b.starts_with(prefix_a);
            if place_a != place_b || !nest {
                continue;
            }
            let message = |other: &str, mine: &[String], theirs: &[String]| {
                format!(
                    "BackupStorageLocation {other} stores in the same bucket {:?} under prefix {:?}, which nests with this one's {:?}: each would read and delete the other's backups; give them prefixes that do not nest",
                    place_a.1,
                    theirs.join("/"),
                    mine.join("/")
                )
            };
            found
                .entry((*a).to_owned())
                .or_insert_with(|| message(b, prefix_a, prefix_b));
            found
                .entry((*b).to_owned())
                .or_insert_with(|| message(a, prefix_b, prefix_a));
        }
    }
    found
}

/// `Err(Some(message))`: unavailable; `Err(None)`: the API could not answer (try again).
async fn validate(
    ctx: &Context,
    name: &str,
    bsl: &BackupStorageLocation,
) -> Result<(), Option<String>> {
    let location = match ctx.locations.open(name, &bsl.spec).await {
        Ok(l) => l,
        Err(e) if e.is_transient() => return Err(None),
        Err(e) => return Err(Some(e.full_message())),
    };
    hawser_store::validate(&location)
        .await
        .map_err(|e| Some(e.reason()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a panic is how a test reports failure

    use super::*;

    fn location(
        provider: &str,
        bucket: &str,
        prefix: Option<&str>,
        config: Value,
    ) -> BackupStorageLocation {
        serde_json::from_value(json!({
            "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "x"},
            "spec": {"provider": provider, "objectStorage": {"bucket": bucket, "prefix": prefix},
                     "config": config}
        }))
        .unwrap()
    }

    #[test]
    fn locations_whose_prefixes_nest_in_one_bucket_name_each_other() {
        let s3 = json!({"s3Url": "http://minio:9000"});
        let plain = location("aws", "b", None, s3.clone());
        let nested = location("velero.io/aws", "b", Some("backups/"), s3.clone());
        let apart = location("aws", "b", Some("team-a"), s3.clone());
        let other_bucket = location("aws", "c", None, s3.clone());
        let other_endpoint = location("aws", "b", None, json!({"s3Url": "http://other:9000"}));
        let found = overlaps([
            ("plain", &plain),
            ("nested", &nested),
            ("apart", &apart),
            ("other-bucket", &other_bucket),
            ("other-endpoint", &other_endpoint),
        ]);
        let mut names: Vec<&String> = found.keys().collect();
        names.sort();
        assert_eq!(names, ["apart", "nested", "plain"], "{found:#?}");
        assert!(
            found["nested"].starts_with("BackupStorageLocation plain "),
            "{}",
            found["nested"]
        );
        assert!(found["nested"].contains("\"backups\""));
        // Siblings under distinct prefixes do not nest.
        let a = location("aws", "b", Some("team-a"), s3.clone());
        let b = location("aws", "b", Some("team-b"), s3.clone());
        let ab = location("aws", "b", Some("team-ab"), s3);
        assert!(overlaps([("a", &a), ("b", &b), ("ab", &ab)]).is_empty());
        // The same prefix twice nests.
        assert_eq!(overlaps([("a", &a), ("a2", &a)]).len(), 2);
    }

    #[test]
    fn a_location_that_skips_tls_verification_says_so() {
        let insecure = location("aws", "b", None, json!({"insecureSkipTLSVerify": "true"}));
        let warning = unverified_tls(&insecure).unwrap();
        assert!(
            warning.starts_with("warning: insecureSkipTLSVerify is set"),
            "{warning}"
        );
        let checked = location("aws", "b", None, json!({"insecureSkipTLSVerify": "false"}));
        assert_eq!(unverified_tls(&checked), None);
        assert_eq!(unverified_tls(&location("aws", "b", None, json!({}))), None);
    }
}
