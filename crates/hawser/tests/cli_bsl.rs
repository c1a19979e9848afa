//! `hawser backup-location create|get` and the global error handling, run as a process against
//! kube-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::Cluster;

const BSL: (&str, &str) = ("velero.io/v1", "BackupStorageLocation");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sends_the_spec_of_the_flags() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "backup-location",
            "create",
            "primary",
            "--provider",
            "aws",
            "--bucket",
            "b1",
            "--prefix",
            "cluster-a",
            "--config",
            "region=eu-west-1,s3ForcePathStyle=true",
            "--credential",
            "cloud-credentials=cloud",
            "--default",
            "--access-mode",
            "ReadOnly",
            "--validation-frequency",
            "90s",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let bsl = cluster.get(BSL.0, BSL.1, "primary").expect("BSL created");
    let spec = &bsl["spec"];
    assert_eq!(spec["provider"], "aws");
    assert_eq!(spec["objectStorage"]["bucket"], "b1");
    assert_eq!(spec["objectStorage"]["prefix"], "cluster-a");
    assert_eq!(spec["config"]["region"], "eu-west-1");
    assert_eq!(spec["config"]["s3ForcePathStyle"], "true");
    assert_eq!(spec["credential"]["name"], "cloud-credentials");
    assert_eq!(spec["credential"]["key"], "cloud");
    assert_eq!(spec["default"], true);
    assert_eq!(spec["accessMode"], "ReadOnly");
    assert_eq!(spec["validationFrequency"], "1m30s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_lists_locations_in_a_table_and_as_yaml() {
    let cluster = Cluster::start().await;
    for (name, bucket) in [("one", "bucket-1"), ("two", "bucket-2")] {
        let run = cluster
            .hawser(&[
                "backup-location",
                "create",
                name,
                "--provider",
                "filesystem",
                "--bucket",
                bucket,
            ])
            .await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    }
    let run = cluster.hawser(&["backup-location", "get"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", run.stdout);
    assert!(lines[0].contains("BUCKET/PREFIX") && lines[0].contains("ACCESS MODE"));
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines[1].starts_with("one ") && lines[1].contains("bucket-1"));
    assert!(lines[2].starts_with("two ") && lines[2].contains("bucket-2"));

    let run = cluster
        .hawser(&["backup-location", "get", "two", "-o", "yaml"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: serde_json::Value = serde_yaml::from_str(&run.stdout).unwrap();
    assert_eq!(value["spec"]["objectStorage"]["bucket"], "bucket-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flag_prints_without_creating() {
    let cluster = Cluster::start().await;
    let run = cluster
        .hawser(&[
            "backup-location",
            "create",
            "dry",
            "--provider",
            "aws",
            "--bucket",
            "b",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(value["kind"], "BackupStorageLocation");
    assert_eq!(value["metadata"]["namespace"], "velero");
    assert!(cluster.get(BSL.0, BSL.1, "dry").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_creates_nothing() {
    let cluster = Cluster::start().await;
    let create = ["backup-location", "create", "x", "--provider", "aws"];
    // (extra arguments, what the message must name); the last is clap's own missing-flag error.
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--bucket", "b", "--config", "region"],
            &["--config", "key=value"],
        ),
        (
            &["--bucket", "b", "--validation-frequency", "soon"],
            &["--validation-frequency"],
        ),
        (&[], &["--bucket"]),
    ];
    for (extra, named) in cases {
        let args: Vec<&str> = create.iter().chain(extra).copied().collect();
        let run = cluster.hawser(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        for word in named {
            assert!(run.stderr.contains(word), "{args:?}: {}", run.stderr);
        }
        assert!(
            cluster.get(BSL.0, BSL.1, "x").is_none(),
            "{args:?} created x"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_1_naming_the_object() {
    let cluster = Cluster::start().await;
    let run = cluster.hawser(&["backup-location", "get", "missing"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("BackupStorageLocation velero/missing not found"),
        "{}",
        run.stderr
    );
    let args = [
        "backup-location",
        "create",
        "dup",
        "--provider",
        "aws",
        "--bucket",
        "b",
    ];
    assert_eq!(cluster.hawser(&args).await.code, 0);
    let run = cluster.hawser(&args).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("could not create BackupStorageLocation velero/dup"),
        "{}",
        run.stderr
    );
}

/// `snapshot-location create|get|set`, with Velero's messages and table; a name that does not
/// exist is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_locations_are_created_listed_and_given_a_credential() {
    let cluster = Cluster::start().await;
    for (name, provider) in [("east", "aws"), ("west", "velero.io/gcp")] {
        let run = cluster
            .hawser(&[
                "snapshot-location",
                "create",
                name,
                "--provider",
                provider,
                "--config",
                "region=eu-west-1",
                "--labels",
                &format!("side={name}"),
            ])
            .await;
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
        assert_eq!(
            run.stdout,
            format!("Snapshot volume location {name:?} configured successfully.\n")
        );
        assert!(
            run.stderr
                .contains("warning: hawser takes no native volume snapshots"),
            "{}",
            run.stderr
        );
    }
    let vsl = cluster
        .get("velero.io/v1", "VolumeSnapshotLocation", "east")
        .expect("created");
    assert_eq!(vsl["spec"]["provider"], "aws");
    assert_eq!(vsl["spec"]["config"]["region"], "eu-west-1");

    let run = cluster.hawser(&["snapshot-location", "get"]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "PROVIDER"],
            vec!["east", "aws"],
            vec!["west", "velero.io/gcp"]
        ]
    );
    let run = cluster
        .hawser(&["snapshot-location", "get", "-l", "side=west", "-o", "json"])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list:#}");
    assert_eq!(list["items"][0]["metadata"]["name"], "west");

    let run = cluster
        .hawser(&[
            "snapshot-location",
            "set",
            "east",
            "--credential",
            "cloud-credentials=snapshots",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout,
        "Volume snapshot location \"east\" configured successfully.\n"
    );
    let vsl = cluster
        .get("velero.io/v1", "VolumeSnapshotLocation", "east")
        .unwrap();
    assert_eq!(
        vsl["spec"]["credential"],
        serde_json::json!({"name": "cloud-credentials", "key": "snapshots"})
    );

    let run = cluster
        .hawser(&["snapshot-location", "set", "north", "--credential", "a=b"])
        .await;
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("north"), "{}", run.stderr);
}

/// `client config get|set` read and write Velero's file under the home directory, and its
/// `namespace` is the namespace of every command unless `-n` is given; it wins over
/// `VELERO_NAMESPACE`, as in Velero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_configuration_file_sets_the_namespace() {
    let cluster = Cluster::start().await;
    cluster
        .store()
        .insert(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "backups"}}))
        .unwrap();
    let run = cluster
        .hawser(&[
            "client",
            "config",
            "set",
            "namespace=backups",
            "colorized=false",
            "junk",
        ])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "WARNING: invalid KEY=VALUE: \"junk\"\n");
    let file = cluster.dir().join(".config/velero/config.json");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        saved,
        serde_json::json!({"colorized": "false", "namespace": "backups"})
    );
    let run = cluster.hawser(&["client", "config", "get"]).await;
    assert_eq!(run.stdout, "colorized: false\nnamespace: backups\n");
    let run = cluster
        .hawser(&["client", "config", "get", "namespace", "features"])
        .await;
    assert_eq!(run.stdout, "namespace: backups\nfeatures: <NOT SET>\n");

    let create = |name: &'static str| {
        [
            "backup-location",
            "create",
            name,
            "--provider",
            "aws",
            "--bucket",
            "b",
        ]
    };
    let run = cluster
        .hawser_with(&create("from-file"), &[("VELERO_NAMESPACE", "velero")])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = cluster
        .hawser(&[&create("from-flag")[..], &["-n", "velero"]].concat())
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let store = cluster.store();
    assert!(store.get(BSL.0, BSL.1, "backups", "from-file").is_some());
    assert!(store.get(BSL.0, BSL.1, "velero", "from-flag").is_some());

    // An empty value removes the key; a broken file is a warning, and commands go on.
    let run = cluster
        .hawser(&["client", "config", "set", "namespace="])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = cluster.hawser(&["client", "config", "get"]).await;
    assert_eq!(run.stdout, "colorized: false\n");
    std::fs::write(&file, "{not json").unwrap();
    let run = cluster.hawser(&["backup-location", "get"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with("WARNING: Error reading config file: the client configuration file"),
        "{}",
        run.stderr
    );
    let run = cluster.hawser(&["client", "config", "get"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
}
