//! The grep result: `path:line:text` lines in walk order under the caps, then a note for each
//! thing the model should know it did not see (a cap reached, lines cut, files skipped).

use super::file_search::FileMatches;
use super::shown_line::{CUT_MARK, MAX_LINE_BYTES};

/// At most this many matching lines are returned.
pub const MAX_MATCHES: usize = 200;
/// At most this many bytes of matching lines are returned (the notes come on top).
pub const MAX_RESULT_BYTES: usize = 50_000;
/// How many of the files that could not be searched are named.
const NAMED_UNSEARCHED: usize = 3;

/// Why the search stopped before the end of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// [`MAX_MATCHES`] lines were kept and another matched.
    Matches,
    /// The next line would have taken the result past [`MAX_RESULT_BYTES`].
    Bytes,
    /// The walk visited its most entries.
    Walk(usize),
}

/// The result being built.
#[derive(Debug, Default)]
pub(crate) struct Report {
    text: String,
    lines: usize,
    cut_lines: usize,
    binary_files: usize,
    /// Files met on the walk that could not be searched, with why (only the first are named).
    unsearched: Vec<String>,
    unsearched_count: usize,
    stopped: Option<Stopped>,
}

impl Report {
    /// How many more lines may be kept, plus one: a search that finds that many knows more
    /// matched than the result shows.
    pub(crate) fn lines_wanted(&self) -> usize {
        MAX_MATCHES - self.lines + 1
    }

    /// Adds the matches of the file shown as `path`; false once a cap is reached (the search
    /// stops).
    pub(crate) fn add(&mut self, path: &str, found: FileMatches) -> bool {
        if found.binary {
            self.binary_files += 1;
            return true;
        }
        for (number, line) in found.lines {
            if self.lines == MAX_MATCHES {
                self.stopped = Some(Stopped::Matches);
                return false;
            }
            let entry = format!("{path}:{number}:{}", line.text);
            if self.text.len() + entry.len() + 1 > MAX_RESULT_BYTES {
                self.stopped = Some(Stopped::Bytes);
                return false;
            }
            if !self.text.is_empty() {
                self.text.push('\n');
            }
            self.text.push_str(&entry);
            self.lines += 1;
            self.cut_lines += usize::from(line.cut);
        }
        true
    }

    /// A file on the walk that could not be searched, and why.
    pub(crate) fn unsearched(&mut self, path: &str, why: &str) {
        self.unsearched_count += 1;
        if self.unsearched.len() < NAMED_UNSEARCHED {
            self.unsearched.push(format!("{path} ({why})"));
        }
    }

    /// The walk stopped after `visited` entries.
    pub(crate) fn walk_stopped(&mut self, visited: usize) {
        self.stopped = Some(Stopped::Walk(visited));
    }

    /// The text the model sees; `nothing` is said when no line matched.
    pub(crate) fn render(self, nothing: String) -> String {
        let mut out = if self.text.is_empty() {
            nothing
        } else {
            self.text
        };
        let mut note = |text: String| {
            out.push('\n');
            out.push_str(&text);
        };
        match self.stopped {
            Some(Stopped::Matches) => note(format!(
                "[more lines match: showing the first {MAX_MATCHES}; narrow the search with \
                 `path` or `glob`, or a more precise pattern]"
            )),
            Some(Stopped::Bytes) => note(format!(
                "[more lines match: showing the first {} lines ({MAX_RESULT_BYTES} bytes at \
                 most); narrow the search with `path` or `glob`, or a more precise pattern]",
                self.lines
            )),
            Some(Stopped::Walk(visited)) => note(format!(
                "[the walk stopped after {visited} entries; files after them were not searched: \
                 narrow the search with `path` or `glob`]"
            )),
            None => {}
        }
        if self.cut_lines > 0 {
            note(format!(
                "[{} longer than {MAX_LINE_BYTES} bytes {} cut around {} first match, marked \
                 {CUT_MARK}; read_file shows {} whole]",
                counted(self.cut_lines, "line", "lines"),
                were(self.cut_lines),
                if self.cut_lines == 1 { "its" } else { "their" },
                if self.cut_lines == 1 { "it" } else { "them" },
            ));
        }
        if self.binary_files > 0 {
            note(format!(
                "[{} (holding NUL bytes) {} skipped]",
                counted(self.binary_files, "binary file", "binary files"),
                were(self.binary_files)
            ));
        }
        if self.unsearched_count > 0 {
            note(format!(
                "[{} could not be searched: {}{}]",
                counted(self.unsearched_count, "file", "files"),
                self.unsearched.join(", "),
                if self.unsearched_count > self.unsearched.len() {
                    ", …"
                } else {
                    ""
                }
            ));
        }
        out
    }
}

/// `1 line`, `2 lines`.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn were(n: usize) -> &'static str {
    if n == 1 {
        "was"
    } else {
        "were"
    }
}
