//! The measured side, each in its own worker process so that its peak RSS is its own:
//!
//! * the floor: the archived objects, read and cleaned before the clock starts, created by
//!   plain `POST`s into the floor namespaces with as many requests in flight as the restore
//!   uses;
//! * the restore: `hawser_engine::restore::run` of the backup with the application namespaces mapped
//!   to the restored ones, then the commit of the Restore record.

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
use hawser_engine::restore::{self, RestoreOptions};
use hawser_store::Location;
use kube::Client;
use serde_json::{Value, json};

use crate::plan;

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
/// (server metadata and status removed, namespace set to the floor's).
async fn archived_creates(location: &Location) -> Result<Vec<Create>> {
    let bytes = location
        .get(&Layout::new(None).backup_contents(plan::BACKUP))
        .await
        .context("reading the archive")?;
    let to = plan::mapping(plan::floor);
    let mut reader = ArchiveReader::new(std::io::Cursor::new(bytes), ReaderOptions::default());
    let mut creates = Vec::new();
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
        creates.push(Create {
            path: collection(api_version, gr, ns),
            body: serde_json::to_vec(object).context("serialising an item")?,
        });
    }
    Ok(creates)
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

/// The floor: the floor namespaces, then every archived object of the seeded types, with
/// `concurrency` creates in flight. The archive is read, parsed and cleaned before the clock
/// starts; that time is printed apart as `prepare secs=…`.
pub async fn floor(url: &str, root: &str, concurrency: usize) -> Result<()> {
    let client = bench_common::client(url)?;
    let location = plan::location(root)?;
    let prepared = Instant::now();
    let creates = archived_creates(&location).await?;
    let prepare_secs = prepared.elapsed().as_secs_f64();

    let started = Instant::now();
    for i in 0..NAMESPACES {
        let ns =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plan::floor(i)}});
        post(&client, "/api/v1/namespaces", serde_json::to_vec(&ns)?).await?;
    }
    let created = stream::iter(creates)
        .map(|c| {
            let client = &client;
            async move { post(client, &c.path, c.body).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_fold(0u64, |n, ()| async move { Ok(n + 1) })
        .await?;
    report(created, started)?;
    println!("prepare secs={prepare_secs:.4}");
    Ok(())
}

/// The restore of the backup into the restored namespaces, `concurrency` items in flight and
/// a look-ahead budget of `look_ahead_bytes`, then the commit of its record. Prints
/// `restore errors=… warnings=… spilled_bytes=… check_secs=…` afterwards.
pub async fn restore(
    url: &str,
    root: &str,
    concurrency: usize,
    look_ahead_bytes: u64,
) -> Result<()> {
    let client = bench_common::client(url)?;
    let location = plan::location(root)?;
    let layout = Layout::new(None);
    let body = location
        .get(&layout.backup_metadata(plan::BACKUP))
        .await
        .context("reading velero-backup.json")?;
    let backup: Backup = serde_json::from_slice(&body).context("parsing velero-backup.json")?;
    let mut object = Restore::new(
        plan::RESTORE,
        RestoreSpec {
            backup_name: Some(plan::BACKUP.to_owned()),
            namespace_mapping: Some(plan::mapping(plan::restored)),
            ..RestoreSpec::default()
        },
    );
    object.metadata.namespace = Some("velero".to_owned());
    let options = RestoreOptions::default()
        .with_concurrency(concurrency)
        .with_look_ahead_bytes(look_ahead_bytes);

    let started = Instant::now();
    let outcome = restore::run(client, &location, &object, &backup, options)
        .await
        .map_err(|e| anyhow::anyhow!(e.full_message()))?;
    let record: Value = restore::record(&object, &outcome).context("the Restore record")?;
    let body = serde_json::to_vec(&record).context("serialising the Restore record")?;
    location
        .put(&layout.restore_record(plan::RESTORE), Bytes::from(body))
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
