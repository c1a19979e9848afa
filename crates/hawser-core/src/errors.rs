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

/// Longest message (bytes) that [`printable`] keeps by default: paths and messages from an
/// archive are untrusted and may be of any length.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `text` made safe to write to a log, a terminal or a results file: control characters
/// (CR, LF, tab, ESC of ANSI sequences, the rest of C0, DEL and C1) are written as escapes
/// (`\r`, `\n`, `\t`, `\u{1b}`), and the result is cut to at most `max` bytes (on a character
/// boundary) with a note of how much was left out.
#[must_use]
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 32);
    for (at, c) in text.char_indices() {
        let mut buf = [0u8; 4];
        let piece: std::borrow::Cow<'_, str> = match c {
            '\r' => "\\r".into(),
            '\n' => "\\n".into(),
            '\t' => "\\t".into(),
            c if c.is_control() => format!("\\u{{{:x}}}", u32::from(c)).into(),
            c => (&*c.encode_utf8(&mut buf)).into(),
        };
        if out.len() + piece.len() > max {
            out.push_str(&format!("…({} more bytes)", text.len() - at));
            return out;
        }
        out.push_str(&piece);
    }
    out
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

    #[test]
    fn printable_escapes_control_characters_and_cuts_long_text() {
        assert_eq!(
            super::printable("a\r\nb\t\u{1b}[31mred\u{7f}\u{9b}ü", 100),
            "a\\r\\nb\\t\\u{1b}[31mred\\u{7f}\\u{9b}ü"
        );
        let long = "x".repeat(5000);
        let cut = super::printable(&long, 1024);
        assert_eq!(cut, format!("{}…(3976 more bytes)", "x".repeat(1024)));
        // A character is never split.
        assert_eq!(super::printable("éé", 3), "é…(2 more bytes)");
    }
}
