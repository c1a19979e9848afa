//! A Backup checked once, carrying what the checks read (its parsed hook specs and resource
//! policies), so that the run neither parses its hooks again nor reads its policies.

use std::time::Duration;

use hawser_api::Backup;
use hawser_core::backup_hooks::BackupHooks;
use hawser_core::selection::policies::ResourcePolicies;
use kube::Client;

use super::{BackupError, policy_errors, resource_policies, spec_checks};

/// A Backup whose spec passed Velero's checks that need no discovery (filters, selectors,
/// namespace names, hook specs, the resource-policies ConfigMap and its include/exclude part),
/// with what they read. [`super::run`] takes one; the checks against the served types are the
/// run's (its selection is planned from discovery made then).
#[derive(Debug)]
pub struct ValidatedBackup {
    pub(super) backup: Backup,
    pub(super) hooks: BackupHooks,
    pub(super) policies: Option<ResourcePolicies>,
}

impl ValidatedBackup {
    /// Checks `backup`'s spec; reads the resource-policies ConfigMap it names within `budget`.
    ///
    /// # Errors
    /// [`BackupError::Validation`] with every message for `validationErrors` (the spec's and
    /// the ConfigMap's together, in that order); [`BackupError::Policies`] when the ConfigMap
    /// could not be read, which says nothing of the spec.
    pub async fn check(
        client: &Client,
        backup: Backup,
        budget: Duration,
    ) -> Result<Self, BackupError> {
        let (mut messages, hooks) = spec_checks(&backup);
        let policies = match resource_policies(client, &backup, budget)
            .await
            .map_err(BackupError::Policies)?
        {
            Ok(policies) => policies,
            Err(invalid) => {
                messages.push(invalid);
                None
            }
        };
        messages.extend(policy_errors(&backup, policies.as_ref()));
        match hooks {
            Some(hooks) if messages.is_empty() => Ok(Self {
                backup,
                hooks,
                policies,
            }),
            _ => Err(BackupError::Validation { messages }),
        }
    }

    /// The Backup as it was checked.
    #[must_use]
    pub fn backup(&self) -> &Backup {
        &self.backup
    }

    /// The Backup as it was checked, given back.
    #[must_use]
    pub fn into_backup(self) -> Backup {
        self.backup
    }

    /// Its resource policies, as read when it was checked.
    #[must_use]
    pub fn policies(&self) -> Option<&ResourcePolicies> {
        self.policies.as_ref()
    }
}
