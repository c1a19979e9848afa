//! Pure restore logic (velero-compat §7): the resource priority list, the order in which a
//! restore walks the archived types, the filters and namespace mapping, spec validation, object
//! cleaning, resource modifiers and the comparison with existing objects. Built on [`crate::selection::Catalogue`]
//! for name resolution; no client and no I/O.

pub mod additional;
pub mod clean;
pub mod exec_hooks;
pub mod existing;
mod extensions;
pub mod filters;
pub mod images;
pub mod init_hooks;
pub mod modifiers;
pub mod order;
pub mod priorities;
mod service;
pub mod types;
pub mod validate;
pub mod volume_data;

pub use clean::{
    BACKUP_NAME_LABEL, CleanContext, Cleaned, ItemSkip, RESTORE_NAME_LABEL, RESTORE_UID_LABEL,
    clean, namespace_object, skip_reason,
};
pub use exec_hooks::{ExecHookSpec, ExecHooks, PodExecHook};
pub use existing::{
    Existing, ExistingPolicy, decide, differs_warning, made_by_restore, merge_patch,
};
pub use filters::{
    CONTROL_TYPES, FILTER_BYPASS, FilterSkip, NON_RESTORABLE, RESTORE_STATUS_ANNOTATION,
    RestoreFilters, RestoreSelection, RestoreStatusFilter,
};
pub use images::ImageNames;
pub use init_hooks::{InitHookSpec, InitHooks};
pub use modifiers::ResourceModifiers;
pub use order::{CRDS, Tier, is_crd, restore_order};
pub use priorities::{Priorities, PrioritiesError, Resolved};
pub use types::{ArchiveTypes, NonCanonicalType};
pub use validate::{RESTORE_BOTH_SELECTORS_MESSAGE, validate};
