//! Error formatting shared by every crate that reports errors to people.

/// All messages of an error and its sources, joined by `: `, for logs and status messages.
///
/// Error types here keep their cause in `#[source]` instead of repeating it in their message, so
/// this is where the whole story is put together.
#[must_use]
pub fn chain_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("reading the record failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn joins_every_cause_in_order() {
        let e = Outer(std::io::Error::other("disk gone"));
        assert_eq!(
            super::chain_text(&e),
            "reading the record failed: disk gone"
        );
    }
}
