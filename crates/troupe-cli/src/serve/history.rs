//! The served team's whole stream, read a part at a time by `seq` and never held: the
//! workspace's `events.jsonl` through its index (`.troupe/events.idx`, caught up here — the
//! server is the index's writer), or a shared team's `troupe_events` by position.

use troupe::bootstrap::TeamView;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::store::events::index::EventIndex;
use troupe::store::events::read::EventCursor;
use troupe::store::events::EventLogError;
use troupe::wire::Event;

/// Why events could not be read: a message with its stable code.
#[derive(Debug)]
pub struct ReadError {
    pub code: &'static str,
    pub message: String,
}

impl From<EventLogError> for ReadError {
    fn from(e: EventLogError) -> Self {
        Self {
            code: "storage_error",
            message: e.to_string(),
        }
    }
}

fn backend(e: &troupe::store::BackendError) -> ReadError {
    ReadError {
        code: e.code(),
        message: e.to_string(),
    }
}

/// One event as served: its `seq` and its JSON text (the stream's line as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub seq: u64,
    pub json: String,
    /// Its agent and kind (for filters and the fold).
    pub agent: String,
    pub kind: String,
}

impl Served {
    fn of(event: &Event) -> Self {
        Self {
            seq: event.seq,
            json: event.to_json().to_string(),
            agent: event.agent.clone(),
            kind: event.kind.clone(),
        }
    }

    /// A line of the stream, checked to be an event; its text is kept as it is.
    fn from_line(seq: u64, text: String) -> Result<Self, ReadError> {
        let event = Event::parse_line(&text).map_err(|e| ReadError {
            code: "storage_error",
            message: format!("event {seq} of the stream is not an event: {e}"),
        })?;
        Ok(Self {
            seq,
            agent: event.agent,
            kind: event.kind,
            json: text,
        })
    }
}

/// Where the served stream is.
pub enum History {
    File {
        layout: Layout,
        /// Opened once the stream exists.
        index: Option<EventIndex>,
    },
    Shared(TeamView),
}

impl History {
    pub fn file(layout: &Layout) -> Self {
        Self::File {
            layout: layout.clone(),
            index: None,
        }
    }

    /// The file's index, caught up with the stream's complete lines (none while there is no
    /// stream).
    fn index(&mut self) -> Result<Option<&mut EventIndex>, ReadError> {
        let Self::File { layout, index } = self else {
            return Ok(None);
        };
        match index {
            Some(index) => index.catch_up()?,
            None => {
                if !layout.events_log().exists() {
                    return Ok(None);
                }
                *index = Some(EventIndex::open(
                    &layout.events_log(),
                    &layout.events_index(),
                )?);
            }
        }
        Ok(index.as_mut())
    }

    /// Up to `limit` events with `seq > since`, oldest first (a file's off the async threads).
    pub async fn after(&mut self, since: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        if let Self::Shared(view) = self {
            let batch = view
                .events_after(since, i64::try_from(limit).unwrap_or(i64::MAX))
                .await
                .map_err(|e| backend(&e))?;
            return Ok(batch.iter().map(Served::of).collect());
        }
        troupe::sync::blocking(|| self.file_after(since, limit))
    }

    fn file_after(&mut self, since: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        let Some(index) = self.index()? else {
            return Ok(Vec::new());
        };
        let from = index.position(since.saturating_add(1))?;
        lines(index, from, from.saturating_add(limit as u64))
    }

    /// Up to `limit` events with `seq < before` — the latest of them — oldest first (a file's
    /// off the async threads).
    pub async fn before(&mut self, before: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        if let Self::Shared(view) = self {
            let batch = view
                .events_before(before, i64::try_from(limit).unwrap_or(i64::MAX))
                .await
                .map_err(|e| backend(&e))?;
            return Ok(batch.iter().map(Served::of).collect());
        }
        troupe::sync::blocking(|| self.file_before(before, limit))
    }

    fn file_before(&mut self, before: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        let Some(index) = self.index()? else {
            return Ok(Vec::new());
        };
        let to = index.position(before)?;
        lines(index, to.saturating_sub(limit as u64), to)
    }

    /// A reader of the events with `seq > since` and every later one (for the live stream).
    pub fn reader_after(&mut self, since: u64) -> Result<EventSource, ReadError> {
        let path = match self {
            Self::Shared(view) => {
                return Ok(EventSource::Shared {
                    view: view.clone(),
                    after: since,
                })
            }
            Self::File { layout, .. } => layout.events_log(),
        };
        let Some(index) = self.index()? else {
            return Ok(EventSource::File(EventCursor::new(&path)));
        };
        let at = index.position(since.saturating_add(1))?;
        let offset = if at < index.len() {
            index.entry(at)?.offset
        } else {
            index.indexed_to()
        };
        Ok(EventSource::File(EventCursor::starting_at(&path, offset)))
    }
}

fn lines(index: &mut EventIndex, from: u64, to: u64) -> Result<Vec<Served>, ReadError> {
    index
        .lines(from, to)?
        .into_iter()
        .map(|line| Served::from_line(line.seq, line.text))
        .collect()
}

/// How many events of a shared stream one read of a reader takes.
const SHARED_BATCH: i64 = 1000;

/// A reader of new events: the workspace's file from a line on, or a shared team's stream
/// after a position.
pub enum EventSource {
    File(EventCursor),
    Shared { view: TeamView, after: u64 },
}

impl EventSource {
    /// The next batch of events not read yet (a file: up to `bytes` of it; a shared stream:
    /// up to a thousand); empty when there are none. A file is read off the async threads.
    pub async fn read_batch(&mut self, bytes: usize) -> Result<Vec<Event>, ReadError> {
        match self {
            Self::File(cursor) => Ok(troupe::sync::blocking(|| cursor.read_batch(bytes))?),
            Self::Shared { view, after } => {
                let batch = view
                    .events_after(*after, SHARED_BATCH)
                    .await
                    .map_err(|e| backend(&e))?;
                if let Some(last) = batch.last() {
                    *after = last.seq;
                }
                Ok(batch)
            }
        }
    }
}

impl Served {
    pub fn from_event(event: &Event) -> Self {
        Self::of(event)
    }
}
