//! A conversation history with idempotency keys.
//!
//! Inputs that come from outside the runner (events, redelivered messages) carry a stable key —
//! a message id, an event id — and are appended at most once per key, so an at-least-once
//! delivery never shows the model the same input twice.

use std::collections::HashSet;

use crate::model::ChatMessage;

#[derive(Debug, Clone, Default)]
pub struct History {
    messages: Vec<ChatMessage>,
    /// Keys of inputs already appended.
    applied: HashSet<String>,
}

impl History {
    pub fn new(system_prompt: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::system(system_prompt)],
            applied: HashSet::new(),
        }
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
        self.messages.push(message);
    }

    /// Appends once per key; returns false (and appends nothing) if the key was seen before.
    pub fn push_once(&mut self, key: &str, message: ChatMessage) -> bool {
        if !self.applied.insert(key.to_owned()) {
            return false;
        }
        self.messages.push(message);
        true
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.applied.contains(key)
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
