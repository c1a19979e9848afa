//! The VolumeSnapshotLocation object (Velero's `volume_snapshot_location_type.go`).
//!
//! hawser has no volume snapshotter plugins: it serves the kind so that Velero's clients and
//! `velero install` manifests work, and reports each location as one it cannot use.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::SecretKeySelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// `spec` of a VolumeSnapshotLocation: a volume snapshotter plugin and its settings.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "VolumeSnapshotLocation",
    namespaced,
    status = "VolumeSnapshotLocationStatus",
    shortname = "vsl",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Velero VolumeSnapshotLocation: where native volume snapshots are taken."
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotLocationSpec {
    /// Volume snapshotter plugin (required), e.g. `aws` or `velero.io/gcp`.
    pub provider: String,
    /// Provider-specific settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
    /// Secret key holding the provider's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<SecretKeySelector>,
}

string_enum! {
    /// `status.phase` of a VolumeSnapshotLocation.
    pub enum VolumeSnapshotLocationPhase {
        /// Snapshots can be taken and read.
        Available = "Available",
        /// Snapshots cannot be taken or read.
        Unavailable = "Unavailable",
    }
}

/// `status` of a VolumeSnapshotLocation. Velero declares the phase but never writes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotLocationStatus {
    /// `Available` or `Unavailable`; unset in practice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VolumeSnapshotLocationPhase>,
}
