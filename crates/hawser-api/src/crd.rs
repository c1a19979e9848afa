//! The CustomResourceDefinitions, generated from the types and adjusted to Velero's served shape.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{
    Backup, BackupStorageLocation, DeleteBackupRequest, DownloadRequest, Restore, Schedule,
    ServerStatusRequest,
};

/// All seven CRDs, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Backup::crd(),
        BackupStorageLocation::crd(),
        DeleteBackupRequest::crd(),
        DownloadRequest::crd(),
        Restore::crd(),
        Schedule::crd(),
        ServerStatusRequest::crd(),
    ]
}
