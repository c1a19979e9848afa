//! The demo's steps, in order. Each step prints what it did and checks what a user relies on.

use std::time::Duration;

use anyhow::Context as _;
use hawser_api::phase::{BackupStorageLocationPhase, Kind, Phase};
use hawser_core::poll::poll_until;
use kube_sim::{LatencyFault, SimStore};
use serde_json::{Value, json};

use super::compare::{self, Mapping};
use super::env::{EnvConfig, Environment, LOCATION, VELERO_NAMESPACE};
use super::sample::{self, NAMESPACE, RESTORED_NAMESPACE};
use super::timeline::{Timeline, object_label, phase_label, phase_of};
use super::{DemoOptions, Story};

const BACKUP: &str = "demo-backup";
const RESTORE: &str = "demo-restore";
/// The server's `--resource-timeout`: the outage below lasts longer.
const RESOURCE_TIMEOUT: Duration = Duration::from_secs(1);
const OUTAGE: Duration = Duration::from_secs(3);
/// Slowness of each read of the Backup, so that its final status write is still under way when
/// the outage starts (the record in storage is written first).
const BACKUP_READ_LATENCY: Duration = Duration::from_millis(400);
/// How long the Restore may go without any phase before the demo concludes that no restore
/// controller picked it up.
const RESTORE_PICKUP: Duration = Duration::from_secs(10);

pub(super) async fn run(
    options: &DemoOptions,
    timeline: &Timeline,
    story: &mut Story,
) -> anyhow::Result<()> {
    story.step("1. Start kube-sim and a hawser server in this process");
    let env = Environment::start(EnvConfig {
        dir: options.dir.clone(),
        api_port: 0,
        admin: false,
        server_flags: [
            "--resource-timeout",
            "1s",
            "--status-patch-max-backoff",
            "250ms",
            "--status-resync-period",
            "1s",
            "--store-validation-frequency",
            "1s",
            "--garbage-collection-frequency",
            "1s",
            // The nightly loop runs every 2s to fit in the demo's minute.
            "--schedule-min-interval",
            "2s",
        ]
        .map(str::to_owned)
        .to_vec(),
    })
    .await?;
    story.check(
        true,
        &format!(
            "kube-sim serves {}; the server is ready (resource timeout {}s)",
            env.sim.api_url(),
            RESOURCE_TIMEOUT.as_secs()
        ),
    );
    let store = env.sim.store();
    let followers = [
        timeline.follow_phase(
            store.clone(),
            "BackupStorageLocation",
            VELERO_NAMESPACE,
            LOCATION,
        ),
        timeline.follow_phase(store.clone(), "Backup", VELERO_NAMESPACE, BACKUP),
        timeline.follow_phase(store.clone(), "Restore", VELERO_NAMESPACE, RESTORE),
    ];
    let location = wait_for(
        &store,
        timeline,
        "BackupStorageLocation",
        LOCATION,
        Duration::from_secs(15),
        |o| BackupStorageLocationPhase::of(o) == BackupStorageLocationPhase::Available,
    )
    .await;
    story.check(
        location.is_some(),
        &format!(
            "BackupStorageLocation {LOCATION} is Available (filesystem, {})",
            env.storage_root.display()
        ),
    );

    let result = scenario(&env, &store, timeline, story).await;
    for follower in followers {
        follower.abort();
    }
    story.step("7. Stop the server and kube-sim");
    let stopped = env.stop().await;
    story.check(
        stopped.is_ok(),
        &match &stopped {
            Ok(()) => "the server and kube-sim shut down cleanly".to_owned(),
            Err(err) => format!("the server stopped with an error: {err:#}"),
        },
    );
    result
}

async fn scenario(
    env: &Environment,
    store: &SimStore,
    timeline: &Timeline,
    story: &mut Story,
) -> anyhow::Result<()> {
    story.step(&format!(
        "2. Create a sample application in namespace {NAMESPACE}"
    ));
    store
        .insert(sample::crd())
        .context("creating the sample CRD")?;
    store
        .insert(sample::namespace())
        .context("creating the sample namespace")?;
    let objects = sample::objects();
    for object in &objects {
        store
            .insert(object.clone())
            .with_context(|| format!("creating {}", describe(object)))?;
    }
    store
        .insert(sample::claim())
        .context("creating the sample claim")?;
    let bound = wait_until(Duration::from_secs(10), || {
        volume_of(store, NAMESPACE, sample::CLAIM).is_some()
    })
    .await;
    story.check(
        bound,
        &format!(
            "PersistentVolumeClaim {} bound to a volume of kube-sim's CSI driver",
            sample::CLAIM
        ),
    );
    timeline.record(
        format!("Namespace {NAMESPACE}"),
        "sample application created",
    );
    story.check(
        true,
        &format!(
            "created {} objects: {}",
            objects.len(),
            objects.iter().map(describe).collect::<Vec<_>>().join(", ")
        ),
    );

    if !backup_through_outage(env, store, timeline, story).await? {
        story.step("4. Restore");
        story.check(false, "skipped: there is no Completed backup to restore");
        return Ok(());
    }
    restore_and_compare(store, timeline, &objects, story).await?;
    nightly_loop(env, store, story).await
}

/// The schedule of the nightly loop.
const SCHEDULE: &str = "demo-nightly";

/// A schedule every 2 s makes two backups; the newer is deleted by request, the older expires
/// and is collected.
async fn nightly_loop(
    env: &Environment,
    store: &SimStore,
    story: &mut Story,
) -> anyhow::Result<()> {
    story.step(&format!(
        "6. The nightly loop: Schedule {SCHEDULE} every 2s, backups with ttl 3s, garbage collection every 1s"
    ));
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": SCHEDULE, "namespace": VELERO_NAMESPACE},
            "spec": {"schedule": "@every 2s",
                     "template": {"includedNamespaces": [NAMESPACE], "ttl": "3s"}}
        }))
        .context("creating the Schedule")?;
    let scheduled = || -> Vec<Value> {
        let mut found: Vec<Value> = store
            .list("velero.io/v1", "Backup", Some(VELERO_NAMESPACE))
            .into_iter()
            .filter(|b| b["metadata"]["labels"]["velero.io/schedule-name"] == SCHEDULE)
            .collect();
        found.sort_by_key(|b| b["metadata"]["name"].as_str().unwrap_or("").to_owned());
        found
    };
    let two = poll_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            let found = scheduled();
            let completed = found
                .iter()
                .filter(|b| Phase::of(Kind::Backup, b).is_success())
                .count();
            (completed >= 2).then_some(found)
        },
    )
    .await;
    // No third run: the story goes on with these two.
    if let Some(mut schedule) = store.get("velero.io/v1", "Schedule", VELERO_NAMESPACE, SCHEDULE) {
        schedule["spec"]["paused"] = json!(true);
        store.insert(schedule).context("pausing the Schedule")?;
    }
    let Some(two) = two else {
        story.check(
            false,
            "the schedule made no two Completed backups within 10 s",
        );
        return Ok(());
    };
    let names: Vec<String> = two
        .iter()
        .filter(|b| Phase::of(Kind::Backup, b).is_success())
        .filter_map(|b| b["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let (older, newer) = (
        names[names.len() - 2].clone(),
        names[names.len() - 1].clone(),
    );
    story.check(
        true,
        &format!("the schedule made {older} and {newer}, both Completed; the schedule is paused"),
    );

    let uid = store
        .get("velero.io/v1", "Backup", VELERO_NAMESPACE, &newer)
        .map(|b| b["metadata"]["uid"].clone())
        .unwrap_or_default();
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "DeleteBackupRequest",
            "metadata": {"name": format!("{newer}-delete"), "namespace": VELERO_NAMESPACE,
                "labels": {"velero.io/backup-name": newer, "velero.io/backup-uid": uid}},
            "spec": {"backupName": newer}
        }))
        .context("creating the DeleteBackupRequest")?;
    story.note(&format!(
        "DeleteBackupRequest for {newer} created, as `hawser backup delete` does"
    ));
    for (name, how) in [
        (&newer, "deleted by its request"),
        (&older, "expired and collected"),
    ] {
        let dir = env.backup_dir(name);
        let gone = wait_until(Duration::from_secs(10), || {
            store
                .get("velero.io/v1", "Backup", VELERO_NAMESPACE, name)
                .is_none()
                && !dir.exists()
        })
        .await;
        story.check(
            gone,
            &format!("Backup {name} {how}: gone from the cluster and from the storage location"),
        );
    }
    Ok(())
}

/// Backs the namespace up with an outage during the final status write; `true` when the
/// Backup ended `Completed`.
async fn backup_through_outage(
    env: &Environment,
    store: &SimStore,
    timeline: &Timeline,
    story: &mut Story,
) -> anyhow::Result<bool> {
    story.step(&format!(
        "3. Back up {NAMESPACE}; the API refuses connections for {}s while the backup finishes",
        OUTAGE.as_secs()
    ));
    let faults = env.sim.faults();
    let slow_reads = faults.latency(
        LatencyFault::new(BACKUP_READ_LATENCY)
            .verbs(&["get"])
            .resources(&["backups"]),
    );
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": BACKUP, "namespace": VELERO_NAMESPACE},
            "spec": {"includedNamespaces": [NAMESPACE], "storageLocation": LOCATION}
        }))
        .context("creating the Backup")?;
    story.note(&format!(
        "Backup {VELERO_NAMESPACE}/{BACKUP} created (spec.includedNamespaces: [{NAMESPACE}])"
    ));
    let record = env.backup_dir(BACKUP).join("velero-backup.json");
    // The record is stored before each status: once it says a final phase, the final status
    // write is next (before that it says WaitingForPluginOperations, then Finalizing, while
    // the claim's snapshot is made ready).
    let recorded = wait_until(Duration::from_secs(20), || {
        std::fs::read(&record)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|r| Phase::of(Kind::Backup, &r).is_final())
    })
    .await;
    if !story.check(
        recorded,
        "the server wrote the backup and its final record velero-backup.json to the storage location",
    ) {
        faults.remove(slow_reads);
        return Ok(false);
    }
    timeline.record(
        format!("storage {LOCATION}"),
        format!("{BACKUP}/velero-backup.json written"),
    );
    faults.refuse(Some(OUTAGE));
    let outage_start = timeline.record("kube-sim API", "refusing connections");
    let phase_at_outage = store
        .get("velero.io/v1", "Backup", VELERO_NAMESPACE, BACKUP)
        .and_then(|o| phase_of(&o).map(str::to_owned))
        .unwrap_or_default();
    story.check(
        !Phase::parse(Kind::Backup, &phase_at_outage).is_final(),
        &format!(
            "the API went away with the Backup still {phase_at_outage}: its final status write \
             meets an outage longer than the {}s resource timeout",
            RESOURCE_TIMEOUT.as_secs()
        ),
    );
    let back = {
        let timeline = timeline.clone();
        tokio::spawn(async move {
            tokio::time::sleep(OUTAGE).await;
            timeline.record("kube-sim API", "accepting connections again");
        })
    };

    let done = wait_for(
        store,
        timeline,
        "Backup",
        BACKUP,
        Duration::from_secs(30),
        |o| Phase::of(Kind::Backup, o).is_final(),
    )
    .await;
    let landed = timeline.elapsed();
    // The record of the outage's end, when the Backup finished early.
    let _ = back.await;
    faults.remove(slow_reads);
    let Some(done) = done else {
        story.check(false, "the Backup reached no final phase within 30 s");
        return Ok(false);
    };
    let phase = phase_of(&done).unwrap_or_default().to_owned();
    let outage_end = outage_start + OUTAGE;
    let completed = story.check(
        Phase::parse(Kind::Backup, &phase).is_success(),
        &format!("the Backup ended {phase}"),
    );
    story.check(
        landed + Duration::from_millis(200) >= outage_end,
        &format!(
            "its final status landed {:.2}s after the outage began, {:.2}s after the API came back",
            landed.saturating_sub(outage_start).as_secs_f64(),
            landed.saturating_sub(outage_end).as_secs_f64(),
        ),
    );
    let progress = &done["status"]["progress"];
    story.check(
        progress["itemsBackedUp"].as_u64().is_some_and(|n| n > 0)
            && progress["itemsBackedUp"] == progress["totalItems"],
        &format!(
            "{} of {} items backed up",
            progress["itemsBackedUp"], progress["totalItems"]
        ),
    );
    let stored_phase = std::fs::read(&record)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|r| phase_of(&r).map(str::to_owned));
    story.check(
        stored_phase.as_deref() == Some(phase.as_str()),
        &format!(
            "the record in storage agrees: {}",
            stored_phase.as_deref().unwrap_or("(unreadable)")
        ),
    );
    super::hooks::check(env, timeline, story);
    Ok(completed)
}

/// Restores the backup into [`RESTORED_NAMESPACE`] and compares every object.
async fn restore_and_compare(
    store: &SimStore,
    timeline: &Timeline,
    objects: &[Value],
    story: &mut Story,
) -> anyhow::Result<()> {
    story.step(&format!(
        "4. Restore {BACKUP} with namespace mapping {NAMESPACE}:{RESTORED_NAMESPACE}"
    ));
    store
        .insert(json!({
            "apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": RESTORE, "namespace": VELERO_NAMESPACE},
            "spec": {
                "backupName": BACKUP,
                "includedNamespaces": [NAMESPACE],
                "namespaceMapping": {NAMESPACE: RESTORED_NAMESPACE}
            }
        }))
        .context("creating the Restore")?;
    story.note(&format!("Restore {VELERO_NAMESPACE}/{RESTORE} created"));
    let picked_up = wait_for(store, timeline, "Restore", RESTORE, RESTORE_PICKUP, |o| {
        phase_of(o).is_some()
    })
    .await;
    if picked_up.is_none() {
        story.check(
            false,
            &format!(
                "the restore step is not available: no controller took up the Restore \
                 (no phase after {}s)",
                RESTORE_PICKUP.as_secs()
            ),
        );
        return Ok(());
    }
    let done = wait_for(
        store,
        timeline,
        "Restore",
        RESTORE,
        Duration::from_secs(30),
        |o| Phase::of(Kind::Restore, o).is_final(),
    )
    .await;
    let Some(done) = done else {
        story.check(false, "the Restore reached no final phase within 30 s");
        return Ok(());
    };
    let phase = phase_of(&done).unwrap_or_default();
    story.check(
        Phase::parse(Kind::Restore, phase).is_success(),
        &format!(
            "the Restore ended {phase} ({} warnings, {} errors)",
            done["status"]["warnings"].as_u64().unwrap_or(0),
            done["status"]["errors"].as_u64().unwrap_or(0)
        ),
    );

    story.note(&format!(
        "{} of {} items restored",
        done["status"]["progress"]["itemsRestored"], done["status"]["progress"]["totalItems"]
    ));

    story.step(&format!(
        "5. Compare every object of {NAMESPACE} with its copy in {RESTORED_NAMESPACE}"
    ));
    let mapping = Mapping {
        source: NAMESPACE,
        target: RESTORED_NAMESPACE,
    };
    let namespace = store.get("v1", "Namespace", "", RESTORED_NAMESPACE);
    story.check(
        namespace
            .as_ref()
            .and_then(|n| n.pointer("/metadata/labels/team"))
            .is_some_and(|t| t == "storefront"),
        &format!("Namespace {RESTORED_NAMESPACE} exists with the original's labels"),
    );
    let mut matched = 0;
    for original in objects {
        let (api_version, kind, name) = identity(original);
        let live = store.get(api_version, kind, NAMESPACE, name);
        let copy = store.get(api_version, kind, RESTORED_NAMESPACE, name);
        let ok = match (&live, &copy) {
            (Some(live), Some(copy)) => {
                let found = compare::differences(live, copy, mapping, BACKUP, RESTORE);
                story.check(
                    found.is_empty(),
                    &if found.is_empty() {
                        format!("{kind} {name} matches")
                    } else {
                        format!("{kind} {name} differs at {}", found.join(", "))
                    },
                )
            }
            (None, _) => story.check(false, &format!("{kind} {name}: the original is gone")),
            (_, None) => story.check(false, &format!("{kind} {name} was not restored")),
        };
        matched += usize::from(ok);
    }
    story.check(
        matched == objects.len(),
        &format!(
            "{matched} of {} objects match their originals",
            objects.len()
        ),
    );
    // The claim's copy gets a new volume provisioned from the backup's snapshot of the original.
    let restored = wait_until(Duration::from_secs(10), || {
        volume_of(store, RESTORED_NAMESPACE, sample::CLAIM).is_some()
    })
    .await;
    let from = volume_of(store, RESTORED_NAMESPACE, sample::CLAIM).and_then(|v| {
        v.pointer(&format!(
            "/metadata/annotations/{}",
            kube_sim::csi::RESTORED_FROM.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .map(str::to_owned)
    });
    story.check(
        restored && from.is_some(),
        &match &from {
            Some(handle) => format!(
                "PersistentVolumeClaim {} was restored from the CSI snapshot {handle} onto a new volume",
                sample::CLAIM
            ),
            None => format!(
                "PersistentVolumeClaim {} did not get a volume provisioned from its snapshot",
                sample::CLAIM
            ),
        },
    );
    Ok(())
}

/// The PersistentVolume the claim `namespace/name` is bound to, once it is bound.
fn volume_of(store: &SimStore, namespace: &str, name: &str) -> Option<Value> {
    let claim = store.get("v1", "PersistentVolumeClaim", namespace, name)?;
    let volume = claim.pointer("/spec/volumeName").and_then(Value::as_str)?;
    store.get("v1", "PersistentVolume", "", volume)
}

fn identity(object: &Value) -> (&str, &str, &str) {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    (
        field("/apiVersion"),
        field("/kind"),
        field("/metadata/name"),
    )
}

fn describe(object: &Value) -> String {
    let (_, kind, name) = identity(object);
    format!("{kind} {name}")
}

/// Polls the velero.io object `kind velero/name` until `done` holds, recording its phases on the
/// timeline; `None` after `limit`.
async fn wait_for(
    store: &SimStore,
    timeline: &Timeline,
    kind: &str,
    name: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Option<Value> {
    poll_until(limit, Duration::from_millis(10), || async {
        let object = store.get("velero.io/v1", kind, VELERO_NAMESPACE, name)?;
        timeline.observe(
            &object_label(kind, VELERO_NAMESPACE, name),
            phase_label(&object),
        );
        done(&object).then_some(object)
    })
    .await
}

/// Polls `done` every 5 ms; `false` after `limit`.
async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    poll_until(limit, Duration::from_millis(5), || async {
        done().then_some(())
    })
    .await
    .is_some()
}
