//! `schedule describe` as Velero's `DescribeSchedule` lays it out.

use hawser_api::{Schedule, SchedulePhase};

use super::{Describer, put};
use crate::cli::output::when;

/// The description of one schedule: its state, cron expression and backup template.
pub fn schedule(schedule: &Schedule, colour: bool) -> String {
    let mut d = Describer::new(colour);
    let spec = &schedule.spec;
    let status = schedule.status.clone().unwrap_or_default();
    d.metadata(&schedule.metadata);

    d.blank();
    let phase = status.phase.as_str();
    let shown = match status.phase {
        SchedulePhase::Enabled => d.green(phase),
        SchedulePhase::FailedValidation => d.red(phase),
        _ => super::safe(phase),
    };
    d.put_painted(&format!("Phase:\t{shown}\n"));
    super::backup::resource_policy(&mut d, spec.template.resource_policy.as_ref());
    super::backup::uploader_config(&mut d, &spec.template);
    d.validation_errors(status.validation_errors.as_deref());

    d.blank();
    put!(d, "Paused:\t{}\n", spec.paused);

    d.blank();
    put!(d, "Schedule:\t{}\n", spec.schedule);
    d.blank();
    d.put("Backup Template:\n");
    d.prefix = "\t";
    super::backup::spec(&mut d, &spec.template);
    d.prefix = "";

    d.blank();
    let last = status
        .last_backup
        .as_ref()
        .map_or_else(|| "<never>".to_owned(), |t| when(Some(t)));
    put!(d, "Last Backup:\t{last}\n");
    d.finish()
}
