//! `/status` on the metrics listener (`--status-page`, off by default): a read-only HTML page of
//! the server's namespace for people, refreshed by the browser every few seconds, with no
//! script. It shows the Backups, Restores and Schedules (newest first, [`ROWS`] of each) with
//! their phases, progress, warnings and errors; for each Backup and Restore the phases this
//! server stored and when (its timeline, from the status engine's journal); and the statuses the
//! re-driver still owes. Each request LISTs the three kinds, each object read on its own, so
//! that one that does not parse is shown as such and hides nothing else.
//!
//! Everything taken from the cluster is escaped before it reaches the HTML.

use std::fmt::Write as _;

use hawser_api::{Backup, Restore, Schedule};
use hawser_status::{Kind, ObjectKey, StatusEngine};
use html_escape::encode_text;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::readiness::Readiness;

/// Rows shown per kind (the newest objects).
pub(crate) const ROWS: usize = 200;
/// How often the browser reloads the page, in seconds.
const REFRESH_SECONDS: u32 = 5;

/// What the page is drawn from.
#[derive(Clone)]
pub(crate) struct StatusPage {
    pub(crate) client: kube::Client,
    pub(crate) namespace: String,
    pub(crate) engine: StatusEngine,
}

/// The objects of one kind: the ones that parse, and the names and errors of the others.
struct Listed<K> {
    objects: Vec<K>,
    unreadable: Vec<(String, String)>,
}

impl StatusPage {
    /// The page. When the cluster cannot be read (an API outage) it says why, and still shows
    /// what this server owes, which is then the most useful part.
    pub(crate) async fn render(&self, readiness: &Readiness) -> String {
        let mut page = String::with_capacity(16 * 1024);
        head(&mut page, &self.namespace, &self.engine, readiness);
        self.owed(&mut page);
        if let Err(e) = self.objects(&mut page).await {
            let _ = writeln!(
                page,
                "<p class=\"bad\">Reading the cluster failed: {}</p>",
                encode_text(&e.to_string())
            );
        }
        page.push_str("</body></html>\n");
        page
    }

    async fn objects(&self, page: &mut String) -> Result<(), kube::Error> {
        let backups: Listed<Backup> = self.list().await?;
        let restores: Listed<Restore> = self.list().await?;
        let schedules: Listed<Schedule> = self.list().await?;
        self.backups(page, backups);
        self.restores(page, restores);
        schedule_table(page, schedules);
        Ok(())
    }

    async fn list<K>(&self) -> Result<Listed<K>, kube::Error>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + DeserializeOwned,
    {
        let url = K::url_path(&(), Some(&self.namespace));
        let (read, unreadable) =
            hawser_status::tolerant::list(&self.client, &url, &ListParams::default()).await?;
        let mut listed = Listed {
            objects: Vec::with_capacity(read.len()),
            unreadable: unreadable.into_iter().map(|u| (u.id(), u.error)).collect(),
        };
        for value in read {
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match serde_json::from_value::<K>(value) {
                Ok(object) => listed.objects.push(object),
                Err(error) => listed.unreadable.push((name, error.to_string())),
            }
        }
        // Newest first; then by name, so that the order never depends on the LIST's.
        listed.objects.sort_by(|a, b| {
            let (a, b) = (a.meta(), b.meta());
            (&b.creation_timestamp, &a.name).cmp(&(&a.creation_timestamp, &b.name))
        });
        Ok(listed)
    }

    fn owed(&self, page: &mut String) {
        let pending = self.engine.pending_statuses();
        page.push_str("<h2>Statuses owed</h2>\n");
        if pending.is_empty() {
            page.push_str(
                "<p class=\"none\">None: every status this server wrote is stored.</p>\n",
            );
            return;
        }
        page.push_str(
            "<p>Written by finished work, not yet stored by the API server; the re-driver keeps trying.</p>\n\
             <table><tr><th>Kind</th><th>Name</th><th>Phase</th><th>Pending since</th></tr>\n",
        );
        for status in pending {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
                status.key.kind.api_resource().kind,
                encode_text(&status.key.name),
                phase_cell(&status.phase),
                status.since.strftime("%Y-%m-%d %H:%M:%S UTC")
            );
        }
        page.push_str("</table>\n");
    }

    fn timeline(&self, kind: Kind, name: &str) -> String {
        let changes = self
            .engine
            .timeline(&ObjectKey::new(kind, self.namespace.clone(), name));
        if changes.is_empty() {
            return "<td class=\"none\">not written by this server</td>".to_owned();
        }
        let steps: Vec<String> = changes
            .iter()
            .map(|c| {
                format!(
                    "<span class=\"{}\">{}</span>&nbsp;{}",
                    phase_class(&c.phase),
                    encode_text(&c.phase),
                    c.at.strftime("%H:%M:%S")
                )
            })
            .collect();
        format!("<td class=\"timeline\">{}</td>", steps.join(" &rarr; "))
    }

    fn backups(&self, page: &mut String, listed: Listed<Backup>) {
        section(page, "Backups", listed.objects.len());
        page.push_str(
            "<table><tr><th>Name</th><th>Phase</th><th>Items</th><th>Warnings</th><th>Errors</th>\
             <th>Started</th><th>Completed</th><th>Location</th><th>Phases stored here</th></tr>\n",
        );
        for backup in listed.objects.iter().take(ROWS) {
            let name = backup.metadata.name.as_deref().unwrap_or_default();
            let status = backup.status.clone().unwrap_or_default();
            let progress = status.progress.unwrap_or_default();
            let _ = writeln!(
                page,
                "<tr><td>{}{}</td>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                encode_text(name),
                reasons(
                    status.failure_reason.as_deref(),
                    status.validation_errors.as_deref()
                ),
                phase_cell(&status.phase.to_string()),
                items(progress.items_backed_up, progress.total_items),
                count(status.warnings),
                count(status.errors),
                time(status.start_timestamp.as_ref()),
                time(status.completion_timestamp.as_ref()),
                encode_text(backup.spec.storage_location.as_deref().unwrap_or("")),
                self.timeline(Kind::Backup, name),
            );
        }
        page.push_str("</table>\n");
        unreadable(page, &listed.unreadable);
    }

    fn restores(&self, page: &mut String, listed: Listed<Restore>) {
        section(page, "Restores", listed.objects.len());
        page.push_str(
            "<table><tr><th>Name</th><th>Backup</th><th>Phase</th><th>Items</th><th>Warnings</th>\
             <th>Errors</th><th>Started</th><th>Completed</th><th>Phases stored here</th></tr>\n",
        );
        for restore in listed.objects.iter().take(ROWS) {
            let name = restore.metadata.name.as_deref().unwrap_or_default();
            let status = restore.status.clone().unwrap_or_default();
            let progress = status.progress.unwrap_or_default();
            let _ = writeln!(
                page,
                "<tr><td>{}{}</td><td>{}</td>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                encode_text(name),
                reasons(
                    status.failure_reason.as_deref(),
                    status.validation_errors.as_deref()
                ),
                encode_text(restore.spec.backup_name.as_deref().unwrap_or("")),
                phase_cell(&status.phase.to_string()),
                items(progress.items_restored, progress.total_items),
                count(status.warnings),
                count(status.errors),
                time(status.start_timestamp.as_ref()),
                time(status.completion_timestamp.as_ref()),
                self.timeline(Kind::Restore, name),
            );
        }
        page.push_str("</table>\n");
        unreadable(page, &listed.unreadable);
    }
}

fn head(page: &mut String, namespace: &str, engine: &StatusEngine, readiness: &Readiness) {
    let state = match readiness.check() {
        Ok(()) => "ready: leading".to_owned(),
        Err(why) => format!("not ready: {why}"),
    };
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>hawser: {ns}</title><style>{STYLE}</style></head><body>\n\
         <h1>hawser in namespace {ns}</h1>\n\
         <p class=\"meta\">Instance {instance}, {state}. Read at {now}; reloads every {REFRESH_SECONDS} s.</p>\n",
        ns = encode_text(namespace),
        instance = encode_text(engine.instance_id()),
        state = encode_text(&state),
        now = Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC"),
    );
}

fn schedule_table(page: &mut String, listed: Listed<Schedule>) {
    section(page, "Schedules", listed.objects.len());
    page.push_str(
        "<table><tr><th>Name</th><th>Schedule</th><th>Phase</th><th>Paused</th>\
         <th>Last backup</th></tr>\n",
    );
    for schedule in listed.objects.iter().take(ROWS) {
        let status = schedule.status.clone().unwrap_or_default();
        let _ = writeln!(
            page,
            "<tr><td>{}{}</td><td><code>{}</code></td>{}<td>{}</td><td>{}</td></tr>",
            encode_text(schedule.metadata.name.as_deref().unwrap_or_default()),
            reasons(None, status.validation_errors.as_deref()),
            encode_text(&schedule.spec.schedule),
            phase_cell(&status.phase.to_string()),
            if schedule.spec.paused { "yes" } else { "no" },
            time(status.last_backup.as_ref()),
        );
    }
    page.push_str("</table>\n");
    unreadable(page, &listed.unreadable);
}

fn section(page: &mut String, title: &str, total: usize) {
    let shown = if total > ROWS {
        format!(" (the newest {ROWS} of {total})")
    } else {
        format!(" ({total})")
    };
    let _ = writeln!(page, "<h2>{title}{shown}</h2>");
}

fn unreadable(page: &mut String, unreadable: &[(String, String)]) {
    for (name, error) in unreadable {
        let _ = writeln!(
            page,
            "<p class=\"bad\">{} cannot be read: {}</p>",
            encode_text(name),
            encode_text(error)
        );
    }
}

/// A failure reason and validation errors under an object's name.
fn reasons(failure: Option<&str>, validation: Option<&[String]>) -> String {
    let mut out = String::new();
    for reason in failure
        .into_iter()
        .chain(validation.unwrap_or_default().iter().map(String::as_str))
    {
        let _ = write!(out, "<div class=\"reason\">{}</div>", encode_text(reason));
    }
    out
}

fn phase_class(phase: &str) -> &'static str {
    match phase {
        "Completed" | "Enabled" => "ok",
        "PartiallyFailed" => "warn",
        "Failed" | "FailedValidation" | "FinalizingPartiallyFailed" => "bad",
        "" | "New" | "Queued" | "ReadyToStart" => "idle",
        _ => "busy",
    }
}

fn phase_cell(phase: &str) -> String {
    let shown = if phase.is_empty() { "New" } else { phase };
    format!(
        "<td class=\"phase {}\">{}</td>",
        phase_class(phase),
        encode_text(shown)
    )
}

fn items(done: Option<i64>, total: Option<i64>) -> String {
    match (done, total) {
        (None, None) => String::new(),
        (done, total) => format!(
            "{} / {}",
            done.unwrap_or(0),
            total.map_or_else(|| "?".to_owned(), |t| t.to_string())
        ),
    }
}

fn count(n: Option<i64>) -> String {
    n.filter(|n| *n != 0)
        .map(|n| n.to_string())
        .unwrap_or_default()
}

fn time(t: Option<&Time>) -> String {
    t.map(|t| t.0.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
td{white-space:nowrap}th{background:#f2f2f2}.meta,.none{color:#666}\
.reason{color:#a00;font-size:.85em;white-space:normal;min-width:18em;max-width:30em}\
.phase{font-weight:600}.ok{color:#176f2c}.warn{color:#9a6700}.bad{color:#b00020}.busy{color:#0b5cad}.idle{color:#666}\
.timeline{font-size:.85em}";
