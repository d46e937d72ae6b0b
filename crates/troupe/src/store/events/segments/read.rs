//! Reading one closed segment: its lines streamed a batch at a time (a reader of the whole
//! history), or the lines of a range of `seq`s (reads by position, `troupe serve`), with the
//! last segment read kept in memory when it is small (a page of history, then the page before
//! it, read one segment once).
//!
//! Every line is checked as it is read: its `seq` follows the previous line's and stays within
//! the segment's name; the last one is the name's `last`. A segment removed since it was listed
//! (by gc) reads as empty.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};

use flate2::read::GzDecoder;
use troupe_wire::UtcTime;

use super::super::index::{seq_of, IndexedLine};
use super::super::read::MAX_LINE;
use super::super::EventLogError;
use super::SegmentInfo;
use crate::store::read::{open_regular, Links};
use crate::store::IoError;

/// The largest segment (its lines' bytes) [`SegmentCache`] keeps whole.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// One closed segment's lines, read on from where the last read stopped.
pub struct SegmentLines {
    info: SegmentInfo,
    decoder: BufReader<GzDecoder<File>>,
    /// The `seq` of the last line read (0: none yet).
    last: u64,
    /// Lines read so far (for error messages).
    lines: usize,
    done: bool,
}

impl SegmentLines {
    /// Opens `info`'s file; `None` when it is gone (removed by gc since it was listed).
    pub fn open(info: &SegmentInfo) -> Result<Option<Self>, EventLogError> {
        let Some(file) = open_regular(&info.path, Links::Refuse)? else {
            return Ok(None);
        };
        Ok(Some(Self {
            info: info.clone(),
            decoder: BufReader::new(GzDecoder::new(file)),
            last: 0,
            lines: 0,
            done: false,
        }))
    }

    pub fn info(&self) -> &SegmentInfo {
        &self.info
    }

    /// The next lines, about `max_bytes` of them; empty once the segment is read.
    pub fn next_lines(&mut self, max_bytes: usize) -> Result<Vec<IndexedLine>, EventLogError> {
        let mut out = Vec::new();
        let mut bytes = 0;
        while !self.done && (out.is_empty() || bytes < max_bytes) {
            match self.next_line()? {
                Some(line) => {
                    bytes += line.text.len() + 1;
                    out.push(line);
                }
                None => self.done = true,
            }
        }
        Ok(out)
    }

    /// The next line, `None` at the end.
    fn next_line(&mut self) -> Result<Option<IndexedLine>, EventLogError> {
        let mut buf = Vec::new();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
        let got = (&mut self.decoder)
            .take(limit)
            .read_until(b'\n', &mut buf)
            .map_err(|e| self.corrupt(format!("cannot decompress: {e}")))?;
        if got == 0 {
            if self.last != self.info.last {
                return Err(self.corrupt(format!(
                    "it ends at seq {} where its name says {}",
                    self.last, self.info.last
                )));
            }
            return Ok(None);
        }
        self.lines += 1;
        if buf.pop() != Some(b'\n') {
            return Err(self.corrupt(if buf.len() >= MAX_LINE {
                format!("a line longer than {MAX_LINE} bytes")
            } else {
                "its last line is not complete".to_owned()
            }));
        }
        let text = String::from_utf8(buf).map_err(|e| self.corrupt(e.to_string()))?;
        let seq = seq_of(text.as_bytes()).ok_or_else(|| self.corrupt("not an event".into()))?;
        let expected = if self.last == 0 {
            self.info.first
        } else {
            self.last + 1
        };
        if seq != expected {
            return Err(self.corrupt(format!("seq {seq} where {expected} was due")));
        }
        self.last = seq;
        Ok(Some(IndexedLine { seq, text }))
    }

    fn corrupt(&self, reason: String) -> EventLogError {
        EventLogError::Corrupt {
            path: self.info.path.display().to_string(),
            line: self.lines,
            reason,
        }
    }
}

/// When the last event of `info` happened: its gzip header's comment, else the file's
/// modification time (when it was closed, which is later: it is kept longer, never shorter).
pub fn last_at(info: &SegmentInfo) -> Result<Option<UtcTime>, IoError> {
    let Some(file) = open_regular(&info.path, Links::Refuse)? else {
        return Ok(None);
    };
    let meta = file
        .metadata()
        .map_err(|e| IoError::new("inspect", &info.path, e))?;
    let decoder = GzDecoder::new(file);
    let written = decoder
        .header()
        .and_then(|h| h.comment())
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| UtcTime::parse(c).ok());
    if written.is_some() {
        return Ok(written);
    }
    let modified = meta
        .modified()
        .map_err(|e| IoError::new("inspect", &info.path, e))?;
    Ok(Some(UtcTime::from_datetime(modified.into())))
}

/// Which lines of a range are wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The first `n`.
    First(usize),
    /// The last `n`.
    Last(usize),
}

/// Reads ranges of closed segments, keeping the last segment read whole in memory when its
/// lines hold at most [`CACHE_BYTES`].
#[derive(Default)]
pub struct SegmentCache {
    held: Option<(SegmentInfo, Vec<IndexedLine>)>,
}

impl SegmentCache {
    /// The lines of `info` with `lo <= seq < hi`, as many as `keep` says.
    pub fn range(
        &mut self,
        info: &SegmentInfo,
        lo: u64,
        hi: u64,
        keep: Keep,
    ) -> Result<Vec<IndexedLine>, EventLogError> {
        if let Some((held, lines)) = &self.held {
            if held == info {
                return Ok(pick(lines, lo, hi, keep));
            }
        }
        self.held = None;
        let Some(mut reader) = SegmentLines::open(info)? else {
            return Ok(Vec::new());
        };
        // Every line while the segment fits the cache; past that only those in range.
        let mut all: Option<Vec<IndexedLine>> = Some(Vec::new());
        let mut all_bytes = 0;
        let mut picked: VecDeque<IndexedLine> = VecDeque::new();
        loop {
            let batch = reader.next_lines(1024 * 1024)?;
            if batch.is_empty() {
                break;
            }
            for line in batch {
                let in_range = (lo..hi).contains(&line.seq);
                if let Some(held) = &mut all {
                    all_bytes += line.text.len();
                    if all_bytes > CACHE_BYTES {
                        picked = pick(held, lo, hi, Keep::First(usize::MAX)).into();
                        all = None;
                    } else {
                        held.push(line);
                        continue;
                    }
                }
                if in_range {
                    picked.push_back(line);
                    if let Keep::Last(n) = keep {
                        while picked.len() > n {
                            picked.pop_front();
                        }
                    }
                }
            }
            if let (None, Keep::First(n)) = (&all, keep) {
                if picked.len() >= n {
                    break;
                }
            }
        }
        match all {
            Some(lines) => {
                let out = pick(&lines, lo, hi, keep);
                self.held = Some((info.clone(), lines));
                Ok(out)
            }
            None => {
                let mut out: Vec<IndexedLine> = picked.into();
                match keep {
                    Keep::First(n) => out.truncate(n),
                    Keep::Last(n) => {
                        out.drain(..out.len().saturating_sub(n));
                    }
                }
                Ok(out)
            }
        }
    }
}

/// The lines of `lines` (in `seq` order) with `lo <= seq < hi`, as many as `keep` says.
fn pick(lines: &[IndexedLine], lo: u64, hi: u64, keep: Keep) -> Vec<IndexedLine> {
    let start = lines.partition_point(|l| l.seq < lo);
    let end = lines.partition_point(|l| l.seq < hi).max(start);
    let range = &lines[start..end];
    let range = match keep {
        Keep::First(n) => &range[..n.min(range.len())],
        Keep::Last(n) => &range[range.len().saturating_sub(n)..],
    };
    range.to_vec()
}
