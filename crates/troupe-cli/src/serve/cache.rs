//! What the server keeps of the event stream between requests: every event's JSON text (for
//! `GET /api/events`, which then costs a copy instead of a parse) and the last model each agent
//! called (for the cost estimate of `/api/state`). Brought up to date through one cursor before
//! each use, so each line of the file is parsed once per server.

use std::collections::BTreeMap;

use troupe::bootstrap::TeamView;
use troupe::error::ErrorCode;
use troupe::store::events::kinds;
use troupe::store::events::read::EventCursor;
use troupe::wire::Event;

/// How many events of a shared stream one read takes.
const SHARED_BATCH: i64 = 1000;

/// Why events could not be read: a message with its stable code.
#[derive(Debug)]
pub struct ReadError {
    pub code: &'static str,
    pub message: String,
}

/// Where a server's events come from: the workspace's file, or a shared team's stream.
pub enum EventSource {
    File(EventCursor),
    Shared { view: TeamView, after: u64 },
}

impl EventSource {
    pub fn shared(view: TeamView) -> Self {
        Self::Shared { view, after: 0 }
    }

    /// The next batch of events not read yet (a file: up to `bytes` of it; a shared stream:
    /// up to a thousand); empty when there are none.
    pub fn read_batch(&mut self, bytes: usize) -> Result<Vec<Event>, ReadError> {
        match self {
            Self::File(cursor) => cursor.read_batch(bytes).map_err(|e| ReadError {
                code: "storage_error",
                message: e.to_string(),
            }),
            Self::Shared { view, after } => {
                let batch = view
                    .events_after(*after, SHARED_BATCH)
                    .map_err(|e| ReadError {
                        code: e.code(),
                        message: e.to_string(),
                    })?;
                if let Some(last) = batch.last() {
                    *after = last.seq;
                }
                Ok(batch)
            }
        }
    }
}

/// How much of the events file one read of the cache takes.
const READ_BYTES: usize = 1024 * 1024;

pub struct EventCache {
    cursor: EventSource,
    /// `(seq, JSON text)`, by seq.
    events: Vec<(u64, String)>,
    models: BTreeMap<String, String>,
}

impl EventCache {
    pub fn new(source: EventSource) -> Self {
        Self {
            cursor: source,
            events: Vec::new(),
            models: BTreeMap::new(),
        }
    }

    /// Reads what was appended since the last call.
    pub fn refresh(&mut self) -> Result<(), ReadError> {
        loop {
            let batch = self.cursor.read_batch(READ_BYTES)?;
            if batch.is_empty() {
                return Ok(());
            }
            self.add(batch);
        }
    }

    fn add(&mut self, events: Vec<Event>) {
        for event in events {
            if event.kind == kinds::MODEL_CALL_FINISHED {
                if let Some(model) = event.str("model") {
                    self.models.insert(event.agent.clone(), model.to_owned());
                }
            }
            self.events.push((event.seq, event.to_json().to_string()));
        }
    }

    /// The `seq` of the last event read (0: none).
    pub fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |(seq, _)| *seq)
    }

    /// A JSON array of at most `limit` events with `seq > since`, oldest first.
    pub fn json_after(&self, since: u64, limit: usize) -> String {
        let start = self.events.partition_point(|(seq, _)| *seq <= since);
        let chosen = &self.events[start..];
        let chosen = &chosen[..chosen.len().min(limit)];
        let mut out =
            String::with_capacity(2 + chosen.iter().map(|(_, j)| j.len() + 1).sum::<usize>());
        out.push('[');
        for (i, (_, json)) in chosen.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(json);
        }
        out.push(']');
        out
    }

    /// The last model each agent called.
    pub fn models(&self) -> &BTreeMap<String, String> {
        &self.models
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_after_a_seq_are_a_json_array() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let line = |seq: u64, kind: &str, extra: &str| {
            format!(
                r#"{{"seq":{seq},"at":"2026-01-01T00:00:00.000Z","run_id":"r","agent":"lead","kind":"{kind}"{extra}}}"#
            )
        };
        let text = [
            line(1, "run_started", ""),
            line(2, "model_call_finished", r#","model":"gpt-4o""#),
            line(3, "assistant_text", r#","text":"hi""#),
        ]
        .join("\n")
            + "\n";
        std::fs::write(&path, text).unwrap();
        let mut cache = EventCache::new(EventSource::File(EventCursor::new(&path)));
        cache.refresh().unwrap();
        let all: serde_json::Value = serde_json::from_str(&cache.json_after(0, 10)).unwrap();
        assert_eq!(all.as_array().unwrap().len(), 3);
        let some: serde_json::Value = serde_json::from_str(&cache.json_after(1, 1)).unwrap();
        assert_eq!(some[0]["seq"], 2);
        assert_eq!(some.as_array().unwrap().len(), 1);
        assert_eq!(cache.json_after(3, 10), "[]");
        assert_eq!(cache.models()["lead"], "gpt-4o");
    }
}
