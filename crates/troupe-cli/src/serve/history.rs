//! The served team's whole stream, read a part at a time by `seq` and never held: the
//! workspace's `events.jsonl` through its index (`.troupe/events.idx`, caught up by the
//! stream's file adapter — the server is the index's writer), or a shared team's
//! `troupe_events` by position.

use std::sync::Arc;

use troupe::error::ErrorCode;
use troupe::store::events::stream::{EventReader, EventStream};
use troupe::wire::Event;

/// Why events could not be read: a message with its stable code.
#[derive(Debug)]
pub struct ReadError {
    pub code: &'static str,
    pub message: String,
}

fn port(e: &troupe::store::PortError) -> ReadError {
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
}

/// The served stream: the team's events, read a part at a time (a file's through its index).
pub struct History(Arc<dyn EventStream>);

impl History {
    pub fn new(stream: Arc<dyn EventStream>) -> Self {
        Self(stream)
    }

    /// Up to `limit` events with `seq > since`, oldest first.
    pub async fn after(&mut self, since: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        let batch = self.0.after(since, limit).await.map_err(|e| port(&e))?;
        Ok(batch.iter().map(Served::of).collect())
    }

    /// Up to `limit` events with `seq < before` — the latest of them — oldest first.
    pub async fn before(&mut self, before: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        let batch = self.0.before(before, limit).await.map_err(|e| port(&e))?;
        Ok(batch.iter().map(Served::of).collect())
    }

    /// A reader of the events with `seq > since` and every later one (for the live stream).
    pub async fn reader_after(&mut self, since: u64) -> Result<EventSource, ReadError> {
        Ok(EventSource(
            self.0.reader(since).await.map_err(|e| port(&e))?,
        ))
    }
}

/// A reader of new events.
pub struct EventSource(Box<dyn EventReader>);

impl EventSource {
    /// The next batch of events not read yet (a file: up to `bytes` of it; a shared stream: a
    /// bounded number of rows); empty when there are none.
    pub async fn read_batch(&mut self, bytes: usize) -> Result<Vec<Event>, ReadError> {
        self.0.next_batch(bytes).await.map_err(|e| port(&e))
    }
}

impl Served {
    pub fn from_event(event: &Event) -> Self {
        Self::of(event)
    }
}
