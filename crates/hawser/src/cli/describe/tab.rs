//! Column alignment as Go's `text/tabwriter` does it with Velero's describe settings (minimum
//! width 0, padding 2, spaces, no flags), so that a description lines up exactly as Velero's.
//!
//! Written here rather than taken from the `tabwriter` crate because Velero's output depends on
//! two of Go's details that crate does not promise: a cell's width is its count of characters
//! (terminal colour sequences included, as Go counts them), and a tab-terminated empty cell is
//! padded too (a wrapped `Labels:` line starts with spaces).
//!
//! Text is lines of cells separated by tabs; the last cell of a line is never aligned. A column
//! block is a run of consecutive lines that all have a tab-terminated cell in that column; every
//! cell of the block is padded to the block's widest cell plus the padding.

const PADDING: usize = 2;

/// `text` with its tab-separated cells aligned.
pub fn align(text: &str) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut widths = Vec::new();
    format(&lines, 0, lines.len(), &mut widths, &mut out);
    out
}

fn width(cell: &str) -> usize {
    cell.chars().count()
}

/// Lays out lines `start..end`, whose columns left of `widths.len()` are already measured.
fn format(
    lines: &[Vec<&str>],
    mut start: usize,
    end: usize,
    widths: &mut Vec<usize>,
    out: &mut String,
) {
    let column = widths.len();
    // Whether line `i` has a tab-terminated cell in this column.
    let in_column = |i: usize| lines[i].len() > column + 1;
    let mut this = start;
    while this < end {
        if !in_column(this) {
            this += 1;
            continue;
        }
        write_lines(lines, start, this, widths, out);
        start = this;
        let mut block = 0;
        while this < end && in_column(this) {
            block = block.max(width(lines[this][column]) + PADDING);
            this += 1;
        }
        widths.push(block);
        format(lines, start, this, widths, out);
        widths.pop();
        start = this;
    }
    write_lines(lines, start, end, widths, out);
}

fn write_lines(lines: &[Vec<&str>], start: usize, end: usize, widths: &[usize], out: &mut String) {
    for (i, line) in lines.iter().enumerate().take(end).skip(start) {
        for (j, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if let Some(&column) = widths.get(j) {
                out.extend(std::iter::repeat_n(' ', column.saturating_sub(width(cell))));
            }
        }
        if i + 1 < lines.len() {
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_lines_share_a_column_and_a_line_without_tabs_ends_it() {
        let text = "Name:\tweb\nNamespace:\tvelero\n\nPhase:\tCompleted\n";
        assert_eq!(
            align(text),
            "Name:       web\nNamespace:  velero\n\nPhase:  Completed\n"
        );
    }

    #[test]
    fn empty_cells_are_padded_and_nested_columns_align_within_their_block() {
        let text = "Labels:\ta=1\n\tb=2\nNamespaces:\n\tIncluded:\t*\n\tExcluded:\t<none>\n";
        assert_eq!(
            align(text),
            "Labels:  a=1\n         b=2\nNamespaces:\n  Included:  *\n  Excluded:  <none>\n"
        );
    }

    #[test]
    fn a_cell_is_as_wide_as_its_characters_colour_sequences_included() {
        let text = "\u{1b}[32mé\u{1b}[0m\tx\nab\ty\n";
        assert_eq!(align(text), "\u{1b}[32mé\u{1b}[0m  x\nab          y\n");
    }
}
