//! What the server keeps of the event stream between requests: every event's JSON text (for
//! `GET /api/events`, which then costs a copy instead of a parse) and the last model each agent
//! called (for the cost estimate of `/api/state`). Brought up to date through one cursor before
//! each use, so each line of the file is parsed once per server.

use std::collections::BTreeMap;

use troupe::store::events::kinds;
use troupe::store::events::read::EventCursor;
use troupe::store::events::EventLogError;

pub struct EventCache {
    cursor: EventCursor,
    /// `(seq, JSON text)`, by seq.
    events: Vec<(u64, String)>,
    models: BTreeMap<String, String>,
}

impl EventCache {
    pub fn new(events_file: &std::path::Path) -> Self {
        Self {
            cursor: EventCursor::new(events_file),
            events: Vec::new(),
            models: BTreeMap::new(),
        }
    }

    /// Reads what was appended since the last call.
    pub fn refresh(&mut self) -> Result<(), EventLogError> {
        for event in self.cursor.read_new()? {
            if event.kind == kinds::MODEL_CALL_FINISHED {
                if let Some(model) = event.str("model") {
                    self.models.insert(event.agent.clone(), model.to_owned());
                }
            }
            self.events.push((event.seq, event.to_json().to_string()));
        }
        Ok(())
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
        let mut cache = EventCache::new(&path);
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
