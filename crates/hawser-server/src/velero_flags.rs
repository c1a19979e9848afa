//! Flags of Velero's commands that hawser accepts, so that an argument list written for Velero
//! parses, but does not act on.
//!
//! Each command has a table of [`VeleroFlag`]s ([`ServerFlags`] for `server`; `hawser install`
//! keeps its own). [`Accepted`] turns a table into clap arguments with Go pflag's syntax and
//! records which ones were given, so that the command can say once that they have no effect:
//!
//! - `--flag=value` and `--flag value`; a repeated flag keeps its last value, list flags
//!   (`--default-volume-snapshot-locations`) collect every value;
//! - booleans bare (`--disable-informer-cache`) or with `=true`/`=false` (and Go's `1`, `0`, `t`, `f`,
//!   `TRUE`, `False`, ...), never with a separate value, as pflag;
//! - an empty value (`--features=`);
//! - durations are checked as Go durations and integers as integers, so a value Velero would
//!   refuse is refused here too.
//!
//! These flags have no `HAWSER_*` environment variable: they exist only for argument lists.

use std::marker::PhantomData;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use hawser_core::duration::GoDuration;

/// How a flag's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A boolean: bare, or `=true` / `=false`.
    Bool,
    /// A Go duration (`10m`, `4h0m0s`).
    Duration,
    /// An integer.
    Int,
    /// Any text, empty included.
    Text,
    /// A comma list; the flag may be repeated and the values add up.
    List,
}

/// One flag of a Velero command that hawser accepts and ignores.
#[derive(Debug, Clone, Copy)]
pub struct VeleroFlag {
    /// Long name, without the dashes.
    pub name: &'static str,
    /// Single-letter form, if Velero has one.
    pub short: Option<char>,
    /// How the value is written.
    pub kind: FlagKind,
    /// Velero's default, as its help shows it (`""`: none).
    pub default: &'static str,
    /// What the flag does in Velero.
    pub help: &'static str,
    /// Left out of `--help` (logging flags of Kubernetes' client library).
    pub hidden: bool,
}

impl VeleroFlag {
    /// A flag shown in `--help`, with no help text yet.
    pub const fn new(name: &'static str, kind: FlagKind, default: &'static str) -> Self {
        Self {
            name,
            short: None,
            kind,
            default,
            help: "",
            hidden: false,
        }
    }

    /// With this help text.
    pub const fn help(mut self, help: &'static str) -> Self {
        self.help = help;
        self
    }

    /// Left out of `--help`.
    pub const fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// With a single-letter form.
    pub const fn short(mut self, short: char) -> Self {
        self.short = Some(short);
        self
    }

    fn arg(&self, heading: &'static str) -> Arg {
        let mut help = self.help.to_owned();
        if !self.default.is_empty() {
            help.push_str(&format!(" [Velero's default: {}]", self.default));
        }
        let mut arg = Arg::new(self.name)
            .long(self.name)
            .help(help)
            .help_heading(heading)
            .hide(self.hidden);
        if let Some(short) = self.short {
            arg = arg.short(short);
        }
        match self.kind {
            FlagKind::Bool => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_name("BOOL")
                .value_parser(parse_go_bool)
                .overrides_with(self.name)
                .action(ArgAction::Set),
            FlagKind::Duration => arg
                .value_name("DURATION")
                .allow_hyphen_values(true)
                .value_parser(parse_go_duration)
                .overrides_with(self.name)
                .action(ArgAction::Set),
            FlagKind::Int => arg
                .value_name("INT")
                .allow_negative_numbers(true)
                .value_parser(parse_int)
                .overrides_with(self.name)
                .action(ArgAction::Set),
            FlagKind::Text => arg
                .value_name("TEXT")
                .value_parser(clap::value_parser!(String))
                .overrides_with(self.name)
                .action(ArgAction::Set),
            FlagKind::List => arg
                .value_name("LIST")
                .value_parser(clap::value_parser!(String))
                .action(ArgAction::Append),
        }
    }
}

/// Go's `strconv.ParseBool`, which pflag uses: for boolean flags written as Velero's, with
/// `#[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]`.
///
/// # Errors
/// The value is not one of Go's spellings of true or false.
pub fn go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{value:?} is not a boolean (true or false)")),
    }
}

fn parse_go_bool(value: &str) -> Result<String, String> {
    go_bool(value).map(|b| b.to_string())
}

fn parse_go_duration(value: &str) -> Result<String, String> {
    GoDuration::parse(value)
        .map(|_| value.to_owned())
        .map_err(|err| err.to_string())
}

fn parse_int(value: &str) -> Result<String, String> {
    value
        .parse::<i64>()
        .map(|_| value.to_owned())
        .map_err(|err| format!("{value:?} is not an integer: {err}"))
}

/// A table of flags of one Velero command.
pub trait FlagTable {
    /// Heading of the flags in `--help`.
    const HEADING: &'static str;
    /// The flags.
    const FLAGS: &'static [VeleroFlag];
}

/// A flag of the table given on the command line, with its value (list values joined by `,`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenFlag {
    /// Long name, without the dashes.
    pub name: &'static str,
    /// The value, as given (booleans as `true` / `false`).
    pub value: String,
}

/// The flags of table `T` given on the command line; flatten it into a clap derive struct.
#[derive(Debug, Clone)]
pub struct Accepted<T> {
    given: Vec<GivenFlag>,
    table: PhantomData<T>,
}

impl<T> Default for Accepted<T> {
    fn default() -> Self {
        Self {
            given: Vec::new(),
            table: PhantomData,
        }
    }
}

impl<T: FlagTable> Accepted<T> {
    /// The flags given, in the table's order.
    pub fn given(&self) -> &[GivenFlag] {
        &self.given
    }

    /// The value given for `name`, if it was given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.given
            .iter()
            .find(|g| g.name == name)
            .map(|g| g.value.as_str())
    }

    /// Logs each flag given, once, as accepted and not implemented.
    pub fn log_not_implemented(&self) {
        for flag in &self.given {
            log_not_implemented(flag.name, &flag.value);
        }
    }
}

/// Logs once that Velero's flag `--name` was given `value` and has no effect in hawser.
pub fn log_not_implemented(name: &str, value: &str) {
    tracing::warn!(
        flag = %format_args!("--{name}"),
        value = %value,
        "Velero flag accepted, not implemented: it has no effect in hawser"
    );
}

/// What a server started with `--features` `features` does differently from Velero, if
/// anything. Velero 1.14 to 1.18 run their CSI actions only with the feature flag `EnableCSI`;
/// hawser's CSI support is built in, so it cuts CSI snapshots with or without it.
#[must_use]
pub fn csi_difference(features: Option<&str>) -> Option<&'static str> {
    let enabled = features
        .unwrap_or_default()
        .split(',')
        .any(|f| f.trim() == "EnableCSI");
    (!enabled).then_some(
        "--features has no EnableCSI, without which Velero cuts no CSI snapshots: hawser cuts them all the same (spec.snapshotVolumes: false or a volume policy with action skip leaves volumes out)",
    )
}

impl<T: FlagTable> FromArgMatches for Accepted<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = T::FLAGS
            .iter()
            .filter(|flag| matches.value_source(flag.name) == Some(ValueSource::CommandLine))
            .map(|flag| GivenFlag {
                name: flag.name,
                value: matches
                    .get_many::<String>(flag.name)
                    .map(|values| values.cloned().collect::<Vec<_>>().join(","))
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Self {
            given,
            table: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<T: FlagTable> Args for Accepted<T> {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(T::FLAGS.iter().map(|flag| flag.arg(T::HEADING)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The flags of `velero server` (Velero 1.14 to 1.18, and the root command's) that hawser
/// accepts without acting on them. The flags it implements are in
/// [`ServerArgs`](crate::ServerArgs) and the global flags.
#[derive(Debug, Clone, Copy)]
pub struct ServerFlags;

use FlagKind::{Bool, Duration, Int, List, Text};

impl FlagTable for ServerFlags {
    const HEADING: &'static str = "Velero server flags accepted without effect";
    const FLAGS: &'static [VeleroFlag] = &[
        VeleroFlag::new("plugin-dir", Text, "/plugins")
            .help("Directory of Velero's plugin binaries; hawser has no plugins."),
        VeleroFlag::new("fs-backup-timeout", Duration, "4h0m0s")
            .help("Timeout of file-system backups and restores of pod volumes."),
        VeleroFlag::new("profiler-address", Text, "localhost:6060")
            .help("Address of the Go pprof profiler."),
        VeleroFlag::new("terminating-resource-timeout", Duration, "10m0s")
            .help("How long a restore waits for terminating namespaces and volumes."),
        VeleroFlag::new(
            "volume-group-snapshot-label-key",
            Text,
            "velero.io/volume-group",
        )
        .help("Label key grouping PVCs into a VolumeGroupSnapshot."),
        VeleroFlag::new("default-repo-maintain-frequency", Duration, "0s")
            .help("How often backup repositories are maintained."),
        VeleroFlag::new("item-operation-sync-frequency", Duration, "0s")
            .help("How often asynchronous plugin operations are polled (0: 10s)."),
        VeleroFlag::new("uploader-type", Text, "kopia")
            .help("Uploader of pod volume data (kopia)."),
        VeleroFlag::new("max-concurrent-k8s-connections", Int, "30")
            .help("Connections to the API server at most."),
        VeleroFlag::new("disable-informer-cache", Bool, "false")
            .help("Read restored kinds without informers."),
        VeleroFlag::new("default-volume-snapshot-locations", List, "")
            .help("Default VolumeSnapshotLocation per provider, provider:name,..."),
        VeleroFlag::new("backup-repository-configmap", Text, "")
            .help("ConfigMap of backup repository settings."),
        VeleroFlag::new("repo-maintenance-job-configmap", Text, "")
            .help("ConfigMap of repository maintenance Job settings."),
        VeleroFlag::new("item-block-worker-count", Int, "1")
            .help("Workers processing the item blocks of one backup."),
        // Server flags of Velero 1.14-1.16 that `velero install` still writes.
        VeleroFlag::new("keep-latest-maintenance-jobs", Int, "3")
            .help("Maintenance Jobs kept per repository (Velero 1.14-1.16)."),
        VeleroFlag::new("maintenance-job-cpu-request", Text, "0")
            .help("CPU request of maintenance Jobs (Velero 1.14-1.16)."),
        VeleroFlag::new("maintenance-job-mem-request", Text, "0")
            .help("Memory request of maintenance Jobs (Velero 1.14-1.16)."),
        VeleroFlag::new("maintenance-job-cpu-limit", Text, "0")
            .help("CPU limit of maintenance Jobs (Velero 1.14-1.16)."),
        VeleroFlag::new("maintenance-job-mem-limit", Text, "0")
            .help("Memory limit of maintenance Jobs (Velero 1.14-1.16)."),
        // The logging flags of Kubernetes' Go client library, registered on Velero's root.
        VeleroFlag::new("v", Int, "0").short('v').hidden(),
        VeleroFlag::new("vmodule", Text, "").hidden(),
        VeleroFlag::new("logtostderr", Bool, "true").hidden(),
        VeleroFlag::new("alsologtostderr", Bool, "false").hidden(),
        VeleroFlag::new("alsologtostderrthreshold", Text, "ERROR").hidden(),
        VeleroFlag::new("stderrthreshold", Text, "INFO").hidden(),
        VeleroFlag::new("log_dir", Text, "").hidden(),
        VeleroFlag::new("log_file", Text, "").hidden(),
        VeleroFlag::new("log_file_max_size", Int, "1800").hidden(),
        VeleroFlag::new("log_backtrace_at", Text, ":0").hidden(),
        VeleroFlag::new("add_dir_header", Bool, "false").hidden(),
        VeleroFlag::new("skip_headers", Bool, "false").hidden(),
        VeleroFlag::new("skip_log_headers", Bool, "false").hidden(),
        VeleroFlag::new("one_output", Bool, "false").hidden(),
        VeleroFlag::new("legacy_stderr_threshold_behavior", Bool, "true").hidden(),
    ];
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use clap::{CommandFactory, Parser};

    #[test]
    fn only_a_server_without_enable_csi_differs_from_velero() {
        assert!(super::csi_difference(None).is_some());
        assert!(super::csi_difference(Some("EnableAPIGroupVersions")).is_some());
        assert!(super::csi_difference(Some("EnableCSIx")).is_some());
        assert_eq!(super::csi_difference(Some("EnableCSI")), None);
        assert_eq!(
            super::csi_difference(Some("EnableAPIGroupVersions, EnableCSI")),
            None
        );
    }

    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        server: crate::ServerArgs,
    }

    fn parse(args: &[&str]) -> Result<Vec<GivenFlag>, clap::Error> {
        let mut all = vec!["hawser"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.server.velero.given().to_vec())
    }

    fn given(pairs: &[(&'static str, &str)]) -> Vec<GivenFlag> {
        pairs
            .iter()
            .map(|(name, value)| GivenFlag {
                name,
                value: (*value).to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_table_and_server_args_make_one_valid_command() {
        Cli::command().debug_assert();
    }

    #[test]
    fn what_velero_install_writes_parses() {
        // (`--features` is a global flag of the command line, not one of this table.)
        let flags = parse(&[
            "--uploader-type=kopia",
            "--disable-informer-cache",
            "--keep-latest-maintenance-jobs=3",
            "--fs-backup-timeout=4h0m0s",
            "--concurrent-backups=2",
        ])
        .unwrap();
        assert_eq!(
            flags,
            given(&[
                ("fs-backup-timeout", "4h0m0s"),
                ("uploader-type", "kopia"),
                ("disable-informer-cache", "true"),
                ("keep-latest-maintenance-jobs", "3"),
            ])
        );
    }

    #[test]
    fn pflag_syntax_is_accepted() {
        let flags = parse(&[
            "--plugin-dir",
            "/plugins",
            "--disable-informer-cache=F",
            "--default-volume-snapshot-locations=aws:a,gcp:b",
            "--default-volume-snapshot-locations",
            "azure:c",
            "--item-block-worker-count",
            "4",
            "--item-block-worker-count=5",
            "--default-repo-maintain-frequency",
            "-1h",
            "-v=2",
            "--logtostderr",
        ])
        .unwrap();
        assert_eq!(
            flags,
            given(&[
                ("plugin-dir", "/plugins"),
                ("default-repo-maintain-frequency", "-1h"),
                ("disable-informer-cache", "false"),
                ("default-volume-snapshot-locations", "aws:a,gcp:b,azure:c"),
                ("item-block-worker-count", "5"),
                ("v", "2"),
                ("logtostderr", "true"),
            ])
        );
    }

    #[test]
    fn values_velero_refuses_are_refused() {
        for args in [
            &["--fs-backup-timeout=4 hours"][..],
            &["--disable-informer-cache=yes"][..],
            &["--disable-informer-cache", "false", "--uploader-type=kopia"][..],
            &["--max-concurrent-k8s-connections=many"][..],
            &["--no-such-flag"][..],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn docs_list_every_accepted_flag() {
        let docs = include_str!("../../../docs/server.md");
        for flag in ServerFlags::FLAGS {
            let written = format!("`--{}`", flag.name);
            assert!(
                docs.contains(&written),
                "{written} missing from docs/server.md"
            );
        }
    }

    #[test]
    fn nothing_given_nothing_reported() {
        assert_eq!(parse(&[]).unwrap(), Vec::new());
    }
}
