//! `hawser schedule create|get|describe|delete|pause|unpause`.

use clap::{Args, Subcommand};
use hawser_api::{Schedule, ScheduleSpec};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use super::bulk::{ConfirmArgs, SelectArgs, select};
use super::describe;
use super::error::{CliError, ExitStatus};
use super::flags::{Listing, MetaArgs, fetch, print_objects, require_location};
use super::global::GlobalArgs;
use super::label_selector::selector_column;
use super::output::{OutputFormat, Table, from_now, or_none, print_uncreated, time_cell};
use super::template::BackupSpecArgs;

/// `schedule` subcommands.
#[derive(Args, Debug)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

/// What to do with schedules.
#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule: backups made periodically from a template.
    Create(Box<ScheduleCreateArgs>),
    /// Show schedules.
    Get(ScheduleGetArgs),
    /// Describe schedules in detail.
    Describe(ScheduleDescribeArgs),
    /// Delete schedules (their backups stay, unless they have an owner reference to the
    /// schedule).
    Delete(ScheduleDeleteArgs),
    /// Pause schedules: no backups are created until they are unpaused.
    Pause(SchedulePauseArgs),
    /// Unpause schedules.
    Unpause(SchedulePauseArgs),
}

/// `--skip-immediately` of `create`, `pause` and `unpause`.
#[derive(Args, Debug, Clone, Default)]
pub struct SkipArgs {
    /// Skip the next due backup (`--skip-immediately` alone means true); unset leaves it to the
    /// server's --schedule-skip-immediately.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_immediately: Option<bool>,
}

/// `schedule create`.
#[derive(Args, Debug)]
pub struct ScheduleCreateArgs {
    /// Name of the new schedule.
    pub name: String,
    /// When to back up: a cron expression in UTC (`0 */6 * * *`) or `@every 6h`, `@daily`, ...
    #[arg(long)]
    pub schedule: String,
    #[command(flatten)]
    pub spec: BackupSpecArgs,
    /// Give the created backups a controller owner reference to the schedule, so that deleting
    /// the schedule deletes them too.
    #[arg(long)]
    pub use_owner_references_in_backup: bool,
    /// Create the schedule paused.
    #[arg(long)]
    pub paused: bool,
    #[command(flatten)]
    pub skip: SkipArgs,
    #[command(flatten)]
    pub meta: MetaArgs,
    /// Print the schedule in this format instead of creating it.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
}

/// `schedule get`.
#[derive(Args, Debug)]
pub struct ScheduleGetArgs {
    /// Names of the schedules; all when omitted.
    pub names: Vec<String>,
    /// Only schedules whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub listing: Listing,
}

/// `schedule describe`.
#[derive(Args, Debug)]
pub struct ScheduleDescribeArgs {
    /// Names of the schedules; all when omitted.
    pub names: Vec<String>,
    /// Only schedules whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

/// `schedule delete`.
#[derive(Args, Debug)]
pub struct ScheduleDeleteArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// `schedule pause` and `schedule unpause`.
#[derive(Args, Debug)]
pub struct SchedulePauseArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub skip: SkipArgs,
}

/// Runs a `schedule` subcommand.
pub async fn run(global: &GlobalArgs, args: ScheduleArgs) -> Result<ExitStatus, CliError> {
    match args.command {
        ScheduleCommand::Create(create) => create_schedule(global, *create).await,
        ScheduleCommand::Get(get) => get_schedules(global, get).await,
        ScheduleCommand::Describe(describe) => describe_schedules(global, describe).await,
        ScheduleCommand::Delete(delete) => delete_schedules(global, delete).await,
        ScheduleCommand::Pause(pause) => set_paused(global, pause, true).await,
        ScheduleCommand::Unpause(unpause) => set_paused(global, unpause, false).await,
    }
}

/// Builds the Schedule `create` describes (pure; no API calls). As in Velero,
/// `useOwnerReferencesInBackup` is always sent, `false` when the flag is absent.
pub fn schedule_from_args(
    namespace: &str,
    args: &ScheduleCreateArgs,
) -> Result<Schedule, CliError> {
    let cron = args.schedule.trim();
    if cron.is_empty() {
        return Err(CliError::usage(
            "--schedule",
            "it needs a cron expression such as \"0 */6 * * *\" or \"@every 6h\"",
        ));
    }
    // The server's own parser: an expression it would refuse is refused here, before anything
    // is created.
    if let Err(e) = hawser_core::schedule::Cron::parse(cron) {
        return Err(CliError::usage("--schedule", e.to_string()));
    }
    let spec = ScheduleSpec {
        template: args.spec.spec()?,
        schedule: cron.to_owned(),
        use_owner_references_in_backup: Some(args.use_owner_references_in_backup),
        paused: args.paused,
        skip_immediately: args.skip.skip_immediately,
    };
    let mut schedule = Schedule::new(&args.name, spec);
    schedule.metadata = args.meta.metadata(namespace, &args.name)?;
    Ok(schedule)
}

async fn create_schedule(
    global: &GlobalArgs,
    args: ScheduleCreateArgs,
) -> Result<ExitStatus, CliError> {
    let schedule = schedule_from_args(&global.namespace, &args)?;
    if let Some(format) = args.output {
        print_uncreated(&schedule, format, |s| schedules_table(s, Timestamp::now()))?;
        return Ok(ExitStatus::Success);
    }
    let client = global.client().await?;
    let namespace = &global.namespace;
    if let Some(location) = &schedule.spec.template.storage_location {
        require_location(&client, namespace, location).await?;
    }
    let api: Api<Schedule> = Api::namespaced(client, namespace);
    let object = format!("Schedule {namespace}/{}", args.name);
    api.create(&PostParams::default(), &schedule)
        .await
        .map_err(|err| CliError::api("create", object, err))?;
    println!("Schedule {:?} created successfully.", args.name);
    Ok(ExitStatus::Success)
}

async fn fetch_schedules(
    global: &GlobalArgs,
    names: &[String],
    selector: Option<&str>,
) -> Result<Vec<Schedule>, CliError> {
    let api: Api<Schedule> = Api::namespaced(global.client().await?, &global.namespace);
    fetch(
        &api,
        &global.namespace,
        ("Schedule", "schedule"),
        names,
        selector,
    )
    .await
}

async fn get_schedules(global: &GlobalArgs, args: ScheduleGetArgs) -> Result<ExitStatus, CliError> {
    let schedules = fetch_schedules(global, &args.names, args.selector.as_deref()).await?;
    let now = Timestamp::now();
    print_objects(&schedules, args.names.len() == 1, &args.listing, |s| {
        schedules_table(s, now)
    })?;
    Ok(ExitStatus::Success)
}

async fn describe_schedules(
    global: &GlobalArgs,
    args: ScheduleDescribeArgs,
) -> Result<ExitStatus, CliError> {
    let schedules = fetch_schedules(global, &args.names, args.selector.as_deref()).await?;
    let texts: Vec<String> = schedules
        .iter()
        .map(|s| describe::schedule(s, global.colour()))
        .collect();
    describe::print(&texts);
    Ok(ExitStatus::Success)
}

async fn delete_schedules(
    global: &GlobalArgs,
    args: ScheduleDeleteArgs,
) -> Result<ExitStatus, CliError> {
    args.select.check("schedule")?;
    args.confirm.require()?;
    let namespace = &global.namespace;
    let api: Api<Schedule> = Api::namespaced(global.client().await?, namespace);
    let (found, mut tally) = select(&api, namespace, ("Schedule", "schedule"), &args.select)
        .await?
        .report("No schedules found");
    for schedule in &found {
        let name = schedule.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => println!("Schedule deleted: {name}"),
            Err(err) => tally.fail(&CliError::api(
                "delete",
                format!("Schedule {namespace}/{name}"),
                err,
            )),
        }
    }
    Ok(tally.status())
}

/// The merge patch of `pause`/`unpause`: `spec.paused`, and `spec.skipImmediately` set to the
/// flag's value or removed (null) when the flag is absent, as Velero's command does.
pub fn pause_patch(paused: bool, skip_immediately: Option<bool>) -> serde_json::Value {
    serde_json::json!({"spec": {"paused": paused, "skipImmediately": skip_immediately}})
}

async fn set_paused(
    global: &GlobalArgs,
    args: SchedulePauseArgs,
    paused: bool,
) -> Result<ExitStatus, CliError> {
    args.select.check("schedule")?;
    let namespace = &global.namespace;
    let api: Api<Schedule> = Api::namespaced(global.client().await?, namespace);
    let (found, mut tally) = select(&api, namespace, ("Schedule", "schedule"), &args.select)
        .await?
        .report("No schedules found");
    let done = if paused { "paused" } else { "unpaused" };
    let patch = Patch::Merge(pause_patch(paused, args.skip.skip_immediately));
    for schedule in &found {
        let name = schedule.name_any();
        if schedule.spec.paused == paused {
            println!("Schedule {name} is already {done}, skip");
            continue;
        }
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => println!("Schedule {name} {done} successfully"),
            Err(err) => tally.fail(&CliError::api(
                "patch",
                format!("Schedule {namespace}/{name}"),
                err,
            )),
        }
    }
    Ok(tally.status())
}

/// The `schedule get` table (Velero's columns). `now` is the time LAST BACKUP counts from.
pub fn schedules_table(schedules: &[Schedule], now: Timestamp) -> Table {
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let status = s.status.as_ref();
            let template = &s.spec.template;
            vec![
                s.metadata.name.clone().unwrap_or_default(),
                status
                    .map(|st| st.phase.clone())
                    .unwrap_or_default()
                    .as_str()
                    .to_owned(),
                time_cell(s.metadata.creation_timestamp.as_ref()),
                s.spec.schedule.clone(),
                or_none(template.ttl.map(|t| t.to_string())),
                from_now(
                    status.and_then(|st| st.last_backup.as_ref()).map(|t| t.0),
                    now,
                ),
                selector_column(
                    template.label_selector.as_ref(),
                    template.or_label_selectors.as_deref(),
                ),
                s.spec.paused.to_string(),
            ]
        })
        .collect();
    Table::new(
        &[
            "NAME",
            "STATUS",
            "CREATED",
            "SCHEDULE",
            "BACKUP TTL",
            "LAST BACKUP",
            "SELECTOR",
            "PAUSED",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_patch_sets_paused_and_clears_an_absent_skip_immediately() {
        assert_eq!(
            pause_patch(true, None),
            serde_json::json!({"spec": {"paused": true, "skipImmediately": null}})
        );
        assert_eq!(
            pause_patch(false, Some(true)),
            serde_json::json!({"spec": {"paused": false, "skipImmediately": true}})
        );
    }
}
