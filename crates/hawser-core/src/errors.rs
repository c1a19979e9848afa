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

/// `text` made safe to print on a terminal: lines and tabs kept, every other control character
/// (ESC, which starts the sequences that move the cursor, rewrite the title or the clipboard;
/// carriage return; the C1 controls such as U+009B) shown escaped as `\u{1b}`. Text from a
/// bucket (a log, a result message) or from an object goes through it before the CLI prints it.
#[must_use]
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A writer that passes bytes on as [`terminal_safe`] would print them, for text streamed in
/// chunks (a multi-byte character split between two writes is handled).
pub struct TerminalSafe<W: std::io::Write> {
    inner: W,
    /// The first byte of a two-byte UTF-8 sequence seen at the end of the last write.
    pending: Option<u8>,
}

impl<W: std::io::Write> TerminalSafe<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: None,
        }
    }

    fn escape(&mut self, code: u32) -> std::io::Result<()> {
        write!(self.inner, "\\u{{{code:x}}}")
    }
}

impl<W: std::io::Write> std::io::Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            if let Some(lead) = self.pending.take() {
                // U+0080..U+009F are 0xC2 0x80..0x9F in UTF-8.
                if lead == 0xC2 && (0x80..=0x9F).contains(&b) {
                    self.escape(u32::from(b))?;
                    start = i + 1;
                    continue;
                }
                self.inner.write_all(&[lead])?;
            }
            let control = (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7F;
            if control || b == 0xC2 {
                self.inner.write_all(&buf[start..i])?;
                start = i + 1;
                if control {
                    self.escape(u32::from(b))?;
                } else {
                    self.pending = Some(b);
                }
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(lead) = self.pending.take() {
            self.inner.write_all(&[lead])?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
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

    #[test]
    fn terminal_safe_text_keeps_lines_and_escapes_sequences() {
        use super::terminal_safe;
        assert_eq!(terminal_safe("plain\n\tline"), "plain\n\tline");
        assert_eq!(
            terminal_safe("a\u{1b}]52;c;ZXZpbA==\u{7}b\rc\u{9b}2J"),
            "a\\u{1b}]52;c;ZXZpbA==\\u{7}b\\u{d}c\\u{9b}2J"
        );
    }

    #[test]
    fn the_terminal_safe_writer_agrees_with_the_function_whatever_the_chunks() {
        use std::io::Write as _;
        let text = "log \u{1b}[31mred\u{1b}[0m\n\u{9b}2J é\r\u{7f}end\n";
        let bytes = text.as_bytes();
        for chunk in 1..=bytes.len() {
            let mut out = Vec::new();
            {
                let mut w = super::TerminalSafe::new(&mut out);
                for piece in bytes.chunks(chunk) {
                    w.write_all(piece).unwrap();
                }
                w.flush().unwrap();
            }
            assert_eq!(
                String::from_utf8(out).unwrap(),
                super::terminal_safe(text),
                "chunks of {chunk}"
            );
        }
    }
}
