//! Warnings and errors of a backup (the results file) and the backup's own log.

use hawser_core::archive::gzjson::{ResultMessages, Results};

pub(crate) use hawser_core::archive::gzjson::Scope;

/// Warnings and errors gathered by one step.
#[derive(Clone, Debug, Default)]
pub(crate) struct Messages {
    pub warnings: Vec<(Scope, String)>,
    pub errors: Vec<(Scope, String)>,
}

impl Messages {
    pub(crate) fn warn(&mut self, scope: Scope, message: String) {
        self.warnings.push((scope, message));
    }

    pub(crate) fn error(&mut self, scope: Scope, message: String) {
        self.errors.push((scope, message));
    }

    pub(crate) fn append(&mut self, other: Messages) {
        self.warnings.extend(other.warnings);
        self.errors.extend(other.errors);
    }

    /// The results file body.
    pub(crate) fn to_results(&self) -> Results {
        Results {
            errors: to_messages(&self.errors),
            warnings: to_messages(&self.warnings),
        }
    }
}

fn to_messages(list: &[(Scope, String)]) -> ResultMessages {
    let mut out = ResultMessages::default();
    for (scope, message) in list {
        out.push(scope, message.clone());
    }
    out
}

/// The backup's log (`<backup>-logs.gz`), in the logfmt shape Velero's logs have. Lines are
/// written per type and per message, never per item, so its size does not grow with the
/// number of objects.
pub(crate) struct BackupLog {
    backup: String,
    clock: hawser_core::clock::Clock,
    text: String,
}

impl BackupLog {
    pub(crate) fn new(backup: String, clock: hawser_core::clock::Clock) -> Self {
        Self {
            backup,
            clock,
            text: String::new(),
        }
    }

    pub(crate) fn line(&mut self, level: &str, message: &str) {
        let now = self.clock.now();
        let escaped = message
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        self.text.push_str(&format!(
            "time=\"{}\" level={level} msg=\"{escaped}\" backup={}\n",
            now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            self.backup
        ));
        match level {
            "error" => tracing::error!(backup = %self.backup, "{message}"),
            "warning" => tracing::warn!(backup = %self.backup, "{message}"),
            _ => tracing::info!(backup = %self.backup, "{message}"),
        }
    }

    pub(crate) fn info(&mut self, message: &str) {
        self.line("info", message);
    }

    pub(crate) fn messages(&mut self, messages: &Messages) {
        for (_, m) in &messages.warnings {
            self.line("warning", m);
        }
        for (_, m) in &messages.errors {
            self.line("error", m);
        }
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.text.into_bytes()
    }
}
