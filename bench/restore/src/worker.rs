//! The measured side, each in its own worker process so that its peak RSS is its own:
//!
//! * the floor (`parse-create`): the archive read, its items parsed and cleaned as the
//!   restore cleans them at the least, each created by a plain `POST` as soon as it is parsed,
//!   with as many requests in flight as the restore uses, all inside the clock;
//! * its creates alone (`creates-only`): the same, with the archive read and parsed before the
//!   clock starts;
//! * the restore: `hawser_engine::restore::run` of the backup with the application namespaces mapped
//!   to the restored ones, then the commit of the Restore record.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use bench_common::seed::{NAMESPACES, TYPES};
use bench_common::worker::report;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream};
use hawser_api::{Backup, Restore, RestoreSpec};
use hawser_core::archive::{ArchiveReader, ReaderOptions, VersionDir};
use hawser_core::layout::Layout;
use hawser_core::restore::clean::strip_metadata;
use hawser_engine::restore::{self, RestoreOptions, ValidatedRestore};
use kube::Client;
use serde_json::{Value, json};

use crate::plan::{self, Target};

/// One create: the collection's path and the object's JSON.
struct Create {
    path: String,
    body: Vec<u8>,
}

/// The collection path of `group_resource` (`deployments.apps`) at `api_version` in `ns`.
fn collection(api_version: &str, group_resource: &str, ns: &str) -> String {
    let plural = group_resource.split('.').next().unwrap_or(group_resource);
    let root = if api_version.contains('/') {
        "apis"
    } else {
        "api"
    };
    format!("/{root}/{api_version}/namespaces/{ns}/{plural}")
}

/// The archived objects of the seeded types, cleaned as the restore cleans them at the least
/// (server metadata and status removed, namespace set to `to`'s), each handed to `each`.
fn archived_creates(
    bytes: Bytes,
    to: &BTreeMap<String, String>,
    mut each: impl FnMut(Create) -> Result<()>,
) -> Result<()> {
    let mut reader = ArchiveReader::new(std::io::Cursor::new(bytes), ReaderOptions::default());
    for item in reader.items().context("opening the archive")? {
        let mut item = item.context("reading an archive entry")?;
        let gr = item.location.group_resource.as_str();
        if item.location.version_dir != VersionDir::Unversioned
            || !TYPES.iter().any(|(_, _, g)| *g == gr)
        {
            continue;
        }
        let source = item
            .location
            .namespace
            .as_deref()
            .context("a namespaced item without a namespace")?;
        let ns = to
            .get(source)
            .with_context(|| format!("an item in the unexpected namespace {source}"))?;
        let object = &mut item.object;
        strip_metadata(object);
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        object["metadata"]["namespace"] = json!(ns);
        let api_version = object["apiVersion"]
            .as_str()
            .context("an item without apiVersion")?;
        each(Create {
            path: collection(api_version, gr, ns),
            body: serde_json::to_vec(object).context("serialising an item")?,
        })?;
    }
    Ok(())
}

async fn post(client: &Client, path: &str, body: Vec<u8>) -> Result<()> {
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .context("POST request")?;
    client
        .request_text(request)
        .await
        .with_context(|| format!("POST {path}"))?;
    Ok(())
}

/// A part of the floor (`target` is [`Target::ParseCreate`] or [`Target::CreatesOnly`]) in
/// round `round`: its namespaces, then every archived object, with `concurrency` creates in
/// flight.
pub async fn floor(
    url: &str,
    root: &str,
    concurrency: usize,
    target: Target,
    round: usize,
) -> Result<()> {
    let client = bench_common::client(url)?;
    let location = plan::location(root)?;
    let to = plan::mapping(|i| target.namespace(round, i));
    let archive = Layout::new(None).backup_contents(plan::BACKUP);
    let mut prepared = Vec::new();
    if target == Target::CreatesOnly {
        let bytes = location
            .get(&archive)
            .await
            .context("reading the archive")?;
        archived_creates(bytes, &to, |c| {
            prepared.push(c);
            Ok(())
        })?;
    }

    let started = Instant::now();
    for i in 0..NAMESPACES {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": target.namespace(round, i)}});
        post(&client, "/api/v1/namespaces", serde_json::to_vec(&ns)?).await?;
    }
    // Parsed on a thread of its own while the creates go on, as the restore overlaps them.
    let (creates, parser) = if target == Target::CreatesOnly {
        (stream::iter(prepared).boxed(), None)
    } else {
        let bytes = location
            .get(&archive)
            .await
            .context("reading the archive")?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Create>(1024);
        let parser = tokio::task::spawn_blocking(move || {
            archived_creates(bytes, &to, |c| {
                tx.blocking_send(c).context("the creates stopped")
            })
        });
        let creates = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
        (creates.boxed(), Some(parser))
    };
    let created = creates
        .map(|c| {
            let client = &client;
            async move { post(client, &c.path, c.body).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_fold(0u64, |n, ()| async move { Ok(n + 1) })
        .await?;
    if let Some(parser) = parser {
        parser.await.context("the parser")??;
    }
    report(created, started)
}

/// The restore of the backup into the restored namespaces of round `round`, `concurrency` items in flight and
/// a look-ahead budget of `look_ahead_bytes`, then the commit of its record. Prints
/// `restore errors=… warnings=… spilled_bytes=… check_secs=…` afterwards.
pub async fn restore(
    url: &str,
    root: &str,
    concurrency: usize,
    look_ahead_bytes: u64,
    round: usize,
) -> Result<()> {
    let client = bench_common::client(url)?;
    let location = plan::location(root)?;
    let layout = Layout::new(None);
    let body = location
        .get(&layout.backup_metadata(plan::BACKUP))
        .await
        .context("reading velero-backup.json")?;
    let backup: Backup = serde_json::from_slice(&body).context("parsing velero-backup.json")?;
    let name = format!("{}-{round}", plan::RESTORE);
    let mut object = Restore::new(
        &name,
        RestoreSpec {
            backup_name: Some(plan::BACKUP.to_owned()),
            namespace_mapping: Some(plan::mapping(|i| Target::Restore.namespace(round, i))),
            ..RestoreSpec::default()
        },
    );
    object.metadata.namespace = Some("velero".to_owned());
    let options = RestoreOptions::default()
        .with_concurrency(concurrency)
        .with_look_ahead_bytes(look_ahead_bytes);

    let started = Instant::now();
    let valid = ValidatedRestore::check(&client, object.clone(), backup, options.api_retry)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let outcome = restore::run(client, &location, &valid, options)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let record: Value = restore::record(&object, &outcome).context("the Restore record")?;
    let body = serde_json::to_vec(&record).context("serialising the Restore record")?;
    location
        .put(&layout.restore_record(&name), Bytes::from(body))
        .await
        .context("storing the Restore record")?;
    report(outcome.items_restored, started)?;
    println!(
        "restore errors={} warnings={} spilled_bytes={} check_secs={:.3}",
        outcome.errors(),
        outcome.warnings(),
        outcome.spilled_bytes,
        outcome.checking_pass.as_secs_f64()
    );
    anyhow::ensure!(
        outcome.errors() == 0,
        "the restore had {} errors: {:?}",
        outcome.errors(),
        outcome.results
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::collection;

    #[test]
    fn collection_paths_follow_the_group() {
        assert_eq!(
            collection("v1", "secrets", "floor-1"),
            "/api/v1/namespaces/floor-1/secrets"
        );
        assert_eq!(
            collection("apps/v1", "deployments.apps", "floor-2"),
            "/apis/apps/v1/namespaces/floor-2/deployments"
        );
        assert_eq!(
            collection("bench.example.com/v1", "widgets.bench.example.com", "f"),
            "/apis/bench.example.com/v1/namespaces/f/widgets"
        );
    }
}
