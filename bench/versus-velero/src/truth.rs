//! What the bucket says a backup truly is, after the outage: the truth the servers' phases are
//! checked against.

use anyhow::Result;
use serde_json::Value;

use crate::FINAL;

/// What the bucket holds for a backup: whether its archive is there, and its record's phase.
pub(crate) async fn uploaded(
    bucket: &object_store::aws::AmazonS3,
    prefix: &str,
    name: &str,
) -> Result<(bool, Option<String>)> {
    use object_store::ObjectStoreExt;
    use object_store::path::Path as Key;
    let base = format!("{prefix}/backups/{name}");
    let archive = bucket
        .head(&Key::from(format!("{base}/{name}.tar.gz")))
        .await
        .is_ok();
    let phase = match bucket
        .get(&Key::from(format!("{base}/velero-backup.json")))
        .await
    {
        Ok(record) => {
            let v: Value = serde_json::from_slice(&record.bytes().await?)?;
            v["status"]["phase"].as_str().map(str::to_owned)
        }
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    Ok((archive, phase))
}

/// The phase a backup truly has, from what was uploaded: an archive and a record in a final
/// phase mean that phase; an archive whose record was left in a working phase means the data is
/// all there (`Completed`); no archive means it failed.
pub(crate) fn true_phase(archive: bool, record: Option<&str>) -> &'static str {
    match (archive, record) {
        (true, Some(p)) => FINAL
            .iter()
            .copied()
            .find(|f| *f == p)
            .unwrap_or("Completed"),
        (true, None) => "Completed",
        (false, _) => "Failed",
    }
}
