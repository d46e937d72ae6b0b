//! Searching one open file with ripgrep's searcher: its matching lines, shown as
//! [`shown_line`] shows them, or the news that it is binary.
//!
//! The searcher reads the file in pieces (never whole, never memory-mapped) and stops at the
//! first NUL byte: a binary file is skipped and what it matched before the NUL is dropped with
//! it. One line may grow the searcher's buffer to [`MAX_SEARCHED_LINE_BYTES`], no more: a file
//! with a longer line fails to be searched (the caller reports it) rather than filling memory.

use std::fs::File;
use std::io;

use grep_matcher::{LineTerminator, Matcher};
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

use super::shown_line::{shown_line, ShownLine};
use crate::secrets::Redactor;

/// The longest line a search holds in memory; a file with a longer one is not searched.
pub const MAX_SEARCHED_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What one file gave.
#[derive(Debug, Default)]
pub(crate) struct FileMatches {
    /// Its matching lines in order (at most the limit asked for), each with its number.
    pub lines: Vec<(u64, ShownLine)>,
    /// It holds a NUL byte: it is skipped, `lines` is empty.
    pub binary: bool,
}

/// The searcher every file is searched with: line numbers, binary files skipped, memory bounded,
/// lines ending in `\n` or `\r\n` (as the matcher is built).
pub(crate) fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_terminator(LineTerminator::crlf())
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .heap_limit(Some(MAX_SEARCHED_LINE_BYTES))
        .build()
}

/// The matching lines of `file`, at most `limit` of them; the search stops early (between
/// lines) once `cancelled` says so.
pub(crate) fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    file: &File,
    limit: usize,
    redactor: &Redactor,
    cancelled: &dyn Fn() -> bool,
) -> io::Result<FileMatches> {
    let mut sink = Collect {
        matcher,
        redactor,
        limit,
        cancelled,
        found: FileMatches::default(),
    };
    searcher.search_file(matcher, file, &mut sink)?;
    let mut found = sink.found;
    if found.binary {
        found.lines.clear();
    }
    Ok(found)
}

/// The sink that keeps the shown lines.
struct Collect<'a> {
    /// To find where the first match of a long line lies (the part a cut keeps).
    matcher: &'a RegexMatcher,
    redactor: &'a Redactor,
    limit: usize,
    cancelled: &'a dyn Fn() -> bool,
    found: FileMatches,
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let line = found.bytes();
        // The matcher never fails (its error type has no values).
        let first_match = self
            .matcher
            .find(line)
            .ok()
            .flatten()
            .map(|m| m.start()..m.end());
        self.found.lines.push((
            found.line_number().unwrap_or(0),
            shown_line(line, first_match, self.redactor),
        ));
        Ok(self.found.lines.len() < self.limit && !(self.cancelled)())
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.found.binary = true;
        Ok(false)
    }
}
