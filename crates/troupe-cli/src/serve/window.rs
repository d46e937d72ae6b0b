//! What the server keeps of the event stream between requests — a bounded window, never the
//! whole stream: the latest [`WINDOW`] events (their JSON text, for the page's first view and
//! for a client catching up), the `seq` of the last one, and the one thing `/api/state` folds
//! from the events (the last model each agent called). Older events are read from the stream's
//! history ([`History`]: the file through its index, or the database) when asked for.
//!
//! The fold runs forwards over every event read from the stream's end on, and backwards —
//! a batch at a time, only as far as needed — for the agents whose last model call is older
//! than the window; what it has searched is never searched again. So starting costs one read
//! of the stream's end, whatever its size, and memory stays bounded.

use std::collections::{BTreeMap, VecDeque};

use troupe::store::events::kinds;

use super::filter::Filter;
use super::history::{EventSource, History, ReadError, Served};

/// How many of the latest events the server holds.
pub const WINDOW: usize = 2000;

/// How many events one step of a backward search reads.
const BATCH: usize = 2000;

/// How much of the events file one read of new events takes.
const READ_BYTES: usize = 1024 * 1024;

/// A page of older events: oldest first, and the `seq` to ask before for the next page (none
/// when the stream's start was reached).
#[derive(Debug)]
pub struct Older {
    pub events: Vec<Served>,
    pub next_before: Option<u64>,
}

pub struct EventWindow {
    history: History,
    /// The reader of new events, from the window's end (none before the first refresh).
    tail: Option<EventSource>,
    recent: VecDeque<Served>,
    last_seq: u64,
    /// The last model of each agent found so far.
    models: BTreeMap<String, String>,
    /// The backward fold has searched every event from this `seq` on (0: all of them).
    searched_from: u64,
}

impl EventWindow {
    pub fn new(history: History) -> Self {
        Self {
            history,
            tail: None,
            recent: VecDeque::new(),
            last_seq: 0,
            models: BTreeMap::new(),
            searched_from: 0,
        }
    }

    /// Reads what was appended since the last call (the first time: the stream's end).
    pub async fn refresh(&mut self) -> Result<(), ReadError> {
        if self.tail.is_none() {
            let latest = self.history.before(u64::MAX, WINDOW).await?;
            self.searched_from = latest.first().map_or(0, |e| e.seq);
            for event in latest {
                self.add(event);
            }
            self.tail = Some(self.history.reader_after(self.last_seq).await?);
        }
        let Some(mut tail) = self.tail.take() else {
            return Ok(());
        };
        let read = loop {
            let batch = match tail.read_batch(READ_BYTES).await {
                Ok(batch) if batch.is_empty() => break Ok(()),
                Ok(batch) => batch,
                Err(e) => break Err(e),
            };
            for event in &batch {
                if event.seq > self.last_seq {
                    self.add(Served::from_event(event));
                }
            }
        };
        self.tail = Some(tail);
        read
    }

    fn add(&mut self, event: Served) {
        if event.kind == kinds::MODEL_CALL_FINISHED {
            if let Some(model) = model_of(&event) {
                self.models.insert(event.agent.clone(), model);
            }
        }
        self.last_seq = event.seq;
        self.recent.push_back(event);
        while self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
    }

    /// The `seq` of the last event read (0: none).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// How many events the window holds now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.recent.len()
    }

    /// The last model each of `agents` called (searching older events only for those not
    /// found yet); agents that never called one are absent.
    pub async fn models(
        &mut self,
        agents: &[&str],
    ) -> Result<&BTreeMap<String, String>, ReadError> {
        while self.searched_from > 1 && agents.iter().any(|a| !self.models.contains_key(*a)) {
            let batch = self.history.before(self.searched_from, BATCH).await?;
            for event in batch.iter().rev() {
                if event.kind == kinds::MODEL_CALL_FINISHED {
                    if let Some(model) = model_of(event) {
                        self.models.entry(event.agent.clone()).or_insert(model);
                    }
                }
            }
            self.searched_from = match batch.first() {
                Some(first) if batch.len() == BATCH => first.seq,
                _ => 0,
            };
        }
        Ok(&self.models)
    }

    /// At most `limit` events with `seq > since`, oldest first.
    pub async fn after(&mut self, since: u64, limit: usize) -> Result<Vec<Served>, ReadError> {
        if let Some(front) = self.recent.front() {
            if since >= front.seq.saturating_sub(1) {
                return Ok(self
                    .recent
                    .iter()
                    .filter(|e| e.seq > since)
                    .take(limit)
                    .cloned()
                    .collect());
            }
        }
        self.history.after(since, limit).await
    }

    /// The latest `limit` events with `seq < before` that `filter` lets through, searching at
    /// most `scan` events of the history for them.
    pub async fn before(
        &mut self,
        before: u64,
        limit: usize,
        filter: &Filter,
        scan: usize,
    ) -> Result<Older, ReadError> {
        if filter.is_empty() {
            let held: Vec<&Served> = self.recent.iter().filter(|e| e.seq < before).collect();
            if held.len() >= limit {
                let events: Vec<Served> = held[held.len() - limit..]
                    .iter()
                    .map(|e| (*e).clone())
                    .collect();
                let next_before = events.first().map(|e| e.seq);
                return Ok(Older {
                    events,
                    next_before,
                });
            }
        }
        let mut found = Vec::new();
        let mut from = before;
        let mut scanned = 0;
        let step = if filter.is_empty() {
            limit.max(1)
        } else {
            BATCH
        };
        let next_before = loop {
            let batch = self.history.before(from, step).await?;
            let Some(first) = batch.first().map(|e| e.seq) else {
                break None;
            };
            scanned += batch.len();
            let full = batch.len() == step;
            for event in batch.into_iter().rev() {
                if filter.matches(&event) {
                    let seq = event.seq;
                    found.push(event);
                    if found.len() == limit {
                        found.reverse();
                        return Ok(Older {
                            events: found,
                            next_before: Some(seq),
                        });
                    }
                }
            }
            if !full {
                break None;
            }
            from = first;
            if scanned >= scan {
                break Some(first);
            }
        };
        found.reverse();
        Ok(Older {
            events: found,
            next_before,
        })
    }

    /// A reader of the events with `seq > since` and every later one.
    pub async fn reader_after(&mut self, since: u64) -> Result<EventSource, ReadError> {
        self.history.reader_after(since).await
    }
}

/// The `model` of a `model_call_finished` event.
fn model_of(event: &Served) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(&event.json).ok()?;
    value.get("model")?.as_str().map(str::to_owned)
}

/// The events as one JSON array.
pub fn json_array<'a>(events: impl IntoIterator<Item = &'a Served>) -> String {
    let mut out = String::from("[");
    for (i, event) in events.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&event.json);
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests;
