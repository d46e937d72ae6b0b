//! Reading `.troupe/events.jsonl`: all of it, or what was appended since the last read.
//!
//! Only complete lines are read: a line still being written (or torn by a crash) is left for the
//! next read. A line that is complete but not an event is an error naming its number — the file
//! is troupe's own, so that is corruption, not something to skip silently. Reading never creates
//! anything: a missing file reads as no events.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use troupe_wire::Event;

use super::EventLogError;
use crate::store::read::{open_regular, Links};
use crate::store::IoError;

/// How much is read from the end to find the last line's `seq` at a time.
const TAIL_CHUNK: u64 = 64 * 1024;

/// How much [`EventCursor::read_new`] reads at a time.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// The longest line a reader accepts (troupe cuts what it records far below this).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Every event in the file at `path` (none if there is no file).
pub fn read_all(path: &Path) -> Result<Vec<Event>, EventLogError> {
    let mut cursor = EventCursor::new(path);
    cursor.read_new()
}

/// The `seq` of the last complete line, `0` for an empty or missing file.
pub fn last_seq(path: &Path) -> Result<u64, EventLogError> {
    Ok(last_event(path)?.map_or(0, |e| e.seq))
}

/// The event of the last complete line, `None` for an empty or missing file.
pub fn last_event(path: &Path) -> Result<Option<Event>, EventLogError> {
    let Some(file) = open_regular(path, Links::Refuse)? else {
        return Ok(None);
    };
    let len = file
        .metadata()
        .map_err(|e| IoError::new("inspect", path, e))?
        .len();
    let mut end = len;
    let mut tail: Vec<u8> = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK);
        let mut chunk = vec![0; usize::try_from(end - start).unwrap_or(0)];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut chunk, start)
            .map_err(|e| IoError::new("read", path, e))?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        end = start;
        // The complete part: up to the last `\n`.
        let Some(last_nl) = tail.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        let complete = &tail[..last_nl];
        let line_start = complete.iter().rposition(|&b| b == b'\n').map(|at| at + 1);
        match line_start {
            Some(at) => return parse_last(path, &complete[at..]).map(Some),
            None if end == 0 => return parse_last(path, complete).map(Some),
            None => {}
        }
    }
    Ok(None)
}

fn parse_last(path: &Path, line: &[u8]) -> Result<Event, EventLogError> {
    let text = String::from_utf8_lossy(line);
    Event::parse_line(&text).map_err(|e| EventLogError::Corrupt {
        path: path.display().to_string(),
        line: count_lines(path).unwrap_or(0),
        reason: e.to_string(),
    })
}

/// Number of complete lines (for naming the last one in an error), read a chunk at a time.
fn count_lines(path: &Path) -> Option<usize> {
    let mut file = open_regular(path, Links::Refuse).ok()??;
    let mut chunk = vec![0u8; 1024 * 1024];
    let mut lines = 0;
    loop {
        let got = file.read(&mut chunk).ok()?;
        if got == 0 {
            return Some(lines);
        }
        lines += chunk[..got].iter().filter(|&&b| b == b'\n').count();
    }
}

/// Reads new complete lines of one file, from where the last read stopped.
#[derive(Debug)]
pub struct EventCursor {
    path: PathBuf,
    file: Option<File>,
    /// Bytes of complete lines consumed so far.
    offset: u64,
    /// Complete lines consumed so far (for error messages).
    lines: usize,
    /// Bytes read past the last complete line, kept for the next read.
    partial: Vec<u8>,
}

impl EventCursor {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            file: None,
            offset: 0,
            lines: 0,
            partial: Vec::new(),
        }
    }

    /// A cursor whose first read starts at byte `offset`, which must be the start of a line
    /// (an [`super::index::Entry`]'s offset, or the end of the indexed lines).
    pub fn starting_at(path: &Path, offset: u64) -> Self {
        Self {
            offset,
            ..Self::new(path)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the first read start at byte `offset` (the start of a line) of the file it opens;
    /// for a cursor that has read nothing yet.
    pub fn start_at(&mut self, offset: u64) {
        self.offset = offset;
        self.partial.clear();
    }

    /// Opens the file now if it is not open yet (reads open it on their own); false while it
    /// does not exist.
    pub fn open(&mut self) -> Result<bool, EventLogError> {
        if self.file.is_none() {
            self.file = open_regular(&self.path, Links::Refuse)?;
        }
        Ok(self.file.is_some())
    }

    /// The open file's identity (device, inode), once it is open.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let meta = self.file.as_ref()?.metadata().ok()?;
        Some((meta.dev(), meta.ino()))
    }

    /// Whether the path no longer names the file this cursor reads — replaced (a roll of the
    /// stream), removed, or cut below what was read: the rest of the stream is elsewhere.
    /// False before the file is open.
    pub fn replaced(&self) -> Result<bool, EventLogError> {
        let Some(file) = &self.file else {
            return Ok(false);
        };
        let ours = file
            .metadata()
            .map_err(|e| IoError::new("inspect", &self.path, e))?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(now) => {
                Ok((now.dev(), now.ino()) != (ours.dev(), ours.ino()) || ours.len() < self.offset)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(IoError::new("inspect", &self.path, e).into()),
        }
    }

    /// The events of the complete lines appended since the last call (all of them the first
    /// time); empty while the file does not exist. Reads everything there is: for files that may
    /// be large, [`Self::read_batch`] bounds the memory.
    pub fn read_new(&mut self) -> Result<Vec<Event>, EventLogError> {
        let mut events = Vec::new();
        loop {
            let batch = self.read_batch(BATCH_BYTES)?;
            if batch.is_empty() {
                return Ok(events);
            }
            events.extend(batch);
        }
    }

    /// Like [`Self::read_new`], but reads at most about `max_bytes` of the file: call it again
    /// until it returns nothing to have read everything. A line longer than [`MAX_LINE`] is an
    /// error (troupe never writes one), not a reason to hold the whole file in memory.
    pub fn read_batch(&mut self, max_bytes: usize) -> Result<Vec<Event>, EventLogError> {
        if self.file.is_none() {
            match open_regular(&self.path, Links::Refuse)? {
                Some(file) => self.file = Some(file),
                None => return Ok(Vec::new()),
            }
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(Vec::new());
        };
        let read_from = self.offset + self.partial.len() as u64;
        file.seek(SeekFrom::Start(read_from))
            .map_err(|e| IoError::new("read", &self.path, e))?;
        let mut bytes = std::mem::take(&mut self.partial);
        let want = u64::try_from(max_bytes.max(1)).unwrap_or(u64::MAX);
        // Read on until a line is complete or the file ends: an empty batch means "nothing
        // more", never "a long line not finished yet".
        let complete = loop {
            let got = (&mut *file)
                .take(want)
                .read_to_end(&mut bytes)
                .map_err(|e| IoError::new("read", &self.path, e))?;
            let complete = bytes
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |at| at + 1);
            if complete == 0 && bytes.len() > MAX_LINE {
                self.lines += 1;
                return Err(self.corrupt(format!("longer than {MAX_LINE} bytes")));
            }
            if complete > 0 || (got as u64) < want {
                break complete;
            }
        };
        let mut events = Vec::new();
        for line in bytes[..complete].split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            self.lines += 1;
            let text = std::str::from_utf8(line).map_err(|e| self.corrupt(e.to_string()))?;
            events.push(Event::parse_line(text).map_err(|e| self.corrupt(e.to_string()))?);
        }
        self.offset += complete as u64;
        self.partial = bytes[complete..].to_vec();
        Ok(events)
    }

    fn corrupt(&self, reason: String) -> EventLogError {
        EventLogError::Corrupt {
            path: self.path.display().to_string(),
            line: self.lines,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> String {
        format!(
            "{{\"seq\":{seq},\"at\":\"2026-07-30T08:00:00.000Z\",\"run_id\":\"r\",\"agent\":\"lead\",\"kind\":\"k\"}}\n"
        )
    }

    #[test]
    fn a_cursor_reads_only_new_complete_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut cursor = EventCursor::new(&path);
        assert!(cursor.read_new().unwrap().is_empty(), "no file, no events");
        assert!(!path.exists(), "reading creates nothing");

        let (one, two) = (line(1), line(2));
        std::fs::write(&path, format!("{one}{}", &two[..10])).unwrap();
        let seqs = |events: Vec<Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(cursor.read_new().unwrap()), [1]);
        assert_eq!(seqs(cursor.read_new().unwrap()), Vec::<u64>::new());
        std::fs::write(&path, format!("{one}{two}{}", line(3))).unwrap();
        assert_eq!(seqs(cursor.read_new().unwrap()), [2, 3]);
    }

    #[test]
    fn last_seq_reads_the_last_complete_line_of_a_long_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        assert_eq!(last_seq(&path).unwrap(), 0);
        let text: String = (1..=5000).map(line).collect();
        std::fs::write(&path, format!("{text}{{\"seq\":5001")).unwrap();
        assert_eq!(last_seq(&path).unwrap(), 5000);
    }

    #[test]
    fn batches_read_everything_a_little_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let text: String = (1..=100).map(line).collect();
        std::fs::write(&path, &text).unwrap();
        let mut cursor = EventCursor::new(&path);
        let mut seqs = Vec::new();
        loop {
            let batch = cursor.read_batch(300).unwrap();
            if batch.is_empty() {
                break;
            }
            assert!(batch.len() <= 4, "a batch is bounded: {}", batch.len());
            seqs.extend(batch.iter().map(|e| e.seq));
        }
        assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
    }

    #[test]
    fn a_line_without_end_past_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, vec![b'x'; MAX_LINE + 10]).unwrap();
        let err = EventCursor::new(&path).read_new().unwrap_err();
        assert!(err.to_string().contains("longer than"), "{err}");
    }

    #[test]
    fn a_corrupt_line_names_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, format!("{}oops\n{}", line(1), line(3))).unwrap();
        let err = read_all(&path).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn a_fifo_in_place_of_the_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read_all(&path).is_err());
    }
}
