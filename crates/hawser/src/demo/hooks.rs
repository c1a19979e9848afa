//! The demo's check of the backup hooks: the database Pod was frozen (its pre hook) before its
//! claim's snapshot was created and thawed (its post hook) after, read from kube-sim's exec and
//! request logs, and shown in the timeline.

use std::time::Duration;

use super::Story;
use super::env::Environment;
use super::sample::{DATABASE_POD, NAMESPACE};
use super::timeline::Timeline;

/// Checks the order freeze → snapshot created → thaw of the first backup, and puts the three
/// into the timeline.
pub(super) fn check(env: &Environment, timeline: &Timeline, story: &mut Story) {
    let pod = format!("Pod {NAMESPACE}/{DATABASE_POD}");
    // The timeline counts from its start; the logs say milliseconds since the epoch.
    let now = epoch_ms();
    let start = now.saturating_sub(u64::try_from(timeline.elapsed().as_millis()).unwrap_or(0));
    let at = |ms: u64| Duration::from_millis(ms.saturating_sub(start));
    let execs: Vec<_> = env
        .sim
        .execs()
        .log()
        .into_iter()
        .filter(|e| e.namespace == NAMESPACE && e.pod == DATABASE_POD)
        .collect();
    let freeze = execs
        .iter()
        .find(|e| e.command.iter().any(|a| a == "--freeze"));
    let thaw = execs
        .iter()
        .find(|e| e.command.iter().any(|a| a == "--unfreeze"));
    let created = env
        .sim
        .requests()
        .into_iter()
        .find(|r| r.resource == "volumesnapshots" && r.verb == "create" && r.namespace == NAMESPACE)
        .and_then(|r| r.time.parse::<jiff::Timestamp>().ok())
        .and_then(|t| u64::try_from(t.as_millisecond()).ok());
    let (Some(freeze), Some(thaw), Some(created)) = (freeze, thaw, created) else {
        story.check(
            false,
            &format!("the pre hook, the snapshot and the post hook of {pod} all happened"),
        );
        return;
    };
    let frozen = freeze.ended_ms.unwrap_or(u64::MAX);
    timeline.record_at(
        at(frozen),
        pod.clone(),
        "frozen (pre hook: fsfreeze --freeze)",
    );
    timeline.record_at(
        at(created),
        format!("VolumeSnapshot {NAMESPACE}"),
        "created for the claim",
    );
    timeline.record_at(
        at(thaw.started_ms),
        pod.clone(),
        "thawed (post hook: fsfreeze --unfreeze)",
    );
    story.check(
        frozen <= created && created <= thaw.started_ms && thaw.exit_code == Some(0),
        &format!(
            "{pod} was frozen by its pre hook before its claim's snapshot was created and thawed by its post hook after ({} ms frozen)",
            thaw.started_ms.saturating_sub(frozen)
        ),
    );
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
