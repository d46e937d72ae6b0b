//! A file stream's reader across its segments: the closed segments it has not read (oldest
//! first), then the open segment (`events.jsonl`), then whatever is appended to it.
//!
//! The open segment is always opened *before* the closed segments are listed, so a roll in
//! between puts its lines in a listed segment or leaves them in the file opened (an open file
//! keeps its lines when a roll replaces it under its name); either way every event is read,
//! and the `seq` of the last event returned skips what is met twice. When the open segment
//! ends and its name now leads to another file (a roll replaced it), the reader opens the new
//! one, lists the closed segments again and reads those it has not, then goes on.

use std::collections::VecDeque;

use troupe_wire::Event;

use super::super::read::EventCursor;
use super::super::segments::read::SegmentLines;
use super::super::segments::{self, SegmentInfo};
use super::super::EventLogError;
use super::{port, storage, EventReader};
use crate::layout::Layout;
use crate::store::PortError;

/// Where a reader may start in the open segment: at `offset` of the file of `identity`
/// (device, inode), as the index saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Start {
    pub identity: (u64, u64),
    pub offset: u64,
}

pub(super) struct FileReader {
    layout: Layout,
    /// The `seq` of the last event returned (or the position asked to read after).
    after: u64,
    /// Lines of the open segment up to this `seq` are closed already: skipped.
    closed_through: u64,
    /// Closed segments still to read, oldest first.
    queue: VecDeque<SegmentInfo>,
    /// The closed segment being read.
    current: Option<SegmentLines>,
    /// The open segment's cursor; `None`: open it (again), then list the closed segments.
    cursor: Option<EventCursor>,
    /// Where the first opening of the open segment starts, if it is still the file the index saw.
    start: Option<Start>,
}

impl FileReader {
    pub(super) fn new(layout: &Layout, after: u64, start: Option<Start>) -> Self {
        Self {
            layout: layout.clone(),
            after,
            closed_through: 0,
            queue: VecDeque::new(),
            current: None,
            cursor: None,
            start,
        }
    }

    /// The next events after `self.after`, about `bytes` of them; empty when there are none now.
    fn next_now(&mut self, bytes: usize) -> Result<Vec<Event>, PortError> {
        loop {
            if let Some(segment) = &mut self.current {
                let lines = segment.next_lines(bytes).map_err(port)?;
                if lines.is_empty() {
                    self.current = None;
                    continue;
                }
                let mut events = Vec::with_capacity(lines.len());
                for line in lines.into_iter().filter(|l| l.seq > self.after) {
                    events.push(Event::parse_line(&line.text).map_err(|e| {
                        storage(format!(
                            "event {} of the stream is not an event: {e}",
                            line.seq
                        ))
                    })?);
                }
                if let Some(last) = events.last() {
                    self.after = last.seq;
                    return Ok(events);
                }
                continue;
            }
            if let Some(info) = self.queue.pop_front() {
                self.current = SegmentLines::open(&info).map_err(port)?;
                continue;
            }
            let Some(cursor) = &mut self.cursor else {
                if self.open_segments().map_err(port)? {
                    continue;
                }
                return Ok(Vec::new());
            };
            let batch = cursor.read_batch(bytes).map_err(port)?;
            if batch.is_empty() {
                if cursor.replaced().map_err(port)? {
                    self.cursor = None;
                    continue;
                }
                return Ok(batch);
            }
            let floor = self.after.max(self.closed_through);
            let events: Vec<Event> = batch.into_iter().filter(|e| e.seq > floor).collect();
            if let Some(last) = events.last() {
                self.after = last.seq;
                return Ok(events);
            }
        }
    }

    /// Opens the open segment, then lists the closed segments not read yet; true when there is
    /// something to read (the open segment exists, or a closed segment is queued).
    fn open_segments(&mut self) -> Result<bool, EventLogError> {
        let mut cursor = EventCursor::new(&self.layout.events_log());
        let opened = cursor.open()?;
        if let Some(start) = self.start.take() {
            if opened && cursor.identity() == Some(start.identity) {
                cursor.start_at(start.offset);
            }
        }
        let closed = segments::closed(&self.layout)?;
        self.closed_through = closed.through;
        self.queue = closed
            .segments
            .into_iter()
            .filter(|s| s.last > self.after)
            .collect();
        if opened {
            self.cursor = Some(cursor);
        }
        Ok(opened || !self.queue.is_empty())
    }
}

#[async_trait::async_trait]
impl EventReader for FileReader {
    async fn next_batch(&mut self, bytes: usize) -> Result<Vec<Event>, PortError> {
        crate::sync::blocking(|| self.next_now(bytes))
    }
}
