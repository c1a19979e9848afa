//! GET of one object.

use crate::http::{Output, Resp};
use crate::render;
use crate::shared::{ResourceRequest, Shared};
use crate::status::ApiError;

/// GET.
pub fn get(shared: &Shared, r: &ResourceRequest, out: &Output) -> Result<Resp, ApiError> {
    let name = r.name.as_deref().unwrap_or("");
    let st = shared.store.read();
    let obj = st
        .get(
            &r.served.storage,
            r.namespace.as_deref().unwrap_or(""),
            name,
        )
        .cloned()
        .ok_or_else(|| ApiError::not_found(&r.served.info, name))?;
    drop(st);
    Ok(render::one(out, &r.served, &obj, 200))
}
