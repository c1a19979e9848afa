//! `hawser schedule create|get|describe|pause|unpause` and `hawser backup create
//! --from-schedule`, run as a process against kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::{Cluster, NS};
use serde_json::{Value, json};

const SCHEDULE: (&str, &str) = ("velero.io/v1", "Schedule");
const BACKUP: (&str, &str) = ("velero.io/v1", "Backup");

fn keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// The cells of a table row, cut at the columns of the header (cells may contain spaces).
fn cells<'a>(header: &str, row: &'a str, columns: &[&str]) -> Vec<&'a str> {
    let starts: Vec<usize> = columns
        .iter()
        .map(|c| header.find(c).unwrap_or_else(|| panic!("{c} in {header}")))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts
                .get(i + 1)
                .copied()
                .unwrap_or(row.len())
                .min(row.len());
            row.get(start..end).unwrap_or("").trim()
        })
        .collect()
}

const COLUMNS: [&str; 8] = [
    "NAME",
    "STATUS",
    "CREATED",
    "SCHEDULE",
    "BACKUP TTL",
    "LAST BACKUP",
    "SELECTOR",
    "PAUSED",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sends_the_schedule_and_the_template_of_the_flags() {
    let cluster = Cluster::start().await;
    cluster.add_location("primary");
    let run = cluster
        .hawser(&[
            "schedule",
            "create",
            "s1",
            "--schedule",
            "0 */6 * * *",
            "--include-namespaces",
            "shop,db",
            "--exclude-namespaces",
            "db-scratch",
            "--include-resources",
            "deployments.apps",
            "--exclude-resources",
            "secrets",
            "--include-cluster-resources=false",
            "-l",
            "app=web",
            "--ttl",
            "72h",
            "--storage-location",
            "primary",
            "--paused",
            "--skip-immediately",
            "--use-owner-references-in-backup",
            "--labels",
            "team=a",
            "--annotations",
            "note=n",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "Schedule \"s1\" created successfully.\n");
    let schedule = cluster.get(SCHEDULE.0, SCHEDULE.1, "s1").expect("created");
    let spec = &schedule["spec"];
    assert_eq!(
        keys(spec),
        [
            "paused",
            "schedule",
            "skipImmediately",
            "template",
            "useOwnerReferencesInBackup"
        ]
    );
    assert_eq!(spec["schedule"], "0 */6 * * *");
    assert_eq!(spec["paused"], true);
    assert_eq!(spec["skipImmediately"], true);
    assert_eq!(spec["useOwnerReferencesInBackup"], true);
    let template = &spec["template"];
    assert_eq!(
        keys(template),
        [
            "excludedNamespaces",
            "excludedResources",
            "includeClusterResources",
            "includedNamespaces",
            "includedResources",
            "labelSelector",
            "storageLocation",
            "ttl",
        ]
    );
    assert_eq!(template["includedNamespaces"], json!(["shop", "db"]));
    assert_eq!(template["excludedNamespaces"], json!(["db-scratch"]));
    assert_eq!(template["includedResources"], json!(["deployments.apps"]));
    assert_eq!(template["excludedResources"], json!(["secrets"]));
    assert_eq!(template["includeClusterResources"], false);
    assert_eq!(
        template["labelSelector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(template["ttl"], "72h0m0s");
    assert_eq!(template["storageLocation"], "primary");
    assert_eq!(schedule["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(schedule["metadata"]["annotations"], json!({"note": "n"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_without_the_optional_flags_leaves_them_unset() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&["schedule", "create", "plain", "--schedule", "@every 6h"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let spec = cluster.get(SCHEDULE.0, SCHEDULE.1, "plain").unwrap()["spec"].clone();
    // As Velero: useOwnerReferencesInBackup is always sent; skipImmediately only when given.
    assert_eq!(
        keys(&spec),
        ["schedule", "template", "useOwnerReferencesInBackup"]
    );
    assert_eq!(spec["useOwnerReferencesInBackup"], false);
    assert_eq!(spec["template"], json!({"includedNamespaces": ["*"]}));

    let run = cluster
        .hawser(&[
            "schedule",
            "create",
            "noskip",
            "--schedule",
            "@daily",
            "--skip-immediately=false",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let spec = cluster.get(SCHEDULE.0, SCHEDULE.1, "noskip").unwrap()["spec"].clone();
    assert_eq!(spec["skipImmediately"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_bad_input_and_creates_nothing() {
    let cluster = Cluster::start().await;
    // (arguments after `schedule create x`, exit code, what stderr must say)
    let cases: [(&[&str], i32, &[&str]); 8] = [
        (&[], 2, &["--schedule"]),
        (&["--schedule", " "], 2, &["--schedule", "cron expression"]),
        (
            &["--schedule", "0 */6 * *"],
            2,
            &["--schedule", "0 */6 * *"],
        ),
        (
            &["--schedule", "@every soon"],
            2,
            &["--schedule", "@every soon"],
        ),
        (
            &["--schedule", "@daily", "--ttl", "soon"],
            2,
            &["--ttl", "duration"],
        ),
        (
            &[
                "--schedule",
                "@daily",
                "--include-resources",
                "pods",
                "--exclude-namespace-scoped-resources",
                "events",
            ],
            2,
            &["cannot be combined"],
        ),
        (
            &["--schedule", "@daily", "--skip-immediately", "true"],
            2,
            &["unexpected argument"],
        ),
        (
            &["--schedule", "@daily", "--storage-location", "nowhere"],
            1,
            &["BackupStorageLocation velero/nowhere not found", "hint:"],
        ),
    ];
    for (extra, code, said) in cases {
        let args: Vec<&str> = ["schedule", "create", "x"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        for words in said {
            assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        }
        assert!(
            cluster.get(SCHEDULE.0, SCHEDULE.1, "x").is_none(),
            "{args:?} created x"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flag_prints_without_creating() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "schedule",
            "create",
            "dry",
            "--schedule",
            "@daily",
            "--ttl",
            "1h",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "Schedule");
    assert_eq!(value["metadata"]["namespace"], NS);
    assert_eq!(value["spec"]["schedule"], "@daily");
    assert_eq!(value["spec"]["template"]["ttl"], "1h0m0s");
    assert!(cluster.get(SCHEDULE.0, SCHEDULE.1, "dry").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_velero_columns_and_filters_by_label() {
    let cluster = Cluster::start().await;
    for args in [
        &[
            "schedule",
            "create",
            "daily",
            "--schedule",
            "0 3 * * *",
            "--ttl",
            "720h",
            "-l",
            "app=web",
            "--labels",
            "team=a",
        ][..],
        &[
            "schedule",
            "create",
            "hourly",
            "--schedule",
            "@every 1h",
            "--paused",
        ][..],
    ] {
        let run = cluster.hawser(args).await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    let three_hours_ago =
        jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - 3 * 3600).unwrap();
    cluster.set_status(
        SCHEDULE.0,
        SCHEDULE.1,
        "daily",
        json!({"phase": "Enabled", "lastBackup": three_hours_ago.to_string()}),
    );

    let run = cluster.hawser(&["schedule", "get"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    let header: Vec<&str> = lines[0]
        .split("   ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    assert_eq!(header, COLUMNS, "{}", lines[0]);
    let daily = cells(lines[0], lines[1], &COLUMNS);
    assert_eq!(daily[0], "daily");
    assert_eq!(daily[1], "Enabled");
    assert!(daily[2].ends_with(" UTC"), "{}", lines[1]);
    assert_eq!(daily[3], "0 3 * * *");
    assert_eq!(daily[4], "720h0m0s");
    assert_eq!(daily[5], "3h ago");
    assert_eq!(daily[6], "app=web");
    assert_eq!(daily[7], "false");
    let hourly = cells(lines[0], lines[2], &COLUMNS);
    assert_eq!(hourly[0], "hourly");
    assert_eq!(hourly[1], "New");
    assert_eq!(hourly[3], "@every 1h");
    assert_eq!(hourly[4], "<none>");
    assert_eq!(hourly[5], "n/a");
    assert_eq!(hourly[6], "<none>");
    assert_eq!(hourly[7], "true");

    let run = cluster.hawser(&["schedule", "get", "-l", "team=a"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(lines[1].starts_with("daily "), "{}", run.stdout);

    let run = cluster
        .hawser(&["schedule", "get", "hourly", "-o", "json"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(value["spec"]["paused"], true);

    let run = cluster.hawser(&["schedule", "get", "-o", "yaml"]).await;
    let value: Value = serde_yaml::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "List");
    assert_eq!(value["items"].as_array().unwrap().len(), 2);

    let run = cluster.hawser(&["schedule", "get", "missing"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("Schedule velero/missing not found"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_schedule_and_its_template() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "schedule",
            "create",
            "nightly",
            "--schedule",
            "@daily",
            "--exclude-namespaces",
            "kube-system",
            "--ttl",
            "48h",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    cluster.set_status(
        SCHEDULE.0,
        SCHEDULE.1,
        "nightly",
        json!({"phase": "FailedValidation", "validationErrors": ["invalid schedule: bad"]}),
    );
    let run = cluster.hawser(&["schedule", "describe", "nightly"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let line = |start: &str| {
        run.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("{start}: {}", run.stdout))
            .split_once(':')
            .unwrap()
            .1
            .trim()
            .to_owned()
    };
    assert_eq!(line("Phase:"), "FailedValidation");
    assert!(
        run.stdout.contains("  invalid schedule: bad"),
        "{}",
        run.stdout
    );
    assert_eq!(line("Paused:"), "false");
    assert_eq!(line("Schedule:"), "@daily");
    assert_eq!(line("Included:"), "*");
    assert_eq!(line("Last Backup:"), "<never>");
    assert!(run.stdout.contains("Backup Template:\n"), "{}", run.stdout);
    // The template's lines are indented under its heading.
    assert!(
        run.stdout
            .contains("\n  Namespaces:\n    Included:  *\n    Excluded:  kube-system\n"),
        "{}",
        run.stdout
    );
    assert_eq!(line("TTL:"), "48h0m0s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_unpause_patch_paused_and_skip_immediately() {
    let cluster = Cluster::start().await;
    for name in ["a", "b"] {
        let run = cluster
            .hawser(&[
                "schedule",
                "create",
                name,
                "--schedule",
                "@daily",
                "--skip-immediately",
            ])
            .await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    let spec = |name: &str| cluster.get(SCHEDULE.0, SCHEDULE.1, name).unwrap()["spec"].clone();

    // A missing name fails on its own; the others are paused.
    let run = cluster.hawser(&["schedule", "pause", "a", "missing"]).await;
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("Schedule velero/missing not found"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "Schedule a paused successfully\n");
    // As in Velero, skipImmediately takes the flag's value: absent flag, absent field.
    assert_eq!(spec("a")["paused"], true);
    assert!(spec("a").get("skipImmediately").is_none(), "{}", spec("a"));
    assert_eq!(spec("b")["paused"], Value::Null);
    assert_eq!(spec("b")["skipImmediately"], true);

    let run = cluster.hawser(&["schedule", "pause", "--all"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.stdout.contains("Schedule a is already paused, skip"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Schedule b paused successfully"),
        "{}",
        run.stdout
    );
    assert_eq!(spec("b")["paused"], true);

    let run = cluster
        .hawser(&["schedule", "unpause", "a", "--skip-immediately"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "Schedule a unpaused successfully\n");
    assert_eq!(spec("a")["paused"], false);
    assert_eq!(spec("a")["skipImmediately"], true);
    assert_eq!(spec("b")["paused"], true);

    let run = cluster.hawser(&["schedule", "unpause"]).await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("exactly one of"), "{}", run.stderr);
}

/// Stores Schedule `name` with a template and the given template labels, schedule labels and
/// annotations, and returns it as stored (with its uid).
fn add_schedule(
    cluster: &Cluster,
    name: &str,
    template_labels: Option<Value>,
    owners: bool,
) -> Value {
    let mut template = json!({
        "includedNamespaces": ["shop"],
        "excludedResources": ["secrets"],
        "ttl": "24h0m0s",
        "labelSelector": {"matchLabels": {"app": "web"}},
    });
    if let Some(labels) = template_labels {
        template["metadata"] = json!({ "labels": labels });
    }
    cluster
        .store()
        .insert(json!({
            "apiVersion": "velero.io/v1",
            "kind": "Schedule",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": {"team": "a"},
                "annotations": {"note": "from-schedule"},
            },
            "spec": {
                "schedule": "@daily",
                "template": template,
                "useOwnerReferencesInBackup": owners,
            },
        }))
        .expect("schedule stored")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_from_schedule_copies_the_template_labels_and_annotations() {
    let cluster = Cluster::start().await;
    let schedule = add_schedule(&cluster, "daily", None, false);
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "b1",
            "--from-schedule",
            "daily",
            "--labels",
            "why=drill",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.stdout.contains("\"b1\" submitted"), "{}", run.stdout);
    let backup = cluster.get(BACKUP.0, BACKUP.1, "b1").expect("created");
    assert_eq!(backup["spec"], schedule["spec"]["template"]);
    assert_eq!(
        backup["metadata"]["labels"],
        json!({"team": "a", "velero.io/schedule-name": "daily", "why": "drill"})
    );
    assert_eq!(
        backup["metadata"]["annotations"],
        json!({"note": "from-schedule"})
    );
    assert!(backup["metadata"].get("ownerReferences").is_none());

    // Without a name: `<schedule>-<UTC YYYYMMDDhhmmss>`.
    let run = cluster
        .hawser(&["backup", "create", "--from-schedule", "daily"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let names: Vec<String> = cluster
        .store()
        .list(BACKUP.0, BACKUP.1, Some(NS))
        .iter()
        .map(|b| b["metadata"]["name"].as_str().unwrap().to_owned())
        .filter(|n| n != "b1")
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let stamp = names[0].strip_prefix("daily-").expect(&names[0]);
    assert_eq!(stamp.len(), 14, "{}", names[0]);
    assert!(stamp.chars().all(|c| c.is_ascii_digit()), "{}", names[0]);
    let named_at = jiff::civil::DateTime::strptime("%Y%m%d%H%M%S", stamp)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp();
    let off = jiff::Timestamp::now().as_second() - named_at.as_second();
    assert!(
        (0..60).contains(&off),
        "{} is {off}s from now in UTC",
        names[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_from_schedule_prefers_template_labels_and_sets_the_owner() {
    let cluster = Cluster::start().await;
    let schedule = add_schedule(&cluster, "owned", Some(json!({"tier": "gold"})), true);
    let run = cluster
        .hawser(&["backup", "create", "b2", "--from-schedule", "owned"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let backup = cluster.get(BACKUP.0, BACKUP.1, "b2").expect("created");
    assert_eq!(backup["spec"], schedule["spec"]["template"]);
    assert_eq!(
        backup["spec"]["metadata"],
        json!({"labels": {"tier": "gold"}})
    );
    assert_eq!(
        backup["metadata"]["labels"],
        json!({"tier": "gold", "velero.io/schedule-name": "owned"})
    );
    let owners = backup["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0]["kind"], "Schedule");
    assert_eq!(owners[0]["apiVersion"], "velero.io/v1");
    assert_eq!(owners[0]["name"], "owned");
    assert_eq!(owners[0]["uid"], schedule["metadata"]["uid"]);
    assert_eq!(owners[0]["controller"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_from_schedule_refuses_filters_and_missing_schedules() {
    let cluster = Cluster::start().await;
    add_schedule(&cluster, "daily", None, false);
    // (arguments after `backup create x`, exit code, what stderr must say)
    let cases: [(&[&str], i32, &[&str]); 5] = [
        (
            &["--from-schedule", "daily", "--include-namespaces", "a"],
            2,
            &["--from-schedule", "--include-namespaces"],
        ),
        (
            &["--from-schedule", "daily", "--ttl", "1h"],
            2,
            &["--from-schedule", "--ttl"],
        ),
        (
            &["--from-schedule", "daily", "-l", "a=b"],
            2,
            &["--from-schedule", "--selector"],
        ),
        (
            &["--from-schedule", " "],
            2,
            &["--from-schedule", "schedule name"],
        ),
        (
            &["--from-schedule", "nope"],
            1,
            &["Schedule velero/nope not found", "hawser schedule get"],
        ),
    ];
    for (extra, code, said) in cases {
        let args: Vec<&str> = ["backup", "create", "x"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        for words in said {
            assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        }
    }
    // Without --from-schedule the name is required.
    let run = cluster.hawser(&["backup", "create"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("<NAME>"), "{}", run.stderr);
    assert_eq!(cluster.store().count(BACKUP.0, BACKUP.1), 0);

    // -o prints the backup it would create, and creates nothing.
    let run = cluster
        .hawser(&[
            "backup",
            "create",
            "dry",
            "--from-schedule",
            "daily",
            "-o",
            "yaml",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: Value = serde_yaml::from_str(&run.stdout).unwrap();
    assert_eq!(
        value["metadata"]["labels"]["velero.io/schedule-name"],
        "daily"
    );
    assert_eq!(value["spec"]["includedNamespaces"], json!(["shop"]));
    assert_eq!(cluster.store().count(BACKUP.0, BACKUP.1), 0);
}
