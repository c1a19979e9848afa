//! Object-storage keys of a backup storage location, exactly as Velero lays them out
//! (velero-compat §5.1).
//!
//! The root is `<prefix>/` when `spec.objectStorage.prefix` is set (leading and trailing slashes
//! trimmed), else the bucket root. Under it live `backups/<backup>/…`, `restores/<restore>/…`
//! and a few reserved directories; any other top-level directory makes the location
//! unavailable ([`Layout::check_top_level_dirs`]).

/// Top-level directories allowed under the root.
pub const TOP_LEVEL_DIRS: [&str; 6] = [
    "backups", "restores", "restic", "metadata", "plugins", "kopia",
];

/// The key builder of one storage location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

/// The artifact kinds a `DownloadRequest` can ask for (`spec.target.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DownloadTargetKind {
    /// `BackupLog`
    BackupLog,
    /// `BackupContents`
    BackupContents,
    /// `BackupVolumeSnapshots`
    BackupVolumeSnapshots,
    /// `BackupItemOperations`
    BackupItemOperations,
    /// `BackupResourceList`
    BackupResourceList,
    /// `BackupResults`
    BackupResults,
    /// `RestoreLog`
    RestoreLog,
    /// `RestoreResults`
    RestoreResults,
    /// `RestoreResourceList`
    RestoreResourceList,
    /// `RestoreItemOperations`
    RestoreItemOperations,
    /// `CSIBackupVolumeSnapshots`
    CsiBackupVolumeSnapshots,
    /// `CSIBackupVolumeSnapshotContents`
    CsiBackupVolumeSnapshotContents,
    /// `BackupVolumeInfos`
    BackupVolumeInfos,
    /// `RestoreVolumeInfo`
    RestoreVolumeInfo,
}

impl DownloadTargetKind {
    /// Every kind, in the order of the API's enum.
    pub const ALL: [Self; 14] = [
        Self::BackupLog,
        Self::BackupContents,
        Self::BackupVolumeSnapshots,
        Self::BackupItemOperations,
        Self::BackupResourceList,
        Self::BackupResults,
        Self::RestoreLog,
        Self::RestoreResults,
        Self::RestoreResourceList,
        Self::RestoreItemOperations,
        Self::CsiBackupVolumeSnapshots,
        Self::CsiBackupVolumeSnapshotContents,
        Self::BackupVolumeInfos,
        Self::RestoreVolumeInfo,
    ];

    /// The exact API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BackupLog => "BackupLog",
            Self::BackupContents => "BackupContents",
            Self::BackupVolumeSnapshots => "BackupVolumeSnapshots",
            Self::BackupItemOperations => "BackupItemOperations",
            Self::BackupResourceList => "BackupResourceList",
            Self::BackupResults => "BackupResults",
            Self::RestoreLog => "RestoreLog",
            Self::RestoreResults => "RestoreResults",
            Self::RestoreResourceList => "RestoreResourceList",
            Self::RestoreItemOperations => "RestoreItemOperations",
            Self::CsiBackupVolumeSnapshots => "CSIBackupVolumeSnapshots",
            Self::CsiBackupVolumeSnapshotContents => "CSIBackupVolumeSnapshotContents",
            Self::BackupVolumeInfos => "BackupVolumeInfos",
            Self::RestoreVolumeInfo => "RestoreVolumeInfo",
        }
    }

    /// Parses the API string; `None` for an unknown kind.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// True for the kinds whose target name is a Restore's (the file lives under `restores/`,
    /// and the Restore names the backup whose location holds it).
    pub fn is_restore_kind(self) -> bool {
        matches!(
            self,
            Self::RestoreLog
                | Self::RestoreResults
                | Self::RestoreResourceList
                | Self::RestoreItemOperations
                | Self::RestoreVolumeInfo
        )
    }

    /// Whether the CLI gunzips the download (every kind except the tarball).
    pub fn is_gzipped_for_cli(self) -> bool {
        self != Self::BackupContents
    }
}

impl Layout {
    /// The layout for a location whose `spec.objectStorage.prefix` is `prefix` (empty or
    /// `None` = bucket root). Leading and trailing slashes are ignored.
    pub fn new(prefix: Option<&str>) -> Self {
        let trimmed = prefix.unwrap_or("").trim_matches('/');
        let root = if trimmed.is_empty() {
            String::new()
        } else {
            format!("{trimmed}/")
        };
        Self { root }
    }

    /// The root prefix: `""` or `"<prefix>/"`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `<root><dir>/` for one of the [`TOP_LEVEL_DIRS`].
    pub fn top_level_dir(&self, dir: &str) -> String {
        format!("{}{dir}/", self.root)
    }

    /// `<root>backups/` — list it with delimiter `/` to find backups.
    pub fn backups_dir(&self) -> String {
        self.top_level_dir("backups")
    }

    /// `<root>restores/`.
    pub fn restores_dir(&self) -> String {
        self.top_level_dir("restores")
    }

    /// `<root>backups/<backup>/` — everything of one backup (delete = delete all under it).
    pub fn backup_dir(&self, backup: &str) -> String {
        format!("{}{backup}/", self.backups_dir())
    }

    /// `<root>restores/<restore>/`.
    pub fn restore_dir(&self, restore: &str) -> String {
        format!("{}{restore}/", self.restores_dir())
    }

    /// `velero-backup.json`: the Backup object; its existence means "the backup exists".
    pub fn backup_metadata(&self, backup: &str) -> String {
        format!("{}velero-backup.json", self.backup_dir(backup))
    }

    fn backup_file(&self, backup: &str, suffix: &str) -> String {
        format!("{}{backup}{suffix}", self.backup_dir(backup))
    }

    /// `<backup>.tar.gz`: the resource archive.
    pub fn backup_contents(&self, backup: &str) -> String {
        self.backup_file(backup, ".tar.gz")
    }

    /// `<backup>-logs.gz`.
    pub fn backup_log(&self, backup: &str) -> String {
        self.backup_file(backup, "-logs.gz")
    }

    /// `<backup>-resource-list.json.gz`.
    pub fn backup_resource_list(&self, backup: &str) -> String {
        self.backup_file(backup, "-resource-list.json.gz")
    }

    /// `<backup>-results.gz`.
    pub fn backup_results(&self, backup: &str) -> String {
        self.backup_file(backup, "-results.gz")
    }

    /// `<backup>-itemoperations.json.gz`.
    pub fn backup_item_operations(&self, backup: &str) -> String {
        self.backup_file(backup, "-itemoperations.json.gz")
    }

    /// `<backup>-volumesnapshots.json.gz`.
    pub fn backup_volume_snapshots(&self, backup: &str) -> String {
        self.backup_file(backup, "-volumesnapshots.json.gz")
    }

    /// `<backup>-podvolumebackups.json.gz`.
    pub fn backup_pod_volume_backups(&self, backup: &str) -> String {
        self.backup_file(backup, "-podvolumebackups.json.gz")
    }

    /// `<backup>-volumeinfo.json.gz`.
    pub fn backup_volume_info(&self, backup: &str) -> String {
        self.backup_file(backup, "-volumeinfo.json.gz")
    }

    /// `<backup>-csi-volumesnapshots.json.gz` (legacy, read only).
    pub fn backup_csi_volume_snapshots(&self, backup: &str) -> String {
        self.backup_file(backup, "-csi-volumesnapshots.json.gz")
    }

    /// `<backup>-csi-volumesnapshotcontents.json.gz` (legacy, read only).
    pub fn backup_csi_volume_snapshot_contents(&self, backup: &str) -> String {
        self.backup_file(backup, "-csi-volumesnapshotcontents.json.gz")
    }

    /// `<backup>-csi-volumesnapshotclasses.json.gz` (legacy, read only).
    pub fn backup_csi_volume_snapshot_classes(&self, backup: &str) -> String {
        self.backup_file(backup, "-csi-volumesnapshotclasses.json.gz")
    }

    fn restore_file(&self, restore: &str, suffix: &str) -> String {
        format!("{}restore-{restore}{suffix}", self.restore_dir(restore))
    }

    /// `restore-<restore>-logs.gz`.
    pub fn restore_log(&self, restore: &str) -> String {
        self.restore_file(restore, "-logs.gz")
    }

    /// `restore-<restore>-results.gz`.
    pub fn restore_results(&self, restore: &str) -> String {
        self.restore_file(restore, "-results.gz")
    }

    /// `restore-<restore>-resource-list.json.gz`.
    pub fn restore_resource_list(&self, restore: &str) -> String {
        self.restore_file(restore, "-resource-list.json.gz")
    }

    /// `restore-<restore>-itemoperations.json.gz`.
    pub fn restore_item_operations(&self, restore: &str) -> String {
        self.restore_file(restore, "-itemoperations.json.gz")
    }

    /// `restore-<restore>-status.json`: hawser's record of a restore's outcome (not a Velero
    /// file), written before the final status so that the status can be recovered from it.
    pub fn restore_record(&self, restore: &str) -> String {
        self.restore_file(restore, "-status.json")
    }

    /// `<restore>-volumeinfo.json.gz` (no `restore-` prefix, as in Velero).
    pub fn restore_volume_info(&self, restore: &str) -> String {
        format!("{}{restore}-volumeinfo.json.gz", self.restore_dir(restore))
    }

    /// `<root>metadata/revision`: the revision marker older servers wrote to signal a change.
    pub fn revision(&self) -> String {
        format!("{}revision", self.top_level_dir("metadata"))
    }

    /// The side files of a backup that has no volume snapshots, pod volume backups, plugin
    /// operations or volume information (hawser's backups), each with the JSON text Velero
    /// writes into it then, before gzip: `null` for the lists Velero leaves unset, `[]` for
    /// the ones it starts empty (Go's `json.Encoder` ends both with a newline).
    pub fn empty_backup_side_files(&self, backup: &str) -> [(String, &'static str); 4] {
        [
            (self.backup_pod_volume_backups(backup), "null\n"),
            (self.backup_volume_snapshots(backup), "null\n"),
            (self.backup_item_operations(backup), "[]\n"),
            (self.backup_volume_info(backup), "[]\n"),
        ]
    }

    /// The side files of a restore without plugin operations or volumes, as
    /// [`empty_backup_side_files`](Self::empty_backup_side_files): both lists start empty.
    pub fn empty_restore_side_files(&self, restore: &str) -> [(String, &'static str); 2] {
        [
            (self.restore_item_operations(restore), "[]\n"),
            (self.restore_volume_info(restore), "[]\n"),
        ]
    }

    /// The key a `DownloadRequest` for `kind` of backup or restore `name` points at.
    pub fn download_key(&self, kind: DownloadTargetKind, name: &str) -> String {
        use DownloadTargetKind as K;
        match kind {
            K::BackupContents => self.backup_contents(name),
            K::BackupLog => self.backup_log(name),
            K::BackupVolumeSnapshots => self.backup_volume_snapshots(name),
            K::BackupItemOperations => self.backup_item_operations(name),
            K::BackupResourceList => self.backup_resource_list(name),
            K::BackupResults => self.backup_results(name),
            K::BackupVolumeInfos => self.backup_volume_info(name),
            K::CsiBackupVolumeSnapshots => self.backup_csi_volume_snapshots(name),
            K::CsiBackupVolumeSnapshotContents => self.backup_csi_volume_snapshot_contents(name),
            K::RestoreLog => self.restore_log(name),
            K::RestoreResults => self.restore_results(name),
            K::RestoreResourceList => self.restore_resource_list(name),
            K::RestoreItemOperations => self.restore_item_operations(name),
            K::RestoreVolumeInfo => self.restore_volume_info(name),
        }
    }

    /// The backup name of a common prefix returned by listing [`Layout::backups_dir`] with
    /// delimiter `/` (`<root>backups/b1/` → `b1`); `None` for anything else.
    pub fn backup_name_from_prefix<'a>(&self, prefix: &'a str) -> Option<&'a str> {
        let backups_dir = self.backups_dir();
        let rest = prefix.strip_prefix(backups_dir.as_str())?;
        // Some stores omit the trailing delimiter.
        let name = rest.strip_suffix('/').unwrap_or(rest);
        (!name.is_empty() && !name.contains('/')).then_some(name)
    }

    /// Checks the common prefixes found at the root (listing with delimiter `/`): any
    /// directory other than [`TOP_LEVEL_DIRS`] is an error, with Velero's message (at most
    /// three named).
    pub fn check_top_level_dirs<S: AsRef<str>>(&self, prefixes: &[S]) -> Result<(), String> {
        let invalid: Vec<&str> = prefixes
            .iter()
            .map(|p| {
                let p = p.as_ref();
                p.strip_prefix(self.root.as_str())
                    .unwrap_or(p)
                    .trim_end_matches('/')
            })
            .filter(|dir| !TOP_LEVEL_DIRS.contains(dir))
            .collect();
        match invalid.len() {
            0 => Ok(()),
            n if n > 3 => Err(format!(
                "Backup store contains {n} invalid top-level directories: [{} ...]",
                invalid[..3].join(" ")
            )),
            _ => Err(format!(
                "Backup store contains invalid top-level directories: [{}]",
                invalid.join(" ")
            )),
        }
    }
}
