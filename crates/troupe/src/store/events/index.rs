//! `.troupe/events.idx`: where each line of `events.jsonl` starts, so that a reader can go to any
//! `seq` without reading the stream from its start (the web view's history, `troupe serve`).
//!
//! The file is a 16-byte header (`TRPEIDX1` and 8 bytes kept at zero) followed by one 16-byte
//! record per line of the stream, in file order: the line's `seq` and the byte offset where it
//! starts, both little-endian `u64`. `seq`s grow strictly from record to record.
//!
//! **Who writes it**: the reader that needs it, never the run. The run appends events without
//! knowing the index exists (its append path stays one write); a reader catches the index up to
//! the stream's complete lines when it opens it and before each use, under an exclusive lock on
//! the index file (two servers on one workspace take turns). It is a cache: deleting it is
//! always safe, and it is never trusted blindly — on every load the first and last records are
//! checked against the lines they point to, every read checks the lines it gets against their
//! records, and anything that does not match (a torn record, an index of another stream, a
//! stream moved away and started again) rebuilds it from the stream. A torn last line of the
//! stream is not indexed until it is complete. When the index file cannot be written (a
//! read-only workspace), the records are kept in memory instead.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use troupe_wire::Event;

use super::read::MAX_LINE;
use super::EventLogError;
use crate::store::read::{open_regular, Links};
use crate::store::IoError;
pub use store::Entry;
use store::{decode, encode, IndexLock, Store};

const MAGIC: &[u8; 8] = b"TRPEIDX1";
const HEADER: u64 = 16;
const RECORD: u64 = store::RECORD;
/// How much of the stream one step of a catch-up reads.
const SCAN_BYTES: u64 = 1024 * 1024;

/// One line of the stream read through the index (its text is the event's JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedLine {
    pub seq: u64,
    pub text: String,
}

/// The index of one stream, caught up on demand.
pub struct EventIndex {
    events_path: PathBuf,
    index_path: PathBuf,
    store: Store,
    /// The stream as opened, with its identity (device, inode): a stream replaced under the
    /// same name is a new stream.
    events: Option<(File, (u64, u64))>,
    /// Records held (after the header).
    count: u64,
    /// The last record, when there is one.
    last: Option<Entry>,
    /// Where the first line not indexed yet starts in the stream.
    indexed_to: u64,
    /// How many times the index was found wrong and rebuilt (reported for tests and logs).
    rebuilds: u64,
}

impl EventIndex {
    /// The index of the stream at `events_path`, kept in `index_path` (created if missing,
    /// checked and caught up now).
    pub fn open(events_path: &Path, index_path: &Path) -> Result<Self, EventLogError> {
        let mut index = Self {
            events_path: events_path.to_owned(),
            index_path: index_path.to_owned(),
            store: Store::Memory(Vec::new()),
            events: None,
            count: 0,
            last: None,
            indexed_to: 0,
            rebuilds: 0,
        };
        index.catch_up()?;
        Ok(index)
    }

    /// Number of lines indexed.
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The last line indexed.
    pub fn last(&self) -> Option<Entry> {
        self.last
    }

    /// How many times the index was found wrong and rebuilt.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// The identity (device, inode) of the stream file indexed, once it is open: a file
    /// replaced under the same name (a roll) is another stream.
    pub fn stream_identity(&self) -> Option<(u64, u64)> {
        self.events.as_ref().map(|(_, identity)| *identity)
    }

    /// Where the first line not indexed yet starts in the stream.
    pub fn indexed_to(&self) -> u64 {
        self.indexed_to
    }

    /// Indexes the complete lines appended since the last call. Checks the records it starts
    /// from, and rebuilds the index from the stream when they do not match it.
    pub fn catch_up(&mut self) -> Result<(), EventLogError> {
        if !self.open_stream()? {
            return Ok(());
        }
        let lock = self.lock()?;
        let result = match self.load() {
            Ok(true) => self.scan(),
            Ok(false) => self.rebuild_locked(),
            Err(e) => Err(e),
        };
        drop(lock);
        result
    }

    /// The record of line `i` (0-based, `i < len()`).
    pub fn entry(&self, i: u64) -> Result<Entry, EventLogError> {
        let mut buf = [0u8; RECORD as usize];
        self.store
            .read_at(&self.index_path, &mut buf, HEADER + i * RECORD)?;
        Ok(decode(&buf))
    }

    /// How many lines have a `seq` below `seq`: the position of `seq`'s line, or of the first
    /// line after it.
    pub fn position(&self, seq: u64) -> Result<u64, EventLogError> {
        let Some(last) = self.last else { return Ok(0) };
        if seq > last.seq {
            return Ok(self.count);
        }
        // Streams are gapless from their first seq: try the direct guess first.
        let first = self.entry(0)?.seq;
        if let Some(guess) = seq.checked_sub(first).filter(|&i| i < self.count) {
            if self.entry(guess)?.seq == seq {
                return Ok(guess);
            }
        }
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.entry(mid)?.seq < seq {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        Ok(low)
    }

    /// The lines at positions `from..to` (clamped to what is indexed), each checked against its
    /// record; an index found wrong is rebuilt and the read tried once more.
    pub fn lines(&mut self, from: u64, to: u64) -> Result<Vec<IndexedLine>, EventLogError> {
        match self.lines_checked(from, to)? {
            Some(lines) => Ok(lines),
            None => {
                self.rebuild()?;
                self.lines_checked(from, to)?
                    .ok_or_else(|| EventLogError::Corrupt {
                        path: self.index_path.display().to_string(),
                        line: 0,
                        reason: "the index does not match the stream even after a rebuild".into(),
                    })
            }
        }
    }

    /// Throws the records away and indexes the whole stream again.
    pub fn rebuild(&mut self) -> Result<(), EventLogError> {
        if !self.open_stream()? {
            return Ok(());
        }
        let lock = self.lock()?;
        let result = self.rebuild_locked();
        drop(lock);
        result
    }

    fn lines_checked(&self, from: u64, to: u64) -> Result<Option<Vec<IndexedLine>>, EventLogError> {
        let to = to.min(self.count);
        if from >= to {
            return Ok(Some(Vec::new()));
        }
        let Some((file, _)) = &self.events else {
            return Ok(None);
        };
        let start = self.entry(from)?;
        let end = if to < self.count {
            self.entry(to)?.offset
        } else {
            self.indexed_to
        };
        let Some(len) = end.checked_sub(start.offset).filter(|&n| n > 0) else {
            return Ok(None);
        };
        let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        if file.read_exact_at(&mut bytes, start.offset).is_err() {
            return Ok(None);
        }
        let last = self.entry(to - 1)?;
        let mut out = Vec::with_capacity(usize::try_from(to - from).unwrap_or(0));
        let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        for line in body.split(|&b| b == b'\n') {
            let Ok(text) = std::str::from_utf8(line) else {
                return Ok(None);
            };
            let Some(seq) = seq_of(line) else {
                return Ok(None);
            };
            out.push(IndexedLine {
                seq,
                text: text.to_owned(),
            });
        }
        let matches = out.len() as u64 == to - from
            && out.first().map(|l| l.seq) == Some(start.seq)
            && out.last().map(|l| l.seq) == Some(last.seq)
            && bytes.ends_with(b"\n");
        Ok(matches.then_some(out))
    }

    /// Opens the stream (again when it was replaced) and the index file beside it; false while
    /// there is no stream.
    fn open_stream(&mut self) -> Result<bool, EventLogError> {
        let Some(file) = open_regular(&self.events_path, Links::Refuse)? else {
            self.events = None;
            self.forget();
            return Ok(false);
        };
        let meta = file
            .metadata()
            .map_err(|e| IoError::new("inspect", &self.events_path, e))?;
        let identity = (meta.dev(), meta.ino());
        let replaced = self.events.as_ref().is_some_and(|(_, id)| *id != identity);
        if replaced {
            self.forget();
        }
        if self.events.is_none() || replaced {
            self.events = Some((file, identity));
        }
        if matches!(self.store, Store::Memory(_)) {
            if let Ok(index) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.index_path)
            {
                if index.metadata().is_ok_and(|m| m.is_file()) {
                    self.store = Store::File(index);
                    self.forget();
                }
            }
        }
        Ok(true)
    }

    /// Forgets what was read of the records (they are loaded again from the store).
    fn forget(&mut self) {
        self.count = 0;
        self.last = None;
        self.indexed_to = 0;
    }

    /// An exclusive lock on the index file while it is written (none for records in memory),
    /// let go when the guard is dropped.
    fn lock(&self) -> Result<IndexLock, EventLogError> {
        match &self.store {
            Store::File(file) => {
                let file = file
                    .try_clone()
                    .map_err(|e| IoError::new("lock", &self.index_path, e))?;
                file.lock()
                    .map_err(|e| IoError::new("lock", &self.index_path, e))?;
                Ok(IndexLock(Some(file)))
            }
            Store::Memory(_) => Ok(IndexLock(None)),
        }
    }

    /// Reads the records' count from the store and checks the first and last against the
    /// stream; false when they do not match (the caller rebuilds).
    fn load(&mut self) -> Result<bool, EventLogError> {
        let len = self.store.len(&self.index_path)?;
        if len < HEADER {
            return Ok(false);
        }
        let mut magic = [0u8; HEADER as usize];
        self.store.read_at(&self.index_path, &mut magic, 0)?;
        if &magic[..8] != MAGIC {
            return Ok(false);
        }
        let count = (len - HEADER) / RECORD;
        if !(len - HEADER).is_multiple_of(RECORD) {
            // A torn record from a writer that stopped mid-write.
            self.store
                .truncate(&self.index_path, HEADER + count * RECORD)?;
        }
        if count == 0 {
            self.forget();
            return Ok(true);
        }
        if count == self.count && self.last.is_some() {
            return Ok(true);
        }
        let first = self.entry(0)?;
        let last = self.entry(count - 1)?;
        if first.offset != 0 || self.line_end(first)?.is_none() {
            return Ok(false);
        }
        let Some(end) = self.line_end(last)? else {
            return Ok(false);
        };
        self.count = count;
        self.last = Some(last);
        self.indexed_to = end;
        Ok(true)
    }

    /// Where the line of `entry` ends (after its `\n`), if the stream holds that line there.
    fn line_end(&self, entry: Entry) -> Result<Option<u64>, EventLogError> {
        let Some((file, _)) = &self.events else {
            return Ok(None);
        };
        if entry.offset > 0 {
            let mut before = [0u8; 1];
            if file.read_exact_at(&mut before, entry.offset - 1).is_err() || before[0] != b'\n' {
                return Ok(None);
            }
        }
        let mut line = Vec::new();
        let mut chunk = vec![0u8; 4096];
        loop {
            let at = entry.offset + line.len() as u64;
            let got = file
                .read_at(&mut chunk, at)
                .map_err(|e| IoError::new("read", &self.events_path, e))?;
            if got == 0 {
                return Ok(None);
            }
            if let Some(nl) = chunk[..got].iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&chunk[..nl]);
                return Ok((seq_of(&line) == Some(entry.seq))
                    .then_some(entry.offset + line.len() as u64 + 1));
            }
            line.extend_from_slice(&chunk[..got]);
            if line.len() > MAX_LINE {
                return Ok(None);
            }
            if chunk.len() < 1024 * 1024 {
                chunk.resize(chunk.len() * 4, 0);
            }
        }
    }

    fn rebuild_locked(&mut self) -> Result<(), EventLogError> {
        // An empty store is a first build, not a repair.
        if self.store.len(&self.index_path)? > 0 {
            self.rebuilds += 1;
        }
        let mut header = [0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        self.store.truncate(&self.index_path, 0)?;
        self.store.write_at(&self.index_path, &header, 0)?;
        self.forget();
        self.scan()
    }

    /// Indexes the complete lines from `indexed_to` on.
    fn scan(&mut self) -> Result<(), EventLogError> {
        let Some((file, _)) = &self.events else {
            return Ok(());
        };
        let file = file
            .try_clone()
            .map_err(|e| IoError::new("read", &self.events_path, e))?;
        let mut records = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; usize::try_from(SCAN_BYTES).unwrap_or(1 << 20)];
        let mut at = self.indexed_to;
        let mut line_start = self.indexed_to;
        let mut last = self.last;
        loop {
            let got = file
                .read_at(&mut chunk, at)
                .map_err(|e| IoError::new("read", &self.events_path, e))?;
            if got == 0 {
                break;
            }
            at += got as u64;
            let mut rest = &chunk[..got];
            while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                let line: &[u8] = if pending.is_empty() {
                    &rest[..nl]
                } else {
                    pending.extend_from_slice(&rest[..nl]);
                    &pending
                };
                let line_len = line.len() as u64 + 1;
                if !line.is_empty() {
                    let seq =
                        seq_of(line).ok_or_else(|| self.corrupt(line_start, "not an event"))?;
                    if last.is_some_and(|l| l.seq >= seq) {
                        return Err(self.corrupt(line_start, "its seq does not follow the last"));
                    }
                    let entry = Entry {
                        seq,
                        offset: line_start,
                    };
                    records.extend_from_slice(&encode(entry));
                    last = Some(entry);
                }
                line_start += line_len;
                pending.clear();
                rest = &rest[nl + 1..];
            }
            pending.extend_from_slice(rest);
            if pending.len() > MAX_LINE {
                return Err(self.corrupt(line_start, "a line longer than the limit"));
            }
            if records.len() as u64 >= SCAN_BYTES / 8 {
                self.append(&records, last, line_start)?;
                records.clear();
            }
        }
        self.append(&records, last, line_start)
    }

    fn append(
        &mut self,
        records: &[u8],
        last: Option<Entry>,
        to: u64,
    ) -> Result<(), EventLogError> {
        if !records.is_empty() {
            self.store
                .write_at(&self.index_path, records, HEADER + self.count * RECORD)?;
            self.count += records.len() as u64 / RECORD;
        }
        self.last = last;
        self.indexed_to = to;
        Ok(())
    }

    fn corrupt(&self, offset: u64, reason: &str) -> EventLogError {
        EventLogError::Corrupt {
            path: self.events_path.display().to_string(),
            line: 0,
            reason: format!("the line at byte {offset}: {reason}"),
        }
    }
}

/// Empties the index file at `index_path` (a roll replaced the stream it indexed), under its
/// lock so that a reader catching it up meanwhile finishes first; its readers rebuild it. A
/// missing index is left missing.
pub fn invalidate(index_path: &Path) -> Result<(), IoError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    let file = match crate::store::read::open_regular_with(index_path, &mut options, Links::Refuse)
    {
        Ok(file) => file,
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    file.lock()
        .map_err(|e| IoError::new("lock", index_path, e))?;
    let _held = IndexLock(Some(
        file.try_clone()
            .map_err(|e| IoError::new("lock", index_path, e))?,
    ));
    file.set_len(0)
        .map_err(|e| IoError::new("truncate", index_path, e))
}

/// The `seq` of one line: read from its start when it begins as troupe writes it
/// (`{"seq":N,`), else from the whole line parsed.
pub fn seq_of(line: &[u8]) -> Option<u64> {
    if let Some(rest) = line.strip_prefix(b"{\"seq\":") {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && digits < 20 && rest.get(digits) == Some(&b',') {
            let text = std::str::from_utf8(&rest[..digits]).ok()?;
            return text.parse().ok().filter(|&s| s >= 1);
        }
    }
    let text = std::str::from_utf8(line).ok()?;
    Event::parse_line(text).ok().map(|e| e.seq)
}

mod store;
#[cfg(test)]
mod tests;
