//! `--wait` of `backup create` and `restore create`: follow one object until its phase is final.
//!
//! The object is watched (list, then watch, restarted with backoff on errors) through a
//! `metadata.name` field selector. Each change of phase or item counts is printed to stderr as a
//! progress line, at most once per second; the final state is always printed. On a terminal the
//! line is rewritten in place, otherwise each line ends with a newline.
//!
//! Outcome ([`Waited`]): the object as last read in its final phase, which the caller reports
//! as Velero does (`Backup completed with status: PartiallyFailed. …`) with the exit status of
//! [`outcome`]: `Completed` → [`ExitStatus::Success`]; `PartiallyFailed`, `Failed` and
//! `FailedValidation` → [`ExitStatus::Unsuccessful`] (exit 3). Ctrl-C stops waiting only (the
//! object keeps running on the server): the wait says the phase it last read, never a final
//! one it did not, and exits 130 ([`ExitStatus::Interrupted`]). An object deleted while waiting
//! is an error (exit 1).

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use futures::{Stream, StreamExt};
use hawser_api::phase::LifecyclePhase;
use hawser_api::{Backup, PhasedResource, Restore};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::error::{CliError, ExitStatus};

/// Shortest time between two progress lines.
pub const PRINT_INTERVAL: Duration = Duration::from_secs(1);

/// Seconds after which the API server ends a `--wait` watch (the watcher opens the next).
const WATCH_SECONDS: u32 = 50;

/// The progress part of a line for an object: item counts from `status.progress`.
pub trait Progress {
    /// `Backup` or `Restore`.
    const KIND: &'static str;
    /// The lower-case command group (`backup`, `restore`) used in hints.
    const COMMAND: &'static str;
    /// `"40 of 100 items backed up"`, or `None` when the status has no progress yet.
    fn progress_text(&self) -> Option<String>;
    /// `status.validationErrors`.
    fn validation_errors(&self) -> &[String];
}

impl Progress for Backup {
    const KIND: &'static str = "Backup";
    const COMMAND: &'static str = "backup";

    fn progress_text(&self) -> Option<String> {
        let progress = self.status.as_ref()?.progress.as_ref()?;
        Some(counts(
            progress.items_backed_up,
            progress.total_items,
            "backed up",
        ))
    }

    fn validation_errors(&self) -> &[String] {
        self.status
            .as_ref()
            .and_then(|s| s.validation_errors.as_deref())
            .unwrap_or_default()
    }
}

impl Progress for Restore {
    const KIND: &'static str = "Restore";
    const COMMAND: &'static str = "restore";

    fn progress_text(&self) -> Option<String> {
        let progress = self.status.as_ref()?.progress.as_ref()?;
        Some(counts(
            progress.items_restored,
            progress.total_items,
            "restored",
        ))
    }

    fn validation_errors(&self) -> &[String] {
        self.status
            .as_ref()
            .and_then(|s| s.validation_errors.as_deref())
            .unwrap_or_default()
    }
}

fn counts(done: Option<i64>, total: Option<i64>, verb: &str) -> String {
    let done = done.unwrap_or(0);
    match total {
        Some(total) => format!("{done} of {total} items {verb}"),
        None => format!("{done} items {verb}"),
    }
}

/// The progress line of an object: `Backup b1: InProgress, 40 of 100 items backed up`.
pub fn progress_line<K: PhasedResource + Progress>(object: &K, name: &str) -> String {
    let phase = object.phase();
    match object.progress_text() {
        Some(progress) => format!("{} {name}: {}, {progress}", K::KIND, phase.as_str()),
        None => format!("{} {name}: {}", K::KIND, phase.as_str()),
    }
}

/// The exit status a final phase maps to; `None` while the phase is not final.
pub fn outcome<P: LifecyclePhase>(phase: &P) -> Option<ExitStatus> {
    if !phase.is_final() {
        None
    } else if phase.is_success() {
        Some(ExitStatus::Success)
    } else {
        Some(ExitStatus::Unsuccessful)
    }
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited<K> {
    /// The object, as read in its final phase.
    Final(Box<K>),
    /// Ctrl-C: the phase last read (`None` before any).
    Interrupted(Option<String>),
}

/// Prints how a wait on the `K` named `name` ended (stdout for a final phase, as Velero's CLI;
/// stderr for an interruption) and returns the exit status.
pub fn report<K>(waited: &Waited<K>, name: &str) -> ExitStatus
where
    K: PhasedResource + Progress,
{
    let command = K::COMMAND;
    match waited {
        Waited::Final(object) => {
            let phase = object.phase();
            println!(
                "{} completed with status: {}. You may check for more information using the commands `hawser {command} describe {name}` and `hawser {command} logs {name}`.",
                K::KIND,
                phase.as_str()
            );
            for error in object.validation_errors() {
                println!("  {}", hawser_core::errors::terminal_safe(error));
            }
            outcome(&phase).unwrap_or(ExitStatus::Failure)
        }
        Waited::Interrupted(last) => {
            eprintln!(
                "Stopped waiting: {} {name} was last seen {}; it goes on in the background. Check it with `hawser {command} describe {name}`.",
                K::KIND,
                last.as_deref().unwrap_or("without a phase")
            );
            ExitStatus::Interrupted
        }
    }
}

/// Watches `name` in `api` until its phase is final, printing progress to stderr.
pub async fn wait_for_final<K>(api: Api<K>, name: &str) -> Result<Waited<K>, CliError>
where
    K: PhasedResource + Progress,
{
    // The API server ends each watch within 50 s, before the client's read timeout
    // (`--request-timeout`, 60 s by default) would break an idle one.
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_SECONDS);
    let events = watcher(api, config).default_backoff();
    let stderr = std::io::stderr();
    let tty = stderr.is_terminal();
    let interrupted = async {
        // If the handler cannot be installed, Ctrl-C ends the process the default way.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let mut out = stderr.lock();
    follow(
        events,
        name,
        &mut LineWriter::new(&mut out, tty),
        interrupted,
    )
    .await
}

/// Where progress lines go: rewrites one line on a terminal, appends lines otherwise.
pub struct LineWriter<W> {
    out: W,
    tty: bool,
    open_line: bool,
}

impl<W: Write> LineWriter<W> {
    /// A writer over `out`; `tty` selects in-place rewriting.
    pub fn new(out: W, tty: bool) -> Self {
        Self {
            out,
            tty,
            open_line: false,
        }
    }

    fn line(&mut self, text: &str) {
        // Progress output is best effort: a closed stderr must not end the wait.
        let _ = if self.tty {
            self.open_line = true;
            write!(self.out, "\r\x1b[K{text}")
        } else {
            writeln!(self.out, "{text}")
        };
        let _ = self.out.flush();
    }

    fn finish(&mut self) {
        if self.open_line {
            let _ = writeln!(self.out);
            self.open_line = false;
        }
    }
}

/// The wait loop over a watch event stream (separate from the watch so it can be tested with a
/// scripted stream and paused time).
pub async fn follow<K, S, E, W, I>(
    events: S,
    name: &str,
    out: &mut LineWriter<W>,
    interrupted: I,
) -> Result<Waited<K>, CliError>
where
    K: PhasedResource + Progress,
    S: Stream<Item = Result<watcher::Event<K>, E>>,
    E: std::fmt::Display,
    W: Write,
    I: Future<Output = ()>,
{
    let mut last_phase: Option<String> = None;
    let mut events = std::pin::pin!(events);
    let mut interrupted = std::pin::pin!(interrupted);
    let mut ticker = tokio::time::interval(PRINT_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut latest: Option<String> = None;
    let mut printed: Option<String> = None;
    let mut listed_in_init = false;
    let object = format!("{} {}", K::KIND, name);
    loop {
        tokio::select! {
            event = events.next() => {
                let seen = match event {
                    None => {
                        out.finish();
                        return Err(CliError::WatchEnded { object });
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "watch of {object} failed; retrying");
                        continue;
                    }
                    Some(Ok(watcher::Event::Init)) => {
                        listed_in_init = false;
                        continue;
                    }
                    Some(Ok(watcher::Event::InitDone)) if listed_in_init => continue,
                    Some(Ok(watcher::Event::InitDone | watcher::Event::Delete(_))) => {
                        out.finish();
                        return Err(CliError::DeletedWhileWaiting { object });
                    }
                    Some(Ok(watcher::Event::InitApply(seen))) => {
                        listed_in_init = true;
                        seen
                    }
                    Some(Ok(watcher::Event::Apply(seen))) => seen,
                };
                let line = progress_line(&seen, name);
                let phase = seen.phase();
                last_phase = Some(phase.as_str().to_owned());
                if outcome(&phase).is_some() {
                    if printed.as_deref() != Some(line.as_str()) {
                        out.line(&line);
                    }
                    out.finish();
                    return Ok(Waited::Final(Box::new(seen)));
                }
                latest = Some(line);
            }
            _ = ticker.tick() => {
                if latest.is_some() && latest != printed {
                    if let Some(line) = &latest {
                        out.line(line);
                    }
                    printed = latest.clone();
                }
            }
            () = &mut interrupted => {
                out.finish();
                return Ok(Waited::Interrupted(last_phase));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hawser_api::{BackupPhase, BackupProgress, BackupStatus, RestorePhase};
    use tokio::sync::mpsc;
    use tokio_stream_shim::ReceiverStream;

    use super::*;

    /// A receiver as a stream, without another dependency.
    mod tokio_stream_shim {
        use std::pin::Pin;
        use std::task::{Context, Poll};

        pub struct ReceiverStream<T>(pub tokio::sync::mpsc::UnboundedReceiver<T>);

        impl<T> futures::Stream for ReceiverStream<T> {
            type Item = T;
            fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
                self.0.poll_recv(cx)
            }
        }
    }

    fn backup(phase: BackupPhase, done: Option<i64>, total: Option<i64>) -> Backup {
        let mut backup = Backup::new("b1", Default::default());
        backup.status = Some(BackupStatus {
            phase,
            progress: done.map(|d| BackupProgress {
                total_items: total,
                items_backed_up: Some(d),
            }),
            ..BackupStatus::default()
        });
        backup
    }

    #[test]
    fn final_phases_map_to_exit_statuses() {
        assert_eq!(outcome(&BackupPhase::Completed), Some(ExitStatus::Success));
        for phase in [
            BackupPhase::PartiallyFailed,
            BackupPhase::Failed,
            BackupPhase::FailedValidation,
        ] {
            assert_eq!(outcome(&phase), Some(ExitStatus::Unsuccessful), "{phase}");
        }
        for phase in [
            BackupPhase::New,
            BackupPhase::InProgress,
            BackupPhase::Deleting,
        ] {
            assert_eq!(outcome(&phase), None, "{phase}");
        }
        assert_eq!(outcome(&RestorePhase::Completed), Some(ExitStatus::Success));
        assert_eq!(
            outcome(&RestorePhase::PartiallyFailed),
            Some(ExitStatus::Unsuccessful)
        );
        assert_eq!(outcome(&RestorePhase::Finalizing), None);
    }

    #[test]
    fn progress_line_names_phase_and_counts() {
        assert_eq!(
            progress_line(&backup(BackupPhase::InProgress, Some(40), Some(100)), "b1"),
            "Backup b1: InProgress, 40 of 100 items backed up"
        );
        assert_eq!(
            progress_line(&backup(BackupPhase::New, None, None), "b1"),
            "Backup b1: New"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn prints_at_most_once_per_second_and_always_the_final_state() {
        let (tx, rx) = mpsc::unbounded_channel::<Result<watcher::Event<Backup>, String>>();
        let task = tokio::spawn(async move {
            let mut buffer = Vec::new();
            let status = follow(
                ReceiverStream(rx),
                "b1",
                &mut LineWriter::new(&mut buffer, false),
                std::future::pending(),
            )
            .await;
            (status.unwrap(), String::from_utf8(buffer).unwrap())
        });
        tx.send(Ok(watcher::Event::Init)).unwrap();
        tx.send(Ok(watcher::Event::InitApply(backup(
            BackupPhase::New,
            None,
            None,
        ))))
        .unwrap();
        tx.send(Ok(watcher::Event::InitDone)).unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        // Ten updates within one second: only the last one of the second is printed.
        for done in 1..=10 {
            tx.send(Ok(watcher::Event::Apply(backup(
                BackupPhase::InProgress,
                Some(done),
                Some(10),
            ))))
            .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        tx.send(Ok(watcher::Event::Apply(backup(
            BackupPhase::Completed,
            Some(10),
            Some(10),
        ))))
        .unwrap();
        let (waited, text) = task.await.unwrap();
        let Waited::Final(backup) = waited else {
            panic!("not final: {waited:?}");
        };
        assert_eq!(backup.phase(), BackupPhase::Completed);
        assert_eq!(
            text,
            "Backup b1: New\n\
             Backup b1: InProgress, 10 of 10 items backed up\n\
             Backup b1: Completed, 10 of 10 items backed up\n"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn deletion_and_interruption_end_the_wait() {
        let (tx, rx) = mpsc::unbounded_channel::<Result<watcher::Event<Backup>, String>>();
        tx.send(Ok(watcher::Event::Init)).unwrap();
        tx.send(Ok(watcher::Event::InitApply(backup(
            BackupPhase::New,
            None,
            None,
        ))))
        .unwrap();
        tx.send(Err("connection reset".to_owned())).unwrap();
        tx.send(Ok(watcher::Event::Delete(backup(
            BackupPhase::Deleting,
            None,
            None,
        ))))
        .unwrap();
        let mut buffer = Vec::new();
        let result = follow(
            ReceiverStream(rx),
            "b1",
            &mut LineWriter::new(&mut buffer, false),
            std::future::pending(),
        )
        .await;
        assert!(matches!(result, Err(CliError::DeletedWhileWaiting { .. })));

        // Interrupted while Queued: the wait says Queued, never a final phase.
        let (tx, rx) = mpsc::unbounded_channel::<Result<watcher::Event<Backup>, String>>();
        tx.send(Ok(watcher::Event::Init)).unwrap();
        tx.send(Ok(watcher::Event::InitApply(backup(
            BackupPhase::Queued,
            None,
            None,
        ))))
        .unwrap();
        tx.send(Ok(watcher::Event::InitDone)).unwrap();
        let mut buffer = Vec::new();
        let result = follow(
            ReceiverStream(rx),
            "b1",
            &mut LineWriter::new(&mut buffer, false),
            tokio::time::sleep(Duration::from_secs(5)),
        )
        .await;
        let waited = result.unwrap();
        assert!(
            matches!(&waited, Waited::Interrupted(Some(phase)) if phase == "Queued"),
            "{waited:?}"
        );
        assert_eq!(report(&waited, "b1"), ExitStatus::Interrupted);
        // Before anything was read.
        let (_tx, rx) = mpsc::unbounded_channel::<Result<watcher::Event<Backup>, String>>();
        let result = follow(
            ReceiverStream(rx),
            "b1",
            &mut LineWriter::new(&mut Vec::new(), false),
            tokio::time::sleep(Duration::from_secs(5)),
        )
        .await;
        assert!(matches!(result.unwrap(), Waited::Interrupted(None)));
    }

    #[test]
    fn a_final_wait_reports_the_phase_read_and_its_exit_status() {
        for (phase, status) in [
            (BackupPhase::Completed, ExitStatus::Success),
            (BackupPhase::PartiallyFailed, ExitStatus::Unsuccessful),
            (BackupPhase::FailedValidation, ExitStatus::Unsuccessful),
        ] {
            let waited = Waited::Final(Box::new(backup(phase, None, None)));
            assert_eq!(report(&waited, "b1"), status);
        }
    }
}
