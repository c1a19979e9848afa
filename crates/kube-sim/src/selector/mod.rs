//! Label and field selectors as the API server parses and evaluates them on LIST and WATCH.
//!
//! - [`LabelSelector`] (module `label`): the full `labelSelector` grammar, with key and value
//!   validation as the server does it.
//! - [`FieldSelector`] (module `field`): `fieldSelector` terms over dotted paths.
//!
//! Both report parse failures as a [`SelectorError`].

mod field;
mod label;

pub use field::FieldSelector;
pub use label::{LabelSelector, is_dns1123_subdomain};

/// Why a selector could not be parsed; the message becomes the body of a 400 `BadRequest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);
