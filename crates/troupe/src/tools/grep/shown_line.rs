//! How one matching line is shown to the model: whole when it is short, otherwise a window of at
//! most [`MAX_LINE_BYTES`] around its first match, marked `[…]` where it was cut.
//!
//! A cut never splits a UTF-8 character (the window shrinks to whole characters) nor a secret
//! the redactor knows (the secret is left out rather than shown in part, which redacting the
//! result afterwards could not repair). Bytes that are not UTF-8 are shown as `�`.

use std::ops::Range;

use crate::secrets::Redactor;

/// The most bytes of one line that a result shows.
pub const MAX_LINE_BYTES: usize = 400;

/// Where a cut line is marked.
pub const CUT_MARK: &str = "[…]";

/// A matching line as shown, and whether it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShownLine {
    pub text: String,
    pub cut: bool,
}

/// `line` (its terminator included or not) as shown; `first_match` is where its first match
/// lies, the part a cut keeps in view.
pub(crate) fn shown_line(
    line: &[u8],
    first_match: Option<Range<usize>>,
    redactor: &Redactor,
) -> ShownLine {
    let line = without_terminator(line);
    if line.len() <= MAX_LINE_BYTES {
        return ShownLine {
            text: String::from_utf8_lossy(line).into_owned(),
            cut: false,
        };
    }
    let (start, end) = window(line.len(), first_match.unwrap_or(0..0));
    // Whole characters only, then no secret in part.
    let start = redactor.cut_start(line, next_boundary(line, start));
    let end = redactor
        .cut_end(line, previous_boundary(line, end))
        .max(start);
    let mut text = String::new();
    if start > 0 {
        text.push_str(CUT_MARK);
    }
    text.push_str(&String::from_utf8_lossy(&line[start..end]));
    if end < line.len() {
        text.push_str(CUT_MARK);
    }
    ShownLine { text, cut: true }
}

fn without_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The `[start, end)` window of at most [`MAX_LINE_BYTES`] of a line of `len` bytes: from the
/// start when the match ends within it, else starting a quarter of a window before the match
/// (a long match is shown from its start), and as full as the line allows.
fn window(len: usize, first_match: Range<usize>) -> (usize, usize) {
    let start = if first_match.end <= MAX_LINE_BYTES {
        0
    } else {
        first_match
            .start
            .saturating_sub(MAX_LINE_BYTES / 4)
            .min(len.saturating_sub(MAX_LINE_BYTES))
    };
    (start, (start + MAX_LINE_BYTES).min(len))
}

/// A UTF-8 continuation byte: never the first byte of a character.
fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The first character boundary at or after `at`.
fn next_boundary(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_continuation(bytes[at]) {
        at += 1;
    }
    at
}

/// The last character boundary at or before `at`.
fn previous_boundary(bytes: &[u8], mut at: usize) -> usize {
    while at > 0 && at < bytes.len() && is_continuation(bytes[at]) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(line: &str, first_match: Range<usize>) -> ShownLine {
        shown_line(line.as_bytes(), Some(first_match), &Redactor::default())
    }

    #[test]
    fn a_short_line_is_shown_whole_without_its_terminator() {
        assert_eq!(
            show("fn main() {}\r\n", 0..2),
            ShownLine {
                text: "fn main() {}".to_owned(),
                cut: false
            }
        );
    }

    #[test]
    fn a_long_line_keeps_its_first_match_in_view() {
        let line = format!("{}NEEDLE{}", "a".repeat(1000), "b".repeat(1000));
        let shown = show(&line, 1000..1006);
        assert!(shown.cut);
        let inner = shown
            .text
            .strip_prefix(CUT_MARK)
            .and_then(|t| t.strip_suffix(CUT_MARK))
            .unwrap();
        assert_eq!(inner.len(), MAX_LINE_BYTES);
        assert!(inner.contains("NEEDLE"), "{inner}");
        assert!(
            inner.starts_with(&"a".repeat(MAX_LINE_BYTES / 4)),
            "{inner}"
        );
    }

    #[test]
    fn a_cut_keeps_whole_characters() {
        // Three-byte characters: no window of 400 bytes from 0 ends on a boundary by luck
        // (400 is not a multiple of 3).
        let line = "€".repeat(300);
        let shown = show(&line, 0..3);
        let inner = shown.text.strip_suffix(CUT_MARK).unwrap();
        assert_eq!(inner, "€".repeat(MAX_LINE_BYTES / 3));
        // A window that starts inside a character starts at the next one: the match `y` at
        // 801 puts the window's start at 701, inside an `é` (two bytes, from 0).
        let line = format!("{}xy{}", "é".repeat(400), "é".repeat(400));
        let shown = show(&line, 801..802);
        let inner = shown
            .text
            .strip_prefix(CUT_MARK)
            .and_then(|t| t.strip_suffix(CUT_MARK))
            .unwrap();
        assert!(inner.contains("xy"), "{inner}");
        assert!(inner.starts_with('é'), "{inner}");
        assert!(inner.chars().all(|c| "éxy".contains(c)), "{inner}");
    }

    #[test]
    fn a_cut_never_shows_part_of_a_secret() {
        let secret = "sk-secret-0123456789";
        let redactor = Redactor::new([secret]);
        // The secret straddles the end of the window that starts at 0.
        let line = format!(
            "match {}{secret}{}",
            "a".repeat(MAX_LINE_BYTES - 16),
            "z".repeat(500)
        );
        let shown = shown_line(line.as_bytes(), Some(0..5), &redactor);
        assert!(shown.cut);
        assert!(!shown.text.contains("sk-"), "{}", shown.text);
        assert!(
            shown.text.ends_with(&format!("a{CUT_MARK}")),
            "{}",
            shown.text
        );
    }
}
