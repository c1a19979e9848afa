use clap::Parser;

use super::*;

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    server: ServerArgs,
}

fn parse(args: &[&str]) -> Result<ServerArgs, clap::Error> {
    let mut all = vec!["hawser"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).map(|c| c.server)
}

#[test]
fn defaults_are_veleros() {
    let s = parse(&[]).unwrap().settings().unwrap();
    assert_eq!(s.status.resource_timeout, Duration::from_secs(600));
    assert_eq!(s.restore.crd_ready_timeout, Duration::from_secs(600));
    assert_eq!(
        s.locations.validation_frequency,
        Some(Duration::from_secs(60))
    );
    assert_eq!(s.backup.default_ttl.to_string(), "720h0m0s");
    assert_eq!(s.backup.default_location, "default");
    assert_eq!(s.client.qps, Some(500.0));
    assert_eq!(s.client.burst, 1000);
    assert_eq!(s.client.page_size, Some(500));
    assert_eq!(s.metrics_address, "0.0.0.0:8085".parse().unwrap());
    assert_eq!(s.backup.concurrency, 1);
    assert_eq!(s.restore.resource_priorities, Priorities::default());
    assert_eq!(s.status.max_backoff, Duration::from_secs(5));
    assert_eq!(s.status.resync_period, Duration::from_secs(60));
    assert_eq!(
        s.leader_election,
        Some(LeaderElectionSettings {
            lease_name: "hawser-server".to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        })
    );
    assert_eq!(s.shutdown.grace_period, Duration::from_secs(60));
    assert_eq!(s.backup.sync_period, Duration::from_secs(60));
}

#[test]
fn filesystem_roots_and_ambient_credentials() {
    let s = parse(&[]).unwrap().settings().unwrap();
    assert_eq!(s.locations.policy.filesystem_roots(), Some(&[][..]));
    assert!(s.locations.policy.allows_ambient_credentials());
    let s = parse(&[
        "--filesystem-root",
        "/srv/a",
        "--filesystem-root=/srv/b",
        "--allow-ambient-credentials=false",
    ])
    .unwrap()
    .settings()
    .unwrap();
    assert_eq!(
        s.locations.policy.filesystem_roots(),
        Some(&[PathBuf::from("/srv/a"), PathBuf::from("/srv/b")][..])
    );
    assert!(!s.locations.policy.allows_ambient_credentials());
    let err = parse(&["--filesystem-root", "backups"])
        .unwrap()
        .settings()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "--filesystem-root \"backups\" must be an absolute path"
    );
}

#[test]
fn a_backup_sync_period_of_zero_or_less_is_veleros_minute() {
    for value in ["0s", "-5s"] {
        let s = parse(&["--backup-sync-period", value])
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(s.backup.sync_period, Duration::from_secs(60), "{value}");
    }
    let s = parse(&["--backup-sync-period=1s"])
        .unwrap()
        .settings()
        .unwrap();
    assert_eq!(s.backup.sync_period, Duration::from_secs(1));
}

#[test]
fn leader_election_is_on_unless_turned_off() {
    for on in [&["--leader-elect"][..], &["--leader-elect=true"][..]] {
        let s = parse(on).unwrap().settings().unwrap();
        assert!(s.leader_election.is_some(), "{on:?}");
    }
    let s = parse(&["--leader-elect=false", "--leader-elect-lease-duration=1s"])
        .unwrap()
        .settings()
        .unwrap();
    assert_eq!(s.leader_election, None, "durations unchecked when off");
    let s = parse(&[
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-name=hawser.team-a",
        "--shutdown-grace-period=0s",
    ])
    .unwrap()
    .settings()
    .unwrap();
    let election = s.leader_election.unwrap();
    assert_eq!(election.lease_name, "hawser.team-a");
    assert_eq!(election.retry_period, Duration::from_millis(500));
    assert_eq!(s.shutdown.grace_period, Duration::ZERO);
}

#[test]
fn zero_disables_validation_paging_and_rate_limit() {
    let s = parse(&[
        "--store-validation-frequency=0s",
        "--client-page-size=0",
        "--client-qps=0",
    ])
    .unwrap()
    .settings()
    .unwrap();
    assert_eq!(s.locations.validation_frequency, None);
    assert_eq!(s.client.page_size, None);
    assert_eq!(s.client.qps, None);
}

#[test]
fn bad_values_are_rejected_with_the_flag_name() {
    let bad_duration = parse(&["--resource-timeout=10 minutes"]).unwrap_err();
    assert!(bad_duration.to_string().contains("--resource-timeout"));

    for (args, flag) in [
        (&["--client-burst=0"][..], "--client-burst"),
        (&["--client-qps=-1"][..], "--client-qps"),
        (&["--concurrent-backups=0"][..], "--concurrent-backups"),
        (&["--resource-timeout=0s"][..], "--resource-timeout"),
        (
            &["--status-resync-period=-1m"][..],
            "--status-resync-period",
        ),
        (
            &["--store-validation-frequency=-1s"][..],
            "--store-validation-frequency",
        ),
        (&["--metrics-address=8085"][..], "--metrics-address"),
        (
            &["--restore-resource-priorities=pods,,secrets"][..],
            "--restore-resource-priorities",
        ),
        (
            &["--leader-elect-lease-duration=0s"][..],
            "--leader-elect-lease-duration",
        ),
        (
            &["--leader-elect-renew-deadline=15s"][..],
            "--leader-elect-renew-deadline (15s) must be shorter than --leader-elect-lease-duration (15s)",
        ),
        (
            &["--leader-elect-retry-period=10s"][..],
            "--leader-elect-retry-period (10s) must be shorter than --leader-elect-renew-deadline",
        ),
        (
            &["--leader-elect-resource-name=Hawser_Lease"][..],
            "--leader-elect-resource-name",
        ),
        (
            &["--shutdown-grace-period=-1s"][..],
            "--shutdown-grace-period",
        ),
    ] {
        let err = parse(args).unwrap().settings().unwrap_err();
        assert!(err.to_string().contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn listen_addresses_in_go_form() {
    assert_eq!(
        parse_listen_address("127.0.0.1:9000").unwrap(),
        "127.0.0.1:9000".parse().unwrap()
    );
    assert_eq!(
        parse_listen_address("localhost:0").unwrap(),
        "127.0.0.1:0".parse().unwrap()
    );
    assert_eq!(
        parse_listen_address("[::1]:80").unwrap(),
        "[::1]:80".parse().unwrap()
    );
}
