//! Splits a shell command into the simple commands of its chain, for permission rules.
//!
//! The split is on `&&`, `||`, `;`, `|`, `&` and newlines, respecting single quotes, double
//! quotes and backslashes; each part becomes its words with the quoting removed. It is not a
//! shell: whatever it cannot judge safely marks the whole chain **opaque** — command
//! substitution (`$(…)`, backticks), any other `$` expansion, redirections (`<`, `>`), subshells
//! and groups (`(`, `)`, `{`, `}`), and unterminated quotes. An opaque chain is never allowed by
//! an allow rule; its parts are still produced (split leniently, also at `(`, `)` and `` ` ``),
//! so deny and ask rules still see `rm -rf x` inside `(rm -rf x)` or `$(rm -rf x)`.

/// The simple commands of a command line, and whether it held anything not judged safely.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chain {
    /// Each simple command's words, unquoted. Empty commands are left out.
    pub parts: Vec<Vec<String>>,
    /// True when an allow rule must not allow this command, whatever its parts.
    pub opaque: bool,
}

/// Splits `command` (see the module doc).
pub fn split_chain(command: &str) -> Chain {
    let mut splitter = Splitter::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => splitter.push(next),
                None => splitter.opaque = true,
            },
            '\'' => {
                splitter.quoted = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(inner) => splitter.push(inner),
                        None => {
                            splitter.opaque = true;
                            break;
                        }
                    }
                }
            }
            '"' => {
                splitter.quoted = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(escaped @ ('"' | '\\' | '$' | '`')) => splitter.push(escaped),
                            Some('\n') => {}
                            Some(other) => {
                                splitter.push('\\');
                                splitter.push(other);
                            }
                            None => {
                                splitter.opaque = true;
                                break;
                            }
                        },
                        Some(inner @ ('$' | '`')) => {
                            splitter.opaque = true;
                            splitter.push(inner);
                        }
                        Some(inner) => splitter.push(inner),
                        None => {
                            splitter.opaque = true;
                            break;
                        }
                    }
                }
            }
            ' ' | '\t' => splitter.end_word(),
            '\n' | ';' | '&' | '|' => splitter.end_part(),
            '(' | ')' | '`' | '{' | '}' => {
                splitter.opaque = true;
                splitter.end_part();
            }
            '$' => {
                splitter.opaque = true;
                if chars.peek() == Some(&'(') {
                    chars.next();
                    splitter.end_part();
                } else {
                    splitter.push(c);
                }
            }
            '<' | '>' => {
                splitter.opaque = true;
                splitter.end_word();
            }
            _ => splitter.push(c),
        }
    }
    splitter.end_part();
    Chain {
        parts: splitter.parts,
        opaque: splitter.opaque,
    }
}

/// Splits one simple command into words (quotes removed); `None` when it is more than one
/// simple command or opaque. Used for the words of a rule's own pattern.
pub fn words(text: &str) -> Option<Vec<String>> {
    let chain = split_chain(text);
    if chain.opaque || chain.parts.len() > 1 {
        return None;
    }
    Some(chain.parts.into_iter().next().unwrap_or_default())
}

#[derive(Default)]
struct Splitter {
    parts: Vec<Vec<String>>,
    words: Vec<String>,
    word: String,
    /// The current word had quotes (so `''` is an empty word, not nothing).
    quoted: bool,
    opaque: bool,
}

impl Splitter {
    fn push(&mut self, c: char) {
        self.word.push(c);
    }

    fn end_word(&mut self) {
        if !self.word.is_empty() || self.quoted {
            self.words.push(std::mem::take(&mut self.word));
        }
        self.quoted = false;
    }

    fn end_part(&mut self) {
        self.end_word();
        if !self.words.is_empty() {
            self.parts.push(std::mem::take(&mut self.words));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(command: &str) -> (Vec<String>, bool) {
        let chain = split_chain(command);
        (
            chain.parts.iter().map(|p| p.join(" ")).collect(),
            chain.opaque,
        )
    }

    #[test]
    fn splits_on_every_operator() {
        for (command, expected) in [
            ("cargo test", vec!["cargo test"]),
            ("a && b", vec!["a", "b"]),
            ("a || b", vec!["a", "b"]),
            ("a; b", vec!["a", "b"]),
            ("a | b", vec!["a", "b"]),
            ("a & b", vec!["a", "b"]),
            ("a\nb", vec!["a", "b"]),
            ("a&&b;c|d", vec!["a", "b", "c", "d"]),
        ] {
            assert_eq!(
                parts(command),
                (expected.iter().map(|s| s.to_string()).collect(), false),
                "{command}"
            );
        }
    }

    #[test]
    fn quotes_and_backslashes_hide_operators() {
        assert_eq!(
            parts("echo 'a && b'"),
            (vec!["echo a && b".to_owned()], false)
        );
        assert_eq!(
            parts("echo \"a; b\""),
            (vec!["echo a; b".to_owned()], false)
        );
        assert_eq!(parts("echo a\\;b"), (vec!["echo a;b".to_owned()], false));
        assert_eq!(
            split_chain("echo ''").parts,
            vec![vec!["echo".to_owned(), String::new()]]
        );
    }

    #[test]
    fn what_cannot_be_judged_is_opaque_but_still_split() {
        for command in [
            "echo $(rm -rf x)",
            "echo `rm -rf x`",
            "echo \"$(rm -rf x)\"",
            "(rm -rf x)",
            "echo hi > file",
            "cat < file",
            "echo $HOME",
            "echo 'unterminated",
            "{ rm -rf x; }",
        ] {
            assert!(split_chain(command).opaque, "{command}");
        }
        assert!(split_chain("echo $(rm -rf x)").parts.contains(&vec![
            "rm".to_owned(),
            "-rf".to_owned(),
            "x".to_owned()
        ]));
        assert!(split_chain("(rm -rf x)").parts.contains(&vec![
            "rm".to_owned(),
            "-rf".to_owned(),
            "x".to_owned()
        ]));
    }
}
