//! A conversation history with idempotency keys.
//!
//! Inputs that come from outside the runner (events, redelivered messages) carry a stable key —
//! a message id, an event id — and are appended at most once per key, so an at-least-once
//! delivery never shows the model the same input twice. With a transcript, every entry (and its
//! key) is also written to disk, so the same holds across runs.

use std::collections::HashSet;
use std::sync::Arc;

use super::transcript::{Loaded, TranscriptSink};
use crate::model::ChatMessage;

#[derive(Clone, Default)]
pub struct History {
    messages: Vec<ChatMessage>,
    /// Keys of inputs already appended.
    applied: HashSet<String>,
    /// Where each appended entry is also written (a transcript), if anywhere.
    sink: Option<Arc<dyn TranscriptSink>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("messages", &self.messages)
            .field("applied", &self.applied)
            .field("transcript", &self.sink.is_some())
            .finish()
    }
}

impl History {
    pub fn new(system_prompt: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::system(system_prompt)],
            applied: HashSet::new(),
            sink: None,
        }
    }

    /// A history that continues `loaded` (an empty transcript starts a new conversation) and
    /// writes every new entry to `sink`. The system prompt is always today's: it may name new
    /// skills or a moved workspace.
    pub fn restore(
        system_prompt: impl Into<String>,
        loaded: Loaded,
        sink: Arc<dyn TranscriptSink>,
    ) -> Self {
        let system = ChatMessage::system(system_prompt);
        let mut history = Self {
            messages: loaded.messages,
            applied: loaded.keys,
            sink: None,
        };
        match history.messages.first_mut() {
            Some(first @ ChatMessage::System { .. }) => *first = system,
            _ => {
                record(&sink, None, &system);
                history.messages.insert(0, system);
            }
        }
        history.sink = Some(sink);
        history
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Appends without a key (the runner's own messages, a user's prompt).
    pub fn push(&mut self, message: ChatMessage) {
        if let Some(sink) = &self.sink {
            record(sink, None, &message);
        }
        self.messages.push(message);
    }

    /// Appends once per key; returns false (and appends nothing) if the key was seen before.
    pub fn push_once(&mut self, key: &str, message: ChatMessage) -> bool {
        if !self.applied.insert(key.to_owned()) {
            return false;
        }
        if let Some(sink) = &self.sink {
            record(sink, Some(key), &message);
        }
        self.messages.push(message);
        true
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.applied.contains(key)
    }
}

fn record(sink: &Arc<dyn TranscriptSink>, key: Option<&str>, message: &ChatMessage) {
    // An append under the transcript's lock, with an fsync: off the async threads.
    if let Err(e) = crate::sync::blocking(|| sink.append(key, message)) {
        // The conversation goes on in memory; only its memory across runs is at risk.
        tracing::warn!("transcript not written: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_inputs_are_appended_once() {
        let mut h = History::new("sys");
        assert!(h.push_once("m-1", ChatMessage::user("event one")));
        assert!(!h.push_once("m-1", ChatMessage::user("event one again")));
        assert!(h.push_once("m-2", ChatMessage::user("event two")));
        assert_eq!(h.len(), 3);
        assert!(h.contains_key("m-1"));
    }
}
