//! One line of `.troupe/events.jsonl` (SPEC §10): what happened in a run, for people and tools.
//!
//! Every event has the same envelope — `seq` (gapless within the file, from 1), `at`, `run_id`,
//! `agent`, `kind` — and the kind's own fields beside it, flat in one JSON object:
//!
//! ```json
//! {"seq":7,"at":"2026-07-30T08:00:00.120Z","run_id":"…","agent":"lead","kind":"tool_finished","tool":"shell",…}
//! ```
//!
//! The kinds and their fields are listed in `troupe::store::events::kinds`. Readers are tolerant
//! of kinds and fields they do not know (a newer troupe may add some) and strict about the
//! envelope and about duplicate keys, like every format troupe reads.

use serde_json::{Map, Value};

use crate::strict::parse_json_str;
use crate::{UtcTime, WireError};

/// The keys every event has; a kind's fields never use them.
pub const ENVELOPE: [&str; 5] = ["seq", "at", "run_id", "agent", "kind"];

/// One event of the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Position in the file, from 1, without gaps.
    pub seq: u64,
    pub at: UtcTime,
    /// The run that wrote it (a UUID), so that several runs in one file can be told apart.
    pub run_id: String,
    /// The agent it is about (`lead`, a teammate), or `troupe` for the run itself.
    pub agent: String,
    /// What happened: `run_started`, `tool_finished`, … (snake case).
    pub kind: String,
    /// The kind's own fields.
    pub fields: Map<String, Value>,
}

impl Event {
    /// A string field, if present and a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// A numeric field, if present and a non-negative integer.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(Value::as_u64)
    }

    /// The event as one JSON object, envelope first (without the line's `\n`).
    pub fn to_json(&self) -> Value {
        let mut object = Map::with_capacity(ENVELOPE.len() + self.fields.len());
        object.insert("seq".into(), Value::from(self.seq));
        object.insert("at".into(), Value::from(self.at.to_string()));
        object.insert("run_id".into(), Value::from(self.run_id.clone()));
        object.insert("agent".into(), Value::from(self.agent.clone()));
        object.insert("kind".into(), Value::from(self.kind.clone()));
        for (key, value) in &self.fields {
            if !ENVELOPE.contains(&key.as_str()) {
                object.insert(key.clone(), value.clone());
            }
        }
        Value::Object(object)
    }

    /// The event as one line of JSON (without the `\n`).
    pub fn to_line(&self) -> String {
        self.to_json().to_string()
    }

    /// Reads one line of `events.jsonl`: a JSON object without duplicate keys, with the whole
    /// envelope (`seq` ≥ 1, a canonical `at`, non-empty `run_id`, `agent` and `kind`).
    pub fn parse_line(line: &str) -> Result<Self, WireError> {
        match parse_json_str(line, "event")? {
            Value::Object(fields) => Self::from_object(fields),
            _ => Err(WireError::new("event: expected a JSON object")),
        }
    }

    /// The envelope is taken out with `shift_remove`, which keeps the other fields in their
    /// order (`remove` swaps the last field into the hole), so that a line read and written
    /// again is the same line.
    fn from_object(mut fields: Map<String, Value>) -> Result<Self, WireError> {
        let seq = match fields.shift_remove("seq") {
            Some(Value::Number(n)) => n.as_u64().filter(|&s| s >= 1),
            _ => None,
        }
        .ok_or_else(|| WireError::new("event: \"seq\" must be a whole number from 1"))?;
        let at = match fields.shift_remove("at") {
            Some(Value::String(s)) => UtcTime::parse(&s)?,
            _ => return Err(WireError::new("event: \"at\" must be a time string")),
        };
        let mut text = |key: &str| match fields.shift_remove(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            _ => Err(WireError::new(format!(
                "event: {key:?} must be a non-empty string"
            ))),
        };
        let run_id = text("run_id")?;
        let agent = text("agent")?;
        let kind = text("kind")?;
        Ok(Self {
            seq,
            at,
            run_id,
            agent,
            kind,
            fields,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        let mut fields = Map::new();
        fields.insert("tool".into(), Value::from("shell"));
        Event {
            seq: 3,
            at: UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap(),
            run_id: "r".into(),
            agent: "lead".into(),
            kind: "tool_started".into(),
            fields,
        }
    }

    #[test]
    fn a_line_reads_back_as_the_same_event() {
        let line = event().to_line();
        assert!(line.starts_with(r#"{"seq":3,"at":"2026-07-30T08:00:00.000Z","run_id":"r""#));
        assert_eq!(Event::parse_line(&line).unwrap(), event());
        let many = r#"{"seq":1,"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"lead","kind":"k","a":1,"b":2,"c":3,"d":4,"e":5}"#;
        assert_eq!(
            Event::parse_line(many).unwrap().to_line(),
            many,
            "fields keep their order"
        );
    }

    #[test]
    fn a_duplicate_key_or_a_broken_envelope_is_refused() {
        for bad in [
            r#"{"seq":1,"seq":2,"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"a","kind":"k"}"#,
            r#"{"seq":0,"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"a","kind":"k"}"#,
            r#"{"seq":1,"at":"yesterday","run_id":"r","agent":"a","kind":"k"}"#,
            r#"{"seq":1,"at":"2026-07-30T08:00:00.000Z","run_id":"","agent":"a","kind":"k"}"#,
            r#"{"seq":1,"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"a"}"#,
            r#"[1]"#,
        ] {
            assert!(Event::parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fields_never_shadow_the_envelope() {
        let mut e = event();
        e.fields.insert("seq".into(), Value::from(99));
        let back = Event::parse_line(&e.to_line()).unwrap();
        assert_eq!(back.seq, 3);
    }
}
