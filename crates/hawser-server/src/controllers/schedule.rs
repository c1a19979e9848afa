//! The Schedule controller: Backups created from a template when a cron expression says so
//! (velero-compat §1.4, §2.4).
//!
//! Every second the Schedules are listed and each is reconciled:
//! 1. **skipImmediately**: unset means `--schedule-skip-immediately`; when it is true it is
//!    written back as `false` with `status.lastSkipped` = now, so the run that is due now is
//!    skipped.
//! 2. **Validation**: the object parses, `spec.schedule` is a valid expression
//!    ([`hawser_core::schedule::Cron`]) whose runs are at least `--schedule-min-interval` apart
//!    (default 1m: `@every 1s` would make a whole backup every second), and the template
//!    passes the backup's filter checks →
//!    `Enabled`; otherwise `FailedValidation` with `validationErrors`. Written when it changes.
//! 3. **Due?** Not when `paused`. The next run is the expression's first time after the latest
//!    of `lastBackup` (else the creation time) and `lastSkipped`; it is due once that time has
//!    passed. Runs missed while no server ran are not caught up: one backup is made, now, and
//!    the next run counts from it (Velero's rule).
//! 4. **Not while one runs**: no backup is created while a backup of this schedule is unset,
//!    `New`, `Queued`, `ReadyToStart` or `InProgress` (Velero checks only unset, `New` and
//!    `InProgress`, so a slow queue lets it pile up backups); the run happens once it has
//!    finished.
//! 5. **Create** `<schedule>-<UTC yyyyMMddHHmmss>` with the template as spec, the template's
//!    labels (else the Schedule's) plus `velero.io/schedule-name`, the Schedule's annotations,
//!    and a controller owner reference with `useOwnerReferencesInBackup`; then `lastBackup`.
//!    A backup of this schedule created at or after the due time (its `lastBackup` write was
//!    lost) counts as this run's: only `lastBackup` is written, so no run makes two backups.
//!
//! `velero_schedule_expected_interval_seconds` follows each valid schedule; the `velero_backup_*`
//! series of a schedule are created when it is first seen and removed when it is gone.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use hawser_api::labels::SCHEDULE_NAME;
use hawser_api::phase::{BackupPhase, SchedulePhase};
use hawser_api::{Backup, Schedule};
use hawser_core::duration::GoDuration;
use hawser_core::schedule::{Cron, backup_name};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use serde_json::{Map, Value, json};

use super::periodic::{self, Pass};
use crate::context::Context;
use crate::objects::{self, text, velero_api};
use crate::readiness::Watch;

/// Time between two looks at the schedules.
const TICK: Duration = Duration::from_secs(1);

/// Runs until the term ends; reports whether its LIST works through `health`.
pub(crate) async fn run(ctx: Arc<Context>, health: Watch) {
    let api = velero_api(&ctx, "Schedule", "schedules");
    let schedules = Schedules {
        api,
        known: HashSet::new(),
    };
    periodic::run(ctx, schedules, health).await;
}

struct Schedules {
    api: kube::Api<kube::api::DynamicObject>,
    /// The schedules whose metrics are set.
    known: HashSet<String>,
}

impl Pass for Schedules {
    const LISTS: &'static str = "schedules";

    type Listed = Vec<Value>;

    async fn list(&mut self, ctx: &Context) -> Result<Vec<Value>, kube::Error> {
        objects::list(ctx, &self.api, &ListParams::default()).await
    }

    async fn handle(&mut self, ctx: &Context, schedules: Vec<Value>) -> Duration {
        let mut seen = HashSet::new();
        for schedule in schedules {
            let name = text(&schedule, "/metadata/name").to_owned();
            if self.known.insert(name.clone()) {
                ctx.metrics.init_schedule(&name);
            }
            reconcile(ctx, &self.api, &schedule).await;
            seen.insert(name);
        }
        for gone in self.known.difference(&seen) {
            ctx.metrics.forget_schedule(gone);
        }
        self.known = seen;
        TICK
    }

    fn retry_after(&self, _: &Context) -> Duration {
        TICK
    }
}

/// What validation found.
fn check(
    schedule: &Value,
    min_interval: Duration,
    now: jiff::Timestamp,
) -> Result<(Schedule, Cron), Vec<String>> {
    let parsed: Schedule = serde_json::from_value(schedule.clone())
        .map_err(|e| vec![format!("the Schedule cannot be read: {e}")])?;
    let mut errors = Vec::new();
    let cron = match Cron::parse(&parsed.spec.schedule) {
        Ok(cron) => Some(cron),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    };
    if let Some(interval) = cron.as_ref().and_then(|c| interval(c, now))
        && interval < min_interval
    {
        errors.push(format!(
            "{:?} runs every {}, more often than the {} this server allows between two backups of a schedule (--schedule-min-interval)",
            parsed.spec.schedule,
            go(interval),
            go(min_interval),
        ));
    }
    let template = Backup::new("template", parsed.spec.template.clone());
    errors.extend(hawser_engine::backup::validate_spec(&template));
    match cron {
        Some(cron) if errors.is_empty() => Ok((parsed, cron)),
        _ => Err(errors),
    }
}

/// `d` as Go writes it (`1m0s`).
fn go(d: Duration) -> GoDuration {
    GoDuration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The time between the next two runs of `cron` after `now`.
fn interval(cron: &Cron, now: jiff::Timestamp) -> Option<Duration> {
    let next = cron.next_after(now)?;
    let after = cron.next_after(next)?;
    after.duration_since(next).try_into().ok()
}

async fn reconcile(ctx: &Context, api: &kube::Api<kube::api::DynamicObject>, schedule: &Value) {
    let name = text(schedule, "/metadata/name");
    let now = ctx.clock.now();
    let mut status = Map::new();
    let mut spec = Map::new();

    let skip = schedule
        .pointer("/spec/skipImmediately")
        .and_then(Value::as_bool)
        .unwrap_or(ctx.settings.backup.schedule_skip_immediately);
    if skip {
        spec.insert("skipImmediately".to_owned(), json!(false));
        status.insert("lastSkipped".to_owned(), json!(Time(now)));
    }
    let checked = check(schedule, ctx.settings.backup.schedule_min_interval, now);
    let (phase, errors) = match &checked {
        Ok(_) => (SchedulePhase::Enabled, Value::Null),
        Err(errors) => (SchedulePhase::FailedValidation, json!(errors)),
    };
    if SchedulePhase::of(schedule) != phase
        || schedule
            .pointer("/status/validationErrors")
            .unwrap_or(&Value::Null)
            != &errors
    {
        status.insert("phase".to_owned(), json!(phase));
        status.insert("validationErrors".to_owned(), errors);
        match &checked {
            Ok(_) => tracing::info!(schedule = name, "schedule enabled"),
            Err(errors) => {
                tracing::warn!(schedule = name, errors = ?errors, "schedule failed validation")
            }
        }
    }
    if !status.is_empty() || !spec.is_empty() {
        let patch = json!({"spec": spec, "status": status});
        if let Err(e) = objects::merge_patch(ctx, api, name, &patch).await {
            tracing::warn!(schedule = name, error = %e, "storing the schedule's status failed; the next pass tries again");
            return;
        }
        if skip {
            tracing::info!(schedule = name, "the due run is skipped (skipImmediately)");
            return;
        }
    }
    let Ok((parsed, cron)) = checked else {
        return;
    };
    if let Some(interval) = interval(&cron, now) {
        ctx.metrics
            .schedule_interval(name, i64::try_from(interval.as_secs()).unwrap_or(i64::MAX));
    }
    if parsed.spec.paused {
        return;
    }
    let status_time = |field: &str| {
        parsed.status.as_ref().and_then(|s| match field {
            "lastBackup" => s.last_backup.as_ref().map(|t| t.0),
            _ => s.last_skipped.as_ref().map(|t| t.0),
        })
    };
    let created = parsed.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let Some(base) = status_time("lastBackup")
        .or(created)
        .into_iter()
        .chain(status_time("lastSkipped"))
        .max()
    else {
        return;
    };
    let Some(due) = cron.next_after(base) else {
        return;
    };
    if due > now {
        return;
    }
    run_once(ctx, api, schedule, name, due, now).await;
}

/// Creates the backup of the run due at `due` (see the module docs, steps 4 and 5).
async fn run_once(
    ctx: &Context,
    api: &kube::Api<kube::api::DynamicObject>,
    schedule: &Value,
    name: &str,
    due: jiff::Timestamp,
    now: jiff::Timestamp,
) {
    let backups = velero_api(ctx, "Backup", "backups");
    let selector = ListParams::default().labels(&format!("{SCHEDULE_NAME}={name}"));
    let ours = match objects::list(ctx, &backups, &selector).await {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(schedule = name, error = %e, "listing the schedule's backups failed");
            return;
        }
    };
    if let Some(running) = ours.iter().find(|b| {
        let phase = BackupPhase::of(b);
        phase.is_waiting() || phase == BackupPhase::InProgress
    }) {
        tracing::info!(
            schedule = name,
            backup = text(running, "/metadata/name"),
            "a run is due but a backup of the schedule has not finished; it waits"
        );
        return;
    }
    let this_run = ours.iter().find_map(|b| {
        let at = text(b, "/metadata/creationTimestamp")
            .parse::<jiff::Timestamp>()
            .ok()?;
        (at >= due
            .saturating_sub(jiff::SignedDuration::from_secs(1))
            .unwrap_or(due))
        .then_some(at)
    });
    let last_backup = match this_run {
        Some(at) => at,
        None => {
            let backup = backup_of(schedule, name, now);
            match objects::create(ctx, &backups, &backup).await {
                Ok(created) => {
                    tracing::info!(
                        schedule = name,
                        backup = text(&created, "/metadata/name"),
                        "scheduled backup created"
                    );
                }
                Err(e) => {
                    tracing::warn!(schedule = name, error = %e, "creating the scheduled backup failed; the next pass tries again");
                    return;
                }
            }
            now
        }
    };
    let patch = json!({"status": {"lastBackup": Time(last_backup)}});
    if let Err(e) = objects::merge_patch(ctx, api, name, &patch).await {
        tracing::warn!(schedule = name, error = %e, "storing lastBackup failed; the next pass finds the backup and tries again");
    }
}

/// The Backup a run of `schedule` creates at `now`.
fn backup_of(schedule: &Value, name: &str, now: jiff::Timestamp) -> Value {
    let template = schedule
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut labels = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .filter(|l| !l.is_empty())
        .or_else(|| {
            schedule
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
        })
        .cloned()
        .unwrap_or_default();
    labels.insert(SCHEDULE_NAME.to_owned(), json!(name));
    let mut metadata = json!({
        "name": backup_name(name, now),
        "namespace": text(schedule, "/metadata/namespace"),
        "labels": labels,
    });
    if let Some(annotations) = schedule.pointer("/metadata/annotations") {
        metadata["annotations"] = annotations.clone();
    }
    if schedule
        .pointer("/spec/useOwnerReferencesInBackup")
        .and_then(Value::as_bool)
        == Some(true)
    {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "velero.io/v1", "kind": "Schedule", "name": name,
            "uid": text(schedule, "/metadata/uid"), "controller": true,
        }]);
    }
    json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": metadata,
        "spec": template,
    })
}
