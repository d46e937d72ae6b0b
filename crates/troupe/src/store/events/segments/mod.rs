//! The event stream in segments: `.troupe/events.jsonl` is the **open** segment (the one runs
//! append to), and `.troupe/events/` holds the **closed** ones, gzip-compressed.
//!
//! **Format.** A closed segment is `.troupe/events/<first>-<last>.jsonl.gz`, `first` and `last`
//! the `seq`s of its first and last lines written with 20 digits (so names sort by `seq`): a
//! gzip stream (RFC 1952) of complete lines exactly as they were in `events.jsonl`, `seq`
//! gapless from `first` to `last`. Its gzip header's comment holds the `at` of its last event
//! (what retention ages it by; the file's modification time stands in when it is missing).
//! Closed segments are never changed: made whole by [`roll`] (temp file → fsync → no-clobber
//! link → folder fsync), then only removed whole by [`prune`]. `.troupe/events/last-seq` holds
//! (decimal, one line) the highest `seq` ever closed, written by [`prune`] before it removes
//! the newest closed segment, so that `seq` stays gapless even when gc has removed every
//! segment. Names starting with `.` are temp files, skipped.
//!
//! **Closed through.** [`Closed::through`] is the highest `seq` closed (the newest segment's
//! `last`, or `last-seq` when that is higher). Every line of `events.jsonl` at or below it is
//! already closed — a roll killed after placing its segment and before emptying the open one
//! leaves such lines — so readers and [`super::EventLog::open`] skip them, and the next roll
//! drops them. Hence a kill between any two steps of a roll loses no event and shows none twice.
//!
//! **Who writes.** Only the holder of the workspace's run lock rolls (no run is appending);
//! [`prune`] removes closed segments beside a live run (the run never reads them).
//!
//! - [`read`]: one closed segment's lines, streamed or cached for reads by position.
//! - [`roll`]: the open segment's complete lines into new closed segments.
//! - [`prune`]: retention of closed segments (`troupe gc`).

pub mod prune;
pub mod read;
pub mod roll;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use prune::prune;
pub use roll::roll;

use super::EventLogError;
use crate::layout::Layout;
use crate::store::read::{open_regular, Links};
use crate::store::IoError;

/// The digits of a `seq` in a segment's name.
const DIGITS: usize = 20;
/// How a closed segment's name ends.
pub const SUFFIX: &str = ".jsonl.gz";

/// One closed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The `seq` of its first line.
    pub first: u64,
    /// The `seq` of its last line.
    pub last: u64,
    pub path: PathBuf,
    /// Its size on disk (compressed).
    pub bytes: u64,
}

impl SegmentInfo {
    /// The file name of the segment of `first..=last`.
    pub fn name(first: u64, last: u64) -> String {
        format!("{first:0DIGITS$}-{last:0DIGITS$}{SUFFIX}")
    }

    /// `first` and `last` of a segment's file name; `None` for any other name.
    pub fn parse_name(name: &str) -> Option<(u64, u64)> {
        let stem = name.strip_suffix(SUFFIX)?;
        let (first, last) = stem.split_once('-')?;
        let number = |s: &str| {
            (s.len() == DIGITS && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let (first, last) = (number(first)?, number(last)?);
        (first >= 1 && first <= last).then_some((first, last))
    }
}

/// The closed segments, oldest first, and the highest `seq` closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Closed {
    pub segments: Vec<SegmentInfo>,
    /// The highest `seq` closed (0: none): lines of `events.jsonl` up to it are skipped.
    pub through: u64,
}

/// Lists the closed segments (none while `.troupe/events/` does not exist). Never creates
/// anything.
pub fn closed(layout: &Layout) -> Result<Closed, EventLogError> {
    let dir = layout.events_segments_dir();
    let entries = match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {
            std::fs::read_dir(&dir).map_err(|e| IoError::new("list", &dir, e))?
        }
        Ok(_) => {
            return Err(IoError::new(
                "list",
                &dir,
                std::io::Error::other("not a folder (troupe refuses a symlinked state folder)"),
            )
            .into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Closed::default()),
        Err(e) => return Err(IoError::new("inspect", &dir, e).into()),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", &dir, e))?;
        let name = entry.file_name();
        let Some((first, last)) = name.to_str().and_then(SegmentInfo::parse_name) else {
            continue;
        };
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            // Removed by a gc meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(IoError::new("inspect", &entry.path(), e).into()),
        };
        if !meta.is_file() {
            continue;
        }
        segments.push(SegmentInfo {
            first,
            last,
            path: entry.path(),
            bytes: meta.len(),
        });
    }
    segments.sort_by_key(|s| (s.first, s.last));
    let newest = segments.iter().map(|s| s.last).max().unwrap_or(0);
    let through = newest.max(read_last_seq(layout)?);
    Ok(Closed { segments, through })
}

/// The highest `seq` closed (0: none).
pub fn closed_through(layout: &Layout) -> Result<u64, EventLogError> {
    Ok(closed(layout)?.through)
}

/// `.troupe/events/last-seq`, 0 when missing.
fn read_last_seq(layout: &Layout) -> Result<u64, EventLogError> {
    let path = layout.events_last_seq();
    let Some(file) = open_regular(&path, Links::Refuse)? else {
        return Ok(0);
    };
    let mut text = String::new();
    file.take(64)
        .read_to_string(&mut text)
        .map_err(|e| IoError::new("read", &path, e))?;
    text.trim_end()
        .parse::<u64>()
        .map_err(|_| EventLogError::Corrupt {
            path: path.display().to_string(),
            line: 1,
            reason: format!("{text:?} is not a seq"),
        })
}

/// Records `seq` as the highest closed in `.troupe/events/last-seq` (durably).
fn write_last_seq(layout: &Layout, seq: u64) -> Result<(), IoError> {
    crate::store::durable::replace(&layout.events_last_seq(), format!("{seq}\n").as_bytes())
}

/// Whether `path` is a temp file a roll left behind (killed before placing its segment).
fn is_stale_segment_temp(name: &str) -> bool {
    name.starts_with(crate::store::durable::TEMP_PREFIX) && name.contains(&format!("{SUFFIX}.tmp-"))
}

/// An error of the stream as a plain I/O error (for callers whose port has only those):
/// corruption becomes `InvalidData` naming the file.
pub fn as_io(e: EventLogError) -> IoError {
    match e {
        EventLogError::Io(io) => io,
        EventLogError::Corrupt { ref path, .. } => IoError::new(
            "read",
            Path::new(path),
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        ),
    }
}

/// The size of a file, 0 when it does not exist.
fn size_of(path: &Path) -> Result<u64, IoError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(IoError::new("inspect", path, e)),
    }
}

#[cfg(test)]
mod tests;
