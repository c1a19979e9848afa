#![allow(clippy::unwrap_used)]

use super::*;

/// Renders a row of the table as `x` (allowed) and `.` (refused), in the order of `phases`.
fn row<P>(from: &P, phases: &[P], allowed: impl Fn(&P, &P) -> bool) -> String {
    phases
        .iter()
        .map(|to| if allowed(from, to) { 'x' } else { '.' })
        .collect()
}

fn backup_phases() -> Vec<BackupPhase> {
    let mut all = BackupPhase::ALL.to_vec();
    all.push(BackupPhase::Unknown("Paused".to_owned()));
    all
}

fn restore_phases() -> Vec<RestorePhase> {
    let mut all = RestorePhase::ALL.to_vec();
    all.push(RestorePhase::Unknown("Paused".to_owned()));
    all
}

#[test]
fn backup_transition_matrix() {
    // Columns (and rows) in this order:
    // New Queued ReadyToStart FailedValidation InProgress Waiting WaitingPF Finalizing
    // FinalizingPF Completed PartiallyFailed Failed Deleting Unknown("Paused")
    let expected = [
        ("New", "xxxxx......xx."),
        ("Queued", ".xxxx......xx."),
        ("ReadyToStart", "..xxx......xx."),
        ("FailedValidation", "...x........x."),
        ("InProgress", "....xxxxxxxxx."),
        ("WaitingForPluginOperations", ".....xxxxxxxx."),
        (
            "WaitingForPluginOperationsPartiallyFailed",
            "......x.x.xxx.",
        ),
        ("Finalizing", ".......xxxxxx."),
        ("FinalizingPartiallyFailed", "........x.xxx."),
        ("Completed", ".........x..x."),
        ("PartiallyFailed", "..........x.x."),
        ("Failed", "...........xx."),
        ("Deleting", "............x."),
        ("Paused", "...........xxx"),
    ];
    let phases = backup_phases();
    assert_eq!(phases.len(), expected.len());
    for (from, (name, want)) in phases.iter().zip(expected) {
        assert_eq!(from.as_str(), name);
        assert_eq!(
            row(from, &phases, BackupPhase::can_transition),
            want,
            "from {from}"
        );
    }
}

#[test]
fn restore_transition_matrix() {
    // New FailedValidation InProgress Waiting WaitingPF Finalizing FinalizingPF Completed
    // PartiallyFailed Failed Unknown("Paused")
    let expected = [
        ("New", "xxx......x."),
        ("FailedValidation", ".x........."),
        ("InProgress", "..xxxxxxxx."),
        ("WaitingForPluginOperations", "...xxxxxxx."),
        ("WaitingForPluginOperationsPartiallyFailed", "....x.x.xx."),
        ("Finalizing", ".....xxxxx."),
        ("FinalizingPartiallyFailed", "......x.xx."),
        ("Completed", ".......x..."),
        ("PartiallyFailed", "........x.."),
        ("Failed", ".........x."),
        ("Paused", ".........xx"),
    ];
    let phases = restore_phases();
    assert_eq!(phases.len(), expected.len());
    for (from, (name, want)) in phases.iter().zip(expected) {
        assert_eq!(from.as_str(), name);
        assert_eq!(
            row(from, &phases, RestorePhase::can_transition),
            want,
            "from {from}"
        );
    }
}

#[test]
fn one_unknown_phase_does_not_move_to_another() {
    let a = BackupPhase::parse("Paused");
    let b = BackupPhase::parse("Resumed");
    assert!(!BackupPhase::can_transition(&a, &b));
    assert!(!RestorePhase::can_transition(
        &RestorePhase::parse("Paused"),
        &RestorePhase::parse("X")
    ));
}

#[test]
fn completed_never_returns_to_in_progress() {
    let err = BackupPhase::Completed
        .transition_to(BackupPhase::InProgress)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "backup may not move from phase \"Completed\" to \"InProgress\""
    );
    assert_eq!(err.category(), "IllegalTransition");
    let err = RestorePhase::Completed
        .transition_to(RestorePhase::InProgress)
        .unwrap_err();
    assert_eq!(err.kind, "restore");
    assert_eq!(
        BackupPhase::InProgress.transition_to(BackupPhase::Completed),
        Ok(BackupPhase::Completed)
    );
}

#[test]
fn final_phases() {
    let finals: Vec<String> = backup_phases()
        .iter()
        .filter(|p| p.is_final())
        .map(|p| p.as_str().to_owned())
        .collect();
    assert_eq!(
        finals,
        ["FailedValidation", "Completed", "PartiallyFailed", "Failed"]
    );
    let finals: Vec<String> = restore_phases()
        .iter()
        .filter(|p| p.is_final())
        .map(|p| p.as_str().to_owned())
        .collect();
    assert_eq!(
        finals,
        ["FailedValidation", "Completed", "PartiallyFailed", "Failed"]
    );
}

#[test]
fn velero_strings_round_trip() {
    for phase in backup_phases() {
        assert_eq!(BackupPhase::parse(phase.as_str()), phase);
        let json = serde_json::to_string(&phase).unwrap();
        assert_eq!(json, format!("\"{}\"", phase.as_str()));
        assert_eq!(serde_json::from_str::<BackupPhase>(&json).unwrap(), phase);
    }
    for phase in restore_phases() {
        assert_eq!(RestorePhase::parse(phase.as_str()), phase);
    }
}

#[test]
fn empty_null_and_unknown_phases_read_without_failing() {
    assert_eq!(
        serde_json::from_str::<BackupPhase>("\"\"").unwrap(),
        BackupPhase::New
    );
    assert_eq!(
        serde_json::from_str::<BackupPhase>("null").unwrap(),
        BackupPhase::New
    );
    assert_eq!(
        serde_json::from_str::<RestorePhase>("\"\"").unwrap(),
        RestorePhase::New
    );
    assert_eq!(
        serde_json::from_str::<SchedulePhase>("\"\"").unwrap(),
        SchedulePhase::New
    );
    assert_eq!(
        serde_json::from_str::<BackupPhase>("\"Paused\"").unwrap(),
        BackupPhase::Unknown("Paused".to_owned())
    );
    assert!(!BackupPhase::Unknown("Paused".to_owned()).is_final());
    // Case matters, as in Velero.
    assert!(BackupPhase::parse("completed").is_unknown());
    // A BSL has no "New": an empty phase is not a known one.
    assert!(BackupStorageLocationPhase::parse("").is_unknown());
    assert_eq!(
        BackupStorageLocationPhase::parse("Available"),
        BackupStorageLocationPhase::Available
    );
    assert_eq!(DownloadRequestPhase::default(), DownloadRequestPhase::New);
    assert_eq!(
        ServerStatusRequestPhase::parse("Processed"),
        ServerStatusRequestPhase::Processed
    );
    assert_eq!(
        DeleteBackupRequestPhase::parse(""),
        DeleteBackupRequestPhase::New
    );
}

/// Every phase of both kinds in exactly one class: waiting (`w`), in flight (`i`), final (`f`)
/// or neither (`-`, only a Backup's `Deleting`); `s` marks the one success.
#[test]
fn every_phase_has_one_class() {
    fn class(p: &Phase) -> String {
        let mut c = match (p.is_waiting(), p.is_in_flight(), p.is_final()) {
            (true, false, false) => "w",
            (false, true, false) => "i",
            (false, false, true) => "f",
            (false, false, false) => "-",
            _ => "?",
        }
        .to_owned();
        if p.is_success() {
            c.push('s');
        }
        c
    }
    let backups: Vec<String> = backup_phases()
        .into_iter()
        .map(|p| class(&Phase::from(p)))
        .collect();
    assert_eq!(
        backups.join(" "),
        "w w w f i i i i i fs f f - i",
        "New Queued ReadyToStart FailedValidation InProgress Waiting WaitingPF Finalizing FinalizingPF Completed PartiallyFailed Failed Deleting Unknown"
    );
    let restores: Vec<String> = restore_phases()
        .into_iter()
        .map(|p| class(&Phase::from(p)))
        .collect();
    assert_eq!(
        restores.join(" "),
        "w f i i i i i fs f f i",
        "New FailedValidation InProgress Waiting WaitingPF Finalizing FinalizingPF Completed PartiallyFailed Failed Unknown"
    );
}

#[test]
fn phases_of_both_kinds_read_from_objects_and_never_cross() {
    let object = serde_json::json!({"status": {"phase": "InProgress"}});
    for kind in Kind::ALL {
        let p = Phase::of(kind, &object);
        assert_eq!(p, Phase::in_progress(kind));
        assert_eq!(p.kind(), kind);
        assert!(p.can_transition_to(&Phase::failed(kind)));
        assert!(!Phase::failed(kind).can_transition_to(&p));
        assert_eq!(Phase::of(kind, &serde_json::json!({})).as_str(), "New");
    }
    assert!(!Phase::failed(Kind::Backup).can_transition_to(&Phase::failed(Kind::Restore)));
    assert!(!Phase::in_progress(Kind::Restore).can_transition_to(&Phase::failed(Kind::Backup)));
    assert_eq!(BackupPhase::Unknown("x".to_owned()).name(), "Unknown");
    assert_eq!(RestorePhase::FailedValidation.name(), "FailedValidation");
}

#[test]
fn work_is_run_again_from_in_progress_and_a_restores_finalizing_only() {
    for kind in Kind::ALL {
        assert!(Phase::in_progress(kind).is_rerun_from());
        assert!(!Phase::failed(kind).is_rerun_from());
    }
    assert!(Phase::Restore(RestorePhase::Finalizing).is_rerun_from());
    // A backup's Finalizing is taken up from its record, never run again.
    assert!(!Phase::Backup(BackupPhase::Finalizing).is_rerun_from());
    assert!(!Phase::Restore(RestorePhase::FinalizingPartiallyFailed).is_rerun_from());
}
