//! What the verbs acting on several objects share (`delete`, `schedule pause|unpause`): the
//! selection `NAMES | --all | -l SELECTOR`, the `--confirm` flag with Velero's prompt, and the
//! tally that lets one failed object not stop the others.

use std::io::{BufRead, Write};

use clap::Args;
use kube::Api;
use kube::api::ListParams;
use serde::de::DeserializeOwned;

use super::error::{CliError, ExitStatus};
use super::flags::get_required;

/// `NAMES | --all | -l SELECTOR`: exactly one of them.
#[derive(Args, Debug, Clone, Default)]
pub struct SelectArgs {
    /// Names of the objects.
    pub names: Vec<String>,
    /// All objects in the namespace.
    #[arg(long)]
    pub all: bool,
    /// The objects whose labels match this selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

impl SelectArgs {
    /// Refuses anything but exactly one of names, `--all` and `--selector` (Velero's rule).
    /// `kind` is the lower-case singular (`backup`).
    pub fn check(&self, kind: &str) -> Result<(), CliError> {
        let given = [!self.names.is_empty(), self.all, self.selector.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(CliError::usage(
                "--all/--selector",
                format!(
                    "give exactly one of: {kind} name(s), the --all flag, or the --selector flag"
                ),
            ));
        }
        Ok(())
    }
}

/// `--confirm`.
#[derive(Args, Debug, Clone, Default)]
pub struct ConfirmArgs {
    /// Delete without asking; without it the command asks on stdin.
    #[arg(long)]
    pub confirm: bool,
}

impl ConfirmArgs {
    /// Asks Velero's question on stdout unless `--confirm` was given; anything but a `Y` is
    /// [`CliError::NotConfirmed`].
    pub fn require(&self) -> Result<(), CliError> {
        if self.confirm {
            return Ok(());
        }
        // The command has not started any other work: blocking on stdin here holds nothing up.
        let stdin = std::io::stdin();
        let answered_yes = ask(&mut stdin.lock(), &mut std::io::stdout());
        if answered_yes {
            Ok(())
        } else {
            Err(CliError::NotConfirmed)
        }
    }
}

/// Velero's `confirm.GetConfirmation`: prints `Are you sure you want to continue (Y/N)? ` and
/// reads lines until one is a single `y` or `n` (either case). End of input or a read error is
/// a no.
pub fn ask(input: &mut impl BufRead, output: &mut impl Write) -> bool {
    loop {
        let _ = write!(output, "Are you sure you want to continue (Y/N)? ");
        let _ = output.flush();
        let mut line = String::new();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => {
                // Ends the prompt's line, so that what follows starts on a line of its own.
                let _ = writeln!(output);
                return false;
            }
            Ok(_) => {}
        }
        match line.trim() {
            "y" | "Y" => return true,
            "n" | "N" => return false,
            _ => {}
        }
    }
}

/// The objects of a selection: each named one that exists (a missing or unreadable one is an
/// entry of `failures`), or all that match `--all`/`--selector`.
pub struct Selected<K> {
    /// The objects found.
    pub found: Vec<K>,
    /// One error per name that could not be read.
    pub failures: Vec<CliError>,
}

impl<K> Selected<K> {
    /// Prints the error of each name that could not be read, or `nothing` (Velero's `No backups
    /// found`) when nothing was selected at all; returns the objects found and a tally that
    /// counts those errors.
    pub fn report(self, nothing: &str) -> (Vec<K>, Tally) {
        let mut tally = Tally::default();
        for err in &self.failures {
            tally.fail(err);
        }
        if self.found.is_empty() && self.failures.is_empty() {
            println!("{nothing}");
        }
        (self.found, tally)
    }
}

/// Reads the objects of `select`. `kind` names the objects in messages (`Backup`), `command`
/// is the command group of hints (`backup`). A failed list is an error of the whole command.
pub async fn select<K>(
    api: &Api<K>,
    namespace: &str,
    (kind, command): (&str, &str),
    select: &SelectArgs,
) -> Result<Selected<K>, CliError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    if select.names.is_empty() {
        let mut params = ListParams::default();
        if let Some(selector) = &select.selector {
            params = params.labels(super::label_selector::checked_selector(selector)?);
        }
        let found = api
            .list(&params)
            .await
            .map_err(|err| CliError::api("list", format!("{kind}s in namespace {namespace}"), err))?
            .items;
        return Ok(Selected {
            found,
            failures: Vec::new(),
        });
    }
    let mut selected = Selected {
        found: Vec::new(),
        failures: Vec::new(),
    };
    for name in &select.names {
        let result = get_required(
            api,
            format!("{kind} {namespace}/{name}"),
            name,
            format!("list them with `hawser {command} get`"),
        )
        .await;
        match result {
            Ok(object) => selected.found.push(object),
            Err(err) => selected.failures.push(err),
        }
    }
    Ok(selected)
}

/// Counts the objects a command failed on, printing each error on stderr as it happens.
#[derive(Debug, Default)]
pub struct Tally {
    failed: usize,
}

impl Tally {
    /// Records a failure and prints it.
    pub fn fail(&mut self, err: &CliError) {
        eprintln!("{}", err.for_people());
        self.failed += 1;
    }

    /// Exit 0 when nothing failed, 1 otherwise.
    pub fn status(&self) -> ExitStatus {
        if self.failed == 0 {
            ExitStatus::Success
        } else {
            ExitStatus::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn answer(input: &str) -> (bool, String) {
        let mut output = Vec::new();
        let yes = ask(&mut input.as_bytes(), &mut output);
        (yes, String::from_utf8(output).unwrap())
    }

    #[test]
    fn only_a_single_y_confirms_and_other_answers_ask_again() {
        assert!(answer("y\n").0);
        assert!(answer(" Y \n").0);
        let (yes, said) = answer("yes\nmaybe\nY\n");
        assert!(yes);
        assert_eq!(said.matches("(Y/N)?").count(), 3, "{said}");
        assert!(!answer("n\ny\n").0);
        assert!(!answer("N\n").0);
        let (yes, said) = answer("");
        assert!(!yes);
        assert_eq!(said, "Are you sure you want to continue (Y/N)? \n");
        assert!(!answer("yes\n").0);
    }

    #[test]
    fn exactly_one_of_names_all_and_selector_is_accepted() {
        let names = SelectArgs {
            names: vec!["a".into()],
            ..SelectArgs::default()
        };
        let all = SelectArgs {
            all: true,
            ..SelectArgs::default()
        };
        let selector = SelectArgs {
            selector: Some("a=b".into()),
            ..SelectArgs::default()
        };
        for ok in [&names, &all, &selector] {
            assert!(ok.check("backup").is_ok(), "{ok:?}");
        }
        let both = SelectArgs {
            all: true,
            ..names.clone()
        };
        for bad in [&SelectArgs::default(), &both] {
            let err = bad.check("backup").unwrap_err();
            assert_eq!(err.exit_status(), ExitStatus::Usage);
            assert!(err.to_string().contains("backup name(s)"), "{err}");
        }
    }
}
