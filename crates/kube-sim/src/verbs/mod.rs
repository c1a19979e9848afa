//! The verb handlers, one module per verb; `api` dispatches resource requests to them.
//!
//! - `get`: GET of one object.
//! - `list`: LIST with selectors, pagination and resourceVersion rules (also the [`Filter`]
//!   watch uses).
//! - `create`: CREATE (POST), also used for seeding and server-side apply creates.
//! - `update`: UPDATE (PUT) and the write path shared with PATCH.
//! - `patch`: PATCH in its four flavours.
//! - `delete`: DELETE and deletecollection.
//! - `watch`: watch streams.
//! - `request`: what write verbs read from a request (options, body, type check).
//!
//! Verb modules import the shared state from `crate::shared` and never the router (`server`)
//! or the dispatcher (`api`). Between verbs the imports run one way: `patch` → `update`,
//! `create`; `create` → `update` (managed fields); `update` → `delete`; `delete`, `watch` →
//! `list`.
//!
//! [`Filter`]: list::Filter

pub mod create;
pub mod delete;
pub mod get;
pub mod list;
pub mod patch;
pub mod request;
pub mod update;
pub mod watch;
