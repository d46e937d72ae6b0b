//! Closing the open segment: the complete lines of `.troupe/events.jsonl` not closed yet become
//! closed segments of at most about [`SEGMENT_BYTES`] each, then `events.jsonl` is replaced by
//! an empty file and the index (`events.idx`) emptied.
//!
//! The steps, and what a kill between two of them leaves (see the parent module for why it
//! is consistent):
//! 1. each segment written to a temp file in `.troupe/events/`, synced, linked under its name,
//!    the folder synced — killed before: a temp file the next roll removes; after: the lines
//!    of `events.jsonl` it holds are at or below the closed `seq`, so every reader skips them;
//! 2. `events.jsonl` replaced by an empty file (durably) — killed before: the next roll finds
//!    only closed lines and does this step;
//! 3. the index emptied — killed before: the index no longer matches the stream, and its
//!    reader rebuilds it (it checks its records against the stream on every load).
//!
//! A torn last line (a run killed mid-append) is cut: it is garbage, never an event.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;

use flate2::{Compression, GzBuilder};
use troupe_wire::{Event, UtcTime};

use super::super::index;
use super::super::read::MAX_LINE;
use super::super::EventLogError;
use super::{closed, is_stale_segment_temp, SegmentInfo};
use crate::layout::Layout;
use crate::store::durable::{self, StagedFile};
use crate::store::lock::LockGuard;
use crate::store::read::{open_regular, Links};
use crate::store::IoError;

/// About how many bytes of lines a closed segment holds at most (a longer open segment is
/// closed as several): retention drops whole segments, and a reader by position keeps one in
/// memory.
pub const SEGMENT_BYTES: usize = 8 * 1024 * 1024;

/// Closes the complete lines of the open segment into new closed segments (oldest first in
/// the result; empty when there was nothing to close). `run_lock` proves the caller holds the
/// workspace's run lock: no run appends meanwhile.
pub fn roll(layout: &Layout, run_lock: &LockGuard) -> Result<Vec<SegmentInfo>, EventLogError> {
    roll_bounded(layout, run_lock, SEGMENT_BYTES)
}

/// [`roll`], closing a segment once it holds `segment_bytes` of lines.
pub(super) fn roll_bounded(
    layout: &Layout,
    run_lock: &LockGuard,
    segment_bytes: usize,
) -> Result<Vec<SegmentInfo>, EventLogError> {
    check_run_lock(layout, run_lock)?;
    let events = layout.events_log();
    let Some(file) = open_regular(&events, Links::Refuse)? else {
        return Ok(Vec::new());
    };
    let len = file
        .metadata()
        .map_err(|e| IoError::new("inspect", &events, e))?
        .len();
    if len == 0 {
        return Ok(Vec::new());
    }
    let through = closed(layout)?.through;
    let mut made = Vec::new();
    let mut pending = Pending::default();
    let mut lines = Lines {
        reader: BufReader::new(file),
        path: &events,
        number: 0,
    };
    let mut last = through;
    while let Some(text) = lines.next()? {
        let event = Event::parse_line(&text).map_err(|e| lines.corrupt(e.to_string()))?;
        if event.seq <= through {
            continue;
        }
        if event.seq <= last {
            return Err(lines.corrupt(format!("seq {} does not follow {last}", event.seq)));
        }
        last = event.seq;
        pending.add(&text, &event);
        if pending.bytes.len() >= segment_bytes {
            made.push(close(layout, &mut pending)?);
        }
    }
    if pending.first.is_some() {
        made.push(close(layout, &mut pending)?);
    }
    durable::replace(&events, b"")?;
    index::invalidate(&layout.events_index())?;
    remove_stale_temps(&layout.events_segments_dir());
    Ok(made)
}

/// Refuses a guard that is not the lock of this workspace's `run.lock` (compared by file
/// identity, so two spellings of one path agree).
fn check_run_lock(layout: &Layout, run_lock: &LockGuard) -> Result<(), IoError> {
    let identity = |path: &std::path::Path| std::fs::metadata(path).map(|m| (m.dev(), m.ino()));
    if let (Ok(held), Ok(ours)) = (identity(run_lock.path()), identity(&layout.run_lock())) {
        if held == ours {
            return Ok(());
        }
    }
    Err(IoError::new(
        "roll",
        &layout.events_log(),
        std::io::Error::other("rolling the event stream needs the workspace's run lock"),
    ))
}

/// The complete lines of the open segment, one at a time.
struct Lines<'a> {
    reader: BufReader<std::fs::File>,
    path: &'a std::path::Path,
    number: usize,
}

impl Lines<'_> {
    /// The next complete, non-empty line; `None` at the end or at a torn last line.
    fn next(&mut self) -> Result<Option<String>, EventLogError> {
        loop {
            let mut buf = Vec::new();
            let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
            let got = (&mut self.reader)
                .take(limit)
                .read_until(b'\n', &mut buf)
                .map_err(|e| IoError::new("read", self.path, e))?;
            if got == 0 {
                return Ok(None);
            }
            if buf.pop() != Some(b'\n') {
                if buf.len() >= MAX_LINE {
                    self.number += 1;
                    return Err(self.corrupt(format!("longer than {MAX_LINE} bytes")));
                }
                return Ok(None);
            }
            self.number += 1;
            if buf.is_empty() {
                continue;
            }
            return String::from_utf8(buf)
                .map(Some)
                .map_err(|e| self.corrupt(e.to_string()));
        }
    }

    fn corrupt(&self, reason: String) -> EventLogError {
        EventLogError::Corrupt {
            path: self.path.display().to_string(),
            line: self.number,
            reason,
        }
    }
}

/// The lines of the next segment, gathered before it is written (its header names its last
/// event's time).
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    first: Option<u64>,
    last: u64,
    last_at: Option<UtcTime>,
}

impl Pending {
    fn add(&mut self, text: &str, event: &Event) {
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(b'\n');
        self.first.get_or_insert(event.seq);
        self.last = event.seq;
        self.last_at = Some(event.at);
    }
}

/// Writes `pending` as a closed segment (durably, never over an existing file) and empties it.
fn close(layout: &Layout, pending: &mut Pending) -> Result<SegmentInfo, IoError> {
    let taken = std::mem::take(pending);
    let first = taken.first.unwrap_or(taken.last);
    let dir = layout.events_segments_dir();
    durable::ensure_real_dir(&dir)?;
    let path = dir.join(SegmentInfo::name(first, taken.last));
    let mut staged = StagedFile::create(&path)?;
    let mut builder = GzBuilder::new();
    if let Some(at) = taken.last_at {
        builder = builder.comment(at.to_string());
    }
    let mut encoder = builder.write(Staged(&mut staged), Compression::default());
    encoder
        .write_all(&taken.bytes)
        .and_then(|()| encoder.try_finish())
        .map_err(|e| IoError::new("write", &path, e))?;
    drop(encoder);
    staged.place_new(&path)?;
    let bytes = std::fs::metadata(&path)
        .map_err(|e| IoError::new("inspect", &path, e))?
        .len();
    Ok(SegmentInfo {
        first,
        last: taken.last,
        path,
        bytes,
    })
}

/// A [`StagedFile`] as a writer, for the encoder.
struct Staged<'a>(&'a mut StagedFile);

impl Write for Staged<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .write_all(buf)
            .map_err(|e| std::io::Error::new(e.source.kind(), e.to_string()))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Removes the temp files of segments a killed roll left (only rolls make them, and the
/// caller holds the run lock, so none is being written). Best effort: they are never read.
fn remove_stale_temps(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(is_stale_segment_temp)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
