//! `hawser demo` and `hawser dev`: hawser on an embedded cluster, with nothing installed.
//!
//! Both start kube-sim in-process (with Velero's CRDs, the `velero` namespace and a filesystem
//! BackupStorageLocation `default` under a directory) and a hawser server against it
//! ([`env::Environment`]).
//!
//! The demo ([`run`]) then tells a story, checking each step:
//! 1. create a sample application ([`sample`]);
//! 2. back it up, and while the backup's final status write is under way make the API server
//!    refuse connections for longer than the server's resource timeout;
//! 3. show the Backup still landing `Completed`, after the API is back;
//! 4. restore it into another namespace and compare every object with its original
//!    ([`compare`]);
//! 5. let a schedule every 2 s make two backups; delete one by request and let the other expire
//!    and be collected;
//! 6. print the timeline of phases ([`timeline`]).
//!
//! The outcome is `true` only when every check passed. `hawser dev` ([`dev`]) keeps the
//! environment running for trying `kubectl` and `hawser` by hand.

pub mod compare;
pub mod dev;
pub mod env;
mod hooks;
pub mod sample;
mod steps;
pub mod timeline;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use timeline::Timeline;

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Directory for the kubeconfig and the storage location (created; left in place).
    pub dir: PathBuf,
    /// Path of the server log, printed in the story.
    pub log: Option<PathBuf>,
    /// Limit of the whole run.
    pub timeout: Duration,
}

/// The demo's output: steps, their checks with ✓ and ✗, and a count of failures.
#[derive(Debug, Default)]
pub struct Story {
    passed: usize,
    failed: usize,
}

impl Story {
    /// Starts a step.
    pub fn step(&mut self, title: &str) {
        self.line(&format!("\n{title}"));
    }

    /// A check: `✓ text` when `ok`, else `✗ text`. Returns `ok`.
    pub fn check(&mut self, ok: bool, text: &str) -> bool {
        if ok {
            self.passed += 1;
            self.line(&format!("  ✓ {text}"));
        } else {
            self.failed += 1;
            self.line(&format!("  ✗ {text}"));
        }
        ok
    }

    /// A line of information under a step.
    pub fn note(&mut self, text: &str) {
        self.line(&format!("    {text}"));
    }

    /// Whether every check passed (and there was at least one).
    pub fn all_passed(&self) -> bool {
        self.failed == 0 && self.passed > 0
    }

    fn line(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        // The story is the demo's output; a closed stdout leaves nothing to report to.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

/// Runs the demo and prints its story on stdout; `true` when every check passed.
pub async fn run(options: DemoOptions) -> bool {
    let timeline = Timeline::new();
    let mut story = Story::default();
    story
        .line("hawser demo: back up an application, survive an API outage, restore it, compare it");
    story.note(&format!("working directory: {}", options.dir.display()));
    if let Some(log) = &options.log {
        story.note(&format!("server log: {}", log.display()));
    }
    let outcome =
        tokio::time::timeout(options.timeout, steps::run(&options, &timeline, &mut story)).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            story.check(false, &format!("the demo stopped: {err:#}"));
        }
        Err(_) => {
            story.check(
                false,
                &format!(
                    "the demo did not finish within --timeout {}s",
                    options.timeout.as_secs()
                ),
            );
        }
    }
    story.step("Timeline");
    story.line(timeline::render(&timeline.entries()).trim_end());
    let summary = if story.all_passed() {
        format!("\nAll {} checks passed.", story.passed)
    } else {
        format!(
            "\n{} of {} checks failed.",
            story.failed,
            story.passed + story.failed
        )
    };
    story.line(&summary);
    story.all_passed()
}
