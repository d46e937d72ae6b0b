//! Text from a workspace, a model, a tool or a server, made safe to put on a terminal: it is
//! shown, never obeyed (issue 39).
//!
//! A terminal acts on the control characters in what it is given: `ESC [ 2 K` erases a line,
//! `\r` goes back to its start, `ESC ] 0 ;` sets the window title, and the C1 control U+009B is
//! a one-character `ESC [` for many terminals. A hook command in a cloned `troupe.toml` or a
//! model's answer holding them could erase what troupe prints and show something else in its
//! place. [`for_terminal`] (text of many lines) and [`line_for_terminal`] (a value shown on one
//! line, its newlines escaped too) are what every place that prints such text calls: the CLI's
//! text output, the trust review, the approval prompt, the run's lines, `troupe log`, the watch
//! view, error lines. Text is escaped once, where it is printed or where its one-line values are
//! put in place, never twice: escaping escaped text would double its backslashes.
//!
//! # The escaped form
//!
//! Every C0 control except tab and newline (U+0000–U+0008, U+000B–U+001F, so `\r` and ESC
//! too), DEL (U+007F) and every C1 control (U+0080–U+009F) is shown as `\x` and its code point
//! in two lower-case hex digits: ESC is `\x1b`, `\r` is `\x0d`, U+009B is `\x9b`. Tab and
//! newline stay: they lay text out without reaching the cursor anywhere else.
//!
//! The invisible characters that reorder or hide text — the bidirectional controls (U+061C,
//! U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: "Trojan Source", where a line shows one
//! command and holds another) and the zero-width space, non-joiner, word joiner and
//! byte-order mark (U+200B, U+200C, U+2060, U+FEFF) — are shown as `\u{` and their code point
//! in four lower-case hex digits and `}`: U+202E is `\u{202e}`. The zero-width joiner (U+200D)
//! stays: emoji are made of it.
//!
//! The form is unambiguous: a `\x` (or `\u{`) in the output is an escape exactly when an odd
//! number of backslashes stands before the `x` (the `u`). To keep it so, a run of backslashes in
//! the input that comes right before an `x`, a `u{` or a character shown escaped is doubled;
//! every other backslash is shown as it is. So text that itself holds `\x1b` is shown as `\\x1b`, and the
//! `\n`, `\\` and `C:\dir` of ordinary code and paths read as they are written, which doubling
//! every backslash would not give a person reviewing a diff.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with its control characters escaped (see the module docs); borrowed when there was
/// nothing to change. Tab and newline stay: for text of many lines (a diff, an answer).
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Kept)
}

/// [`for_terminal`], and a newline is escaped too (`\x0a`): for a value shown on one line of
/// a list (a hook command in the trust review, an event's line), where a newline could start
/// a line that looks like the list's own, or push the value's start off the screen.
pub fn line_for_terminal(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Escaped)
}

/// Whether `c` is shown escaped in text of many lines: a C0 control other than tab and
/// newline, DEL, a C1 control, or an invisible character that reorders or hides text.
pub fn is_escaped(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n') || is_invisible(c)
}

/// The bidirectional controls and the zero-width characters shown as `\u{…}`.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'
            | '\u{200c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// Serialized JSON (`json`, as serde_json wrote it) with every character [`is_escaped`] would
/// show escaped written as a JSON `\uXXXX` escape instead; borrowed when there was nothing to
/// change. serde_json escapes the C0 controls itself but writes DEL, the C1 controls and the
/// invisible characters as they are, which a terminal reading `--json` output would act on.
/// The value a program reads back is the same: in valid JSON such a character can only be
/// inside a string, where its escape stands for it.
pub fn json_for_terminal(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_escaped) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_escaped(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    Kept,
    Escaped,
}

fn escape(text: &str, lines: Lines) -> Cow<'_, str> {
    let escaped = |c: char| is_escaped(c) || (c == '\n' && lines == Lines::Escaped);
    if !text.chars().any(escaped) && !text.contains("\\x") && !text.contains("\\u{") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    // The backslashes seen and not yet written: whether they are doubled depends on what
    // follows them.
    let mut backslashes = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            backslashes += 1;
            continue;
        }
        let shown_escaped = escaped(c);
        let escape_like = c == 'x' || (c == 'u' && chars.peek() == Some(&'{'));
        let run = if shown_escaped || escape_like {
            2 * backslashes
        } else {
            backslashes
        };
        out.extend(std::iter::repeat_n('\\', run));
        backslashes = 0;
        if shown_escaped && is_invisible(c) {
            let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
        } else if shown_escaped {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out.extend(std::iter::repeat_n('\\', backslashes));
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    /// The input [`for_terminal`] was given, read back from its output: the proof that the
    /// escaped form is unambiguous.
    fn unescape(shown: &str) -> String {
        let chars: Vec<char> = shown.chars().collect();
        let mut out = String::new();
        let mut at = 0;
        while at < chars.len() {
            if chars[at] != '\\' {
                out.push(chars[at]);
                at += 1;
                continue;
            }
            let run = chars[at..].iter().take_while(|c| **c == '\\').count();
            at += run;
            let unicode = chars.get(at) == Some(&'u') && chars.get(at + 1) == Some(&'{');
            if chars.get(at) != Some(&'x') && !unicode {
                out.extend(std::iter::repeat_n('\\', run));
                continue;
            }
            out.extend(std::iter::repeat_n('\\', run / 2));
            if run % 2 == 0 {
                continue;
            }
            let (digits, width) = if unicode {
                (at + 2..at + 6, 7)
            } else {
                (at + 1..at + 3, 3)
            };
            let hex: String = chars[digits].iter().collect();
            out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
            at += width;
        }
        out
    }

    #[test]
    fn controls_are_shown_as_hex_escapes_and_the_rest_as_it_is() {
        let cases = [
            ("plain text", "plain text"),
            ("", ""),
            ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
            ("echo hi\u{1b}[2K\rrm -rf ~", "echo hi\\x1b[2K\\x0drm -rf ~"),
            ("up\u{1b}[1A", "up\\x1b[1A"),
            ("\u{1b}]0;title\u{7}", "\\x1b]0;title\\x07"),
            ("nul\u{0} del\u{7f}", "nul\\x00 del\\x7f"),
            (
                "csi\u{9b}2J c1 end\u{9f} nel\u{85}",
                "csi\\x9b2J c1 end\\x9f nel\\x85",
            ),
            ("\u{a0}é∑ not controls", "\u{a0}é∑ not controls"),
            ("windows\r\n", "windows\\x0d\n"),
            // Backslashes before an `x` or an escape are doubled; the others stay.
            ("C:\\dir \\n \\\\ end\\", "C:\\dir \\n \\\\ end\\"),
            ("literal \\x1b", "literal \\\\x1b"),
            ("two \\\\x", "two \\\\\\\\x"),
            ("before esc \\\u{1b}", "before esc \\\\\\x1b"),
            ("xx no backslash", "xx no backslash"),
            // Trojan Source: what reorders or hides text is shown, not obeyed.
            (
                "access = \"user\u{202e} \u{2066}// admin\u{2069}\u{2066}\"",
                "access = \"user\\u{202e} \\u{2066}// admin\\u{2069}\\u{2066}\"",
            ),
            ("zero\u{200b}width\u{feff}", "zero\\u{200b}width\\u{feff}"),
            (
                "family 👨\u{200d}👩\u{200d}👧",
                "family 👨\u{200d}👩\u{200d}👧",
            ),
            // A literal `\u{` is doubled like a literal `\x`; `\u00e9` is not an escape here.
            ("literal \\u{202e}", "literal \\\\u{202e}"),
            ("json \\u00e9", "json \\u00e9"),
        ];
        for (input, shown) in cases {
            assert_eq!(for_terminal(input), shown, "{input:?}");
            assert_eq!(unescape(shown), input, "{shown:?}");
        }
    }

    #[test]
    fn a_line_escapes_its_newlines_too() {
        let cases = [
            ("one line", "one line"),
            (
                "evil\n  troupe.toml  harmless",
                "evil\\x0a  troupe.toml  harmless",
            ),
            ("tab\tstays\r\n", "tab\tstays\\x0d\\x0a"),
            ("\\\n", "\\\\\\x0a"),
        ];
        for (input, shown) in cases {
            assert_eq!(line_for_terminal(input), shown, "{input:?}");
            assert_eq!(unescape(shown), input, "{shown:?}");
        }
    }

    #[test]
    fn json_keeps_its_value_and_loses_what_a_terminal_would_act_on() {
        let value = serde_json::json!({"text": "del\u{7f} csi\u{9b}2J rtl\u{202e}x \u{1b}[2K é"});
        let raw = value.to_string();
        assert!(
            raw.contains('\u{9b}'),
            "serde_json writes C1 as it is: {raw:?}"
        );
        let shown = json_for_terminal(&raw);
        assert_eq!(
            shown,
            r#"{"text":"del\u007f csi\u009b2J rtl\u202ex \u001b[2K é"}"#
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
        assert!(matches!(
            json_for_terminal(r#"{"a":"\u001b é"}"#),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn text_with_nothing_to_escape_is_borrowed() {
        assert!(matches!(for_terminal("a \\n b"), Cow::Borrowed(_)));
        assert!(matches!(for_terminal("\u{1b}"), Cow::Owned(_)));
    }

    proptest! {
        #[test]
        fn the_output_holds_no_control_but_tab_and_newline(text in any::<String>()) {
            let shown = for_terminal(&text);
            prop_assert!(
                shown.chars().all(|c| !c.is_control() || c == '\t' || c == '\n'),
                "{shown:?}"
            );
            prop_assert!(!shown.chars().any(is_invisible), "{shown:?}");
            let line = line_for_terminal(&text);
            prop_assert!(line.chars().all(|c| !c.is_control() || c == '\t'), "{line:?}");
        }

        #[test]
        fn the_output_reads_back_as_the_input(
            text in proptest::collection::vec(
                prop_oneof![
                    Just('\\'), Just('x'), Just('\u{1b}'), Just('\r'), Just('\u{9b}'),
                    Just('\t'), Just('\n'), Just('u'), Just('{'), Just('\u{202e}'),
                    Just('\u{feff}'), any::<char>(),
                ],
                0..40,
            )
        ) {
            let text: String = text.into_iter().collect();
            prop_assert_eq!(&unescape(&for_terminal(&text)), &text);
            prop_assert_eq!(unescape(&line_for_terminal(&text)), text);
        }
    }
}
