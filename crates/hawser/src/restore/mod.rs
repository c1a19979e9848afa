//! The restore engine: from a backup archive in a storage location back into the cluster.
