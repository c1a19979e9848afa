//! A Restore checked once against the cluster, carrying what the checks read, so that the run
//! neither validates its spec again nor discovers the cluster again (until restored CRDs make
//! it refresh discovery), nor compiles its hook specs again.

use std::sync::Arc;
use std::time::Duration;

use hawser_api::{Backup, Restore};
use hawser_core::restore::{
    ExecHooks, InitHooks, ResourceModifiers, RestoreFilters, RestoreSelection,
};
use hawser_core::selection::Catalogue;
use kube::Client;

use super::RestoreError;
use super::plugin_config::resource_modifiers;

/// A Restore whose spec passed Velero's checks (filters, selectors, mappings, existing-resource
/// policy, the resource-modifier ConfigMap, the hook specs) against the cluster's discovery,
/// with the backup it restores and what the checks read. [`super::run`] takes one.
#[derive(Debug)]
pub struct ValidatedRestore {
    pub(super) restore: Restore,
    pub(super) backup: Backup,
    pub(super) catalogue: Catalogue,
    pub(super) selection: RestoreSelection,
    pub(super) modifiers: Option<ResourceModifiers>,
    pub(super) init_hooks: Arc<InitHooks>,
    pub(super) exec_hooks: Arc<ExecHooks>,
}

/// Why a restore that names resource policies is refused: hawser does not apply them, and a
/// restore without them would bring back what they leave out.
fn refused_policy(restore: &Restore) -> Option<String> {
    restore.spec.resource_policy.as_ref().map(|policy| {
        format!(
            "spec.resourcePolicy: hawser does not apply a restore's resource policies (the filter policies of {} {}); restoring without them would restore what they leave out, so nothing was restored: select with the restore's own filters instead",
            policy.kind, policy.name
        )
    })
}

/// The restore's hook specs compiled (Velero refuses invalid ones in validation too).
fn compile_hooks(restore: &Restore) -> Result<(InitHooks, ExecHooks), String> {
    let name = restore.metadata.name.as_deref().unwrap_or_default();
    let init = InitHooks::new(
        restore.spec.init_hook_specs(),
        restore.metadata.uid.as_deref().unwrap_or(name),
    );
    let exec = ExecHooks::new(restore.spec.exec_hook_specs());
    init.and_then(|init| Ok((init, exec?)))
        .map_err(|message| format!("spec.hooks: {message}"))
}

impl ValidatedRestore {
    /// Discovers the cluster's served types once and checks `restore`'s spec against them;
    /// reads its resource-modifier ConfigMap within `budget`; compiles its hook specs.
    ///
    /// # Errors
    /// [`RestoreError::Validation`] with every message for `validationErrors` (the spec's, the
    /// ConfigMap's, the hook specs' and a refused `resourcePolicy`, together);
    /// [`RestoreError::Discovery`] or [`RestoreError::ConfigMap`]
    /// when the cluster did not answer, which says nothing of the spec.
    pub async fn check(
        client: &Client,
        restore: Restore,
        backup: Backup,
        budget: Duration,
    ) -> Result<Self, RestoreError> {
        let catalogue = crate::cluster::catalogue(client)
            .await
            .map_err(RestoreError::Discovery)?;
        let selection = RestoreSelection::new(&RestoreFilters::from(&restore.spec), &catalogue);
        let modifiers = resource_modifiers(client, &restore, budget).await;
        let hooks = compile_hooks(&restore);
        let refused = refused_policy(&restore);
        let (selection, modifiers, (init_hooks, exec_hooks)) =
            match (selection, modifiers, hooks, refused) {
                (Ok(selection), Ok(modifiers), Ok(hooks), None) => (selection, modifiers, hooks),
                (_, Err(e), _, _) if !matches!(e, RestoreError::Validation { .. }) => {
                    return Err(e);
                }
                (selection, modifiers, hooks, refused) => {
                    let mut messages = selection.err().unwrap_or_default();
                    if let Err(RestoreError::Validation { messages: more }) = modifiers {
                        messages.extend(more);
                    }
                    messages.extend(hooks.err());
                    messages.extend(refused);
                    return Err(RestoreError::Validation { messages });
                }
            };
        Ok(Self {
            restore,
            backup,
            catalogue,
            selection,
            modifiers,
            init_hooks: Arc::new(init_hooks),
            exec_hooks: Arc::new(exec_hooks),
        })
    }

    /// The Restore as it was checked.
    #[must_use]
    pub fn restore(&self) -> &Restore {
        &self.restore
    }

    /// The Backup it restores.
    #[must_use]
    pub fn backup(&self) -> &Backup {
        &self.backup
    }
}
