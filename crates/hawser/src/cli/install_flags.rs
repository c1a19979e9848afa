//! The flags of `velero install` that `hawser install` accepts without acting on them: they set
//! up parts hawser does not have (plugins, the node agent, volume snapshots, repository
//! maintenance) or server settings it does not implement. Each one given is reported once as a
//! warning; the others of Velero's install flags are implemented in [`super::install`].

use hawser_server::velero_flags::FlagKind::{Bool, Duration, Int, List, Text};
use hawser_server::velero_flags::{FlagTable, VeleroFlag};

/// The table of [`hawser_server::velero_flags::Accepted`] for `install`.
#[derive(Debug, Clone, Copy)]
pub struct InstallFlags;

impl FlagTable for InstallFlags {
    const HEADING: &'static str = "velero install flags accepted without effect";
    const FLAGS: &'static [VeleroFlag] = &[
        VeleroFlag::new("plugins", List, "")
            .help("Plugin images added as init containers; hawser runs no plugins."),
        VeleroFlag::new("use-node-agent", Bool, "false")
            .help("Create the node-agent DaemonSet for pod volume backups."),
        VeleroFlag::new("use-node-agent-windows", Bool, "false")
            .help("Create the node-agent DaemonSet for Windows nodes."),
        VeleroFlag::new("privileged-node-agent", Bool, "false")
            .help("Run the node agent privileged."),
        VeleroFlag::new("node-agent-pod-cpu-request", Text, "0")
            .help("CPU request of the node agent."),
        VeleroFlag::new("node-agent-pod-mem-request", Text, "0")
            .help("Memory request of the node agent."),
        VeleroFlag::new("node-agent-pod-cpu-limit", Text, "0").help("CPU limit of the node agent."),
        VeleroFlag::new("node-agent-pod-mem-limit", Text, "0")
            .help("Memory limit of the node agent."),
        VeleroFlag::new("node-agent-configmap", Text, "").help("ConfigMap of node-agent settings."),
        VeleroFlag::new("node-agent-priority-class-name", Text, "")
            .help("PriorityClass of the node agent."),
        VeleroFlag::new("node-agent-disable-host-path", Bool, "false")
            .help("Do not mount the pods' volume directory into the node agent."),
        VeleroFlag::new("kubelet-root-dir", Text, "/var/lib/kubelet")
            .help("Kubelet root directory for the node agent."),
        VeleroFlag::new("use-volume-snapshots", Bool, "true")
            .help("Create the VolumeSnapshotLocation `default`; hawser takes no native snapshots through it (CSI snapshots need none)."),
        VeleroFlag::new("snapshot-location-config", List, "")
            .help("Settings of the VolumeSnapshotLocation, key=value,..."),
        VeleroFlag::new("default-repo-maintain-frequency", Duration, "")
            .help("How often backup repositories are maintained."),
        VeleroFlag::new("pod-volume-operation-timeout", Duration, "")
            .help("Timeout of pod volume backups and restores (--fs-backup-timeout)."),
        VeleroFlag::new("uploader-type", Text, "kopia").help("Uploader of pod volume data."),
        VeleroFlag::new("disable-informer-cache", Bool, "false")
            .help("Read restored kinds without informers."),
        VeleroFlag::new("keep-latest-maintenance-jobs", Int, "")
            .help("Maintenance Jobs kept per repository."),
        VeleroFlag::new("maintenance-job-cpu-request", Text, "")
            .help("CPU request of maintenance Jobs."),
        VeleroFlag::new("maintenance-job-mem-request", Text, "")
            .help("Memory request of maintenance Jobs."),
        VeleroFlag::new("maintenance-job-cpu-limit", Text, "")
            .help("CPU limit of maintenance Jobs."),
        VeleroFlag::new("maintenance-job-mem-limit", Text, "")
            .help("Memory limit of maintenance Jobs."),
        VeleroFlag::new("backup-repository-configmap", Text, "")
            .help("ConfigMap of backup repository settings."),
        VeleroFlag::new("repo-maintenance-job-configmap", Text, "")
            .help("ConfigMap of repository maintenance Job settings."),
        VeleroFlag::new("item-block-worker-count", Int, "")
            .help("Workers processing the item blocks of one backup."),
    ];
}
