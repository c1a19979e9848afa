//! The pure decisions of backup sync: rule B15, the object made from a record, owner
//! references, pending deletions, orphans and the period.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use super::*;
use hawser_api::labels::HAWSER_ATTEMPT;

const NOW: &str = "2025-06-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// A stored `velero-backup.json`, as another cluster wrote it.
struct Record(Value);

impl Record {
    fn named(name: &str) -> Self {
        Self(json!({
            "apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {
                "name": name, "namespace": "elsewhere", "uid": "source-uid",
                "resourceVersion": "77", "creationTimestamp": "2025-05-01T00:00:00Z",
                "generation": 3, "managedFields": [{"manager": "velero"}],
                "labels": {"team": "shop", STORAGE_LOCATION: "primary"},
                "annotations": {HAWSER_OWNER: "old-instance", "note": "kept"}
            },
            "spec": {"includedNamespaces": ["shop"], "storageLocation": "primary"},
            "status": {"phase": "Completed", "errors": 0, "expiration": "2025-07-01T00:00:00Z"}
        }))
    }

    fn in_phase(mut self, phase: &str) -> Self {
        self.0["status"]["phase"] = json!(phase);
        self
    }

    fn expiring(mut self, at: &str) -> Self {
        self.0["status"]["expiration"] = json!(at);
        self
    }

    fn owned_by(mut self, kind: &str, name: &str, uid: &str) -> Self {
        let reference =
            json!({"apiVersion": "velero.io/v1", "kind": kind, "name": name, "uid": uid});
        let refs = &mut self.0["metadata"]["ownerReferences"];
        if !refs.is_array() {
            *refs = json!([]);
        }
        refs.as_array_mut().unwrap().push(reference);
        self
    }

    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).unwrap()
    }
}

fn planned(name: &str, record: &Record, schedules: &HashMap<String, String>) -> Plan {
    let target = Target {
        namespace: "velero",
        location: "dr",
        schedules,
        now: now(),
    };
    plan(name, &record.bytes(), &target)
}

fn created(plan: Plan) -> Value {
    match plan {
        Plan::Create(object) => object,
        other => panic!("not created: {other:?}"),
    }
}

#[test]
fn b15_final_phases_are_kept_unfinished_ones_wait_until_they_expire_and_others_fail() {
    use BackupPhase::*;
    let past: Timestamp = "2025-06-01T11:00:00Z".parse().unwrap();
    let future: Timestamp = "2025-06-01T13:00:00Z".parse().unwrap();
    for phase in BackupPhase::ALL {
        let unfinished = matches!(
            phase,
            WaitingForPluginOperations
                | WaitingForPluginOperationsPartiallyFailed
                | Finalizing
                | FinalizingPartiallyFailed
        );
        for expiration in [None, Some(past), Some(now()), Some(future)] {
            let expired = expiration.is_some_and(|at| at <= now());
            let wanted = match (unfinished, expired) {
                _ if phase.is_final() => Some(phase.clone()),
                (false, _) => Some(Failed),
                (true, true) => Some(PartiallyFailed),
                (true, false) => None,
            };
            assert_eq!(
                synced_phase(phase.clone(), expiration, now()),
                wanted,
                "{phase} expiring {expiration:?}"
            );
        }
    }
}

#[test]
fn a_synced_backup_is_the_record_without_the_source_clusters_identity() {
    let object = created(planned("b1", &Record::named("b1"), &HashMap::new()));
    let metadata = &object["metadata"];
    assert_eq!(metadata["namespace"], "velero");
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        assert!(metadata.get(field).is_none(), "{field} kept: {object:#}");
    }
    assert_eq!(metadata["labels"]["team"], "shop");
    assert_eq!(metadata["labels"][STORAGE_LOCATION], "dr");
    assert_eq!(object["spec"]["storageLocation"], "dr");
    assert_eq!(object["spec"]["includedNamespaces"], json!(["shop"]));
    assert_eq!(object["status"]["phase"], "Completed");
    assert_eq!(object["status"]["errors"], 0);
    assert_eq!(metadata["annotations"]["note"], "kept");
    assert_eq!(metadata["annotations"][HAWSER_RECORD_UID], "source-uid");
    assert!(metadata["annotations"].get(HAWSER_OWNER).is_none());
}

#[test]
fn an_expired_unfinished_backup_is_created_partially_failed_and_a_live_one_waits() {
    let expired = Record::named("b1")
        .in_phase("Finalizing")
        .expiring("2025-06-01T11:59:59Z");
    let object = created(planned("b1", &expired, &HashMap::new()));
    assert_eq!(object["status"]["phase"], "PartiallyFailed");
    let live = Record::named("b1").in_phase("WaitingForPluginOperations");
    assert_eq!(
        planned("b1", &live, &HashMap::new()),
        Plan::Wait("WaitingForPluginOperations".to_owned())
    );
}

#[test]
fn only_references_to_this_namespaces_schedule_with_the_same_uid_are_kept() {
    let schedules = HashMap::from([
        ("nightly".to_owned(), "s-uid".to_owned()),
        ("weekly".to_owned(), "new-uid".to_owned()),
    ]);
    let record = Record::named("b1")
        .owned_by("Schedule", "nightly", "s-uid")
        .owned_by("Schedule", "weekly", "old-uid")
        .owned_by("Schedule", "gone", "g-uid")
        .owned_by("Deployment", "nightly", "s-uid");
    let object = created(planned("b1", &record, &schedules));
    assert_eq!(
        object["metadata"]["ownerReferences"],
        json!([{"apiVersion": "velero.io/v1", "kind": "Schedule", "name": "nightly", "uid": "s-uid"}])
    );
    let unowned = Record::named("b1").owned_by("Schedule", "gone", "g-uid");
    let object = created(planned("b1", &unowned, &schedules));
    assert!(object["metadata"].get("ownerReferences").is_none());
}

#[test]
fn unusable_records_are_skipped_with_a_reason() {
    let schedules = HashMap::new();
    let target = Target {
        namespace: "velero",
        location: "dr",
        schedules: &schedules,
        now: now(),
    };
    let mut restore = Record::named("b1");
    restore.0["kind"] = json!("Restore");
    let mut bad_ttl = Record::named("b1");
    bad_ttl.0["spec"]["ttl"] = json!("30d");
    for (bytes, reason) in [
        (b"{not json".to_vec(), "not JSON"),
        (restore.bytes(), "not a velero.io/v1 Backup"),
        (bad_ttl.bytes(), "cannot be read as a Backup"),
        (Record::named("other").bytes(), "names backup \"other\""),
    ] {
        match plan("b1", &bytes, &target) {
            Plan::Unusable(why) => assert!(why.contains(reason), "{why}"),
            other => panic!("{reason}: {other:?}"),
        }
    }
}

#[test]
fn pending_deletion_requests_block_their_backup_and_processed_ones_do_not() {
    let request = |backup: &str, phase: &str| json!({"spec": {"backupName": backup}, "status": {"phase": phase}});
    let requests = [
        request("a", ""),
        request("b", "New"),
        request("c", "InProgress"),
        request("d", "Processed"),
        json!({"spec": {"backupName": "e"}}),
    ];
    let names = being_deleted(&requests);
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b", "c", "e"]);
}

#[test]
fn orphans_are_final_backups_of_this_location_missing_from_the_listing() {
    let backup = |name: &str, labels: Value, location: &str, phase: &str| {
        json!({"metadata": {"name": name, "labels": labels},
               "spec": {"storageLocation": location}, "status": {"phase": phase}})
    };
    let ours = json!({STORAGE_LOCATION: "dr"});
    let mut made_here = backup("made-here", json!({}), "dr", "Completed");
    made_here["metadata"]["annotations"] = json!({HAWSER_OWNER: "instance"});
    let backups = [
        backup("gone", ours.clone(), "dr", "Completed"),
        backup("partial", ours.clone(), "dr", "PartiallyFailed"),
        made_here,
        backup("unlabelled", json!({}), "dr", "Completed"),
        backup(
            "relabelled",
            json!({STORAGE_LOCATION: "other"}),
            "dr",
            "Completed",
        ),
        backup("listed", ours.clone(), "dr", "Completed"),
        backup("failed", ours.clone(), "dr", "Failed"),
        backup("deleting", ours.clone(), "dr", "Deleting"),
        backup("running", ours.clone(), "dr", "InProgress"),
        backup(
            "elsewhere",
            json!({STORAGE_LOCATION: "other"}),
            "other",
            "Completed",
        ),
    ];
    let listed = BTreeSet::from(["listed".to_owned()]);
    let found: Vec<&str> = orphans(&backups, "dr", &listed)
        .into_iter()
        .map(|b| text(b, "/metadata/name"))
        .collect();
    assert_eq!(found, ["gone", "partial", "made-here"]);
}

#[test]
fn the_period_is_the_locations_else_the_flag_and_zero_turns_sync_off() {
    let flag = Duration::from_secs(60);
    let go = |s: &str| Some(GoDuration::parse(s).unwrap());
    assert_eq!(sync_period(None, flag), Some(flag));
    assert_eq!(sync_period(go("1s"), flag), Some(Duration::from_secs(1)));
    assert_eq!(sync_period(go("0s"), flag), None);
    assert_eq!(sync_period(go("-5s"), flag), Some(flag));
}

#[test]
fn a_location_is_due_once_its_period_has_passed_since_its_last_sync() {
    let period = Duration::from_secs(10);
    let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
    assert_eq!(due_in(None, period, now()), Duration::ZERO);
    assert_eq!(
        due_in(at("2025-06-01T11:59:57Z"), period, now()),
        Duration::from_secs(7)
    );
    assert_eq!(
        due_in(at("2025-06-01T11:59:50Z"), period, now()),
        Duration::ZERO
    );
    assert_eq!(
        due_in(at("2025-06-01T12:00:05Z"), period, now()),
        Duration::ZERO
    );
}

#[test]
fn a_record_that_never_finished_is_synced_failed_and_says_why() {
    for phase in [
        "InProgress",
        "New",
        "",
        "Queued",
        "Deleting",
        "Finalising-typo",
    ] {
        let object = created(planned(
            "b1",
            &Record::named("b1").in_phase(phase),
            &HashMap::new(),
        ));
        assert_eq!(object["status"]["phase"], "Failed", "{phase}");
        let reason = text(&object, "/status/failureReason");
        assert!(reason.starts_with("synced unfinished"), "{phase}: {reason}");
    }
    let done = created(planned("b1", &Record::named("b1"), &HashMap::new()));
    assert!(done["status"].get("failureReason").is_none());
}

#[test]
fn the_bucket_cannot_set_finalizers_hawser_marks_or_a_future_date() {
    let mut record = Record::named("b1");
    let meta = &mut record.0["metadata"];
    meta["finalizers"] = json!(["example.com/never-delete"]);
    meta["annotations"][HAWSER_ATTEMPT] = json!("9");
    meta["annotations"][HAWSER_RECORD_UID] = json!("someone-elses-uid");
    meta["labels"]["hawser.io/restore-uid"] = json!("x");
    record.0["status"]["startTimestamp"] = json!("2099-01-01T00:00:00Z");
    record.0["status"]["completionTimestamp"] = json!("2099-01-01T00:10:00Z");
    let past = "2025-05-31T00:00:00Z";
    record.0["status"]["expiration"] = json!("2099-02-01T00:00:00Z");
    let object = created(planned("b1", &record, &HashMap::new()));
    let meta = &object["metadata"];
    assert!(meta.get("finalizers").is_none(), "{object:#}");
    assert!(meta["annotations"].get(HAWSER_ATTEMPT).is_none());
    assert_eq!(meta["annotations"][HAWSER_RECORD_UID], "source-uid");
    assert!(meta["labels"].get("hawser.io/restore-uid").is_none());
    assert_eq!(meta["labels"]["team"], "shop");
    assert_eq!(object["status"]["startTimestamp"], NOW);
    assert_eq!(object["status"]["completionTimestamp"], NOW);
    // An expiration ahead is what a backup has; it is kept.
    assert_eq!(object["status"]["expiration"], "2099-02-01T00:00:00Z");
    // A date in the past is kept as it is.
    let mut record = Record::named("b1");
    record.0["status"]["startTimestamp"] = json!(past);
    let object = created(planned("b1", &record, &HashMap::new()));
    assert_eq!(object["status"]["startTimestamp"], past);
}
